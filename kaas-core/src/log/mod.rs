//! A partition's log: segment files of record batches stored exactly as received,
//! base offsets assigned in place, a sparse offset index per segment, roll by size and
//! time, retention by time and size, and recovery that truncates a torn or corrupt
//! tail. This module does file I/O only; it knows nothing of the network, and leaves
//! fsync scheduling (group commit) to its caller through [`PartitionLog::sync_handle`].

pub mod compression;
mod read_buffers;
pub mod scan;
mod segment;
pub mod swap;
pub mod txn_index;

pub(crate) use segment::file_name as segment_file_name;
pub use segment::{LogFile, Segment, SegmentError, INDEX_ENTRY_LEN};

use crate::batch::{self, BatchError, BatchHeader};
use bytes::Bytes;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Per-topic log settings (Kafka topic config names in the docs).
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older than this.
    pub segment_ms: i64,
    /// `retention.ms`: delete whole segments whose newest record is older; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is larger; -1 = no limit.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `max.message.bytes`: largest batch accepted.
    pub max_message_bytes: usize,
    /// `cleanup.policy` includes `delete`: retention may delete segments. A topic
    /// whose policy is only `compact` never loses data to retention.
    pub cleanup_delete: bool,
    /// `cleanup.policy` includes `compact`: the log cleaner keeps the latest record
    /// of every key.
    pub compact: bool,
    /// `delete.retention.ms`: how long a tombstone (and a transaction marker) stays in
    /// a compacted log after the segment holding it was cleaned.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: clean when at least this share of the log's
    /// bytes lies past the last cleaned offset.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this long.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a record is eligible for cleaning, whatever the dirty
    /// ratio, once it is this old.
    pub max_compaction_lag_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            cleanup_delete: true,
            compact: false,
            delete_retention_ms: 86_400_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
        }
    }
}

#[derive(Debug, Error)]
pub enum LogError {
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    TooLarge { size: usize, max: usize },
    #[error("offset {offset} is out of range [{start}, {end}]")]
    OutOfRange { offset: i64, start: i64, end: i64 },
    #[error(transparent)]
    Segment(#[from] SegmentError),
    #[error(transparent)]
    Volume(#[from] crate::VolumeError),
    /// The log cleaner recorded a segment swap it could not finish: the segments in
    /// memory no longer match the files until the partition is reopened.
    #[error("a cleaner swap could not be finished ({0}); the partition must be reopened")]
    SwapIncomplete(String),
}

impl LogError {
    /// A write refused because the volume is full (ENOSPC, EDQUOT).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            LogError::Segment(SegmentError::Io { source, .. }) => crate::fsutil::is_out_of_space(source),
            LogError::Volume(crate::VolumeError::Io { source, .. }) => crate::fsutil::is_out_of_space(source),
            _ => false,
        }
    }
}

/// `log-start.json` in a partition directory: the log start offset when DeleteRecords
/// moved it past the base offset of the first segment (docs/segment-format.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogStartFile {
    pub version: u32,
    pub log_start_offset: i64,
}

crate::versioned!(LogStartFile);

pub const LOG_START_FILE: &str = "log-start.json";
pub const LOG_START_FORMAT_VERSION: u32 = 1;

