//! A classic group's membership on the volume ([`GroupOffsets::classic`]), as Apache
//! keeps it with the group in `__consumer_offsets`: a broker that takes a group over
//! (its coordinator restarted, or the group moved with the live set) loads its last
//! stable generation, gives every member a full session from then, and goes on with
//! it — members heartbeat on without a rebalance, and DeleteGroups and OffsetDelete
//! see them (NON_EMPTY_GROUP) until they leave or their sessions pass.
//!
//! When it is written: a group whose stable generation (or emptiness) differs from
//! what this broker last wrote or loaded is marked; the request that made the change
//! writes it before its answer where a member depends on it (the leader's SyncGroup,
//! a static member's rejoin under a new member id), and a pass every second writes
//! the rest (members leaving or expiring). A rebalance in progress writes nothing: the
//! file keeps the last stable generation, which is what Apache loads too. A record
//! that lags (a crash right after a generation was handed out) costs its members a
//! rejoin (ILLEGAL_GENERATION), as before the record existed.
//!
//! Lock order as everywhere in the coordinator: the group's cache entry, its file
//! lock, then the group's mutex (held only to read it; no file lock is awaited
//! under it).

use super::*;
use kaas_core::offsets::{ClassicGroupRecord, ClassicMemberRecord, ClassicProtocol};

/// What identifies a record's content for "does the file hold it": the generation, its
/// leader and every member id (a static member rejoining changes its id, not the
/// generation). None: no members.
pub(super) type RecordKey = Option<(i32, String, Vec<String>)>;

/// Whether the file should hold a record of `group` now: Some(true) for a stable
/// group with members, Some(false) for an empty or removed one; None while it
/// rebalances (the file keeps the last stable generation).
fn recorded(group: &Group) -> Option<bool> {
    if group.removed {
        return Some(false);
    }
    match group.state {
        GroupState::Stable => Some(!group.members.is_empty()),
        GroupState::Empty | GroupState::Dead => Some(false),
        GroupState::PreparingRebalance | GroupState::CompletingRebalance => None,
    }
}

/// What a group's file should say of it now (see [`recorded`]).
fn wanted(group: &Group) -> Option<Option<ClassicGroupRecord>> {
    recorded(group).map(|with| with.then(|| record_of(group)))
}

/// Whether what the file should say of `group` differs from what this broker last
/// wrote or loaded (None while it rebalances). Allocates nothing: `tick` asks it of
/// every group ten times a second.
fn differs_from_persisted(group: &Group) -> Option<bool> {
    let with = recorded(group)?;
    Some(match (&group.persisted, with) {
        (None, false) => false,
        (Some((generation, leader, ids)), true) => {
            *generation != group.generation
                || group.leader.as_deref().unwrap_or_default() != leader.as_str()
                || !ids.iter().eq(group.members.keys())
        }
        _ => true,
    })
}

/// The key of a record (member ids sorted, as a group's members are kept).
fn key_of(record: Option<&ClassicGroupRecord>) -> RecordKey {
    record.filter(|r| !r.members.is_empty()).map(|r| {
        let mut ids: Vec<String> = r.members.iter().map(|m| m.member_id.clone()).collect();
        ids.sort();
        (r.generation, r.leader.clone(), ids)
    })
}

fn record_of(group: &Group) -> ClassicGroupRecord {
    ClassicGroupRecord {
        generation: group.generation,
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        protocol: group.protocol.clone().unwrap_or_default(),
        leader: group.leader.clone().unwrap_or_default(),
        members: group
            .members
            .values()
            .map(|m| ClassicMemberRecord {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout.as_millis() as u64,
                rebalance_timeout_ms: m.rebalance_timeout.as_millis() as u64,
                protocols: m
                    .protocols
                    .iter()
                    .map(|(name, metadata)| ClassicProtocol {
                        name: name.clone(),
                        metadata: metadata.to_vec(),
                    })
                    .collect(),
                assignment: m.assignment.to_vec(),
            })
            .collect(),
    }
}

impl GroupCoordinator {
    /// After a change to `group` (its mutex held): marks it for writing when what its
    /// file should say differs from what this broker last wrote or loaded.
    pub(super) fn note_record(&self, group: &Group) {
        if differs_from_persisted(group) == Some(true) {
            let seq = self.classic_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            self.classic_dirty
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(group.id.clone(), seq);
        }
    }

    /// Whether `group_id` waits to have its record written.
    pub fn record_pending(&self, group_id: &str) -> bool {
        self.classic_dirty
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(group_id)
    }

