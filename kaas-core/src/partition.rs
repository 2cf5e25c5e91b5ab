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
//!   snapshot offset re-derives exactly those markers and indexes them. An entry a
//!   crash left written but not fsynced is read back at open from the page cache:
//!   open fsyncs the index files holding entries past the snapshot before anything
//!   can cover them (`recover_txn_indexes`). That is why
//!   this fsync-plus-replay scheme is chosen over re-deriving from the whole log after
//!   every unclean stop: it is complete and costs an fsync per abort instead of a full
//!   log scan at every start.
//! - **An index never outlives its log.** The opposite crash (entry durable, marker
//!   lost) leaves entries at or past the recovered log end: open removes them from the
//!   file (atomic rewrite), and cuts a torn tail (length not a multiple of 34) so later
//!   entries stay aligned.
//! - **No entry without its marker.** Any entry whose offset does not hold an ABORT
//!   control batch of its producer is removed the same way, whatever wrote it: kept,
//!   it would hide the producer's committed records from read_committed consumers.
//!
//! Crash points along these steps are in [`crate::failpoint`]; `tests/integration/
//! test_crash.py` crashes a broker at each and checks what read_committed consumers see.

use crate::batch::BatchHeader;
use crate::error::{read_versioned_json, VolumeError};
use crate::idempotence::{Classification, ProducerEntry, ProducerStateTable, SequenceError};
use crate::log::txn_index::recover_txn_indexes;
pub use crate::log::txn_index::{read_txn_indexes, txn_index_entry, AbortedTxn, TXN_INDEX_ENTRY_LEN};
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
    /// A producer-state snapshot no reader would take (past the state-file cap): not
    /// written, the previous one stays ([`PartitionState::write_snapshot_within`]).
    #[error("{}: the producer state ({producers} producers) would take {bytes} bytes, more than the {cap} bytes a state file may have; not written (the previous snapshot stays, and the next open replays more of the log)", path.display())]
    SnapshotTooLarge {
        path: PathBuf,
        producers: usize,
        bytes: usize,
        cap: u64,
    },
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
    /// Aborted transactions still in the log, by last offset.
    pub aborted: Vec<AbortedTxn>,
    /// Where recovery started replaying (for the open log line).
    pub replayed_from: i64,
    /// Aborts in `aborted` whose `.txnindex` entry is not known to be durable yet (an
    /// index write failed): retried before any snapshot, which they block.
    unsynced_aborts: Vec<AbortedTxn>,
    /// The coordinator's number (`txn_seq`) of each producer's transaction open here,
    /// for those this process saw open with a verified batch ([`Self::note_txn_seq`]);
    /// unknown for the rest (opened before this process loaded the partition). In
    /// memory only: a coordinator's notice is checked against it
    /// ([`Self::open_txn_seq`]), so a late notice of an earlier transaction never
    /// closes a later one (docs/cluster.md, "Markers from a notice").
    txn_seqs: std::collections::HashMap<i64, u64>,
}