impl LogStartFile {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(LOG_START_FILE)
    }

    /// Records `offset` as the log start of the partition in `dir` (atomically, fsynced).
    pub fn write(dir: &Path, offset: i64) -> Result<(), crate::VolumeError> {
        let path = Self::path(dir);
        let file = LogStartFile {
            version: LOG_START_FORMAT_VERSION,
            log_start_offset: offset,
        };
        crate::fsutil::write_json(&path, &file).map_err(|e| crate::VolumeError::io(&path, e))
    }

    /// The recorded log start of the partition in `dir`, None when none is recorded.
    pub fn read(dir: &Path) -> Result<Option<i64>, crate::VolumeError> {
        let path = Self::path(dir);
        match crate::error::read_versioned_json::<LogStartFile>(&path, "log start offset", LOG_START_FORMAT_VERSION) {
            Ok(f) if f.log_start_offset < 0 => Err(crate::VolumeError::Invalid {
                path,
                detail: format!("log start offset {} is negative", f.log_start_offset),
            }),
            Ok(f) => Ok(Some(f.log_start_offset)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Where one append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Log end offset after the append.
    pub next_offset: i64,
    /// Whether the append started a new segment.
    pub rolled: bool,
}

/// What recovery found and cut, for the log line the caller writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub path: PathBuf,
    pub valid_bytes: u64,
    pub cut_bytes: u64,
    pub reason: String,
}

/// Validates `records` (one produce request's data for one partition) completely
/// before anything is written: every batch's header and CRC32C, and its size.
/// Needs no lock: it only reads the request's bytes.
pub fn validate_records(records: &[u8], max_message_bytes: usize) -> Result<Vec<BatchHeader>, LogError> {
    let headers = batch::validate_all(records)?;
    if let Some(h) = headers.iter().find(|h| h.total_len() > max_message_bytes) {
        return Err(LogError::TooLarge {
            size: h.total_len(),
            max: max_message_bytes,
        });
    }
    Ok(headers)
}

pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<Segment>,
    /// The log start offset recorded in `log-start.json` (DeleteRecords), if any; the
    /// log starts at the larger of it and the first segment's base offset.
    recorded_start: i64,
    /// Set when the segments in memory may no longer match the files (a cleaner swap
    /// that could not be finished): reads and appends are refused until the partition
    /// is reopened.
    broken: Option<String>,
    /// Recovery findings, kept for the caller to log.
    pub truncations: Vec<Truncation>,
}

