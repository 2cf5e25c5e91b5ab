//! Fence logs: `__cluster/producer_fences/from-<broker>.json`, each broker's outbound
//! record of epoch bumps (pid → latest epoch), and the [`FenceWatcher`] that turns the
//! other brokers' logs into fences to apply locally. Peers poll rather than watch:
//! inotify does not see other NFS clients' writes.

use crate::error::{read_versioned_json, Loaded, VolumeError};
use crate::fsutil::write_json;
use crate::layout::Volume;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

crate::versioned!(FenceLog, FenceDeliveries);

pub const FENCE_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceRecord {
    pub epoch: i16,
    pub recorded_ms: i64,
    #[serde(default)]
    pub transactional_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceLog {
    pub version: u32,
    pub broker: i32,
    pub updated_ms: i64,
    /// producer id → latest fenced epoch. JSON object keys are strings of the id.
    pub fences: BTreeMap<i64, FenceRecord>,
}

pub fn fences_dir(volume: &Volume) -> PathBuf {
    volume.cluster_dir().join("producer_fences")
}

/// The writer id of the fence log kept by admin tools (kaasctl): `from-admin.json`.
pub const ADMIN_WRITER: i32 = -1;

pub fn fence_log_path(volume: &Volume, broker: i32) -> PathBuf {
    if broker == ADMIN_WRITER {
        fences_dir(volume).join("from-admin.json")
    } else {
        fences_dir(volume).join(format!("from-{broker}.json"))
    }
}

/// The writer id of a fence log file name, if it is one.
fn writer_of(file_name: &str) -> Option<i32> {
    let stem = file_name.strip_prefix("from-")?.strip_suffix(".json")?;
    if stem == "admin" {
        Some(ADMIN_WRITER)
    } else {
        stem.parse().ok()
    }
}

/// The transactional id as a fence record keeps it, for people (kaasctl shows it; no
/// rule reads it): at most [`FENCE_ID_MAX_BYTES`], cut at a character boundary and
/// marked with "…". Each bump rewrites the whole log and every peer reads it, so a
/// record costs a bounded number of bytes whatever ids clients choose (up to 32,767
/// bytes each, which JSON escaping could grow six-fold).
fn shown_id(id: &str) -> String {
    if id.len() <= FENCE_ID_MAX_BYTES {
        return id.to_string();
    }
    let mut end = FENCE_ID_MAX_BYTES;
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &id[..end])
}

/// The longest transactional id a fence record keeps whole (see [`shown_id`]).
pub const FENCE_ID_MAX_BYTES: usize = 256;

impl FenceLog {
    pub fn empty(broker: i32) -> Self {
        FenceLog {
            version: FENCE_FORMAT_VERSION,
            broker,
            updated_ms: 0,
            fences: BTreeMap::new(),
        }
    }

    /// A broker's log; missing means empty, corrupt is an error naming the file.
    pub fn load(volume: &Volume, broker: i32) -> Result<FenceLog, VolumeError> {
        match read_versioned_json(&fence_log_path(volume, broker), "fence log", FENCE_FORMAT_VERSION) {
            Ok(l) => Ok(l),
            Err(e) if e.is_not_found() => Ok(FenceLog::empty(broker)),
            Err(e) => Err(e),
        }
    }

    /// Records `(pid, epoch)`; an equal or lower epoch than the one recorded changes
    /// nothing. Returns whether the log changed (and must be saved).
    pub fn append(&mut self, producer_id: i64, epoch: i16, transactional_id: Option<&str>, now_ms: i64) -> bool {
        if self.fences.get(&producer_id).is_some_and(|r| r.epoch >= epoch) {
            return false;
        }
        self.fences.insert(
            producer_id,
            FenceRecord {
                epoch,
                recorded_ms: now_ms,
                transactional_id: transactional_id.map(shown_id),
            },
        );
        self.updated_ms = now_ms;
        true
    }

