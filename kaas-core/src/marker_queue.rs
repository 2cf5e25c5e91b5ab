//! The marker queue: `__cluster/marker_queue/to-<broker>/<pid>-<epoch>-<txn>.json`, one
//! file per (transaction, target broker) holding the COMMIT/ABORT markers that broker
//! must write to partitions it leads. `<txn>` is the entry's transaction number
//! ([`crate::txn::TxnEntry::txn_seq`]): consecutive transactions at one epoch get
//! different files, so the entry of transaction N+1 can never overwrite N's before it
//! is applied (the seeds' `<pid>-<epoch>.json` could). Idempotent by name: a retried
//! finish rewrites the same file. The target's marker watcher appends the control
//! batches, then deletes the file; the transaction completes once every file of it is
//! gone.
//!
//! Entries without a transaction number — written by older versions as
//! `<pid>-<epoch>.json`, or by `kaasctl txn repair` for a hanging transaction
//! (`<pid>-<epoch>-h<ms>-<hash of its partitions>.json`) — are read and applied too.

use crate::error::{read_versioned_json, Loaded, VolumeError};
use crate::fsutil::write_json;
use crate::layout::Volume;
use crate::txn::TopicPartition;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

crate::versioned!(MarkerEntry);

pub const MARKER_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarkerResult {
    Commit,
    Abort,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerEntry {
    pub version: u32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: MarkerResult,
    /// The coordinator's epoch for the slot (written into the control record).
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
    /// The transaction this entry closes (the coordinator entry's `txn_seq`); None
    /// for entries of older versions and for hanging-transaction repairs.
    #[serde(default)]
    pub txn_seq: Option<u64>,
    /// Broker (or `kaasctl`, -1) that enqueued it.
    pub enqueued_by: i32,
    pub enqueued_ms: i64,
    /// A hanging-transaction repair (`kaasctl txn repair --fix`): the offset the
    /// judged transaction is open since on its one partition. The leader judges it
    /// again with the slot of `transactional_id` (if any) locked and writes the
    /// marker only to that transaction, still hanging. Absent otherwise (and in
    /// entries of older versions, which are written as they say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hanging_since: Option<i64>,
}

impl MarkerEntry {
    /// An entry asking `partitions`' leader to write `commit`'s marker for
    /// (`producer_id`, `producer_epoch`), closing transaction `txn_seq` (None: an entry
    /// that names no transaction, such as a hanging-transaction repair).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        partitions: Vec<TopicPartition>,
        txn_seq: Option<u64>,
        enqueued_by: i32,
        enqueued_ms: i64,
    ) -> MarkerEntry {
        MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            result: if commit {
                MarkerResult::Commit
            } else {
                MarkerResult::Abort
            },
            coordinator_epoch: 0,
            partitions,
            txn_seq,
            enqueued_by,
            enqueued_ms,
            hanging_since: None,
        }
    }
}

pub fn queue_dir(volume: &Volume, target_broker: i32) -> PathBuf {
    volume
        .cluster_dir()
        .join("marker_queue")
        .join(format!("to-{target_broker}"))
}

/// The file of one entry: `<pid>-<epoch>-<txn>.json`, or
/// `<pid>-<epoch>-h<ms>-<partitions hash>.json` for an entry that names no transaction.
pub fn entry_path(volume: &Volume, target_broker: i32, entry: &MarkerEntry) -> PathBuf {
    let (pid, epoch) = (entry.producer_id, entry.producer_epoch);
    let name = match entry.txn_seq {
        Some(txn) => format!("{pid}-{epoch}-{txn}.json"),
        // Several repairs of one producer may be queued in the same millisecond: the
        // partitions they end tell them apart.
        None => {
            let mut hash: u32 = 0x811c_9dc5;
            for tp in &entry.partitions {
                for b in tp.topic.bytes().chain(tp.partition.to_be_bytes()) {
                    hash ^= b as u32;
                    hash = hash.wrapping_mul(0x0100_0193);
                }
            }
            format!("{pid}-{epoch}-h{}-{hash:08x}.json", entry.enqueued_ms)
        }
    };
    queue_dir(volume, target_broker).join(name)
}

