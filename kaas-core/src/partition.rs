//! A partition as the broker serves it: its log plus its idempotent-producer state,
//! kept consistent with each other. The producer state is saved to
//! `producer-state.snapshot` on segment roll and on clean shutdown (and relinquish),
//! and restored at open by loading the snapshot and replaying the log after it, so a
//! restart never forgets a dedupe window.
//!
//! Recovery trusts nothing that describes a timeline the log no longer has:
//!
//! - **Snapshots prove they belong to the log.** A snapshot (format 2) records the
//!   offset it covers and the identity (base offset, stored CRC32C) of the batch that
//!   ends at `offset - 1` (none for a snapshot of an empty log). At open a snapshot is
//!   applied only if its offset lies within the log and the log holds that very batch
//!   there; otherwise it is deleted (warning with the path and the reason) and the
//!   state is rebuilt by replaying the log from its start. A crash can cut a tail the
//!   snapshot covered, and the log can then grow back past the snapshot's offset with
//!   other batches: the identity check is what tells the two timelines apart. A
//!   format-1 snapshot (no identity) is accepted when its offset is within the log and
//!   on a batch boundary — the best an old file can show — and, because the build that
//!   wrote it never fsynced `.txnindex` files, every abort is then re-derived by
//!   replaying the whole log once (the next snapshot is format 2).
//!   See [`snapshot_mismatch`].
//! - **`.txnindex` entries are durable before any snapshot can cover their marker.**
//!   `write_marker` appends an ABORT to the log, then writes and fsyncs its index entry
//!   before it returns (the caller fsyncs the log afterwards). The log marker may still
//!   reach the disk first (kernel writeback, a concurrent group-commit fsync), so an
//!   entry can be missing for a marker in the log — but only for a marker after the
//!   latest snapshot, because a snapshot is never written while an entry is not yet
//!   durable (it retries them first and refuses if it cannot). Replay from the
//!   snapshot offset re-derives exactly those markers and indexes them. That is why
//!   this fsync-plus-replay scheme is chosen over re-deriving from the whole log after
//!   every unclean stop: it is complete and costs an fsync per abort instead of a full
//!   log scan at every start.
//! - **An index never outlives its log.** The opposite crash (entry durable, marker
//!   lost) leaves entries at or past the recovered log end: open removes them from the
//!   file (atomic rewrite), and cuts a torn tail (length not a multiple of 34) so later
//!   entries stay aligned.
//!
//! Crash points along these steps are in [`crate::failpoint`]; `tests/integration/
//! test_crash.py` crashes a broker at each and checks what read_committed consumers see.

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
/// Written by this build: format 2 adds `last_batch`. Format 1 is still read.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 2;
/// The first format with `last_batch`, the proof that a snapshot belongs to a log.
pub const SNAPSHOT_FORMAT_WITH_IDENTITY: u32 = 2;

/// Which batch a snapshot ends with: its base offset and the CRC32C stored in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchId {
    pub base_offset: i64,
    pub crc: u32,
}

impl BatchId {
    pub fn of(h: &BatchHeader) -> BatchId {
        BatchId {
            base_offset: h.base_offset,
            crc: h.crc,
        }
    }
}

/// The on-disk producer-state snapshot (JSON, replaced atomically).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerStateSnapshot {
    pub version: u32,
    /// The state reflects every batch below this offset; the log from here on is replayed.
    pub offset: i64,
    /// The batch ending at `offset - 1` when the snapshot was written; None when nothing
    /// precedes `offset` in the log. Absent in format 1.
    #[serde(default)]
    pub last_batch: Option<BatchId>,
    pub written_ms: i64,
    pub producers: Vec<ProducerEntry>,
}

impl ProducerStateSnapshot {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(SNAPSHOT_FILE)
    }
    /// Reads a partition's snapshot (format 2, or 1); Ok(None) when there is none.
    pub fn read(dir: &Path) -> Result<Option<ProducerStateSnapshot>, VolumeError> {
        let path = Self::path(dir);
        let what = "producer-state snapshot";
        match read_versioned_json(&path, what, SNAPSHOT_FORMAT_VERSION) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(VolumeError::UnknownVersion { found: 1, .. }) => read_versioned_json(&path, what, 1).map(Some),
            Err(e) => Err(e),
        }
    }
}