    /// Writes `group_id`'s record if it waits to be, off the async workers: what a
    /// request whose answer depends on it calls before answering. False when the
    /// write failed (logged; the pass, [`Self::persist_records`], tries again): the
    /// caller decides whether its answer may go out without it.
    pub fn persist_record_now(&self, group_id: &str, owns: &(dyn Fn(&str) -> bool + Sync)) -> bool {
        if !self.record_pending(group_id) {
            return true;
        }
        crate::blocking::off_worker(|| match self.persist_record(group_id, owns) {
            Ok(_) => true,
            Err(e) => {
                warn!(group = group_id, error = %e, "cannot write the group's membership to its file; tried again within a second");
                false
            }
        })
    }

    /// Whether the group's file names `member_id` as this broker holds the group now:
    /// the group is in memory here with that member, what this broker last wrote or
    /// loaded names it, and the group has not changed since (a group rebalancing
    /// writes nothing: what was written stands). What a static member's rejoin
    /// checks before it tells the member its new id.
    pub fn records_member(&self, group_id: &str, member_id: &str) -> bool {
        self.group(group_id).is_some_and(|g| {
            let g = lock_group(&g);
            let named = g
                .persisted
                .as_ref()
                .is_some_and(|(_, _, ids)| ids.iter().any(|id| id == member_id));
            !g.removed && g.members.contains_key(member_id) && named && differs_from_persisted(&g) != Some(true)
        })
    }

    /// Writes the records of every group marked since the last pass (run every
    /// second, blocking file work). Returns how many files were written.
    pub fn persist_records(&self, owns: &dyn Fn(&str) -> bool) -> usize {
        let due: Vec<String> = self
            .classic_dirty
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        let mut written = 0;
        for id in due {
            match self.persist_record(&id, owns) {
                Ok(wrote) => written += usize::from(wrote),
                Err(e @ (VolumeError::Io { .. } | VolumeError::Busy { .. })) => {
                    warn!(group = %id, error = %e, "cannot write the group's membership to its file; tried again within a second")
                }
                Err(e) => {
                    // The file itself is refused (unreadable, too large): its members
                    // join again after a move, as before the record existed.
                    tracing::error!(group = %id, error = %e, "cannot write the group's membership to its file: the file is refused; dropped");
                    self.classic_dirty.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                }
            }
        }
        written
    }