/// The transaction an entry's file name names, (`producer_id`, `epoch`, `txn_seq`), read
/// from the name alone (`<pid>-<epoch>-<txn>.json`): for an entry whose bytes cannot be
/// read. None for any other name (an entry that names no transaction, a stray file).
pub fn transaction_named(path: &std::path::Path) -> Option<(i64, i16, u64)> {
    let name = path.file_name()?.to_str()?.strip_suffix(".json")?;
    let mut parts = name.split('-');
    let (pid, epoch, txn) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some((pid.parse().ok()?, epoch.parse().ok()?, txn.parse().ok()?))
}

/// Where transaction (`producer_id`, `epoch`, `txn_seq`)'s entry would be in each
/// broker's queue: (target broker, path).
fn files_of(
    volume: &Volume,
    producer_id: i64,
    epoch: i16,
    txn_seq: u64,
) -> Result<impl Iterator<Item = (i32, PathBuf)> + '_, VolumeError> {
    let name = format!("{producer_id}-{epoch}-{txn_seq}.json");
    Ok(targets(volume)?
        .into_iter()
        .map(move |t| (t, queue_dir(volume, t).join(&name))))
}

/// Queue files of one transaction still waiting in any broker's queue.
pub fn pending_files(volume: &Volume, producer_id: i64, epoch: i16, txn_seq: u64) -> Result<Vec<PathBuf>, VolumeError> {
    let mut out = Vec::new();
    for (_, path) in files_of(volume, producer_id, epoch, txn_seq)? {
        // An error is not "gone": completing over a marker that may still be
        // waiting would lose it.
        if path.try_exists().map_err(|e| VolumeError::io(&path, e))? {
            out.push(path);
        }
    }
    Ok(out)
}

/// Makes every queue file of one transaction still waiting durable
/// ([`make_durable`]); returns how many are left. For whoever is about to record
/// `markers_queued`, which may only ever name durable entries.
pub fn make_pending_durable(volume: &Volume, producer_id: i64, epoch: i16, txn_seq: u64) -> Result<usize, VolumeError> {
    let mut left = 0;
    for path in pending_files(volume, producer_id, epoch, txn_seq)? {
        if make_durable(&path)? {
            left += 1;
        }
    }
    Ok(left)
}

/// Removes the files of transaction (`producer_id`, `epoch`, `txn_seq`) from every
/// queue but `keep`'s. For a finish that has just written the transaction's whole
/// set of entries again, while nothing relies on the old ones: an entry left in
/// another broker's queue by an earlier finish (its partitions led elsewhere since),
/// or torn by a power cut, would otherwise stay behind the new ones.
pub fn remove_others(
    volume: &Volume,
    producer_id: i64,
    epoch: i16,
    txn_seq: u64,
    keep: &[i32],
) -> Result<(), VolumeError> {
    for (_, path) in files_of(volume, producer_id, epoch, txn_seq)?.filter(|(t, _)| !keep.contains(t)) {
        remove(&path)?;
    }
    Ok(())
}

/// The entries queued for `target_broker` of one producer at one epoch (what a
/// WriteTxnMarkers notification names), each with its path; only files named
/// `<pid>-<epoch>-…` are read. Unreadable ones are returned as errors.
pub fn entries_of(
    volume: &Volume,
    target_broker: i32,
    producer_id: i64,
    epoch: i16,
) -> Result<Vec<(PathBuf, Loaded<MarkerEntry>)>, VolumeError> {
    let prefix = format!("{producer_id}-{epoch}-");
    read_entries(volume, target_broker, |name| name.starts_with(&prefix))
}

