//! The marker queue: `__cluster/marker_queue/to-<broker>/<pid>-<epoch>.json`, one file
//! per (transaction, target broker) holding the COMMIT/ABORT markers that broker must
//! write to partitions it leads. Idempotent by name: a retried EndTxn rewrites the same
//! file. The target's marker watcher appends the control batches, then deletes the file.

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
    /// Broker (or `kaasctl`, -1) that enqueued it.
    pub enqueued_by: i32,
    pub enqueued_ms: i64,
}

pub fn queue_dir(volume: &Volume, target_broker: i32) -> PathBuf {
    volume
        .cluster_dir()
        .join("marker_queue")
        .join(format!("to-{target_broker}"))
}

pub fn entry_path(volume: &Volume, target_broker: i32, producer_id: i64, epoch: i16) -> PathBuf {
    queue_dir(volume, target_broker).join(format!("{producer_id}-{epoch}.json"))
}

/// Writes (or rewrites) the queue entry for `target_broker`.
pub fn enqueue(volume: &Volume, target_broker: i32, entry: &MarkerEntry) -> Result<PathBuf, VolumeError> {
    let path = entry_path(volume, target_broker, entry.producer_id, entry.producer_epoch);
    write_json(&path, entry).map_err(|e| VolumeError::io(&path, e))?;
    Ok(path)
}

/// Entries queued for `target_broker`, oldest first, each with its path; unreadable
/// files are returned as errors beside the good ones.
pub fn list(volume: &Volume, target_broker: i32) -> Result<Vec<(PathBuf, Loaded<MarkerEntry>)>, VolumeError> {
    let mut out: Vec<(PathBuf, Loaded<MarkerEntry>)> = crate::error::json_files(&queue_dir(volume, target_broker))?
        .into_iter()
        .map(|path| {
            let parsed = read_versioned_json(&path, "marker queue entry", MARKER_FORMAT_VERSION);
            (path, parsed)
        })
        .collect();
    out.sort_by_key(|(_, e)| e.as_ref().map(|e| e.enqueued_ms).unwrap_or(i64::MIN));
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

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
            enqueued_by: 0,
            enqueued_ms: ms,
        }
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
        assert!(p1.ends_with("marker_queue/to-2/7-1.json"));
        assert_eq!(targets(&v).unwrap(), vec![2]);
        remove(&p1).unwrap();
        remove(&p1).unwrap();
        assert_eq!(list(&v, 2).unwrap().len(), 1);
        assert!(list(&v, 9).unwrap().is_empty());
    }
}