    /// One group's record, written when it differs from the file's: under the group's
    /// file lock, with the group read there (file lock, then group mutex) and this
    /// broker's coordination checked there too — a group that moved away is its new
    /// coordinator's to write. Ok(true) when the file was written.
    fn persist_record(&self, group_id: &str, owns: &dyn Fn(&str) -> bool) -> Result<bool, VolumeError> {
        let seq = self
            .classic_dirty
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(group_id)
            .copied();
        let Some(seq) = seq else {
            return Ok(false);
        };
        let wanted_now = || self.group(group_id).map_or(Some(None), |g| wanted(&lock_group(&g)));
        // A group with members makes its file; an empty one never does.
        let create = self
            .group(group_id)
            .is_some_and(|g| recorded(&lock_group(&g)) == Some(true));
        let outcome = self.with_offsets_blocking(group_id, create, &|| Ok(()), |offsets| {
            // Under the file lock, again: still this broker's group, and still marked.
            // A group that moved away while this write waited for the lock lost its
            // mark (`forget_unowned`); if it came back meanwhile, it is not in memory
            // here, and "not in memory" would clear the record its coordinator in
            // between wrote (`a_write_that_waited_while_the_group_moved_away_and_back_clears_nothing`).
            if !owns(group_id) || !self.record_pending(group_id) {
                return (None, false);
            }
            match wanted_now() {
                None => (None, false),
                Some(record) => {
                    let key = key_of(record.as_ref());
                    let changed = offsets.classic != record;
                    offsets.classic = record;
                    (Some((key, changed)), changed)
                }
            }
        });
        let wrote = match outcome {
            Err(e) => {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, &e);
                return Err(e);
            }
            // No file (an empty group makes none), moved away, or rebalancing now:
            // nothing to write.
            Ok(None) | Ok(Some(None)) => false,
            Ok(Some(Some((key, wrote)))) => {
                if let Some(g) = self.group(group_id) {
                    lock_group(&g).persisted = key;
                }
                wrote
            }
        };
        let mut dirty = self.classic_dirty.lock().unwrap_or_else(|p| p.into_inner());
        if dirty.get(group_id) == Some(&seq) {
            dirty.remove(group_id);
        }
        Ok(wrote)
    }

    /// The group, from memory, or loaded from its file's record when this broker has
    /// none in memory and the record names members (a coordinator that took the group
    /// over): stable at the record's generation, every member with a full session from
    /// now. Its members' metadata and assignments are charged to
    /// `--group-member-metadata-max-bytes` where they fit; where they do not, they are
    /// kept uncharged (refusing them would let the group be deleted under its members)
    /// until the member's next join. None when the load could not be decided
    /// ([`Self::load_group`]): read-only callers answer as for a group without members.
    pub(super) fn group_or_load(&self, group_id: &str) -> Option<Arc<Mutex<Group>>> {
        self.load_group(group_id).ok().flatten()
    }

    /// [`Self::group_or_load`], saying when the load could not be decided: the file
    /// could not be read for the volume (COORDINATOR_NOT_AVAILABLE; a file refused for
    /// itself, unreadable or too large, loads nothing, logged), or the live set changed
    /// during the read (NOT_COORDINATOR: the group may have moved). A caller that
    /// would make the group afresh (JoinGroup) must not on either: a fresh empty group
    /// in memory would hide the record's members from every request after it, and let
    /// DeleteGroups delete their offsets.
    pub(super) fn load_group(&self, group_id: &str) -> Result<Option<Arc<Mutex<Group>>>, ResponseError> {
        if let Some(g) = self.group(group_id) {
            return Ok(Some(g));
        }
        // This broker changed the group since it last wrote it (its last member left
        // a moment ago): memory is the group, the file is behind.
        if self.record_pending(group_id) {
            return Ok(None);
        }
        let generation = self.generation();
        // A file read: off the async workers (heartbeats and DescribeGroups come here
        // for groups not in memory).
        let record = match crate::blocking::off_worker(|| GroupOffsets::load(&self.volume, group_id)) {
            Ok(o) => match o.classic.filter(|r| !r.members.is_empty()) {
                Some(r) => r,
                None => return Ok(None),
            },
            // The volume failed the read (not the file refused for what it holds: not
            // a regular file, too large, unparseable).
            Err(e @ VolumeError::Io { .. }) if !e.is_invalid_data() => {
                warn!(group = group_id, error = %e, "cannot read the group's file to load its members");
                return Err(ResponseError::CoordinatorNotAvailable);
            }
            Err(e) => {
                warn!(group = group_id, error = %e, "the group's file is refused; its recorded members are not loaded");
                return Ok(None);
            }
        };
        self.insert_loaded(group_id, record, generation, Instant::now())
    }

    /// Puts a group built from `record` in memory unless one is there already, or this
    /// broker changed the group since it last wrote it (its record waits to be
    /// written: memory is the group, the file is behind: Ok(None)). Err(NOT_COORDINATOR)
    /// when the live set changed since `generation` (the group may have moved
    /// meanwhile).
    pub(super) fn insert_loaded(
        &self,
        group_id: &str,
        record: ClassicGroupRecord,
        generation: u64,
        now: Instant,
    ) -> Result<Option<Arc<Mutex<Group>>>, ResponseError> {
        if let Some(g) = self.group(group_id) {
            return Ok(Some(g));
        }
        if self.record_pending(group_id) {
            return Ok(None);
        }
        let group = self.group_of_record(group_id, record, now);
        let mut groups = self.groups();
        if let Some(g) = groups.get(group_id) {
            return Ok(Some(g.clone()));
        }
        // Again under the map's lock: a group made and emptied here since the check
        // above was marked before it left the map (`evict`), so its record read
        // before that is not put back.
        if self.record_pending(group_id) {
            return Ok(None);
        }
        if self.generation() != generation {
            return Err(ResponseError::NotCoordinator);
        }
        info!(
            group = group_id,
            generation = group.generation,
            members = group.members.len(),
            "classic group loaded from its file; its members have a session from now"
        );
        let handle = Arc::new(Mutex::new(group));
        groups.insert(group_id.to_string(), handle.clone());
        Ok(Some(handle))
    }

    fn group_of_record(&self, group_id: &str, record: ClassicGroupRecord, now: Instant) -> Group {
        let key = key_of(Some(&record));
        let mut group = Group::new(group_id);
        group.state = GroupState::Stable;
        group.generation = record.generation;
        group.protocol_type = Some(record.protocol_type);
        group.protocol = Some(record.protocol);
        group.leader = Some(record.leader);
        for m in record.members {
            let protocols: Vec<(String, Bytes)> = m
                .protocols
                .into_iter()
                .map(|p| (p.name, Bytes::from(p.metadata)))
                .collect();
            let assignment = Bytes::from(m.assignment);
            let metadata_charge = self
                .metadata
                .charge(group_id, &protocols, 0)
                .unwrap_or_else(MetadataCharge::none);
            let assignment_charge = self
                .metadata
                .charge_bytes(group_id, assignment.len() as u64, 0)
                .unwrap_or_else(MetadataCharge::none);
            if let Some(inst) = &m.instance_id {
                group.static_members.insert(inst.clone(), m.member_id.clone());
            }
            group.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: Duration::from_millis(m.session_timeout_ms),
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms),
                    protocols,
                    metadata_charge,
                    assignment,
                    assignment_charge,
                    join_waiter: None,
                    sync_waiter: None,
                    last_seen: now,
                },
            );
        }
        group.persisted = key;
        group
    }
}