/// The entries of `target_broker`'s queue whose file names `wanted` takes, read,
/// oldest first.
fn read_entries(
    volume: &Volume,
    target_broker: i32,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<(PathBuf, Loaded<MarkerEntry>)>, VolumeError> {
    let listed: Vec<PathBuf> = crate::error::json_files(&queue_dir(volume, target_broker))?
        .into_iter()
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(&wanted))
        .collect();
    Ok(read_listed(listed))
}

/// The entries at `paths` (just listed), read, oldest first. One gone since the listing
/// was applied and removed meanwhile (its leader's poll, the coordinator after the
/// answers): it is left out, not reported unreadable — on a busy cluster `kaasctl
/// markers list` and `doctor` counted such entries as problems.
fn read_listed(paths: Vec<PathBuf>) -> Vec<(PathBuf, Loaded<MarkerEntry>)> {
    let mut out: Vec<(PathBuf, Loaded<MarkerEntry>)> = paths
        .into_iter()
        .filter_map(
            |path| match read_versioned_json(&path, "marker queue entry", MARKER_FORMAT_VERSION) {
                Err(e) if e.is_not_found() => None,
                parsed => Some((path, parsed)),
            },
        )
        .collect();
    out.sort_by_key(|(_, e)| e.as_ref().map(|e| e.enqueued_ms).unwrap_or(i64::MIN));
    out
}

/// Writes (or rewrites) the queue entry for `target_broker`, durably.
pub fn enqueue(volume: &Volume, target_broker: i32, entry: &MarkerEntry) -> Result<PathBuf, VolumeError> {
    let path = entry_path(volume, target_broker, entry);
    write_json(&path, entry).map_err(|e| VolumeError::io(&path, e))?;
    Ok(path)
}

/// Queue entries written beside their places (each a new file with its whole
/// content, fsynced when staged `synced`) and not yet renamed in: what a slot holder
/// prepares before it takes the slot's gate, so the gate is held only for the
/// renames ([`crate::txn_store::TxnStateStore::while_held`]). Whatever is not renamed
/// in is removed when this is dropped.
#[derive(Debug)]
pub struct StagedEntries {
    moves: Vec<(PathBuf, PathBuf)>,
}

/// Stages `entries`, one per target broker ([`StagedEntries`]); `synced`: each file
/// fsynced (its name becomes durable with [`sync_queue_dirs`] after the rename).
pub fn stage_entries(
    volume: &Volume,
    entries: &[(i32, MarkerEntry)],
    synced: bool,
) -> Result<StagedEntries, VolumeError> {
    let mut staged = StagedEntries { moves: Vec::new() };
    for (target, entry) in entries {
        let path = entry_path(volume, *target, entry);
        let dir = queue_dir(volume, *target);
        let tmp = crate::fsutil::create_dir_durable(&dir)
            .and_then(|()| crate::fsutil::json_bytes(entry))
            .and_then(|bytes| {
                if synced {
                    crate::fsutil::stage_file(&path, &bytes)
                } else {
                    crate::fsutil::stage_file_unsynced(&path, &bytes)
                }
            })
            .map_err(|e| VolumeError::io(&path, e))?;
        staged.moves.push((tmp, path));
    }
    Ok(staged)
}

impl StagedEntries {
    /// Renames every staged entry into place, in order; the paths written. On a
    /// failed rename, that entry's temporary file and those not reached yet are
    /// removed (dropped with `self`); the ones renamed in stay, for the caller's retry
    /// to write again.
    pub fn publish(mut self) -> Result<Vec<PathBuf>, VolumeError> {
        let mut written = Vec::with_capacity(self.moves.len());
        while !self.moves.is_empty() {
            let (tmp, path) = self.moves.remove(0);
            if let Err(e) = std::fs::rename(&tmp, &path) {
                let _ = std::fs::remove_file(&tmp);
                return Err(VolumeError::io(&path, e));
            }
            written.push(path);
        }
        Ok(written)
    }
}

