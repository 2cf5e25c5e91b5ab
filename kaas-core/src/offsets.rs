//! Committed consumer-group offsets: one file per group,
//! `__cluster/groups/<encoded group id>.json`, replaced atomically on every commit.
//! Every writer (a broker's group coordinator, a broker finishing a transaction,
//! kaasctl) holds the exclusive advisory lock on `<encoded group id>.lock` beside it
//! for its read-modify-write ([`GroupOffsets::lock`]), so no writer's change is lost
//! to another's. The lock is tried for at most [`GROUP_LOCK_WAIT`], never waited on
//! blocking.
//!
//! Staged transactional offsets (KIP-447) belong to one (producer id, epoch): staging
//! at another epoch replaces, never merges; a commit applies only the offsets staged
//! at its own epoch; an abort drops those of its epoch and older.

use crate::error::VolumeError;
use crate::layout::{decode_name, Volume};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::versioned!(GroupOffsets);

/// The version of a group's file without a consumer group record: every kaas
/// version reads it.
pub const OFFSETS_FORMAT_VERSION: u32 = 1;
/// The version of a file holding a KIP-848 consumer group record
/// ([`GroupOffsets::consumer`]). A reader that knows only version 1 refuses it (an
/// error naming the file) rather than reading it without the record and dropping the
/// group's members at its next rewrite.
pub const OFFSETS_WITH_CONSUMER_FORMAT_VERSION: u32 = 2;

/// Reads a group's file of either version (read once: a file replaced between two
/// reads cannot make one version look like the other).
fn read_offsets(path: &std::path::Path) -> Result<GroupOffsets, VolumeError> {
    let bytes =
        crate::fsutil::read_capped(path, crate::fsutil::MAX_STATE_FILE_BYTES).map_err(|e| VolumeError::io(path, e))?;
    match crate::error::parse_versioned_json::<GroupOffsets>(path, &bytes, "group offsets", OFFSETS_FORMAT_VERSION) {
        Err(VolumeError::UnknownVersion { found, .. }) if found == OFFSETS_WITH_CONSUMER_FORMAT_VERSION => {
            crate::error::parse_versioned_json::<GroupOffsets>(
                path,
                &bytes,
                "group offsets",
                OFFSETS_WITH_CONSUMER_FORMAT_VERSION,
            )
        }
        other => other,
    }
}
/// How long a writer tries a group's lock before it gives up with an error.
pub const GROUP_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    pub offset: i64,
    #[serde(default = "minus_one")]
    pub leader_epoch: i32,
    #[serde(default)]
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

fn minus_one() -> i32 {
    -1
}

/// Offsets a transactional producer staged with TxnOffsetCommit (KIP-447): invisible
/// to OffsetFetch until its transaction commits, dropped if it aborts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffsets {
    pub producer_epoch: i16,
    pub transactional_id: String,
    pub staged_ms: i64,
    pub offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOffsets {
    pub version: u32,
    pub group: String,
    /// topic -> partition -> committed offset
    pub offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
    /// producer id -> offsets staged by its open transaction (at `producer_epoch`)
    #[serde(default)]
    pub pending: BTreeMap<i64, PendingOffsets>,
    /// The group's members, epochs and assignments when it is a KIP-848 consumer
    /// group (`group.protocol=consumer`); None for a classic group, whose membership
    /// lives in its coordinator's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<crate::consumer_group::ConsumerGroupRecord>,
    /// Offsets retention (Kafka's `offsets.retention.minutes`, KIP-211): the latest
    /// time (ms) the group's coordinator saw it with members (written when a
    /// consumer group's record changes with members, when a classic group's last
    /// member leaves, and by the retention pass, [`Self::expire`]); or, for a group
    /// never seen with members, when the pass first found it. Absent until the first pass (a reader that does not know
    /// the field drops it on its next rewrite, and the next pass starts its clock
    /// again: later, never sooner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_ms: Option<i64>,
    /// A classic group's membership as of its last stable generation (Apache stores
    /// the same with the group in `__consumer_offsets`): a broker that takes the group
    /// over — its coordinator restarted, or the group moved with the live set — loads
    /// it, gives every member a full session from then, and goes on with the same
    /// generation: members heartbeat on without a rebalance, and DeleteGroups is
    /// refused (NON_EMPTY_GROUP) while they may be alive. Written once a generation is
    /// stable (the leader's SyncGroup) and cleared once the group is empty. Absent for
    /// a group with no members, a KIP-848 group, and in files written before it
    /// existed; a reader that does not know it drops it at its next rewrite, and the
    /// members then join again, as before. No format version change: dropping it
    /// loses nothing but that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classic: Option<ClassicGroupRecord>,
}