/// Why `s` must not be applied to a log spanning `[log_start, log_end)` whose batch
/// ending at `s.offset - 1` is `ending` (see [`PartitionLog::batch_ending_at`]); None
/// when it may. The rules:
/// - past the log end: the tail it covered was cut by recovery;
/// - below the log start: the batch it ends with was deleted by retention, so nothing
///   can be checked (Apache likewise drops snapshots below the log start);
/// - format 2: `last_batch` must equal `ending` (both None only at the log start);
/// - format 1: `offset` must be the log start or a batch boundary.
pub fn snapshot_mismatch(
    s: &ProducerStateSnapshot,
    log_start: i64,
    log_end: i64,
    ending: Option<BatchId>,
) -> Option<String> {
    if s.offset > log_end {
        return Some(format!(
            "it covers offsets below {} but the log ends at {log_end}: the tail it describes was cut",
            s.offset
        ));
    }
    if s.offset < log_start {
        return Some(format!(
            "its offset {} is below the log start {log_start}: the batch it ends with is gone and cannot be checked",
            s.offset
        ));
    }
    if s.version >= SNAPSHOT_FORMAT_WITH_IDENTITY {
        if s.last_batch != ending {
            let show = |b: Option<BatchId>| match b {
                Some(b) => format!("batch {} with crc {:#010x}", b.base_offset, b.crc),
                None => "no batch".into(),
            };
            return Some(format!(
                "it ends with {} but the log has {} ending at offset {}: another timeline",
                show(s.last_batch),
                show(ending),
                s.offset - 1
            ));
        }
    } else if s.offset > log_start && ending.is_none() {
        return Some(format!(
            "its offset {} is not a batch boundary of this log (format-1 snapshot, no batch identity)",
            s.offset
        ));
    }
    None
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
    /// Aborts in `aborted` whose `.txnindex` entry is not known to be durable yet (an
    /// index write failed): retried before any snapshot, which they block.
    unsynced_aborts: Vec<AbortedTxn>,
}

impl PartitionState {
    /// Opens the log (recovering its tail), checks the snapshot against it (deleting
    /// one that does not belong to it, see [`snapshot_mismatch`]), loads it and replays
    /// the log after it; cuts `.txnindex` files back to the recovered log and indexes
    /// any abort the replay finds missing. A corrupt or unknown-version snapshot is an
    /// error: the partition is refused rather than served with an empty (forgetful)
    /// producer state.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<PartitionState, PartitionError> {
        let log = PartitionLog::open(dir, config, now_ms)?;
        // Producer state is rebuilt from the first byte of the log, which may lie below
        // the log start clients see (DeleteRecords).
        let (start, end) = (log.first_segment_base(), log.log_end_offset());
        let mut producers = ProducerStateTable::default();
        let mut from = start;
        // Where aborts are re-derived from the log: the replay start, or the log start
        // for a format-1 snapshot (its build never fsynced the index files).
        let mut derive_from = start;
        if let Some(s) = ProducerStateSnapshot::read(dir)? {
            let ending = log.batch_ending_at(s.offset)?.map(|h| BatchId::of(&h));
            match snapshot_mismatch(&s, start, end, ending) {
                Some(why) => discard_snapshot(dir, &why)?,
                None => {
                    from = s.offset;
                    if s.version >= SNAPSHOT_FORMAT_WITH_IDENTITY {
                        derive_from = s.offset;
                    }
                    producers.producers = s.producers.into_iter().map(|e| (e.producer_id, e)).collect();
                }
            }
        }
        let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
        let mut aborted = recover_txn_indexes(dir, end, &bases)?;
        let mut derived = replay_log(&log, &mut producers, from)?;
        if derive_from < from {
            derived.extend(replay_log(&log, &mut ProducerStateTable::default(), derive_from)?);
        }
        let mut state = PartitionState {
            log,
            producers,
            aborted: Vec::new(),
            replayed_from: from,
            unsynced_aborts: Vec::new(),
        };
        // Markers whose index entry was lost in a crash are re-indexed from the log.
        for a in derived {
            if !aborted.contains(&a) {
                let (topic, partition) = crate::layout::partition_ids(dir);
                tracing::info!(
                    topic,
                    partition,
                    producer_id = a.producer_id,
                    marker_offset = a.last_offset,
                    "re-indexing an aborted transaction found in the log"
                );
                state.unsynced_aborts.push(a);
                aborted.push(a);
            }
        }
        state.sync_txn_index()?;
        aborted.sort_by_key(|a| (a.last_offset, a.producer_id, a.first_offset));
        aborted.dedup();
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
            // Never below the log start (DeleteRecords may pass an open transaction's
            // first offset), as Apache.
            .max(self.log.log_start_offset())
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
    ///
    /// For an ABORT, the `.txnindex` entry is written and fsynced before this returns;
    /// the caller then makes the marker durable (fsync of the log). If the index write
    /// fails, the marker stays appended (Ok, so the caller still fsyncs it), the failure
    /// is logged, and the entry is retried before the next snapshot — which it blocks,
    /// so replay at the next open re-derives the abort if it never made it.
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<Option<AppendInfo>, PartitionError> {
        let (first, known_epoch) = match self.producers.get(producer_id) {
            Some(e) => (e.txn_first_offset, Some(e.epoch)),
            None => (None, None),
        };
        // A marker from an older epoch than this partition knows the producer at is
        // stale (a repair or queue entry that lost a race with a newer session): it
        // must not close whatever that session has open here. Apache refuses it too.
        if known_epoch.is_some_and(|k| producer_epoch < k) {
            let (topic, partition) = crate::layout::partition_ids(self.log.dir());
            tracing::warn!(
                topic,
                partition,
                producer_id,
                producer_epoch,
                known_epoch,
                "ignoring a transaction marker older than the producer's epoch on this partition"
            );
            return Ok(None);
        }
        let Some(first_offset) = first else {
            self.producers.fence_at(producer_id, producer_epoch, now_ms);
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
            crate::failpoint::hit(crate::failpoint::ABORT_BEFORE_TXNINDEX);
            let a = AbortedTxn {
                producer_id,
                first_offset,
                last_offset: info.base_offset,
            };
            self.aborted.push(a);
            self.unsynced_aborts.push(a);
            if let Err(e) = self.sync_txn_index() {
                let (topic, partition) = crate::layout::partition_ids(self.log.dir());
                tracing::error!(topic, partition, producer_id, marker_offset = a.last_offset, error = %e,
                    "cannot make an aborted transaction's index entry durable; retried before the next snapshot");
            }
        }
        Ok(Some(info))
    }