impl Drop for StagedEntries {
    fn drop(&mut self) {
        for (tmp, _) in self.moves.drain(..) {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// Makes the names of entries renamed in durable: one fsync of each queue directory
/// they are in.
pub fn sync_queue_dirs(paths: &[PathBuf]) -> Result<(), VolumeError> {
    let dirs: std::collections::BTreeSet<&std::path::Path> = paths.iter().filter_map(|p| p.parent()).collect();
    for dir in dirs {
        crate::fsutil::sync_dir(dir).map_err(|e| VolumeError::io(dir, e))?;
    }
    Ok(())
}

/// Makes an entry staged unsynced ([`stage_entries`]) durable: its bytes, then its name in the
/// queue directory. Returns false when the entry is gone (its leader applied it).
pub fn make_durable(path: &std::path::Path) -> Result<bool, VolumeError> {
    let file = match crate::fsutil::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(VolumeError::io(path, e)),
    };
    file.sync_all().map_err(|e| VolumeError::io(path, e))?;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    crate::fsutil::sync_dir(dir).map_err(|e| VolumeError::io(dir, e))?;
    Ok(true)
}

/// The queue entry at `path`: None once it is gone (applied, or moved by another
/// process).
pub fn read_entry(path: &std::path::Path) -> Result<Option<MarkerEntry>, VolumeError> {
    match crate::error::read_versioned_json::<MarkerEntry>(path, "marker queue entry", MARKER_FORMAT_VERSION) {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Entries queued for `target_broker`, oldest first, each with its path; unreadable
/// files are returned as errors beside the good ones.
pub fn list(volume: &Volume, target_broker: i32) -> Result<Vec<(PathBuf, Loaded<MarkerEntry>)>, VolumeError> {
    read_entries(volume, target_broker, |_| true)
}

/// Target brokers that have a queue directory.
pub fn targets(volume: &Volume) -> Result<Vec<i32>, VolumeError> {
    let mut out: Vec<i32> = crate::error::dir_entries(&volume.cluster_dir().join("marker_queue"))?
        .into_iter()
        .filter_map(|(name, _)| name.strip_prefix("to-").and_then(|s| s.parse().ok()))
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Deletes a processed entry (a missing file is fine: someone else finished it).
pub fn remove(path: &std::path::Path) -> Result<(), VolumeError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(VolumeError::io(path, e)),
    }
}

/// [`enqueue`] of `entry`, merged with the entry of the same transaction and result
/// already in `target_broker`'s queue (its partitions kept too), so a writer never
/// narrows what another queued. The caller holds the transaction's slot lock.
pub fn enqueue_merged(volume: &Volume, target_broker: i32, entry: &MarkerEntry) -> Result<PathBuf, VolumeError> {
    let path = entry_path(volume, target_broker, entry);
    let mut merged = entry.clone();
    // One that cannot be read (torn) is replaced whole.
    if let Ok(Some(found)) = read_entry(&path) {
        if found.result == entry.result
            && found.producer_id == entry.producer_id
            && found.producer_epoch == entry.producer_epoch
            && found.txn_seq == entry.txn_seq
            && found.hanging_since.is_none()
        {
            for tp in found.partitions {
                if !merged.partitions.contains(&tp) {
                    merged.partitions.push(tp);
                }
            }
        }
    }
    enqueue(volume, target_broker, &merged)
}

/// Removes the entry of `entry`'s transaction in `target_broker`'s queue if what it
/// still asks for is covered by `entry` (its result, a subset of its partitions):
/// `entry`'s markers are durable, its leader said so. An entry that asks for more
/// (rewritten since with partitions added) stays. The caller holds the
/// transaction's slot lock, under which entries are written and rewritten. Returns
/// whether an entry was removed.
pub fn remove_if_covered(volume: &Volume, target_broker: i32, entry: &MarkerEntry) -> Result<bool, VolumeError> {
    let path = entry_path(volume, target_broker, entry);
    let Some(found) = read_entry(&path)? else {
        return Ok(false);
    };
    let covered = found.result == entry.result
        && found.producer_id == entry.producer_id
        && found.producer_epoch == entry.producer_epoch
        && found.txn_seq == entry.txn_seq
        && found.hanging_since.is_none()
        && found.partitions.iter().all(|tp| entry.partitions.contains(tp));
    if covered {
        remove(&path)?;
    }
    Ok(covered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry listed and then removed before it was read (applied meanwhile, on a
    /// busy cluster) was reported unreadable ("No such file"): `kaasctl markers list`
    /// and `doctor` then flagged a healthy cluster. It is left out; one that exists
    /// and does not parse is still reported.
    #[test]
    fn an_entry_removed_between_the_listing_and_its_read_is_not_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let entry = MarkerEntry::new("tx", 7, 0, true, vec![], Some(3), 0, 1);
        let kept = enqueue(&volume, 1, &entry).unwrap();
        let torn = queue_dir(&volume, 1).join("8-0-1.json");
        std::fs::write(&torn, b"{").unwrap();
        let gone = queue_dir(&volume, 1).join("9-0-1.json");
        let read = read_listed(vec![kept.clone(), gone, torn.clone()]);
        let paths: Vec<&PathBuf> = read.iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            vec![&torn, &kept],
            "the torn one reported (first: no time), the gone one left out"
        );
        assert!(read[0].1.is_err() && read[1].1.is_ok());
    }

    #[test]
    fn an_entry_is_removed_only_while_a_delivered_notice_covers_it() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let tp = |p| TopicPartition {
            topic: "t".into(),
            partition: p,
        };
        let asked = MarkerEntry::new("tx", 7, 0, true, vec![tp(0), tp(1)], Some(3), 0, 1);
        // Gone already (its leader's poll applied it): nothing to do.
        assert!(!remove_if_covered(&volume, 1, &asked).unwrap());
        // Rewritten with a partition added since the notice went: kept.
        let mut wider = asked.clone();
        wider.partitions.push(tp(2));
        let path = unsynced(&volume, 1, &wider).unwrap();
        assert!(!remove_if_covered(&volume, 1, &asked).unwrap());
        assert!(path.exists());
        // The other result: kept.
        let mut abort = asked.clone();
        abort.result = MarkerResult::Abort;
        unsynced(&volume, 1, &abort).unwrap();
        assert!(!remove_if_covered(&volume, 1, &asked).unwrap());
        // A subset of what was delivered (a leader applied part of it): removed.
        let mut part = asked.clone();
        part.partitions.truncate(1);
        unsynced(&volume, 1, &part).unwrap();
        assert!(remove_if_covered(&volume, 1, &asked).unwrap());
        assert!(!path.exists());
        // kaasctl's entry, merged with the coordinator's: never narrower than either.
        unsynced(&volume, 1, &asked).unwrap();
        let mut other = asked.clone();
        other.partitions = vec![tp(2)];
        enqueue_merged(&volume, 1, &other).unwrap();
        let merged = read_entry(&path).unwrap().unwrap();
        assert_eq!(merged.partitions, vec![tp(2), tp(0), tp(1)]);
        assert!(!remove_if_covered(&volume, 1, &asked).unwrap(), "tp 2 is not covered");
    }

    fn entry(epoch: i16, ms: i64) -> MarkerEntry {
        MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: "tx".into(),
            producer_id: 7,
            producer_epoch: epoch,
            result: MarkerResult::Commit,
            coordinator_epoch: 0,
            partitions: vec![TopicPartition {
                topic: "t".into(),
                partition: 1,
            }],
            txn_seq: Some(3),
            enqueued_by: 0,
            enqueued_ms: ms,
            hanging_since: None,
        }
    }

    /// An entry renamed in without its fsyncs, as a coordinator that notifies writes it.
    fn unsynced(volume: &Volume, target: i32, entry: &MarkerEntry) -> Result<PathBuf, VolumeError> {
        stage_entries(volume, &[(target, entry.clone())], false)?
            .publish()
            .map(|mut written| written.remove(0))
    }

    /// Review finding: a rename that failed part way through a set left the
    /// temporary files of the entries after it behind for good.
    #[test]
    fn a_publish_that_fails_part_way_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let entries = [(1, entry(1, 50)), (2, entry(1, 50))];
        // A directory (not empty) where the first entry goes: its rename fails.
        let blocked = entry_path(&v, 1, &entries[0].1);
        std::fs::create_dir_all(blocked.join("x")).unwrap();
        let staged = stage_entries(&v, &entries, false).unwrap();
        assert!(staged.publish().is_err());
        for target in [1, 2] {
            let left: Vec<String> = std::fs::read_dir(queue_dir(&v, target))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp-"))
                .collect();
            assert!(left.is_empty(), "left behind in to-{target}: {left:?}");
        }
        assert!(
            !entry_path(&v, 2, &entries[1].1).exists(),
            "nothing renamed in after the failure"
        );
        // Staged and dropped unpublished: nothing left either.
        std::fs::remove_dir_all(&blocked).unwrap();
        drop(stage_entries(&v, &entries, true).unwrap());
        assert!(std::fs::read_dir(queue_dir(&v, 2)).unwrap().next().is_none());
    }