/// A classic group's stable generation ([`GroupOffsets::classic`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassicGroupRecord {
    pub generation: i32,
    pub protocol_type: String,
    /// The protocol the generation selected (the assignor, for consumers).
    pub protocol: String,
    /// The member id of the generation's leader.
    pub leader: String,
    pub members: Vec<ClassicMemberRecord>,
}

/// One member of a [`ClassicGroupRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassicMemberRecord {
    pub member_id: String,
    /// `group.instance.id` of a static member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// Every protocol the member joined with, in its order, with its metadata.
    pub protocols: Vec<ClassicProtocol>,
    /// The assignment the leader gave it, base64.
    #[serde(with = "crate::scram::b64")]
    pub assignment: Vec<u8>,
}

/// A protocol a classic member offered, with its metadata (base64).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassicProtocol {
    pub name: String,
    #[serde(with = "crate::scram::b64")]
    pub metadata: Vec<u8>,
}

/// What one offsets-retention pass did to a group's file ([`GroupOffsets::expire`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expiry {
    /// The file changed (offsets removed, or `active_ms` moved): rewrite it.
    pub changed: bool,
    /// The committed offsets removed, as (topic, partition).
    pub expired: Vec<(String, i32)>,
    /// Nothing is left but the group's name: no committed or staged offsets, no
    /// members, and no member seen for the whole retention. The file may go.
    pub gone: bool,
}

impl GroupOffsets {
    pub fn new(group: &str) -> Self {
        GroupOffsets {
            version: OFFSETS_FORMAT_VERSION,
            group: group.to_string(),
            offsets: BTreeMap::new(),
            pending: BTreeMap::new(),
            consumer: None,
            active_ms: None,
            classic: None,
        }
    }

    /// Whether a KIP-848 consumer group's record, in this file, has members.
    pub fn has_consumer_members(&self) -> bool {
        self.consumer.as_ref().is_some_and(|c| !c.members.is_empty())
    }

    /// Whether a classic group's record ([`Self::classic`]) names members: its last
    /// coordinator saw them, and the next one waits a session for them.
    pub fn has_classic_members(&self) -> bool {
        self.classic.as_ref().is_some_and(|c| !c.members.is_empty())
    }

    /// One pass of offsets retention at `now_ms` (Kafka's `offsets.retention.minutes`
    /// as KIP-211 has it): while the group has members nothing expires; once it has
    /// none, a committed offset expires `retention_ms` after the later of its commit and
    /// the last time the group had members (`active_ms`). `seen_active` is the latest
    /// time the caller saw the group with members (a classic group's members live in
    /// its coordinator's memory; now, if it has some now), and `members_now` whether
    /// it has them now; a consumer group's record here counts too, and so does a classic
    /// group's record with members (its coordinator clears it once the group empties). Offsets a
    /// transaction staged are never expired here (their transaction commits or aborts
    /// them). A group with nothing left for a whole retention is `gone`.
    pub fn expire(&mut self, now_ms: i64, retention_ms: i64, seen_active: Option<i64>, members_now: bool) -> Expiry {
        let mut out = Expiry::default();
        let members_now = members_now || self.has_consumer_members() || self.has_classic_members();
        let seen = if members_now { Some(now_ms) } else { seen_active };
        if seen > self.active_ms {
            self.active_ms = seen;
            out.changed = true;
        }
        let Some(since) = self.active_ms else {
            // Never seen before: its clock starts now.
            self.active_ms = Some(now_ms);
            out.changed = true;
            return out;
        };
        if members_now {
            return out;
        }
        let due = |commit_ms: i64| commit_ms.max(since).saturating_add(retention_ms) <= now_ms;
        for (topic, partitions) in self.offsets.iter_mut() {
            partitions.retain(|&partition, o| {
                let keep = !due(o.commit_ms);
                if !keep {
                    out.expired.push((topic.clone(), partition));
                }
                keep
            });
        }
        self.offsets.retain(|_, partitions| !partitions.is_empty());
        out.changed |= !out.expired.is_empty();
        out.gone = self.offsets.is_empty() && self.pending.is_empty() && due(since);
        out
    }

