//! A partition as the broker serves it: its log plus its idempotent-producer state,
//! kept consistent with each other. The producer state is saved to
//! `producer-state.snapshot` on segment roll and on clean shutdown (and relinquish),
//! and restored at open by loading the snapshot and replaying the log after it, so a
//! restart never forgets a dedupe window.

use crate::batch::BatchHeader;
use crate::error::{read_versioned_json, VolumeError};
use crate::fsutil::write_json;
use crate::idempotence::{Classification, ProducerEntry, ProducerStateTable, SequenceError};
use crate::log::{AppendInfo, LogConfig, LogError, PartitionLog};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

crate::versioned!(ProducerStateSnapshot);

pub const SNAPSHOT_FILE: &str = "producer-state.snapshot";
pub const SNAPSHOT_FORMAT_VERSION: u32 = 1;

/// The on-disk producer-state snapshot (JSON, replaced atomically).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerStateSnapshot {
    pub version: u32,
    /// The state reflects every batch below this offset; the log from here on is replayed.
    pub offset: i64,
    pub written_ms: i64,
    pub producers: Vec<ProducerEntry>,
}

impl ProducerStateSnapshot {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(SNAPSHOT_FILE)
    }
    /// Reads a partition's snapshot; Ok(None) when there is none.
    pub fn read(dir: &Path) -> Result<Option<ProducerStateSnapshot>, VolumeError> {
        match read_versioned_json(&Self::path(dir), "producer-state snapshot", SNAPSHOT_FORMAT_VERSION) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[derive(Debug, Error)]
pub enum PartitionError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

#[derive(Debug, Error)]
pub enum AppendError {
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    #[error("a produce request may carry a retried (duplicate) batch only on its own")]
    DuplicateInMultiBatch,
    #[error(transparent)]
    Log(#[from] LogError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    Appended(AppendInfo),
    /// A retry of batches already in the log: nothing was written.
    Duplicate {
        base_offset: i64,
        last_offset: i64,
    },
}

/// An aborted transaction on this partition: read_committed consumers skip the
/// producer's records from `first_offset` up to the ABORT marker at `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// Bytes per `.txnindex` entry (Apache's layout): version i16, producer id i64, first
/// offset i64, last offset i64, last stable offset i64, all big-endian.
pub const TXN_INDEX_ENTRY_LEN: usize = 34;

pub struct PartitionState {
    pub log: PartitionLog,
    pub producers: ProducerStateTable,
    /// Aborted transactions still in the log, by last offset.
    pub aborted: Vec<AbortedTxn>,
    /// Where recovery started replaying (for the open log line).
    pub replayed_from: i64,
}

impl PartitionState {
    /// Opens the log (recovering its tail), loads the snapshot and replays the log
    /// after it. A corrupt or unknown-version snapshot is an error: the partition is
    /// refused rather than served with an empty (forgetful) producer state.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<PartitionState, PartitionError> {
        let log = PartitionLog::open(dir, config, now_ms)?;
        let snapshot = ProducerStateSnapshot::read(dir)?;
        let mut producers = ProducerStateTable::default();
        let mut from = log.log_start_offset();
        if let Some(s) = snapshot {
            // A snapshot past the log end describes data recovery cut off: ignore it
            // and rebuild from the log itself.
            if s.offset <= log.log_end_offset() {
                from = s.offset.max(log.log_start_offset());
                producers.producers = s.producers.into_iter().map(|e| (e.producer_id, e)).collect();
            }
        }
        let mut aborted = read_txn_indexes(log.dir())?;
        let mut derived = Vec::new();
        let mut control_error = None;
        log.for_each_header_from(from, |h| {
            let mut marker = None;
            if h.is_control() && h.has_producer_id() {
                match log.read(h.base_offset, h.total_len(), i64::MAX, true) {
                    Ok(bytes) => marker = crate::batch::control_marker_type(&bytes),
                    Err(e) => control_error = Some(e),
                }
            }
            derived.extend(replay(&mut producers, h, marker));
        })?;
        if let Some(e) = control_error {
            return Err(e.into());
        }
        let mut state = PartitionState {
            log,
            producers,
            aborted: Vec::new(),
            replayed_from: from,
        };
        // Markers whose index entry was lost in a crash are re-indexed from the log.
        for a in derived {
            if !aborted.contains(&a) {
                state.append_txn_index(&a)?;
                aborted.push(a);
            }
        }
        aborted.sort_by_key(|a| a.last_offset);
        aborted.retain(|a| a.last_offset >= state.log.log_start_offset());
        state.aborted = aborted;
        Ok(state)
    }

    /// The first offset of the earliest open transaction, or the log end when none is
    /// open: read_committed consumers read up to here.
    pub fn last_stable_offset(&self) -> i64 {
        self.producers
            .first_open_offset()
            .unwrap_or_else(|| self.log.log_end_offset())
    }

    /// Aborted transactions overlapping `[from, to)`, for a read_committed fetch.
    pub fn aborted_in_range(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset < to)
            .copied()
            .collect()
    }

    /// Writes a COMMIT/ABORT marker for `producer_id` unless it has no open transaction
    /// here (the marker already landed, or nothing was produced): markers are
    /// idempotent, so recovery and retries may call this again. The marker's epoch
    /// also fences older epochs of the producer on this partition.
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Option<AppendInfo>, PartitionError> {
        let first = self.producers.get(producer_id).and_then(|e| e.txn_first_offset);
        let Some(first_offset) = first else {
            self.producers.fence(producer_id, producer_epoch);
            return Ok(None);
        };
        crate::failpoint::check(crate::failpoint::MARKER_APPEND).map_err(|e| VolumeError::io(self.log.dir(), e))?;
        let mut batch =
            crate::batch::build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms);
        let headers = crate::batch::validate_all(&batch).map_err(LogError::from)?;
        let info = self.log.append(&mut batch, &headers, leader_epoch, now_ms)?;
        let mut h = headers[0];
        h.base_offset = info.base_offset;
        self.producers.record(&h);
        if !commit {
            let a = AbortedTxn {
                producer_id,
                first_offset,
                last_offset: info.base_offset,
            };
            self.append_txn_index(&a)?;
            self.aborted.push(a);
        }
        Ok(Some(info))
    }

    fn append_txn_index(&self, a: &AbortedTxn) -> Result<(), VolumeError> {
        use std::io::Write;
        let base = self.log.segments().last().map(|s| s.base_offset()).unwrap_or(0);
        let path = self.log.dir().join(format!("{base:020}.txnindex"));
        let mut entry = Vec::with_capacity(TXN_INDEX_ENTRY_LEN);
        entry.extend_from_slice(&0i16.to_be_bytes());
        entry.extend_from_slice(&a.producer_id.to_be_bytes());
        entry.extend_from_slice(&a.first_offset.to_be_bytes());
        entry.extend_from_slice(&a.last_offset.to_be_bytes());
        entry.extend_from_slice(&self.last_stable_offset().to_be_bytes());
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&entry))
            .map_err(|e| VolumeError::io(&path, e))
    }

    /// Retention, keeping the aborted-transaction list in step with the log start.
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<Vec<i64>, LogError> {
        let deleted = self.log.enforce_retention(now_ms)?;
        let start = self.log.log_start_offset();
        self.aborted.retain(|a| a.last_offset >= start);
        Ok(deleted)
    }

    /// Classifies every batch (under the caller's partition lock), then appends them
    /// and records them in the producer state. Nothing is written on any error.
    pub fn append(
        &mut self,
        records: &mut [u8],
        headers: &[BatchHeader],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        if headers.len() == 1 {
            if let Classification::Duplicate {
                base_offset,
                last_offset,
            } = self.producers.classify(&headers[0])?
            {
                return Ok(AppendOutcome::Duplicate {
                    base_offset,
                    last_offset,
                });
            }
        } else {
            // Later batches of one producer continue its earlier ones: check them
            // against a scratch copy of just the producers involved.
            let mut scratch = ProducerStateTable::default();
            for h in headers {
                if let Some(e) = self.producers.get(h.producer_id) {
                    scratch.producers.entry(h.producer_id).or_insert_with(|| e.clone());
                }
            }
            for h in headers {
                match scratch.classify(h)? {
                    Classification::Append => scratch.record(h),
                    Classification::Duplicate { .. } => return Err(AppendError::DuplicateInMultiBatch),
                }
            }
        }
        let info = self.log.append(records, headers, leader_epoch, now_ms)?;
        let mut offset = info.base_offset;
        for h in headers {
            let mut h = *h;
            h.base_offset = offset;
            offset = h.next_offset();
            self.producers.record(&h);
        }
        if info.rolled {
            if let Err(e) = self.write_snapshot(now_ms) {
                tracing::warn!(error = %e, "producer-state snapshot on roll failed; the next open replays more log");
            }
        }
        Ok(AppendOutcome::Appended(info))
    }

    /// Saves the producer state as of the current log end.
    pub fn write_snapshot(&self, now_ms: i64) -> Result<(), VolumeError> {
        let snapshot = ProducerStateSnapshot {
            version: SNAPSHOT_FORMAT_VERSION,
            offset: self.log.log_end_offset(),
            written_ms: now_ms,
            producers: self.producers.producers.values().cloned().collect(),
        };
        let path = ProducerStateSnapshot::path(self.log.dir());
        write_json(&path, &snapshot).map_err(|e| VolumeError::io(&path, e))
    }
}

