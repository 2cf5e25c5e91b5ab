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
        match read_versioned_json(
            &Self::path(dir),
            "producer-state snapshot",
            SNAPSHOT_FORMAT_VERSION,
        ) {
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

pub struct PartitionState {
    pub log: PartitionLog,
    pub producers: ProducerStateTable,
    /// Where recovery started replaying (for the open log line).
    pub replayed_from: i64,
}

impl PartitionState {
    /// Opens the log (recovering its tail), loads the snapshot and replays the log
    /// after it. A corrupt or unknown-version snapshot is an error: the partition is
    /// refused rather than served with an empty (forgetful) producer state.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<PartitionState, PartitionError> {
        let log = PartitionLog::open(dir, config, now_ms)?;
        let snapshot = ProducerStateSnapshot::read(dir)?;
        let mut producers = ProducerStateTable::default();
        let mut from = log.log_start_offset();
        if let Some(s) = snapshot {
            // A snapshot past the log end describes data recovery cut off: ignore it
            // and rebuild from the log itself.
            if s.offset <= log.log_end_offset() {
                from = s.offset.max(log.log_start_offset());
                producers.producers = s
                    .producers
                    .into_iter()
                    .map(|e| (e.producer_id, e))
                    .collect();
            }
        }
        log.for_each_header_from(from, |h| producers.record(h))?;
        Ok(PartitionState {
            log,
            producers,
            replayed_from: from,
        })
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
                    scratch
                        .producers
                        .entry(h.producer_id)
                        .or_insert_with(|| e.clone());
                }
            }
            for h in headers {
                match scratch.classify(h)? {
                    Classification::Append => scratch.record(h),
                    Classification::Duplicate { .. } => {
                        return Err(AppendError::DuplicateInMultiBatch)
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, validate_all};

    fn produce(
        p: &mut PartitionState,
        pid: i64,
        epoch: i16,
        seq: i32,
        n: usize,
    ) -> Result<AppendOutcome, AppendError> {
        let recs: Vec<crate::batch::PlainRecord> =
            (0..n).map(|_| (None, Some(&b"value"[..]))).collect();
        let mut b = build_batch(0, 1, Some((pid, epoch, seq)), 0, &recs);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 1)
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
        std::fs::write(
            dir.path().join(SNAPSHOT_FILE),
            b"{\"version\": 1, \"offset\": ",
        )
        .unwrap();
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