    /// Loads a group's offsets; a missing file is an empty group, a broken one an error.
    pub fn load(volume: &Volume, group: &str) -> Result<GroupOffsets, VolumeError> {
        let path = offsets_file(volume, group);
        match read_offsets(&path) {
            Ok(g) if g.group != group => Err(VolumeError::Invalid {
                path,
                detail: format!("holds the offsets of group {:?}, not of {group:?}", g.group),
            }),
            Ok(g) => Ok(g),
            Err(e) if e.is_not_found() => Ok(GroupOffsets::new(group)),
            Err(e) => Err(e),
        }
    }

    /// Writes the offsets atomically, refusing a file no reader would read back.
    pub fn save(&self, volume: &Volume) -> Result<(), VolumeError> {
        let path = offsets_file(volume, &self.group);
        let versioned;
        let this = if self.consumer.is_some() && self.version != OFFSETS_WITH_CONSUMER_FORMAT_VERSION {
            versioned = GroupOffsets {
                version: OFFSETS_WITH_CONSUMER_FORMAT_VERSION,
                ..self.clone()
            };
            &versioned
        } else if self.consumer.is_none() && self.version != OFFSETS_FORMAT_VERSION {
            versioned = GroupOffsets {
                version: OFFSETS_FORMAT_VERSION,
                ..self.clone()
            };
            &versioned
        } else {
            self
        };
        let bytes = crate::fsutil::json_bytes(this).map_err(|e| VolumeError::io(&path, e))?;
        // Never write what no reader would read back (the state-file size cap).
        if bytes.len() as u64 > crate::fsutil::MAX_STATE_FILE_BYTES {
            return Err(VolumeError::Invalid {
                path,
                detail: format!(
                    "the group's offsets would take {} bytes, more than the {} bytes a state file may have; not written",
                    bytes.len(),
                    crate::fsutil::MAX_STATE_FILE_BYTES
                ),
            });
        }
        crate::fsutil::atomic_write(&path, &bytes).map_err(|e| VolumeError::io(&path, e))
    }

    /// Takes the group's cross-process write lock (`<encoded group id>.lock`); held
    /// until the returned file is dropped. Tried, never waited on blocking, for at
    /// most [`GROUP_LOCK_WAIT`]: a holder paused (SIGSTOP, a frozen VM) or stuck costs
    /// its group's writers an error they retry, never a thread held forever.
    pub fn lock(volume: &Volume, group: &str) -> Result<std::fs::File, VolumeError> {
        Self::lock_within(volume, group, GROUP_LOCK_WAIT)
    }

    /// [`Self::lock`], waiting at most `wait`, with pauses growing from 1 ms to 8 ms.
    pub fn lock_within(volume: &Volume, group: &str, wait: std::time::Duration) -> Result<std::fs::File, VolumeError> {
        let path = offsets_file(volume, group).with_extension("lock");
        if let Some(dir) = path.parent() {
            crate::fsutil::create_dir_durable(dir).map_err(|e| VolumeError::io(dir, e))?;
        }
        match crate::fsutil::lock_exclusive_within(&path, wait).map_err(|e| VolumeError::io(&path, e))? {
            Some(f) => Ok(f),
            None => Err(VolumeError::Busy {
                path,
                waited_ms: wait.as_millis() as u64,
            }),
        }
    }

    /// Read-modify-write of a group's offsets under its lock: `f` returns its result
    /// and whether it changed anything; only then is the file rewritten.
    pub fn update<R>(
        volume: &Volume,
        group: &str,
        f: impl FnOnce(&mut GroupOffsets) -> (R, bool),
    ) -> Result<R, VolumeError> {
        let _lock = GroupOffsets::lock(volume, group)?;
        let mut offsets = GroupOffsets::load(volume, group)?;
        let (result, changed) = f(&mut offsets);
        if changed {
            offsets.save(volume)?;
        }
        Ok(result)
    }

    /// Deletes a group's offsets file, under the group's lock.
    pub fn delete(volume: &Volume, group: &str) -> Result<(), VolumeError> {
        let _lock = GroupOffsets::lock(volume, group)?;
        Self::delete_locked(volume, group)
    }

    /// Deletes a group's offsets file durably (the unlink, then its directory's
    /// fsync); the caller holds the group's lock ([`Self::lock`]).
    pub fn delete_locked(volume: &Volume, group: &str) -> Result<(), VolumeError> {
        remove_durably(&offsets_file(volume, group))
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.offsets.get(topic).and_then(|p| p.get(&partition))
    }