/// One step of rebuilding a partition's state from its log (at open, and for read-only
/// inspection): records the batch in the producer state; for a control batch whose
/// marker type is `marker` (true = COMMIT), returns the aborted transaction an ABORT
/// closes.
pub fn replay(producers: &mut ProducerStateTable, h: &BatchHeader, marker: Option<bool>) -> Option<AbortedTxn> {
    let first = producers.get(h.producer_id).and_then(|e| e.txn_first_offset);
    producers.record(h);
    match (h.is_control(), marker, first) {
        (true, Some(false), Some(first_offset)) => Some(AbortedTxn {
            producer_id: h.producer_id,
            first_offset,
            last_offset: h.base_offset,
        }),
        _ => None,
    }
}

/// Loads every `*.txnindex` file of a partition directory. A ragged tail (a torn
/// append) is ignored: the log replay re-derives what it held.
pub fn read_txn_indexes(dir: &Path) -> Result<Vec<AbortedTxn>, VolumeError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| VolumeError::io(dir, e))?;
    for entry in entries {
        let path = entry.map_err(|e| VolumeError::io(dir, e))?.path();
        if path.extension().is_none_or(|e| e != "txnindex") {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| VolumeError::io(&path, e))?;
        for chunk in bytes.chunks_exact(TXN_INDEX_ENTRY_LEN) {
            let i64_at = |at: usize| i64::from_be_bytes(chunk[at..at + 8].try_into().expect("8 bytes"));
            out.push(AbortedTxn {
                producer_id: i64_at(2),
                first_offset: i64_at(10),
                last_offset: i64_at(18),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, validate_all};

    fn produce(p: &mut PartitionState, pid: i64, epoch: i16, seq: i32, n: usize) -> Result<AppendOutcome, AppendError> {
        let recs: Vec<crate::batch::PlainRecord> = (0..n).map(|_| (None, Some(&b"value"[..]))).collect();
        let mut b = build_batch(0, 1, Some((pid, epoch, seq)), 0, &recs);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 1)
    }

    fn produce_txn(p: &mut PartitionState, pid: i64, epoch: i16, seq: i32) -> AppendInfo {
        let recs: Vec<crate::batch::PlainRecord> = vec![(None, Some(&b"txn"[..]))];
        let mut b = build_batch(0, 1, Some((pid, epoch, seq)), 0x10, &recs);
        let h = validate_all(&b).unwrap();
        match p.append(&mut b, &h, 0, 1).unwrap() {
            AppendOutcome::Appended(i) => i,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn open_transactions_pin_the_last_stable_offset_until_their_marker() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce(&mut p, 1, 0, 0, 2).unwrap(); // offsets 0-1, not transactional
        produce_txn(&mut p, 7, 0, 0); // offset 2
        produce(&mut p, 1, 0, 2, 1).unwrap(); // offset 3
        produce_txn(&mut p, 8, 0, 0); // offset 4
        assert_eq!(p.last_stable_offset(), 2);
        let marker = p.write_marker(7, 0, true, 0, 0, 1).unwrap().unwrap();
        assert_eq!(marker.base_offset, 5);
        assert_eq!(p.last_stable_offset(), 4);
        p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap();
        assert_eq!(p.last_stable_offset(), 7);
        assert_eq!(
            p.aborted,
            vec![AbortedTxn {
                producer_id: 8,
                first_offset: 4,
                last_offset: 6
            }]
        );
        assert_eq!(p.aborted_in_range(0, 4), vec![]);
        assert_eq!(p.aborted_in_range(0, 5).len(), 1);
        // A second marker for a closed transaction is a no-op.
        assert_eq!(p.write_marker(8, 0, false, 0, 0, 1).unwrap(), None);
    }

    #[test]
    fn aborted_transactions_and_open_ones_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce_txn(&mut p, 8, 0, 0);
        p.write_marker(8, 0, false, 0, 0, 1).unwrap();
        produce_txn(&mut p, 9, 0, 0); // left open
        drop(p);
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(
            p.aborted,
            vec![AbortedTxn {
                producer_id: 8,
                first_offset: 0,
                last_offset: 1
            }]
        );
        assert_eq!(p.last_stable_offset(), 2);
        // Without its index file the abort is re-derived from the log.
        drop(p);
        for f in std::fs::read_dir(dir.path()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "txnindex") {
                std::fs::remove_file(f).unwrap();
            }
        }
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.aborted.len(), 1);
    }

    #[test]
    fn an_abort_marker_at_a_bumped_epoch_fences_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce_txn(&mut p, 7, 0, 0);
        p.write_marker(7, 1, false, 0, 0, 1).unwrap().unwrap();
        let recs: Vec<crate::batch::PlainRecord> = vec![(None, Some(&b"zombie"[..]))];
        let mut b = build_batch(0, 1, Some((7, 0, 1)), 0x10, &recs);
        let h = validate_all(&b).unwrap();
        assert!(matches!(
            p.append(&mut b, &h, 0, 1),
            Err(AppendError::Sequence(SequenceError::StaleEpoch { .. }))
        ));
    }

    #[test]
    fn a_restart_keeps_the_dedupe_window_from_snapshot_and_log_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce(&mut p, 7, 0, 0, 2).unwrap();
        p.write_snapshot(1).unwrap();
        produce(&mut p, 7, 0, 2, 2).unwrap(); // only in the log tail
        drop(p);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.replayed_from, 2);
        assert_eq!(
            produce(&mut p, 7, 0, 0, 2).unwrap(),
            AppendOutcome::Duplicate {
                base_offset: 0,
                last_offset: 1
            }
        );
        assert_eq!(
            produce(&mut p, 7, 0, 2, 2).unwrap(),
            AppendOutcome::Duplicate {
                base_offset: 2,
                last_offset: 3
            }
        );
        assert!(matches!(
            produce(&mut p, 7, 0, 9, 1),
            Err(AppendError::Sequence(SequenceError::OutOfOrder { .. }))
        ));
        assert!(matches!(
            produce(&mut p, 7, 0, 4, 1).unwrap(),
            AppendOutcome::Appended(_)
        ));
    }

    #[test]
    fn without_a_snapshot_the_whole_log_is_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce(&mut p, 7, 0, 0, 1).unwrap();
        drop(p);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert!(matches!(
            produce(&mut p, 7, 0, 0, 1).unwrap(),
            AppendOutcome::Duplicate { .. }
        ));
    }

    #[test]
    fn a_roll_writes_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 150,
            ..LogConfig::default()
        };
        let mut p = PartitionState::open(dir.path(), config, 0).unwrap();
        for seq in 0..4 {
            produce(&mut p, 7, 0, seq, 1).unwrap();
        }
        let snap = ProducerStateSnapshot::read(dir.path())
            .unwrap()
            .expect("written on roll");
        assert!(snap.offset > 0);
        assert_eq!(snap.producers[0].producer_id, 7);
    }

    #[test]
    fn a_corrupt_snapshot_refuses_the_partition_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SNAPSHOT_FILE), b"{\"version\": 1, \"offset\": ").unwrap();
        let err = PartitionState::open(dir.path(), LogConfig::default(), 0)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(SNAPSHOT_FILE), "{err}");
        std::fs::write(dir.path().join(SNAPSHOT_FILE), b"{\"version\": 7}").unwrap();
        let err = PartitionState::open(dir.path(), LogConfig::default(), 0)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("unknown format version 7"), "{err}");
    }

    #[test]
    fn nothing_is_written_when_any_batch_of_a_request_is_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        let one: Vec<crate::batch::PlainRecord> = vec![(None, Some(b"v"))];
        let mut b = build_batch(0, 1, Some((7, 0, 0)), 0, &one);
        b.extend(build_batch(0, 1, Some((7, 0, 5)), 0, &one));
        let h = validate_all(&b).unwrap();
        assert!(p.append(&mut b, &h, 0, 1).is_err());
        assert_eq!(p.log.log_end_offset(), 0);
        let mut b = build_batch(0, 1, Some((7, 0, 0)), 0, &one);
        b.extend(build_batch(0, 1, Some((7, 0, 1)), 0, &one));
        let h = validate_all(&b).unwrap();
        assert!(matches!(
            p.append(&mut b, &h, 0, 1).unwrap(),
            AppendOutcome::Appended(_)
        ));
        assert_eq!(p.log.log_end_offset(), 2);
    }
}