    /// Drops records older than `max_age_ms` (the broker passes
    /// `transactional.id.expiration.ms`: by then the coordinator entry itself may be
    /// gone), so a fence log stays bounded. Returns whether anything was dropped.
    pub fn prune(&mut self, now_ms: i64, max_age_ms: i64) -> bool {
        let before = self.fences.len();
        self.fences.retain(|_, r| now_ms - r.recorded_ms <= max_age_ms);
        before != self.fences.len()
    }

    pub fn save(&self, volume: &Volume) -> Result<(), VolumeError> {
        let path = fence_log_path(volume, self.broker);
        write_json(&path, self).map_err(|e| VolumeError::io(&path, e))
    }
}

/// Every fence log on the volume: (broker id, log or the error reading it).
pub fn list_fence_logs(volume: &Volume) -> Result<Vec<(i32, Loaded<FenceLog>)>, VolumeError> {
    let mut out: Vec<(i32, Loaded<FenceLog>)> = crate::error::dir_entries(&fences_dir(volume))?
        .into_iter()
        .filter_map(|(name, _)| writer_of(&name))
        .map(|id| (id, FenceLog::load(volume, id)))
        .collect();
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

/// One fence a watcher found in another writer's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerFence {
    pub producer_id: i64,
    pub epoch: i16,
    /// The log it came from (a broker id, or [`ADMIN_WRITER`]).
    pub writer: i32,
    pub recorded_ms: i64,
}

/// What one broker's fence watcher applied, and when:
/// `__cluster/producer_fences/applied-by-<broker>.json`, written by that broker only
/// (atomic replace), so `kaasctl fence show` can tell per broker which bumps reached
/// it and how late.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceDeliveries {
    pub version: u32,
    pub broker: i32,
    pub updated_ms: i64,
    /// producer id → the latest fence applied for it.
    pub applied: BTreeMap<i64, Delivery>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub epoch: i16,
    pub writer: i32,
    /// When the writer recorded the bump (its clock).
    pub recorded_ms: i64,
    /// When this broker applied it (its clock).
    pub applied_ms: i64,
}

pub fn deliveries_path(volume: &Volume, broker: i32) -> PathBuf {
    fences_dir(volume).join(format!("applied-by-{broker}.json"))
}