    pub fn set(&mut self, topic: &str, partition: i32, offset: CommittedOffset) {
        self.offsets
            .entry(topic.to_string())
            .or_default()
            .insert(partition, offset);
    }

    /// Stages an offset for the open transaction of (`producer_id`, `producer_epoch`).
    /// Offsets staged at another epoch belong to another transaction: they are
    /// replaced, never merged with these.
    pub fn stage(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        transactional_id: &str,
        topic: &str,
        partition: i32,
        offset: CommittedOffset,
    ) {
        let fresh = || PendingOffsets {
            producer_epoch,
            transactional_id: transactional_id.to_string(),
            staged_ms: offset.commit_ms,
            offsets: BTreeMap::new(),
        };
        let p = self.pending.entry(producer_id).or_insert_with(fresh);
        if p.producer_epoch != producer_epoch {
            *p = fresh();
        }
        p.offsets
            .entry(topic.to_string())
            .or_default()
            .insert(partition, offset);
    }

    /// Makes the offsets staged by (`producer_id`, `producer_epoch`) the committed
    /// ones. Offsets staged at an older epoch (a fenced instance) are dropped, a newer
    /// epoch's are left alone. Idempotent: false when nothing changed.
    pub fn commit_pending(&mut self, producer_id: i64, producer_epoch: i16) -> bool {
        match self.pending.get(&producer_id) {
            Some(p) if p.producer_epoch == producer_epoch => {}
            Some(p) if p.producer_epoch < producer_epoch => return self.pending.remove(&producer_id).is_some(),
            _ => return false,
        }
        let Some(p) = self.pending.remove(&producer_id) else {
            return false;
        };
        for (topic, parts) in p.offsets {
            for (partition, offset) in parts {
                self.set(&topic, partition, offset);
            }
        }
        true
    }

    /// Drops the offsets staged by `producer_id` at `producer_epoch` or older (an
    /// abort at a fencing epoch drops what the fenced epoch staged); false when there
    /// were none.
    pub fn discard_pending(&mut self, producer_id: i64, producer_epoch: i16) -> bool {
        if self
            .pending
            .get(&producer_id)
            .is_some_and(|p| p.producer_epoch <= producer_epoch)
        {
            return self.pending.remove(&producer_id).is_some();
        }
        false
    }

    /// Whether an open transaction has staged an offset for this partition
    /// (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT then).
    pub fn has_pending(&self, topic: &str, partition: i32) -> bool {
        self.pending
            .values()
            .any(|p| p.offsets.get(topic).is_some_and(|ps| ps.contains_key(&partition)))
    }

    /// Drops every offset of a deleted topic, the committed ones and those open
    /// transactions staged (Apache drops pending transactional offsets of deleted
    /// partitions too): a staged offset applied when its transaction commits, after
    /// the topic was created again under the name, would start the group's consumers
    /// of the new topic past records they never read. True if anything was removed.
    pub fn remove_topic(&mut self, topic: &str) -> bool {
        let mut removed = self.offsets.remove(topic).is_some();
        self.pending.retain(|_, p| {
            removed |= p.offsets.remove(topic).is_some();
            !p.offsets.is_empty()
        });
        removed
    }

    /// Drops one partition's committed offset (OffsetDelete); staged transactional
    /// offsets are left to their transaction. True when there was one.
    pub fn remove(&mut self, topic: &str, partition: i32) -> bool {
        let Some(parts) = self.offsets.get_mut(topic) else {
            return false;
        };
        let removed = parts.remove(&partition).is_some();
        if parts.is_empty() {
            self.offsets.remove(topic);
        }
        removed
    }
}

/// Removes a group's offsets file for good: its directory is fsynced after the unlink,
/// so a power cut after the caller's answer cannot bring the file back
/// (`test_a_deleted_group_stays_deleted_after_a_power_cut`). A file already gone is
/// removed all the same — by another process, whose unlink this sync makes durable
/// too.
fn remove_durably(path: &std::path::Path) -> Result<(), VolumeError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(VolumeError::io(path, e)),
    }
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    crate::fsutil::sync_dir(dir).map_err(|e| VolumeError::io(dir, e))
}