/// What a partition knows of a producer's open transaction, against the transaction
/// a coordinator's notice names ([`PartitionState::open_txn_seq`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenTxn {
    /// Nothing open for the producer here: a marker would be a no-op.
    None,
    /// The named transaction is the one open here: its marker closes it.
    Named,
    /// A later transaction than the named one is open here: the named one's marker
    /// landed before that one began; a marker now would close the wrong one.
    Later,
    /// A transaction is open whose number this process does not know, or an earlier
    /// one than named (which cannot be while the named one is being finished): only
    /// the coordinator's slot can tell.
    Unknown,
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
        let mut aborted = recover_txn_indexes(dir, &log, derive_from)?;
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
            txn_seqs: Default::default(),
        };
        // Markers whose index entry was lost in a crash are re-indexed from the log.
        // An entry is its marker's (one control batch of one producer per offset): a
        // replay that began past the transaction's first batch (its segment deleted
        // since) derives a later first offset for a marker indexed already, and the
        // index's is kept.
        for a in derived {
            if !aborted
                .iter()
                .any(|e| (e.producer_id, e.last_offset) == (a.producer_id, a.last_offset))
            {
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
        // One per marker, with the earliest first offset (an index written twice for
        // one marker by an older build).
        aborted.dedup_by_key(|a| (a.last_offset, a.producer_id));
        // As `forget_below_start`: kept while the marker's segment is.
        aborted.retain(|a| a.last_offset >= state.log.first_segment_base());
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
            self.txn_seqs.remove(&producer_id);
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
        self.txn_seqs.remove(&producer_id);
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

    /// Whether [`Self::write_marker`] for `producer_id` at `now_ms` would roll the log
    /// first: it appends only for a transaction open here, and a marker batch is of
    /// one size.
    pub fn marker_would_roll(&self, producer_id: i64, now_ms: i64) -> bool {
        let marker_len = crate::batch::build_control_batch(producer_id, 0, true, 0, now_ms).len();
        self.has_open_txn(producer_id) && self.log.would_roll(marker_len as u64, 1, now_ms)
    }

    /// Whether `producer_id` has a transaction open here (a batch past its last marker).
    pub fn has_open_txn(&self, producer_id: i64) -> bool {
        self.producers
            .get(producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some())
    }

    /// Records that a transactional batch of `producer_id`, verified against its
    /// coordinator's transaction `txn_seq`, was just appended; `was_open` is
    /// [`Self::has_open_txn`] from before the append. A batch that opened the
    /// transaction names it; one that continued a transaction of the same number keeps
    /// it; one that continued a transaction of unknown or other number makes it unknown
    /// (only the coordinator's slot can tell then).
    pub fn note_txn_seq(&mut self, producer_id: i64, txn_seq: u64, was_open: bool) {
        if !was_open {
            self.txn_seqs.insert(producer_id, txn_seq);
        } else if self.txn_seqs.get(&producer_id) != Some(&txn_seq) {
            self.txn_seqs.remove(&producer_id);
        }
    }

    /// The producer's open transaction here against transaction `txn_seq` (see [`OpenTxn`]).
    pub fn open_txn_seq(&self, producer_id: i64, txn_seq: u64) -> OpenTxn {
        if !self.has_open_txn(producer_id) {
            return OpenTxn::None;
        }
        match self.txn_seqs.get(&producer_id) {
            Some(&open) if open == txn_seq => OpenTxn::Named,
            Some(&open) if open > txn_seq => OpenTxn::Later,
            _ => OpenTxn::Unknown,
        }
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

    /// Retention below `high_watermark` ([`PartitionLog::enforce_retention`]), keeping
    /// the aborted-transaction list in step with the log start.
    pub fn enforce_retention(&mut self, now_ms: i64, high_watermark: i64) -> Result<Vec<i64>, LogError> {
        let deleted = self.log.enforce_retention(now_ms, high_watermark)?;
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
        // Where the replaced segments end; none after them: the log changed under the
        // pass, and `install` drops it.
        let replaced_end = self
            .log
            .segments()
            .get(out.replaced_sizes.len())
            .map(|s| s.base_offset());
        let mut snapshot_at_end = false;
        if let Some(end) = replaced_end {
            match self.keep_snapshot_past(end, now_ms) {
                Ok(written) => snapshot_at_end = written,
                Err(e) => {
                    crate::log::swap::remove_cleaned_files(self.log.dir(), Some(&out.tag));
                    return Err(e);
                }
            }
        }
        if !crate::cleaner::install(&mut self.log, out, now_ms)? {
            return Ok(false);
        }
        let removed = |a: &AbortedTxn| out.removed_aborts.contains(&(a.producer_id, a.last_offset));
        self.aborted.retain(|a| !removed(a));
        self.unsynced_aborts.retain(|a| !removed(a));
        // A snapshot that names a batch the pass rewrote is refused at the next open
        // (which then replays the whole log): written again, it names the batch as it
        // is now. Only when it ends where the replaced segments end (the active segment
        // is empty), or none was written before the swap.
        if !snapshot_at_end || replaced_end == Some(self.log.log_end_offset()) {
            if let Err(e) = self.write_snapshot(now_ms) {
                let (topic, partition) = crate::layout::partition_ids(self.log.dir());
                tracing::warn!(topic, partition, error = %e, "producer-state snapshot after cleaning failed; the next open replays more log");
            }
        }
        Ok(true)
    }

    /// Before a cleaning pass's segments replace those below `end`: no producer-state
    /// snapshot on the volume may lie below `end`. The next open replays the log from
    /// the snapshot; over cleaned segments, from a point inside them, a transaction
    /// whose data lay before that point and whose marker after it — both cleaned away
    /// — came back open (the last stable offset stuck at its first offset for
    /// read_committed readers, until the reconcile backstop wrote a marker for it).
    /// Replayed from the log end, or from the log's start, a cleaned log holds
    /// together. So the snapshot is written now, at the log end (at or past `end`:
    /// the active segment is never replaced); if that fails (a state past the cap, a
    /// failing disk), the one there is deleted when it lies below `end`. True when
    /// the snapshot was written. An error (the old snapshot can be neither replaced,
    /// nor read, nor deleted) leaves the pass out. Cut by a crash anywhere, the volume
    /// holds the old segments, or the new ones with a snapshot at or past `end`, or
    /// none. One exactly at `end` names the batch before it, inside the replaced
    /// segments: the next open takes it only if the pass kept that batch byte for
    /// byte (a batch it rewrote has another CRC, one it dropped is missing: the
    /// snapshot is refused and the log replayed from its start), and then replays
    /// nothing the pass touched. (The failure branch:
    /// `a_snapshot_inside_a_cleaned_range_is_never_replayed_over_it`.)
    fn keep_snapshot_past(&mut self, end: i64, now_ms: i64) -> Result<bool, LogError> {
        let Err(e) = self.write_snapshot(now_ms) else {
            return Ok(true);
        };
        let dir = self.log.dir().to_path_buf();
        let (topic, partition) = crate::layout::partition_ids(&dir);
        tracing::warn!(topic, partition, error = %e, "producer-state snapshot before a cleaning swap failed");
        if let Some(s) = ProducerStateSnapshot::read(&dir)? {
            if s.offset < end {
                discard_snapshot(
                    &dir,
                    &format!(
                        "it ends at offset {} inside the segments a cleaning pass replaces (below {end}), and a fresh one could not be written",
                        s.offset
                    ),
                )?;
            }
        }
        Ok(false)
    }

    /// Drops the aborted transactions whose marker's segment is gone. One below the log
    /// start (DeleteRecords moves it inside a segment) is kept while its segment is:
    /// the cleaner still reads that segment, and given a list without it took its
    /// data for committed and dropped its marker, and a replay from the first segment
    /// then found a transaction that never ended
    /// (`an_aborted_transaction_below_a_moved_log_start_stays_aborted_through_cleaning_and_a_replay`).
    /// Fetches never list it: they start at the log start.
    fn forget_below_start(&mut self) {
        let first = self.log.first_segment_base();
        self.aborted.retain(|a| a.last_offset >= first);
        self.unsynced_aborts.retain(|a| a.last_offset >= first);
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
            self.snapshot_after_roll(now_ms);
        }
        Ok(AppendOutcome::Appended(info))
    }

    /// Rolls the log ([`PartitionLog::roll`]: the active segment sealed, a new one
    /// created at the log end), for a leader that must confirm its leadership around
    /// the new segment's creation (the server does it under the partition's
    /// `owner.gate`: a deposed leader's segment created by path at its own end would
    /// lie inside its successor's, and the next open would cut the successor's
    /// records at its base). The caller then appends the batch that needed the roll
    /// and calls [`Self::snapshot_after_roll`], as an append that rolls itself does.
    pub fn roll(&mut self, now_ms: i64) -> Result<(), AppendError> {
        self.log.check_usable()?;
        self.log.roll(now_ms)?;
        Ok(())
    }

    /// The producer-state snapshot a roll writes, once the batch that needed the roll
    /// is appended (failpoints `roll-before-snapshot`, `roll-after-snapshot`). A
    /// failure is logged: the next open replays more of the log.
    pub fn snapshot_after_roll(&mut self, now_ms: i64) {
        crate::failpoint::hit(crate::failpoint::ROLL_BEFORE_SNAPSHOT);
        if let Err(e) = self.write_snapshot(now_ms) {
            let (topic, partition) = crate::layout::partition_ids(self.log.dir());
            tracing::warn!(topic, partition, error = %e, "producer-state snapshot on roll failed; the next open replays more log");
        }
        crate::failpoint::hit(crate::failpoint::ROLL_AFTER_SNAPSHOT);
    }

    /// Saves the producer state as of the current log end, with the identity of the
    /// batch it ends with. Every aborted transaction below that offset has a durable
    /// index entry first (retried here; the snapshot is refused if that fails), since
    /// the next open replays only the log after the snapshot.
    pub fn write_snapshot(&mut self, now_ms: i64) -> Result<(), PartitionError> {
        #[cfg(test)]
        if let Some(cap) = TEST_SNAPSHOT_CAP.with(std::cell::Cell::get) {
            return self.write_snapshot_within(now_ms, cap);
        }
        self.write_snapshot_within(now_ms, crate::fsutil::MAX_STATE_FILE_BYTES)
    }

    /// [`Self::write_snapshot`], refused when the snapshot would pass `cap` bytes —
    /// the size every read of a state file is capped at. Producer state is bounded
    /// only by time (`producer.id.expiration.ms`): a snapshot past the cap, once
    /// written, made the partition unopenable for every broker. Refused, the previous
    /// snapshot stays (or none), and the next open replays more of the log.
    pub fn write_snapshot_within(&mut self, now_ms: i64, cap: u64) -> Result<(), PartitionError> {
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
        // Compact: a snapshot holds one entry per producer, and is written at every roll.
        let mut bytes = serde_json::to_vec(&snapshot).map_err(|e| VolumeError::io(&path, std::io::Error::other(e)))?;
        bytes.push(b'\n');
        if bytes.len() as u64 > cap {
            return Err(PartitionError::SnapshotTooLarge {
                path,
                producers: snapshot.producers.len(),
                bytes: bytes.len(),
                cap,
            });
        }
        crate::fsutil::atomic_write(&path, &bytes).map_err(|e| VolumeError::io(&path, e))?;
        Ok(())
    }
}

#[cfg(test)]
thread_local! {
    /// A smaller snapshot cap for [`PartitionState::write_snapshot`] on this thread:
    /// tests of what a refused snapshot does, without a million producers.
    pub(crate) static TEST_SNAPSHOT_CAP: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
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
            // Below the log start too: DeleteRecords may have passed the marker.
            match log.read_stored(h.base_offset, h.total_len()) {
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

#[cfg(test)]
mod tests;