    /// Writes and fsyncs the index entries of `unsynced_aborts`, each into the
    /// `.txnindex` of the segment holding its marker.
    fn sync_txn_index(&mut self) -> Result<(), VolumeError> {
        use std::io::Write;
        while let Some(&a) = self.unsynced_aborts.first() {
            let base = self.log.segment_base_for(a.last_offset);
            let path = self.log.dir().join(format!("{base:020}.txnindex"));
            let entry = txn_index_entry(&a, self.last_stable_offset());
            let io = |e| VolumeError::io(&path, e);
            let created = !path.exists();
            let mut f = crate::fsutil::open_volume_file(std::fs::OpenOptions::new().create(true).append(true), &path)
                .map_err(io)?;
            // Never append after a torn entry (a write that failed half-way): that
            // would misalign every later entry.
            let len = f.metadata().map_err(io)?.len();
            let aligned = len - len % TXN_INDEX_ENTRY_LEN as u64;
            if aligned != len {
                let (topic, partition) = crate::layout::partition_ids(&path);
                tracing::warn!(topic, partition, path = %path.display(), cut_bytes = len - aligned, "cutting a torn .txnindex entry");
                f.set_len(aligned).map_err(io)?;
            }
            f.write_all(&entry).map_err(io)?;
            crate::failpoint::hit(crate::failpoint::ABORT_AFTER_TXNINDEX_WRITE);
            f.sync_data().map_err(io)?;
            if created {
                crate::fsutil::sync_dir(self.log.dir()).map_err(|e| VolumeError::io(self.log.dir(), e))?;
            }
            crate::failpoint::hit(crate::failpoint::ABORT_AFTER_TXNINDEX_FSYNC);
            self.unsynced_aborts.remove(0);
        }
        Ok(())
    }

    /// Retention, keeping the aborted-transaction list in step with the log start.
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<Vec<i64>, LogError> {
        let deleted = self.log.enforce_retention(now_ms)?;
        self.forget_below_start();
        Ok(deleted)
    }

    /// DeleteRecords: moves the log start up to `offset` (see
    /// [`PartitionLog::advance_start`]), keeping the aborted-transaction list in step.
    /// Producer state is kept: a producer's sequence window does not depend on where
    /// the log starts.
    pub fn delete_records(&mut self, offset: i64) -> Result<Vec<i64>, LogError> {
        let deleted = self.log.advance_start(offset)?;
        self.forget_below_start();
        Ok(deleted)
    }