impl FenceDeliveries {
    /// A broker's record; missing means nothing applied yet, corrupt is an error
    /// naming the file.
    pub fn load(volume: &Volume, broker: i32) -> Result<FenceDeliveries, VolumeError> {
        match read_versioned_json(
            &deliveries_path(volume, broker),
            "fence deliveries",
            FENCE_FORMAT_VERSION,
        ) {
            Ok(d) => Ok(d),
            Err(e) if e.is_not_found() => Ok(FenceDeliveries {
                version: FENCE_FORMAT_VERSION,
                broker,
                updated_ms: 0,
                applied: BTreeMap::new(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Records fences applied at `now_ms`, drops records older than `max_age_ms`
    /// (bounded like the fence logs), and saves.
    pub fn record(
        &mut self,
        volume: &Volume,
        fences: &[PeerFence],
        now_ms: i64,
        max_age_ms: i64,
    ) -> Result<(), VolumeError> {
        for f in fences {
            if self.applied.get(&f.producer_id).is_some_and(|d| d.epoch >= f.epoch) {
                continue;
            }
            self.applied.insert(
                f.producer_id,
                Delivery {
                    epoch: f.epoch,
                    writer: f.writer,
                    recorded_ms: f.recorded_ms,
                    applied_ms: now_ms,
                },
            );
        }
        self.applied.retain(|_, d| now_ms - d.applied_ms <= max_age_ms);
        self.updated_ms = now_ms;
        let path = deliveries_path(volume, self.broker);
        write_json(&path, self).map_err(|e| VolumeError::io(&path, e))
    }
}

/// Every broker's delivery record on the volume: (broker id, record or the error).
pub fn list_deliveries(volume: &Volume) -> Result<Vec<(i32, Loaded<FenceDeliveries>)>, VolumeError> {
    let mut out: Vec<(i32, Loaded<FenceDeliveries>)> = crate::error::dir_entries(&fences_dir(volume))?
        .into_iter()
        .filter_map(|(name, _)| name.strip_prefix("applied-by-")?.strip_suffix(".json")?.parse().ok())
        .map(|id| (id, FenceDeliveries::load(volume, id)))
        .collect();
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

/// Reads the other brokers' fence logs and reports each (pid, epoch) newer than what
/// it reported before, so a fence is applied once per bump. A log whose file is as it
/// was at the last read (same stamp: every save replaces the file) is not read again.
pub struct FenceWatcher {
    self_broker: i32,
    applied: HashMap<i64, i16>,
    read: HashMap<i32, crate::fsutil::FileStamp>,
    /// The producer ids in each writer's log as last read: `applied` keeps only
    /// those, so it shrinks as the logs are pruned (a pid pruned and fenced again
    /// later is applied again, which changes nothing where it was applied before).
    logged: HashMap<i32, Vec<i64>>,
}

impl FenceWatcher {
    pub fn new(self_broker: i32) -> Self {
        FenceWatcher {
            self_broker,
            applied: HashMap::new(),
            read: HashMap::new(),
            logged: HashMap::new(),
        }
    }

    /// One poll: fences to apply now, and logs that could not be read.
    pub fn poll(&mut self, volume: &Volume) -> (Vec<(i64, i16)>, Vec<VolumeError>) {
        let (fresh, errors) = self.poll_fences(volume);
        (fresh.into_iter().map(|f| (f.producer_id, f.epoch)).collect(), errors)
    }

    /// [`FenceWatcher::poll`] with where each fence came from and when it was recorded.
    pub fn poll_fences(&mut self, volume: &Volume) -> (Vec<PeerFence>, Vec<VolumeError>) {
        let mut fresh = Vec::new();
        let mut errors = Vec::new();
        let writers = match crate::error::dir_entries(&fences_dir(volume)) {
            Ok(entries) => entries.into_iter().filter_map(|(name, _)| writer_of(&name)),
            Err(e) => return (fresh, vec![e]),
        };
        let mut writers: Vec<i32> = writers.filter(|w| *w != self.self_broker).collect();
        writers.sort_unstable();
        let mut changed = false;
        for &broker in &writers {
            // The stamp before the read: a save in between only makes the next poll
            // read the log again.
            let stamp = crate::fsutil::file_stamp(&fence_log_path(volume, broker));
            if stamp.is_some() && self.read.get(&broker) == stamp.as_ref() {
                continue;
            }
            match FenceLog::load(volume, broker) {
                Ok(log) => {
                    if let Some(stamp) = stamp {
                        self.read.insert(broker, stamp);
                    }
                    self.logged.insert(broker, log.fences.keys().copied().collect());
                    changed = true;
                    for (pid, rec) in log.fences {
                        if self.applied.get(&pid).is_none_or(|&e| e < rec.epoch) {
                            self.applied.insert(pid, rec.epoch);
                            fresh.push(PeerFence {
                                producer_id: pid,
                                epoch: rec.epoch,
                                writer: broker,
                                recorded_ms: rec.recorded_ms,
                            });
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        // A log gone (its broker's files removed) is forgotten; one unreadable now
        // keeps what it held when last read.
        let before = self.logged.len();
        self.logged.retain(|w, _| writers.binary_search(w).is_ok());
        self.read.retain(|w, _| writers.binary_search(w).is_ok());
        if changed || self.logged.len() != before {
            let logged: std::collections::HashSet<i64> = self.logged.values().flatten().copied().collect();
            self.applied.retain(|pid, _| logged.contains(pid));
        }
        (fresh, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume() -> (tempfile::TempDir, Volume) {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        (dir, v)
    }

    /// Each fence record kept the whole transactional id: ids of 32,767 control
    /// characters (escaped six-fold in JSON) made a record of about 197 KB, and past
    /// 256 MiB the broker could no longer read its own log back (every transactional
    /// InitProducerId then refused at its next start), with every bump rewriting it
    /// whole before that.
    #[test]
    fn a_record_costs_a_bounded_number_of_bytes_whatever_the_transactional_id() {
        let d = tempfile::tempdir().unwrap();
        let v = Volume::new(d.path());
        let mut log = FenceLog::empty(0);
        log.append(7, 1, Some(&"\u{1}".repeat(32_767)), 1);
        log.append(8, 1, Some(&"é".repeat(200)), 1);
        log.save(&v).unwrap();
        assert!(std::fs::metadata(fence_log_path(&v, 0)).unwrap().len() < 4_096);
        let back = FenceLog::load(&v, 0).unwrap();
        let long = back.fences[&8].transactional_id.as_deref().unwrap();
        assert!(
            long.ends_with('…') && long.len() <= FENCE_ID_MAX_BYTES + '…'.len_utf8(),
            "{long}"
        );
        log.append(9, 1, Some("tx"), 1);
        assert_eq!(log.fences[&9].transactional_id.as_deref(), Some("tx"));
    }

    /// The watcher's memory of applied fences kept every producer id any peer ever
    /// fenced, for the life of the process, while the logs themselves are pruned after
    /// `transactional.id.expiration.ms`: unbounded with ids made per checkpoint (Flink).
    #[test]
    fn the_watchers_memory_shrinks_with_the_logs() {
        let (_d, v) = volume();
        let mut peer = FenceLog::empty(1);
        peer.append(7, 1, None, 100);
        peer.append(8, 1, None, 5_000);
        peer.save(&v).unwrap();
        let mut w = FenceWatcher::new(0);
        assert_eq!(w.poll(&v).0.len(), 2);
        assert!(peer.prune(6_000, 2_000));
        peer.append(9, 2, None, 6_000);
        peer.save(&v).unwrap();
        assert_eq!(w.poll(&v).0, vec![(9, 2)]);
        let mut kept: Vec<i64> = w.applied.keys().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![8, 9], "7 was pruned from the log");
        // Still applied once per bump.
        assert!(w.poll(&v).0.is_empty());
        std::fs::remove_file(fence_log_path(&v, 1)).unwrap();
        assert!(w.poll(&v).0.is_empty());
        assert!(w.applied.is_empty(), "the log is gone");
    }

    #[test]
    fn old_records_are_pruned() {
        let mut log = FenceLog::empty(0);
        log.append(7, 3, None, 100);
        log.append(8, 1, None, 1_000);
        assert!(log.prune(1_050, 500));
        assert_eq!(log.fences.keys().copied().collect::<Vec<_>>(), vec![8]);
        assert!(!log.prune(1_050, 500));
    }

    #[test]
    fn append_lower_or_equal_epoch_is_noop() {
        let mut log = FenceLog::empty(0);
        assert!(log.append(7, 3, Some("tx"), 1));
        assert!(!log.append(7, 3, None, 2));
        assert!(!log.append(7, 2, None, 3));
        assert_eq!(
            log.fences[&7],
            FenceRecord {
                epoch: 3,
                recorded_ms: 1,
                transactional_id: Some("tx".into())
            }
        );
    }

    #[test]
    fn append_higher_epoch_overwrites() {
        let (_d, v) = volume();
        let mut log = FenceLog::empty(0);
        log.append(7, 1, Some("tx"), 1);
        assert!(log.append(7, 2, Some("tx"), 5));
        log.save(&v).unwrap();
        let back = FenceLog::load(&v, 0).unwrap();
        assert_eq!(back.fences[&7].epoch, 2);
        assert_eq!(back.fences[&7].recorded_ms, 5);
    }

    #[test]
    fn applies_peer_fences() {
        let (_d, v) = volume();
        let mut peer = FenceLog::empty(1);
        peer.append(7, 2, None, 1);
        peer.append(8, 1, None, 1);
        peer.save(&v).unwrap();
        let mut w = FenceWatcher::new(0);
        let (mut fresh, errors) = w.poll(&v);
        fresh.sort();
        assert_eq!(fresh, vec![(7, 2), (8, 1)]);
        assert!(errors.is_empty());
    }

    #[test]
    fn deliveries_record_the_latest_fence_per_producer_and_when_it_was_applied() {
        let (_d, v) = volume();
        let mut d = FenceDeliveries::load(&v, 2).unwrap();
        let f = |pid, epoch, recorded_ms| PeerFence {
            producer_id: pid,
            epoch,
            writer: 1,
            recorded_ms,
        };
        d.record(&v, &[f(7, 2, 100), f(8, 1, 100)], 400, 10_000).unwrap();
        d.record(&v, &[f(7, 1, 50)], 500, 10_000).unwrap();
        let back = FenceDeliveries::load(&v, 2).unwrap();
        assert_eq!(back.applied[&7].epoch, 2, "an older fence does not replace a newer one");
        assert_eq!(back.applied[&7].applied_ms - back.applied[&7].recorded_ms, 300);
        d.record(&v, &[], 20_000, 10_000).unwrap();
        assert!(
            FenceDeliveries::load(&v, 2).unwrap().applied.is_empty(),
            "old records pruned"
        );
        assert_eq!(list_deliveries(&v).unwrap().len(), 1);
        assert!(list_fence_logs(&v).unwrap().is_empty(), "not mistaken for a fence log");
    }

    #[test]
    fn skips_self_file() {
        let (_d, v) = volume();
        let mut own = FenceLog::empty(0);
        own.append(7, 2, None, 1);
        own.save(&v).unwrap();
        assert!(FenceWatcher::new(0).poll(&v).0.is_empty());
    }

    #[test]
    fn dedupe_across_ticks() {
        let (_d, v) = volume();
        let mut peer = FenceLog::empty(1);
        peer.append(7, 2, None, 1);
        peer.save(&v).unwrap();
        let mut w = FenceWatcher::new(0);
        assert_eq!(w.poll(&v).0, vec![(7, 2)]);
        assert!(w.poll(&v).0.is_empty());
        assert!(w.poll(&v).0.is_empty());
    }

    #[test]
    fn higher_epoch_after_first_apply_fires_once_more() {
        let (_d, v) = volume();
        let mut peer = FenceLog::empty(1);
        peer.append(7, 2, None, 1);
        peer.save(&v).unwrap();
        let mut w = FenceWatcher::new(0);
        assert_eq!(w.poll(&v).0, vec![(7, 2)]);
        peer.append(7, 3, None, 2);
        peer.save(&v).unwrap();
        assert_eq!(w.poll(&v).0, vec![(7, 3)]);
        assert!(w.poll(&v).0.is_empty());
    }

    #[test]
    fn an_admin_tools_fences_are_applied_by_every_broker() {
        let (_d, v) = volume();
        let mut admin = FenceLog::empty(ADMIN_WRITER);
        admin.append(9, 4, Some("stuck"), 1);
        admin.save(&v).unwrap();
        assert!(fence_log_path(&v, ADMIN_WRITER).ends_with("from-admin.json"));
        assert_eq!(FenceWatcher::new(0).poll(&v).0, vec![(9, 4)]);
        assert_eq!(list_fence_logs(&v).unwrap()[0].0, ADMIN_WRITER);
    }

    #[test]
    fn a_corrupt_peer_log_is_reported_not_skipped_silently() {
        let (_d, v) = volume();
        std::fs::create_dir_all(fences_dir(&v)).unwrap();
        std::fs::write(fence_log_path(&v, 3), b"{").unwrap();
        let (fresh, errors) = FenceWatcher::new(0).poll(&v);
        assert!(fresh.is_empty());
        assert!(errors[0].to_string().contains("from-3.json"));
    }
}