    #[test]
    fn enqueue_is_idempotent_by_name_and_listed_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let p1 = enqueue(&v, 2, &entry(1, 50)).unwrap();
        assert_eq!(p1, enqueue(&v, 2, &entry(1, 50)).unwrap());
        enqueue(&v, 2, &entry(0, 10)).unwrap();
        let listed = list(&v, 2).unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].1.as_ref().unwrap().producer_epoch, 0);
        assert!(p1.ends_with("marker_queue/to-2/7-1-3.json"));
        assert_eq!(pending_files(&v, 7, 1, 3).unwrap(), vec![p1.clone()]);
        assert!(pending_files(&v, 7, 1, 4).unwrap().is_empty());
        assert_eq!(targets(&v).unwrap(), vec![2]);
        let of = |epoch| entries_of(&v, 2, 7, epoch).unwrap();
        assert_eq!(of(1).len(), 1, "only the named producer and epoch");
        assert_eq!(of(1)[0].0, p1);
        assert!(entries_of(&v, 2, 77, 1).unwrap().is_empty() && entries_of(&v, 3, 7, 1).unwrap().is_empty());
        let p10 = enqueue(&v, 2, &entry(10, 60)).unwrap();
        assert_eq!(of(1).len(), 1, "epoch 10 is not epoch 1");
        remove(&p10).unwrap();
        remove(&p1).unwrap();
        remove(&p1).unwrap();
        assert_eq!(list(&v, 2).unwrap().len(), 1);
        assert!(list(&v, 9).unwrap().is_empty());
    }

    #[test]
    fn consecutive_transactions_at_one_epoch_get_separate_entries() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let mut n = entry(1, 10);
        n.txn_seq = Some(4);
        let mut next = entry(1, 20);
        next.txn_seq = Some(5);
        next.result = MarkerResult::Abort;
        let a = enqueue(&v, 2, &n).unwrap();
        let b = enqueue(&v, 2, &next).unwrap();
        assert_ne!(a, b);
        let listed = list(&v, 2).unwrap();
        assert_eq!(listed.len(), 2, "N+1 did not overwrite N");
        assert_eq!(listed[0].1.as_ref().unwrap().result, MarkerResult::Commit);
    }

    #[test]
    fn entries_of_the_old_name_and_without_a_transaction_number_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        std::fs::create_dir_all(queue_dir(&v, 1)).unwrap();
        let old = r#"{"version":1,"transactional_id":"tx","producer_id":7,"producer_epoch":0,
            "result":"Abort","coordinator_epoch":0,"partitions":[{"topic":"t","partition":0}],
            "enqueued_by":0,"enqueued_ms":5}"#;
        std::fs::write(queue_dir(&v, 1).join("7-0.json"), old).unwrap();
        let listed = list(&v, 1).unwrap();
        let e = listed[0].1.as_ref().unwrap();
        assert_eq!((e.producer_id, e.txn_seq), (7, None));
    }
}