    /// What the log cleaner would clean now, given where cleaning reached.
    pub fn cleaner_plan(
        &mut self,
        cleaner: &crate::cleaner::CleanerState,
        now_ms: i64,
    ) -> Result<Option<crate::cleaner::Plan>, LogError> {
        let lso = self.last_stable_offset();
        let deletes_due = cleaner.deletes_due(now_ms, self.log.config().delete_retention_ms);
        crate::cleaner::plan(&mut self.log, cleaner.clean_offset, deletes_due, lso, now_ms)
    }

    /// The facts a cleaning pass over `plan` needs, taken under the partition lock.
    pub fn clean_input(
        &self,
        plan: &crate::cleaner::Plan,
        cleaner: &crate::cleaner::CleanerState,
        tag: String,
        now_ms: i64,
    ) -> crate::cleaner::CleanInput {
        let segments = self.log.segments();
        let config = self.log.config();
        crate::cleaner::CleanInput {
            dir: self.log.dir().to_path_buf(),
            segments: segments[..plan.cleanable]
                .iter()
                .map(|s| (s.base_offset(), s.size()))
                .collect(),
            end_base: segments[plan.cleanable].base_offset(),
            clean_offset: cleaner.clean_offset,
            first_dirty: plan.first_dirty,
            aborted: self.aborted.clone(),
            last_batch_of: self
                .producers
                .producers
                .values()
                .filter_map(|e| e.batches.back().map(|b| (e.producer_id, b.base_offset)))
                .collect(),
            delete_horizon: cleaner.delete_horizon(now_ms, config.delete_retention_ms),
            index_interval: config.index_interval_bytes,
            segment_bytes: config.segment_bytes,
            tag,
        }
    }

    /// Swaps a finished pass's segments in (see `cleaner::install`) and forgets the
    /// aborted transactions whose markers it removed. False when the log changed
    /// under the pass and it was dropped.
    pub fn install_cleaned(&mut self, out: &crate::cleaner::CleanOutput, now_ms: i64) -> Result<bool, LogError> {
        if !crate::cleaner::install(&mut self.log, out, now_ms)? {
            return Ok(false);
        }
        let removed = |a: &AbortedTxn| out.removed_aborts.contains(&(a.producer_id, a.last_offset));
        self.aborted.retain(|a| !removed(a));
        self.unsynced_aborts.retain(|a| !removed(a));
        // The last snapshot may name a batch the pass removed or rewrote (then the next
        // open would replay the whole log): a fresh one names the log end.
        if let Err(e) = self.write_snapshot(now_ms) {
            let (topic, partition) = crate::layout::partition_ids(self.log.dir());
            tracing::warn!(topic, partition, error = %e, "producer-state snapshot after cleaning failed; the next open replays more log");
        }
        Ok(true)
    }

    fn forget_below_start(&mut self) {
        let start = self.log.log_start_offset();
        self.aborted.retain(|a| a.last_offset >= start);
        self.unsynced_aborts.retain(|a| a.last_offset >= start);
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
            crate::failpoint::hit(crate::failpoint::ROLL_BEFORE_SNAPSHOT);
            if let Err(e) = self.write_snapshot(now_ms) {
                let (topic, partition) = crate::layout::partition_ids(self.log.dir());
                tracing::warn!(topic, partition, error = %e, "producer-state snapshot on roll failed; the next open replays more log");
            }
            crate::failpoint::hit(crate::failpoint::ROLL_AFTER_SNAPSHOT);
        }
        Ok(AppendOutcome::Appended(info))
    }

    /// Saves the producer state as of the current log end, with the identity of the
    /// batch it ends with. Every aborted transaction below that offset has a durable
    /// index entry first (retried here; the snapshot is refused if that fails), since
    /// the next open replays only the log after the snapshot.
    pub fn write_snapshot(&mut self, now_ms: i64) -> Result<(), PartitionError> {
        self.sync_txn_index()?;
        let offset = self.log.log_end_offset();
        let snapshot = ProducerStateSnapshot {
            version: SNAPSHOT_FORMAT_VERSION,
            offset,
            last_batch: self.log.batch_ending_at(offset)?.map(|h| BatchId::of(&h)),
            written_ms: now_ms,
            producers: self.producers.producers.values().cloned().collect(),
        };
        let path = ProducerStateSnapshot::path(self.log.dir());
        write_json(&path, &snapshot).map_err(|e| VolumeError::io(&path, e))?;
        Ok(())
    }
}