/// The file of a group's offsets: [`Volume::group_offsets_file`], except for a group
/// whose file was written before long names were hashed (percent-encoded names of 181
/// to ~235 bytes worked then). Such a group keeps its old file name, and its lock's,
/// for good: every writer, of whatever version, then uses the same file and lock.
pub fn offsets_file(volume: &Volume, group: &str) -> std::path::PathBuf {
    let stored = crate::layout::stored_name(group);
    let encoded = crate::layout::encode_name(group);
    if crate::layout::is_hashed_name(&stored) && encoded.len() + ".json".len() <= 255 {
        let legacy = volume.groups_dir().join(format!("{encoded}.json"));
        if legacy.exists() {
            return legacy;
        }
    }
    volume.group_offsets_file(group)
}

/// Group ids that have an offsets file on the volume. A long id's file name is
/// hashed ([`crate::layout::stored_name`]): its id is read from the file, and a file
/// that cannot be read is left out here (loading that group reports it).
pub fn list_groups(volume: &Volume) -> Result<Vec<String>, VolumeError> {
    let mut out: Vec<String> = crate::error::dir_entries(&volume.groups_dir())?
        .into_iter()
        .filter_map(|(name, path)| {
            let stem = name.strip_suffix(".json")?;
            if !crate::layout::is_hashed_name(stem) {
                return decode_name(stem);
            }
            match read_offsets(&path) {
                Ok(g) => (crate::layout::stored_name(&g.group) == stem).then_some(g.group),
                Err(e) => {
                    tracing::warn!(error = %e, "a group offsets file under a hashed name is unreadable; its group is not listed");
                    None
                }
            }
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::read_versioned_json;
    use proptest::prelude::*;

    fn committed(at: i64) -> CommittedOffset {
        CommittedOffset {
            offset: 1,
            leader_epoch: -1,
            metadata: None,
            commit_ms: at,
        }
    }

    /// Staged transactional offsets of a deleted topic outlived the deletion and were
    /// applied when their transaction committed: a group's consumers of the topic
    /// created again under the name then started past records they never read.
    #[test]
    fn a_deleted_topics_staged_offsets_go_with_its_committed_ones() {
        let mut g = GroupOffsets::new("g");
        g.stage(7, 0, "tx", "t", 0, committed(1));
        g.stage(7, 0, "tx", "u", 0, committed(1));
        g.stage(8, 0, "tx2", "t", 1, committed(1));
        assert!(g.remove_topic("t"), "something was removed");
        assert!(!g.has_pending("t", 0) && !g.has_pending("t", 1));
        assert!(g.has_pending("u", 0), "other topics' staged offsets stay");
        assert!(!g.pending.contains_key(&8), "nothing left of producer 8's");
        g.commit_pending(7, 0);
        assert!(g.get("t", 0).is_none());
        assert!(g.get("u", 0).is_some());
    }

    #[derive(Debug, Clone)]
    enum Step {
        /// Time passes (ms).
        Wait(i64),
        /// A commit of this partition now.
        Commit(i32),
        /// Members join (true) or the last one leaves (false).
        Members(bool),
        /// An expiry pass now.
        Pass,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1i64..400).prop_map(Step::Wait),
            (0i32..3).prop_map(Step::Commit),
            any::<bool>().prop_map(Step::Members),
            Just(Step::Pass),
        ]
    }

    proptest! {
        /// Offsets retention against a reference: at a pass at `t`, an offset goes
        /// exactly when the group has no members and both its commit and the group's
        /// last member (or, for a group never seen with one, the first pass) lie at
        /// least the retention before `t`; the group is gone exactly when nothing is
        /// left and that last sighting is as old. The caller reports the last time it
        /// saw members (as a coordinator's memory does).
        #[test]
        fn offsets_expire_exactly_a_retention_after_their_commit_and_the_last_member(
            steps in proptest::collection::vec(step(), 1..60),
        ) {
            const RETENTION: i64 = 1_000;
            let mut file = GroupOffsets::new("g");
            let mut now = 10_000i64;
            let mut members = false;
            let mut last_member: Option<i64> = None;
            // The reference: each partition's last commit, and the group's clock.
            let mut commits: BTreeMap<i32, i64> = BTreeMap::new();
            let mut clock: Option<i64> = None;
            for s in steps {
                match s {
                    Step::Wait(ms) => {
                        if members {
                            last_member = Some(now + ms);
                        }
                        now += ms;
                    }
                    Step::Commit(p) => {
                        file.set("t", p, committed(now));
                        commits.insert(p, now);
                    }
                    Step::Members(on) => {
                        members = on;
                        last_member = Some(now);
                    }
                    Step::Pass => {
                        let seen = if members { Some(now) } else { last_member };
                        let out = file.expire(now, RETENTION, seen, members);
                        clock = clock.max(seen).or(Some(now));
                        let since = clock.unwrap();
                        let mut expected = Vec::new();
                        if !members {
                            commits.retain(|&p, &mut c| {
                                let due = c.max(since) + RETENTION <= now;
                                if due {
                                    expected.push(("t".to_string(), p));
                                }
                                !due
                            });
                        }
                        prop_assert_eq!(&out.expired, &expected);
                        prop_assert_eq!(file.active_ms, Some(since));
                        let left: BTreeMap<i32, i64> = file
                            .offsets
                            .get("t")
                            .map(|ps| ps.iter().map(|(&p, o)| (p, o.commit_ms)).collect())
                            .unwrap_or_default();
                        prop_assert_eq!(&left, &commits);
                        prop_assert_eq!(out.gone, !members && commits.is_empty() && since + RETENTION <= now);
                    }
                }
            }
        }
    }

    /// While a consumer group's record has members, nothing expires, whatever the
    /// caller saw; offsets a transaction staged never expire here.
    #[test]
    fn a_consumer_groups_members_and_staged_offsets_keep_the_group() {
        let mut g = GroupOffsets::new("g");
        g.set("t", 0, committed(0));
        g.active_ms = Some(0);
        g.consumer = Some(crate::consumer_group::ConsumerGroupRecord {
            members: [(
                "m".to_string(),
                serde_json::from_str(r#"{"rebalance_timeout_ms":1,"epoch":1,"previous_epoch":0,"state":"stable"}"#)
                    .unwrap(),
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        });
        let out = g.expire(1_000_000, 10, None, false);
        assert!(out.expired.is_empty() && !out.gone);
        assert_eq!(g.active_ms, Some(1_000_000), "seen with members now");
        g.consumer = None;
        g.stage(7, 0, "tx", "t", 1, committed(0));
        let out = g.expire(2_000_000, 10, None, false);
        assert_eq!(out.expired, vec![("t".to_string(), 0)]);
        assert!(!out.gone, "the staged offsets keep it");
        assert_eq!(g.pending.len(), 1);
    }

    /// A file with the field is read by a reader that does not know it (the field
    /// is ignored), and the field survives a rewrite by one that does.
    #[test]
    fn active_ms_is_optional_on_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let mut g = GroupOffsets::new("g");
        g.save(&v).unwrap();
        let text = std::fs::read_to_string(offsets_file(&v, "g")).unwrap();
        assert!(!text.contains("active_ms"), "{text}");
        g.active_ms = Some(42);
        g.save(&v).unwrap();
        let back = GroupOffsets::load(&v, "g").unwrap();
        assert_eq!(back.active_ms, Some(42));
        assert_eq!(back.version, OFFSETS_FORMAT_VERSION);
    }

    /// A file holding a consumer group record is version 2: a reader of version 1
    /// (an older kaas) refuses it by name instead of reading it without the record
    /// and dropping the group's members at its next rewrite; without the record it is
    /// version 1 again, which every version reads.
    #[test]
    fn a_file_with_a_consumer_group_is_version_2_and_a_version_1_reader_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let mut g = GroupOffsets::new("g");
        g.consumer = Some(crate::consumer_group::ConsumerGroupRecord {
            group_epoch: 3,
            ..Default::default()
        });
        g.save(&v).unwrap();
        let back = GroupOffsets::load(&v, "g").unwrap();
        assert_eq!(back.version, OFFSETS_WITH_CONSUMER_FORMAT_VERSION);
        assert_eq!(back.consumer.as_ref().unwrap().group_epoch, 3);
        let old = read_versioned_json::<GroupOffsets>(&offsets_file(&v, "g"), "group offsets", OFFSETS_FORMAT_VERSION);
        assert!(
            matches!(old, Err(VolumeError::UnknownVersion { found: 2, .. })),
            "{old:?}"
        );
        let mut back = back;
        back.consumer = None;
        back.save(&v).unwrap();
        assert_eq!(GroupOffsets::load(&v, "g").unwrap().version, OFFSETS_FORMAT_VERSION);
        assert_eq!(list_groups(&v).unwrap(), vec!["g".to_string()]);
    }

    /// A classic group's record is an optional field of a version 1 file: written with
    /// its bytes as base64, read back whole, and a file without it (every file written
    /// before it) reads as a group with no record. Its members count for offsets
    /// retention as a consumer group's do.
    #[test]
    fn a_classic_group_record_round_trips_in_a_version_1_file() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let mut g = GroupOffsets::new("g");
        g.classic = Some(ClassicGroupRecord {
            generation: 7,
            protocol_type: "consumer".into(),
            protocol: "range".into(),
            leader: "m-1".into(),
            members: vec![ClassicMemberRecord {
                member_id: "m-1".into(),
                instance_id: Some("i-1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                protocols: vec![ClassicProtocol {
                    name: "range".into(),
                    metadata: vec![0, 1, 255],
                }],
                assignment: vec![9, 8, 7],
            }],
        });
        g.save(&v).unwrap();
        let text = std::fs::read_to_string(offsets_file(&v, "g")).unwrap();
        assert!(text.contains("\"metadata\": \"AAH/\""), "{text}");
        let back = GroupOffsets::load(&v, "g").unwrap();
        assert_eq!(back.version, OFFSETS_FORMAT_VERSION);
        assert_eq!(back, g);
        assert!(back.has_classic_members());
        let mut expiring = back.clone();
        let expiry = expiring.expire(1_000_000, 1, Some(0), false);
        assert!(!expiry.gone && expiry.expired.is_empty(), "{expiry:?}");
        std::fs::write(offsets_file(&v, "g"), r#"{"version": 1, "group": "g", "offsets": {}}"#).unwrap();
        assert_eq!(GroupOffsets::load(&v, "g").unwrap().classic, None);
    }

    /// Issue 25 item 8: a group's lock held by a process that does not let go (paused
    /// with SIGSTOP, a frozen VM) costs a writer an error after a bounded wait; the
    /// code before waited on it blocking, for as long as the holder stayed paused.
    #[test]
    fn a_group_lock_held_elsewhere_is_given_up_on_after_a_bounded_wait() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        GroupOffsets::update(&volume, "g", |_| ((), false)).unwrap();
        let path = offsets_file(&volume, "g").with_extension("lock");
        let paused = crate::fsutil::lock_exclusive(&path).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let v = volume.clone();
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let result = GroupOffsets::update(&v, "g", |o| {
                o.set(
                    "t",
                    0,
                    CommittedOffset {
                        offset: 1,
                        leader_epoch: -1,
                        metadata: None,
                        commit_ms: 1,
                    },
                );
                ((), true)
            });
            let _ = tx.send((result.map_err(|e| e.to_string()), started.elapsed()));
        });
        let (result, waited) = rx
            .recv_timeout(GROUP_LOCK_WAIT + std::time::Duration::from_secs(5))
            .expect("the writer gave up instead of waiting for the holder");
        let err = result.unwrap_err();
        assert!(err.contains("held by another process"), "{err}");
        assert!(waited >= GROUP_LOCK_WAIT);
        assert!(GroupOffsets::load(&volume, "g").unwrap().get("t", 0).is_none());
        drop(paused);
        assert!(GroupOffsets::lock_within(&volume, "g", std::time::Duration::from_millis(100)).is_ok());
    }

    #[test]
    fn a_group_file_under_its_old_unhashed_name_keeps_that_name() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let group = "g".repeat(200);
        let mut g = GroupOffsets::new(&group);
        g.set(
            "t",
            0,
            CommittedOffset {
                offset: 7,
                leader_epoch: 0,
                metadata: None,
                commit_ms: 1,
            },
        );
        let legacy = volume.groups_dir().join(format!("{group}.json"));
        crate::fsutil::write_json(&legacy, &g).unwrap();
        assert_eq!(
            GroupOffsets::load(&volume, &group).unwrap().get("t", 0).unwrap().offset,
            7
        );
        assert_eq!(list_groups(&volume).unwrap(), vec![group.clone()]);
        GroupOffsets::update(&volume, &group, |o| {
            o.set(
                "t",
                0,
                CommittedOffset {
                    offset: 8,
                    leader_epoch: 0,
                    metadata: None,
                    commit_ms: 2,
                },
            );
            ((), true)
        })
        .unwrap();
        assert!(legacy.exists() && !volume.group_offsets_file(&group).exists());
        assert_eq!(
            GroupOffsets::load(&volume, &group).unwrap().get("t", 0).unwrap().offset,
            8
        );
        assert_eq!(list_groups(&volume).unwrap(), vec![group.clone()]);
        GroupOffsets::delete(&volume, &group).unwrap();
        assert!(!legacy.exists());
        assert!(GroupOffsets::load(&volume, &group).unwrap().offsets.is_empty());
    }

    #[test]
    fn offsets_survive_a_reload_and_missing_means_empty() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        assert!(GroupOffsets::load(&volume, "g 1").unwrap().offsets.is_empty());
        let mut g = GroupOffsets::new("g 1");
        g.set(
            "t",
            3,
            CommittedOffset {
                offset: 42,
                leader_epoch: -1,
                metadata: Some("m".into()),
                commit_ms: 7,
            },
        );
        g.save(&volume).unwrap();
        let back = GroupOffsets::load(&volume, "g 1").unwrap();
        assert_eq!(back, g);
        assert_eq!(list_groups(&volume).unwrap(), vec!["g 1".to_string()]);
    }

    #[test]
    fn staged_offsets_are_invisible_until_committed_and_dropped_on_abort() {
        let c = |offset| CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_ms: 1,
        };
        let mut g = GroupOffsets::new("g");
        g.set("t", 0, c(5));
        g.stage(7, 0, "tx", "t", 0, c(10));
        assert_eq!(g.get("t", 0).unwrap().offset, 5);
        assert!(g.has_pending("t", 0));
        assert!(g.commit_pending(7, 0));
        assert_eq!(g.get("t", 0).unwrap().offset, 10);
        assert!(!g.commit_pending(7, 0), "idempotent");
        g.stage(8, 0, "tx2", "t", 0, c(20));
        assert!(g.discard_pending(8, 0));
        assert_eq!(g.get("t", 0).unwrap().offset, 10);
        assert!(!g.has_pending("t", 0));
    }

    #[test]
    fn staged_offsets_of_different_epochs_never_mix() {
        let c = |offset| CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_ms: 1,
        };
        let mut g = GroupOffsets::new("g");
        // A zombie at epoch 0 staged partition 1; the new instance at epoch 1 stages partition 0.
        g.stage(7, 0, "tx", "t", 1, c(99));
        g.stage(7, 1, "tx", "t", 0, c(10));
        assert!(g.commit_pending(7, 1));
        assert_eq!(g.get("t", 0).unwrap().offset, 10);
        assert!(
            g.get("t", 1).is_none(),
            "the zombie's offset was not merged into the commit"
        );
        // Committing an older epoch never applies a newer epoch's offsets.
        g.stage(7, 2, "tx", "t", 0, c(20));
        assert!(!g.commit_pending(7, 1));
        assert_eq!(g.get("t", 0).unwrap().offset, 10);
        // An abort at a fencing epoch drops what the fenced epoch staged.
        assert!(g.discard_pending(7, 3));
        assert!(!g.has_pending("t", 0));
        // Committing at a newer epoch drops an older epoch's leftovers without applying them.
        g.stage(7, 3, "tx", "t", 0, c(30));
        assert!(g.commit_pending(7, 4));
        assert_eq!(g.get("t", 0).unwrap().offset, 10);
        assert!(g.pending.is_empty());
    }

    #[test]
    fn updates_under_the_group_lock_lose_nothing_to_concurrent_writers() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let volume = volume.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        GroupOffsets::update(&volume, "g", |o| {
                            let offset = CommittedOffset {
                                offset: i,
                                leader_epoch: -1,
                                metadata: None,
                                commit_ms: 1,
                            };
                            o.set(&format!("t{w}"), i as i32, offset);
                            ((), true)
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let g = GroupOffsets::load(&volume, "g").unwrap();
        for w in 0..4 {
            assert_eq!(g.offsets[&format!("t{w}")].len(), 25, "writer {w} lost updates");
        }
    }

    #[test]
    fn a_corrupt_offsets_file_is_an_error_not_an_empty_group() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        std::fs::create_dir_all(volume.groups_dir()).unwrap();
        std::fs::write(volume.group_offsets_file("g"), b"garbage").unwrap();
        let err = GroupOffsets::load(&volume, "g").unwrap_err().to_string();
        assert!(err.contains("g.json"), "{err}");
    }
}