impl PartitionLog {
    /// Opens (creating if needed) the log in `dir`, recovering the active segment:
    /// every batch is CRC-checked and a corrupt or torn tail is truncated.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<PartitionLog, LogError> {
        crate::fsutil::create_dir_durable(dir).map_err(|e| SegmentError::io(dir, e))?;
        if let Some(done) = swap::finish_interrupted_swap(dir)? {
            let (topic, partition) = crate::layout::partition_ids(dir);
            tracing::warn!(topic, partition, dir = %dir.display(), "{done}");
        }
        let mut bases = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| SegmentError::io(dir, e))? {
            let entry = entry.map_err(|e| SegmentError::io(dir, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".log") {
                if stem.len() == 20 {
                    if let Ok(base) = stem.parse::<i64>() {
                        bases.push(base);
                    }
                }
            }
        }
        bases.sort_unstable();
        let mut segments = Vec::with_capacity(bases.len().max(1));
        let mut truncations = Vec::new();
        let count = bases.len();
        for (i, base) in bases.iter().copied().enumerate() {
            let next_base = if i + 1 == count { None } else { Some(bases[i + 1]) };
            let (seg, cut) = Segment::open(dir, base, config.index_interval_bytes, next_base, now_ms)?;
            if let Some(cut) = cut {
                truncations.push(cut);
            }
            segments.push(seg);
        }
        if segments.is_empty() {
            segments.push(Segment::create(dir, 0, config.index_interval_bytes, now_ms)?);
        }
        let mut recorded_start = LogStartFile::read(dir)?.unwrap_or(0);
        let end = segments.last().map_or(0, |s| s.next_offset());
        if recorded_start > end {
            // Records below it were deleted while they were not yet fsynced, and a
            // crash took the tail since: the log starts at its (recovered) end, and the
            // record says so at once (offsets from `end` on will be written again).
            let (topic, partition) = crate::layout::partition_ids(dir);
            tracing::warn!(
                topic,
                partition,
                recorded_start,
                log_end = end,
                "the recorded log start is past the recovered log end; the log starts at its end"
            );
            recorded_start = end;
            LogStartFile::write(dir, end)?;
        }
        Ok(PartitionLog {
            dir: dir.to_path_buf(),
            config,
            segments,
            recorded_start,
            broken: None,
            truncations,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Refuses every read and append from now on (see `broken`).
    pub(crate) fn set_broken(&mut self, why: &str) {
        self.broken = Some(why.to_string());
    }

    pub(crate) fn check_usable(&self) -> Result<(), LogError> {
        match &self.broken {
            Some(why) => Err(LogError::SwapIncomplete(why.clone())),
            None => Ok(()),
        }
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// First offset still in the log: what clients may read from (ListOffsets
    /// EARLIEST, Fetch's log start). Records below it may still lie in the first
    /// segment (DeleteRecords moves it to any offset), but are never served.
    pub fn log_start_offset(&self) -> i64 {
        self.recorded_start.max(self.segments[0].base_offset())
    }

    /// Base offset of the first segment: where the log's bytes begin, at or below
    /// [`Self::log_start_offset`] (replay of producer state starts here).
    pub fn first_segment_base(&self) -> i64 {
        self.segments[0].base_offset()
    }

    /// Moves the log start offset up to `offset` (DeleteRecords): recorded durably in
    /// `log-start.json` first, then every segment wholly below it is deleted (never
    /// the active one). A crash between the steps leaves segments the next call or
    /// retention deletes; they are never served again. An `offset` at or below the
    /// current start changes nothing. Returns the base offsets deleted.
    pub fn advance_start(&mut self, offset: i64) -> Result<Vec<i64>, LogError> {
        let end = self.log_end_offset();
        if offset > end {
            return Err(LogError::OutOfRange {
                offset,
                start: self.log_start_offset(),
                end,
            });
        }
        if offset > self.log_start_offset() {
            LogStartFile::write(&self.dir, offset)?;
            self.recorded_start = offset;
        }
        self.delete_segments_below_start()
    }

    /// Deletes the segments every record of which lies below the log start.
    fn delete_segments_below_start(&mut self) -> Result<Vec<i64>, LogError> {
        let mut deleted = Vec::new();
        while self.segments.len() > 1 && self.segments[1].base_offset() <= self.log_start_offset() {
            let seg = self.segments.remove(0);
            deleted.push(seg.base_offset());
            seg.delete()?;
        }
        Ok(deleted)
    }

    /// Offset the next appended record gets (the high watermark, with one replica).
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size()).sum()
    }

    fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has a segment")
    }

    /// Validates `records` against this log's `max.message.bytes`; see [`validate_records`].
    pub fn validate(&self, records: &[u8]) -> Result<Vec<BatchHeader>, LogError> {
        validate_records(records, self.config.max_message_bytes)
    }

    /// Appends already-validated batches: assigns base offsets (and the leader epoch)
    /// in place and writes the bytes as they are. Rolls first if needed.
    pub fn append(
        &mut self,
        records: &mut [u8],
        headers: &[BatchHeader],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.check_usable()?;
        let first = self.log_end_offset();
        let mut next = first;
        let mut pos = 0;
        for h in headers {
            let slice = &mut records[pos..pos + h.total_len()];
            batch::set_base_offset(slice, next);
            batch::set_partition_leader_epoch(slice, leader_epoch);
            next += h.last_offset_delta as i64 + 1;
            pos += h.total_len();
        }
        let rolled = self.should_roll(records.len() as u64, next - first, now_ms);
        if rolled {
            self.roll(now_ms)?;
        }
        let active = self.segments.last_mut().expect("a log always has a segment");
        active.append(records, headers, first)?;
        Ok(AppendInfo {
            base_offset: first,
            last_offset: next - 1,
            next_offset: next,
            rolled,
        })
    }

    /// Whether appending `incoming` bytes that take `offsets` offsets at `now_ms` rolls
    /// the active segment first (blocking file work: callers on an async runtime move
    /// off its workers).
    pub fn would_roll(&self, incoming: u64, offsets: i64, now_ms: i64) -> bool {
        self.should_roll(incoming, offsets, now_ms)
    }

    fn should_roll(&self, incoming: u64, offsets: i64, now_ms: i64) -> bool {
        let active = self.active();
        if active.size() == 0 {
            return false;
        }
        // The offset index holds offsets relative to the segment's base in 32 bits: a
        // segment never spans more than i32::MAX offsets past its base (Kafka's
        // canConvertToRelativeOffset), or its index entries would wrap and reads
        // would look up the wrong batch.
        if self.log_end_offset() + offsets - 1 - active.base_offset() > i32::MAX as i64 {
            return true;
        }
        // A compacted log rolls by max.compaction.lag.ms too, or records in the active
        // segment (never cleaned) would wait for segment.ms (Apache's maxSegmentMs).
        let roll_ms = if self.config.compact {
            self.config.segment_ms.min(self.config.max_compaction_lag_ms)
        } else {
            self.config.segment_ms
        };
        active.size() + incoming > self.config.segment_bytes || now_ms - active.created_ms() >= roll_ms
    }

    /// Closes the active segment (fsyncing it, so durability never depends on a file
    /// the group-commit flusher no longer sees) and starts a new one at the log end.
    /// A crash between the steps (failpoints `roll-after-seal`,
    /// `roll-after-new-segment`) leaves either the sealed segment as the last one or an
    /// empty last segment at the log end; both open as a valid log.
    ///
    /// The new segment is created by path at this writer's log end. A writer that may
    /// have lost the partition (a leader paused with its clock) must confirm it still
    /// leads around the roll, under the partition's `owner.gate` (the server's
    /// `Partition::while_led`): a deposed writer's segment would lie inside its
    /// successor's, and the next open would end the successor's segment at that base.
    pub fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        let base = self.log_end_offset();
        self.segments.last_mut().expect("a log always has a segment").seal()?;
        crate::failpoint::hit(crate::failpoint::ROLL_AFTER_SEAL);
        let seg = Segment::create(&self.dir, base, self.config.index_interval_bytes, now_ms)?;
        crate::failpoint::hit(crate::failpoint::ROLL_AFTER_NEW_SEGMENT);
        self.segments.push(seg);
        Ok(())
    }

    /// Starts a new active segment at the log end for a new leader that took the
    /// partition from one that did not let it go: the old leader, if it is only paused,
    /// may still append through the segment file it has open, and nothing it writes
    /// there is read (a sealed segment ends where its successor begins). An empty
    /// active segment is replaced by new files rather than rolled.
    pub fn start_fresh_segment(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.active().size() > 0 {
            return self.roll(now_ms);
        }
        let old = self.segments.pop().expect("a log always has a segment");
        let seg = old.replace_empty(now_ms)?;
        self.segments.push(seg);
        Ok(())
    }

    /// Newest batch timestamp of segment `i` (scanned once, then cached).
    pub fn segment_max_timestamp(&mut self, i: usize) -> Result<i64, LogError> {
        Ok(self.segments[i].max_timestamp()?)
    }

    /// Puts the log cleaner's new segments in place of the ones they replace (their
    /// files already swapped on disk, see `cleaner::install`).
    pub(crate) fn replace_cleaned(&mut self, groups: &[swap::SwapGroup], now_ms: i64) -> Result<(), LogError> {
        for g in groups {
            let first = self
                .segments
                .iter()
                .position(|s| s.base_offset() == g.new_base)
                .expect("install checked the replaced segments are present");
            let next_base = self.segments.get(first + g.replaces.len()).map(|s| s.base_offset());
            let (mut seg, cut) = Segment::open(
                &self.dir,
                g.new_base,
                self.config.index_interval_bytes,
                next_base,
                now_ms,
            )?;
            if let Some(cut) = cut {
                self.truncations.push(cut);
            }
            // The newest timestamp of what it replaced, if known: an upper bound of its
            // own (cleaning only removes), so retention and min.compaction.lag.ms stay
            // on the safe side without a scan under the partition lock.
            let replaced = &self.segments[first..first + g.replaces.len()];
            if let Some(newest) = replaced
                .iter()
                .map(|s| s.cached_max_timestamp())
                .collect::<Option<Vec<i64>>>()
                .and_then(|v| v.into_iter().max())
            {
                seg.set_max_timestamp(newest);
            }
            self.segments.splice(first..first + g.replaces.len(), [seg]);
        }
        Ok(())
    }

    /// Base offset of the segment that holds (or, past the end, would hold) `offset`.
    pub fn segment_base_for(&self, offset: i64) -> i64 {
        let i = match self.segments.binary_search_by_key(&offset, |s| s.base_offset()) {
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        };
        self.segments[i].base_offset()
    }

    /// The header of the batch whose last offset is `offset - 1`, the batch a state
    /// "covering everything below `offset`" ends with. None when `offset` is at or
    /// below the log start or past the log end, or when `offset - 1` lies inside a
    /// batch (`offset` is not a batch boundary).
    pub fn batch_ending_at(&self, offset: i64) -> Result<Option<BatchHeader>, LogError> {
        if offset <= self.first_segment_base() || offset > self.log_end_offset() {
            return Ok(None);
        }
        let last = offset - 1;
        let i = match self.segments.binary_search_by_key(&last, |s| s.base_offset()) {
            Ok(i) => i,
            Err(i) => i - 1, // i > 0: last >= the log start
        };
        Ok(self.segments[i]
            .batch_holding(last)?
            .filter(|h| h.last_offset() == last))
    }

    /// The active segment's file and the log end offset it covers, for a flusher that
    /// fsyncs outside the partition lock.
    pub fn sync_handle(&self) -> Result<(Arc<LogFile>, i64), LogError> {
        Ok((self.active().file()?, self.log_end_offset()))
    }

    /// Where the log's durable end will be once the active segment's file is fsynced:
    /// that segment's base offset and size now (see [`Self::cut_back_to_durable`]).
    pub fn sync_point(&self) -> (i64, u64) {
        (self.active().base_offset(), self.active().size())
    }

    /// After a failed fsync: cuts the active segment back to `durable`, the
    /// [`Self::sync_point`] of the last fsync that succeeded (to nothing if the active
    /// segment was begun since: every segment before it was sealed, with an fsync,
    /// when the log rolled). What lies past it was never made
    /// durable here and may be readable all the same (`Segment::cut_back_to`). The log
    /// is then fit only to be opened again from its files.
    /// Ok(false): nothing to cut.
    pub fn cut_back_to_durable(&mut self, durable: (i64, u64)) -> Result<bool, LogError> {
        let active = self.segments.last_mut().expect("a log always has a segment");
        if active.is_sealed() {
            // A roll sealed it, with an fsync that succeeded (and no fsync of the file
            // failed before: `LogFile::sync` makes a failure sticky), and then failed
            // to create the next segment: every byte of it is durable, whatever
            // `durable` says.
            return Ok(false);
        }
        let keep = if active.base_offset() == durable.0 {
            durable.1
        } else {
            0
        };
        let cut = keep < active.size();
        active.cut_back_to(keep)?;
        Ok(cut)
    }

    /// Reads whole batches starting with the one that holds `offset`, up to `max_bytes`
    /// (but at least one whole batch when `min_one`, as KIP-74 requires of the first
    /// partition of a fetch), never past `max_offset` (exclusive; the high watermark
    /// or last stable offset).
    pub fn read(&self, offset: i64, max_bytes: usize, max_offset: i64, min_one: bool) -> Result<Bytes, LogError> {
        self.check_usable()?;
        let start = self.log_start_offset();
        let end = self.log_end_offset();
        if offset < start || offset > end {
            return Err(LogError::OutOfRange { offset, start, end });
        }
        if offset >= max_offset {
            return Ok(Bytes::new());
        }
        self.read_segments(offset, max_bytes, max_offset, min_one)
    }

    /// [`Self::read`] of what the segments hold, below the log start too (the batches
    /// a DeleteRecords put out of clients' reach stay in their segment until it is
    /// deleted whole): for recovery, which replays producer state from the segment's
    /// first byte. Empty at or past the log end.
    pub fn read_stored(&self, offset: i64, max_bytes: usize) -> Result<Bytes, LogError> {
        self.check_usable()?;
        if offset < self.first_segment_base() || offset >= self.log_end_offset() {
            return Ok(Bytes::new());
        }
        self.read_segments(offset, max_bytes, i64::MAX, true)
    }

    fn read_segments(&self, offset: i64, max_bytes: usize, max_offset: i64, min_one: bool) -> Result<Bytes, LogError> {
        let idx = match self.segments.binary_search_by_key(&offset, |s| s.base_offset()) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        // A segment ends before `offset` when the offset falls past its last batch (a
        // gap compaction left at its end): the batch holding it is in a later segment.
        // The first segment that holds it answers, even with nothing (its batch does
        // not fit); a later segment's batches would skip the records in between
        // (`a_batch_too_big_for_what_is_left_is_never_skipped_for_the_next_segments`).
        for seg in &self.segments[idx..] {
            if let Some(data) = seg.read(offset, max_bytes, max_offset, min_one)? {
                return Ok(data);
            }
        }
        Ok(Bytes::new())
    }

    /// First offset whose batch has a timestamp >= `ts` (batch granularity, using the
    /// batch's max timestamp), or None when every record is older.
    /// Never below the log start.
    pub fn offset_for_timestamp(&mut self, ts: i64) -> Result<Option<(i64, i64)>, LogError> {
        let start = self.log_start_offset();
        for seg in &mut self.segments {
            if let Some((offset, found_ts)) = seg.find_timestamp(ts, start)? {
                // A batch holding the log start is answered with the log start.
                return Ok(Some((offset.max(start), found_ts)));
            }
        }
        Ok(None)
    }

    /// (offset, timestamp) of the first record batch (never a control batch) carrying
    /// the largest timestamp at or past the log start (ListOffsets' -3, KIP-734; to the
    /// batch, answered with its base offset, or the log start for the batch holding
    /// it). Segments are visited by their newest timestamp (kept in memory, each
    /// sealed segment scanned once for it), highest first, and only while one could
    /// still hold a larger timestamp than found: that figure is an upper bound (it
    /// counts markers, and records the cleaner removed), so a segment is scanned to
    /// confirm it. Before, every lookup read every batch header of the partition under
    /// its lock.
    pub fn max_timestamp_offset(&mut self) -> Result<Option<(i64, i64)>, LogError> {
        let start = self.log_start_offset();
        let mut order = Vec::with_capacity(self.segments.len());
        for (i, seg) in self.segments.iter_mut().enumerate() {
            order.push((seg.max_timestamp()?, i));
        }
        // Highest bound first; among equal bounds the earlier segment, whose batch
        // comes first in the log.
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        // (timestamp, segment, offset)
        let mut best: Option<(i64, usize, i64)> = None;
        for (bound, i) in order {
            if let Some((ts, seg, _)) = best {
                if bound < ts {
                    break;
                }
                // Equal at most, and later in the log: it cannot win. A larger bound
                // may be reached or not (the bound counts markers and records below
                // the log start or cleaned away): scanned.
                if bound == ts && i > seg {
                    continue;
                }
            }
            let mut found: Option<(i64, i64)> = None;
            self.segments[i].for_each_header(|_, h| {
                if !h.is_control() && h.last_offset() >= start && found.is_none_or(|(_, t)| h.max_timestamp > t) {
                    found = Some((h.base_offset.max(start), h.max_timestamp));
                }
                true
            })?;
            if let Some((offset, ts)) = found {
                if best.is_none_or(|(b, seg, _)| ts > b || (ts == b && i < seg)) {
                    best = Some((ts, i, offset));
                }
            }
        }
        Ok(best.map(|(ts, _, offset)| (offset, ts)))
    }

    /// Deletes whole segments past `retention.ms` / `retention.bytes`, and those wholly
    /// below a log start DeleteRecords moved; never the active one, nor one holding a
    /// record at or past `high_watermark` (the offset readers are capped at), as Apache
    /// deletes a segment only once the high watermark reached the next one's base:
    /// records appended with acks=0/1 wait in sealed segments for the next flush, and
    /// deleting them put the log start past the high watermark (a consumer at the
    /// latest offset told OFFSET_OUT_OF_RANGE, again and again, until the flush).
    /// Returns the base offsets deleted.
    pub fn enforce_retention(&mut self, now_ms: i64, high_watermark: i64) -> Result<Vec<i64>, LogError> {
        let mut deleted = self.delete_segments_below_start()?;
        if !self.config.cleanup_delete {
            return Ok(deleted);
        }
        let mut total = self.size_bytes() as i64;
        while self.segments.len() > 1 && self.segments[1].base_offset() <= high_watermark {
            let first = &mut self.segments[0];
            let by_size =
                self.config.retention_bytes >= 0 && total - first.size() as i64 >= self.config.retention_bytes;
            let by_time = self.config.retention_ms >= 0 && {
                let newest = match first.max_timestamp()? {
                    // No batch timestamp: the file's age, as Apache's largestTimestamp.
                    ts if ts < 0 => first.modified_ms()?,
                    ts => ts,
                };
                now_ms - newest > self.config.retention_ms
            };
            if !(by_size || by_time) {
                break;
            }
            let seg = self.segments.remove(0);
            total -= seg.size() as i64;
            deleted.push(seg.base_offset());
            seg.delete()?;
        }
        Ok(deleted)
    }

    /// Every batch header from the batch holding `from` to the log end, in order.
    pub fn for_each_header_from(&self, from: i64, mut f: impl FnMut(&BatchHeader)) -> Result<(), LogError> {
        let first = match self.segments.binary_search_by_key(&from, |s| s.base_offset()) {
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        };
        for seg in &self.segments[first..] {
            seg.for_each_header(|_, h| {
                if h.last_offset() >= from {
                    f(h);
                }
                true
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