/// Deletes a snapshot that does not belong to the log (durably: the directory is
/// fsynced, so it cannot come back and be trusted once the log has grown past it).
fn discard_snapshot(dir: &Path, why: &str) -> Result<(), VolumeError> {
    let path = ProducerStateSnapshot::path(dir);
    let (topic, partition) = crate::layout::partition_ids(dir);
    tracing::warn!(topic, partition, path = %path.display(), reason = why,
        "deleting a producer-state snapshot that does not belong to this log; rebuilding the state from the log start");
    std::fs::remove_file(&path).map_err(|e| VolumeError::io(&path, e))?;
    crate::fsutil::sync_dir(dir).map_err(|e| VolumeError::io(dir, e))
}

/// Replays the log from the batch holding `from` into `producers`; returns the aborted
/// transactions its ABORT markers close.
fn replay_log(log: &PartitionLog, producers: &mut ProducerStateTable, from: i64) -> Result<Vec<AbortedTxn>, LogError> {
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
        derived.extend(replay(producers, h, marker));
    })?;
    match control_error {
        Some(e) => Err(e),
        None => Ok(derived),
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

/// One `.txnindex` entry (see [`TXN_INDEX_ENTRY_LEN`]) for `a`, with `lso` as its
/// last-stable-offset field.
pub fn txn_index_entry(a: &AbortedTxn, lso: i64) -> [u8; TXN_INDEX_ENTRY_LEN] {
    let mut e = [0u8; TXN_INDEX_ENTRY_LEN];
    e[2..10].copy_from_slice(&a.producer_id.to_be_bytes());
    e[10..18].copy_from_slice(&a.first_offset.to_be_bytes());
    e[18..26].copy_from_slice(&a.last_offset.to_be_bytes());
    e[26..34].copy_from_slice(&lso.to_be_bytes());
    e
}

fn parse_txn_index_entry(chunk: &[u8]) -> AbortedTxn {
    let i64_at = |at: usize| i64::from_be_bytes(chunk[at..at + 8].try_into().expect("8 bytes"));
    AbortedTxn {
        producer_id: i64_at(2),
        first_offset: i64_at(10),
        last_offset: i64_at(18),
    }
}

fn txn_index_paths(dir: &Path) -> Result<Vec<PathBuf>, VolumeError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| VolumeError::io(dir, e))? {
        let path = entry.map_err(|e| VolumeError::io(dir, e))?.path();
        if path.extension().is_some_and(|e| e == "txnindex") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The largest `.txnindex` read: each entry stands for an ABORT marker of at least
/// its own size in the segment, and a segment is at most 2 GiB (`segment.bytes`).
const TXN_INDEX_MAX_BYTES: u64 = i32::MAX as u64;

/// Loads every `*.txnindex` file of a partition directory without changing it (for
/// read-only inspection). A ragged tail (a torn append) is ignored, as open cuts it.
pub fn read_txn_indexes(dir: &Path) -> Result<Vec<AbortedTxn>, VolumeError> {
    let mut out = Vec::new();
    for path in txn_index_paths(dir)? {
        let bytes = crate::fsutil::read_capped(&path, TXN_INDEX_MAX_BYTES).map_err(|e| VolumeError::io(&path, e))?;
        out.extend(bytes.chunks_exact(TXN_INDEX_ENTRY_LEN).map(parse_txn_index_entry));
    }
    Ok(out)
}

/// Loads every `*.txnindex` file at open, making each describe the recovered log: a
/// torn tail is cut, and entries whose marker is at or past `log_end` (a marker the
/// crash lost while its entry was durable) are removed, the file being replaced
/// atomically; so are entries of a sealed segment's file whose marker is at or past
/// the next segment's base (`segment_bases`): a leader that had lost the partition
/// wrote them after its successor rolled. Each change is logged with the path.
fn recover_txn_indexes(dir: &Path, log_end: i64, segment_bases: &[i64]) -> Result<Vec<AbortedTxn>, VolumeError> {
    let mut out = Vec::new();
    for path in txn_index_paths(dir)? {
        let own_base = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<i64>().ok());
        let limit = own_base
            .and_then(|b| segment_bases.iter().copied().find(|next| *next > b))
            .unwrap_or(log_end)
            .min(log_end);
        let bytes = crate::fsutil::read_capped(&path, TXN_INDEX_MAX_BYTES).map_err(|e| VolumeError::io(&path, e))?;
        let torn = bytes.len() % TXN_INDEX_ENTRY_LEN;
        let mut kept = Vec::with_capacity(bytes.len());
        let mut dropped = 0usize;
        for chunk in bytes.chunks_exact(TXN_INDEX_ENTRY_LEN) {
            let a = parse_txn_index_entry(chunk);
            if a.last_offset >= limit {
                dropped += 1;
                let (topic, partition) = crate::layout::partition_ids(&path);
                tracing::warn!(topic, partition, path = %path.display(), producer_id = a.producer_id, marker_offset = a.last_offset, log_end, limit,
                    "removing an aborted-transaction entry whose marker is past the recovered log end or its segment");
            } else {
                kept.extend_from_slice(chunk);
                out.push(a);
            }
        }
        if torn != 0 {
            let (topic, partition) = crate::layout::partition_ids(&path);
            tracing::warn!(topic, partition, path = %path.display(), cut_bytes = torn, "cutting a torn .txnindex tail");
        }
        if dropped > 0 {
            crate::fsutil::atomic_write(&path, &kept).map_err(|e| VolumeError::io(&path, e))?;
        } else if torn != 0 {
            let f = crate::fsutil::open_volume_file(std::fs::OpenOptions::new().write(true), &path)
                .map_err(|e| VolumeError::io(&path, e))?;
            f.set_len(kept.len() as u64)
                .and_then(|_| f.sync_data())
                .map_err(|e| VolumeError::io(&path, e))?;
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
    fn a_marker_older_than_the_producers_epoch_never_closes_its_newer_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        // A hanging transaction at epoch 3, a repair queued for it, then the producer's
        // new session at epoch 5 opens a transaction here before the repair lands.
        produce_txn(&mut p, 7, 5, 0);
        assert_eq!(p.write_marker(7, 3, false, 0, 0, 1).unwrap(), None);
        assert_eq!(p.last_stable_offset(), 0, "epoch 5's transaction is still open");
        assert!(p.aborted.is_empty());
        assert!(p.write_marker(7, 5, true, 0, 0, 1).unwrap().is_some());
        assert_eq!(p.last_stable_offset(), 2);
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
        let mut p = PartitionState::open(dir.path(), config.clone(), 0).unwrap();
        for seq in 0..4 {
            produce(&mut p, 7, 0, seq, 1).unwrap();
        }
        let snap = ProducerStateSnapshot::read(dir.path())
            .unwrap()
            .expect("written on roll");
        assert!(snap.offset > 0);
        assert_eq!(snap.producers[0].producer_id, 7);
        assert_eq!(snap.version, SNAPSHOT_FORMAT_VERSION);
        // It names the batch it ends with, as stored in the log.
        let last = p.log.batch_ending_at(snap.offset).unwrap().unwrap();
        assert_eq!(snap.last_batch, Some(BatchId::of(&last)));
        assert_eq!(last.last_offset(), snap.offset - 1);
        drop(p);
        let p = PartitionState::open(dir.path(), config, 0).unwrap();
        assert_eq!(p.replayed_from, snap.offset);
    }

    #[test]
    fn a_snapshot_of_an_empty_log_names_no_batch_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        p.write_snapshot(1).unwrap();
        let snap = ProducerStateSnapshot::read(dir.path()).unwrap().unwrap();
        assert_eq!((snap.offset, snap.last_batch), (0, None));
        drop(p);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert!(ProducerStateSnapshot::path(dir.path()).exists());
        produce(&mut p, 7, 0, 0, 1).unwrap();
        drop(p);
        // Once the log has data, an identity of "no batch" at offset 0 still matches.
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert!(ProducerStateSnapshot::path(dir.path()).exists());
        assert_eq!(p.replayed_from, 0);
    }

    #[test]
    fn snapshot_checks_cover_every_rule() {
        let id = |base_offset, crc| Some(BatchId { base_offset, crc });
        let snap = |version, offset, last_batch| ProducerStateSnapshot {
            version,
            offset,
            last_batch,
            written_ms: 0,
            producers: vec![],
        };
        // Format 2: exactly the batch it names, inside the log.
        assert_eq!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, id(8, 5)), None);
        assert_eq!(snapshot_mismatch(&snap(2, 12, id(8, 5)), 0, 12, id(8, 5)), None);
        assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, id(8, 6))
            .unwrap()
            .contains("another timeline"));
        assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, id(9, 5)).is_some());
        assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, None).is_some());
        assert!(snapshot_mismatch(&snap(2, 13, id(8, 5)), 0, 12, None)
            .unwrap()
            .contains("log ends at 12"));
        assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 11, 20, None)
            .unwrap()
            .contains("below the log start"));
        // At the log start: "no batch" proves itself; a named batch retention deleted does not.
        assert_eq!(snapshot_mismatch(&snap(2, 0, None), 0, 12, None), None);
        assert_eq!(snapshot_mismatch(&snap(2, 11, None), 11, 20, None), None);
        assert!(snapshot_mismatch(&snap(2, 11, id(8, 5)), 11, 20, None).is_some());
        // Format 1: within the log and on a batch boundary.
        assert_eq!(snapshot_mismatch(&snap(1, 10, None), 0, 12, id(8, 5)), None);
        assert_eq!(snapshot_mismatch(&snap(1, 0, None), 0, 12, None), None);
        assert!(snapshot_mismatch(&snap(1, 10, None), 0, 12, None)
            .unwrap()
            .contains("batch boundary"));
        assert!(snapshot_mismatch(&snap(1, 13, None), 0, 12, None).is_some());
    }

    #[test]
    fn an_index_entry_that_cannot_be_written_blocks_snapshots_until_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce_txn(&mut p, 8, 0, 0); // offset 0
                                      // The index file cannot be opened for writing (a directory sits at its path).
        let index = dir.path().join(format!("{:020}.txnindex", 0));
        std::fs::create_dir(&index).unwrap();
        // The marker is in the log and must still be made durable by the caller: Ok.
        let info = p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap();
        assert_eq!(info.base_offset, 1);
        assert_eq!(p.aborted.len(), 1, "served as aborted right away");
        assert!(
            p.write_snapshot(1).is_err(),
            "no snapshot may cover a non-durable entry"
        );
        assert!(!ProducerStateSnapshot::path(dir.path()).exists());
        std::fs::remove_dir(&index).unwrap();
        p.write_snapshot(1).unwrap();
        assert_eq!(
            read_txn_indexes(dir.path()).unwrap(),
            vec![AbortedTxn {
                producer_id: 8,
                first_offset: 0,
                last_offset: 1
            }]
        );
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

    fn segment0(dir: &Path) -> PathBuf {
        dir.join(format!("{:020}.log", 0))
    }

    /// Cuts the first segment to `len` bytes, as a crash that lost unsynced log data
    /// (recovery then finds the log ending there).
    fn lose_log_tail(dir: &Path, len: u64) {
        let f = std::fs::OpenOptions::new().write(true).open(segment0(dir)).unwrap();
        f.set_len(len).unwrap();
    }

    fn txnindex_files(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_snapshot_past_the_recovered_log_end_is_deleted_and_never_trusted_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce(&mut p, 7, 0, 0, 1).unwrap(); // offset 0
        let keep = p.log.size_bytes();
        produce(&mut p, 7, 0, 1, 1).unwrap(); // offset 1
        produce(&mut p, 7, 0, 2, 1).unwrap(); // offset 2
        p.write_snapshot(1).unwrap(); // covers [0, 3)
        drop(p);
        lose_log_tail(dir.path(), keep);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.log.log_end_offset(), 1);
        assert!(
            !ProducerStateSnapshot::path(dir.path()).exists(),
            "a snapshot of a tail recovery cut must be deleted"
        );
        assert_eq!(p.replayed_from, 0);
        // Another producer grows the log past the old snapshot's offset.
        produce(&mut p, 9, 0, 0, 3).unwrap(); // offsets 1-3
        drop(p);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        // Producer 7's sequences 1 and 2 were lost: their retry is new data, not a
        // duplicate of producer 9's records.
        assert!(matches!(
            produce(&mut p, 7, 0, 1, 1).unwrap(),
            AppendOutcome::Appended(_)
        ));
        assert!(matches!(
            produce(&mut p, 9, 0, 0, 3).unwrap(),
            AppendOutcome::Duplicate { base_offset: 1, .. }
        ));
    }

    #[test]
    fn a_snapshot_whose_last_batch_is_not_in_the_log_is_deleted_and_the_log_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce(&mut p, 7, 0, 0, 1).unwrap(); // offset 0
        let keep = p.log.size_bytes();
        produce(&mut p, 7, 0, 1, 1).unwrap(); // offset 1
        p.write_snapshot(1).unwrap(); // covers [0, 2)
        let stale = std::fs::read(ProducerStateSnapshot::path(dir.path())).unwrap();
        drop(p);
        lose_log_tail(dir.path(), keep);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce(&mut p, 9, 0, 0, 1).unwrap(); // offset 1 again, another timeline
        drop(p);
        // The old snapshot comes back (say its unlink never reached the disk): its
        // offset is inside the log again, but offset 1 holds another batch now.
        std::fs::write(ProducerStateSnapshot::path(dir.path()), &stale).unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert!(!ProducerStateSnapshot::path(dir.path()).exists());
        assert_eq!(p.replayed_from, 0);
        assert!(matches!(
            produce(&mut p, 9, 0, 0, 1).unwrap(),
            AppendOutcome::Duplicate { base_offset: 1, .. }
        ));
        assert!(matches!(
            produce(&mut p, 7, 0, 1, 1).unwrap(),
            AppendOutcome::Appended(_)
        ));
    }

    #[test]
    fn an_old_snapshot_is_kept_on_a_batch_boundary_and_its_aborts_are_rederived() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce_txn(&mut p, 8, 0, 0); // offset 0
        p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
        produce(&mut p, 1, 0, 0, 2).unwrap(); // offsets 2-3
        p.write_snapshot(1).unwrap(); // covers [0, 4)
        drop(p);
        // As written by a build before format 2, whose .txnindex was never fsynced
        // and whose entry a crash therefore lost.
        let path = ProducerStateSnapshot::path(dir.path());
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let obj = v.as_object_mut().unwrap();
        obj.insert("version".into(), 1.into());
        obj.remove("last_batch");
        let v1 = serde_json::to_vec(&v).unwrap();
        std::fs::write(&path, &v1).unwrap();
        for f in txnindex_files(dir.path()) {
            std::fs::remove_file(f).unwrap();
        }
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.replayed_from, 4, "an old snapshot on a batch boundary is used");
        assert_eq!(
            p.aborted,
            vec![AbortedTxn {
                producer_id: 8,
                first_offset: 0,
                last_offset: 1
            }],
            "the abort before the old snapshot is re-derived from the log"
        );
        assert!(matches!(
            produce(&mut p, 1, 0, 0, 2).unwrap(),
            AppendOutcome::Duplicate { base_offset: 2, .. }
        ));
        drop(p);
        // An old snapshot whose offset is inside a batch proves nothing: deleted.
        obj_offset(&path, &v1, 3);
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.replayed_from, 0);
        assert!(!path.exists());
    }

    fn obj_offset(path: &Path, json: &[u8], offset: i64) {
        let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
        v.as_object_mut().unwrap().insert("offset".into(), offset.into());
        std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    #[test]
    fn a_torn_txnindex_tail_is_cut_at_open_so_later_entries_stay_aligned() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce_txn(&mut p, 8, 0, 0); // offset 0
        p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
        drop(p);
        let index = txnindex_files(dir.path()).pop().unwrap();
        let mut bytes = std::fs::read(&index).unwrap();
        assert_eq!(bytes.len(), TXN_INDEX_ENTRY_LEN);
        bytes.extend_from_slice(&[0xAB; 10]); // a torn second entry
        std::fs::write(&index, &bytes).unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(std::fs::metadata(&index).unwrap().len(), TXN_INDEX_ENTRY_LEN as u64);
        produce_txn(&mut p, 9, 0, 0); // offset 2
        p.write_marker(9, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 3
        p.write_snapshot(1).unwrap(); // both aborts now come from the index alone
        drop(p);
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(std::fs::metadata(&index).unwrap().len(), 2 * TXN_INDEX_ENTRY_LEN as u64);
        assert_eq!(
            p.aborted,
            vec![
                AbortedTxn {
                    producer_id: 8,
                    first_offset: 0,
                    last_offset: 1
                },
                AbortedTxn {
                    producer_id: 9,
                    first_offset: 2,
                    last_offset: 3
                }
            ]
        );
    }

    #[test]
    fn txnindex_entries_past_the_recovered_log_end_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        produce_txn(&mut p, 8, 0, 0); // offset 0
        let keep = p.log.size_bytes();
        p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
        drop(p);
        // The index entry reached the disk, the marker did not.
        lose_log_tail(dir.path(), keep);
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.aborted, vec![]);
        assert_eq!(
            read_txn_indexes(dir.path()).unwrap(),
            vec![],
            "the file no longer lists it"
        );
        assert_eq!(p.last_stable_offset(), 0, "the transaction is open again");
        // Whatever lands at offset 1 in this timeline (here a COMMIT) must not be
        // described by the vanished ABORT's entry.
        p.write_marker(8, 0, true, 0, 0, 1).unwrap().unwrap(); // COMMIT at 1
        drop(p);
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(p.aborted, vec![]);
        assert_eq!(p.aborted_in_range(0, 2), vec![]);
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
