//! The log cleaner (docs/compaction.md): for topics whose `cleanup.policy` includes
//! `compact`, keeps the latest record of every key, with Apache Kafka's semantics.
//!
//! A pass works in three steps, so that produce and fetch are held up only by the
//! last one:
//! 1. [`plan`] and `PartitionState::clean_input`, under the partition lock: which sealed
//!    segments may be cleaned (below the active segment, the last stable offset and
//!    `min.compaction.lag.ms`), and the facts the pass needs (aborted transactions,
//!    each live producer's last batch, the tombstone delete horizon).
//! 2. [`clean`], without the lock: an offset map (key hash -> latest offset, at most
//!    `log.cleaner.dedupe.buffer.size` bytes) over the dirty segments, then every
//!    segment from the log start to the end of the map is rewritten, in groups of at
//!    most `segment.bytes`, into `*.cleaned` files beside the log.
//! 3. [`install`], under the lock: the swap is recorded in `cleaning-swap.json`
//!    (the commit point), the old segments are deleted and the cleaned files renamed
//!    into place, and the record removed. A crash before the record leaves the old
//!    segments (the `*.cleaned` files are deleted at the next open); after it, the
//!    next open finishes the swap ([`finish_interrupted_swap`]).
//!
//! What a pass keeps of each batch:
//! - a data batch of an aborted transaction: nothing;
//! - a record whose key has a later record in the map: nothing;
//! - a tombstone (null value) below the delete horizon: nothing;
//! - a transaction marker below the delete horizon once no data of its transaction
//!   remains before it: nothing;
//! - the last batch of every producer the partition still tracks: the batch itself,
//!   emptied of the records the rules above remove (an empty batch keeps its header),
//!   so the producer's sequence and epoch survive a rebuild of the producer state from
//!   the log;
//! - everything else, byte for byte (a batch that lost records is rewritten with the
//!   same base offset, last offset delta and codec).
//!
//! Offsets never change: a cleaned log has gaps, and every client reads across them.
//!
//! Why one file of ~900 lines: the three steps share the record walk and the rules
//! above (what a pass keeps), which must read as one; the crash-safe swap they end in
//! is the log's (`log::swap`), and the tests are in `cleaner/tests.rs`.

use crate::batch::{self, BatchHeader, HEADER_LEN};
use crate::error::read_versioned_json;
use crate::fsutil::{sync_dir, write_json};
use crate::log::compression::{compress, decompress, Codec};
use crate::log::scan::{BatchScanner, Scanned};
use crate::log::swap::{apply_swap, cleaned_path, seg_path, SWAP_FORMAT_VERSION};
pub use crate::log::swap::{finish_interrupted_swap, remove_cleaned_files, SwapGroup, SwapManifest, SWAP_FILE};
use crate::log::txn_index::{txn_index_entry, AbortedTxn};
use crate::log::{LogConfig, LogError, PartitionLog};
use crate::VolumeError;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const CLEANER_FILE: &str = "cleaner.json";
pub const CLEANER_FORMAT_VERSION: u32 = 1;
/// Bytes of the offset map per entry, to size it from `log.cleaner.dedupe.buffer.size`:
/// 25 per bucket (a 128-bit key hash, an offset, a control byte); buckets are a power
/// of two at most 7/8 full, and while the table grows the old one (n buckets) and the
/// new (2n) coexist, so at the worst moment 7n/8 entries take 75n bytes. At 96 bytes
/// per entry the map never exceeds the buffer, and it grows only as keys come.
pub const MAP_BYTES_PER_ENTRY: usize = 96;
/// The most a compressed batch may expand to when the cleaner reads it; a batch that
/// would expand further is kept whole.
const MAX_DECOMPRESSED_BATCH: usize = 256 << 20;
/// Passes remembered for the delete horizon.
const MAX_PASSES_KEPT: usize = 64;

/// `cleaner.json`: where cleaning reached and what the last pass did (kaasctl shows it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CleanerState {
    pub version: u32,
    /// Offsets below this are clean (each key at most once); above it, dirty.
    pub clean_offset: i64,
    /// (clean offset reached, when) of recent passes: a tombstone or marker below the
    /// clean offset of a pass at least `delete.retention.ms` old may go.
    #[serde(default)]
    pub passes: Vec<CleanPass>,
    #[serde(default)]
    pub last: Option<CleanReport>,
    /// Why the last attempt failed, if it did (cleared by the next success).
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub total_passes: u64,
}

crate::versioned!(CleanerState);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanPass {
    pub clean_offset: i64,
    pub cleaned_ms: i64,
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CleanReport {
    pub started_ms: i64,
    pub finished_ms: i64,
    /// The dirty range cleaned: [from, to).
    pub dirty_from: i64,
    pub dirty_to: i64,
    pub segments_before: usize,
    pub segments_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_read: u64,
    pub records_removed: u64,
    pub tombstones_removed: u64,
    pub aborted_batches_removed: u64,
    pub markers_removed: u64,
    /// Batches kept whole because their records could not be read (an unknown codec,
    /// or expanding past 256 MiB).
    pub unreadable_batches_kept: u64,
    pub map_entries: usize,
    /// Tombstones and markers kept only because they are not yet past the delete
    /// horizon: a later pass removes them even if nothing new is written.
    #[serde(default)]
    pub deletes_pending: u64,
    /// The delete horizon the pass used (offsets below it could lose tombstones).
    #[serde(default)]
    pub delete_horizon: i64,
}

impl CleanerState {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(CLEANER_FILE)
    }

    /// The partition's cleaner state; None before its first pass.
    pub fn read(dir: &Path) -> Result<Option<CleanerState>, VolumeError> {
        match read_versioned_json(&Self::path(dir), "cleaner state", CLEANER_FORMAT_VERSION) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<(), VolumeError> {
        let path = Self::path(dir);
        write_json(&path, self).map_err(|e| VolumeError::io(&path, e))
    }

    /// Tombstones and markers below this offset may be removed: cleaning reached it at
    /// least `delete_retention_ms` ago.
    pub fn delete_horizon(&self, now_ms: i64, delete_retention_ms: i64) -> i64 {
        self.passes
            .iter()
            .filter(|p| now_ms.saturating_sub(p.cleaned_ms) >= delete_retention_ms)
            .map(|p| p.clean_offset)
            .max()
            .unwrap_or(i64::MIN)
    }

    /// Whether a pass is due for deletes alone: the last pass kept tombstones or
    /// markers that were not yet past its delete horizon, and the horizon has moved.
    pub fn deletes_due(&self, now_ms: i64, delete_retention_ms: i64) -> bool {
        self.last.as_ref().is_some_and(|l| {
            l.deletes_pending > 0 && self.delete_horizon(now_ms, delete_retention_ms) > l.delete_horizon
        })
    }

    /// Records a finished pass, under the partition's `delete.retention.ms`.
    pub fn record(&mut self, report: CleanReport, delete_retention_ms: i64) {
        self.version = CLEANER_FORMAT_VERSION;
        self.clean_offset = report.dirty_to;
        let now_ms = report.finished_ms;
        self.passes.push(CleanPass {
            clean_offset: report.dirty_to,
            cleaned_ms: report.finished_ms,
        });
        self.thin_passes(now_ms, delete_retention_ms);
        self.last = Some(report);
        self.last_error = None;
        self.total_passes += 1;
    }

    /// Keeps the pass history small without letting the delete horizon stall. Two
    /// passes are merged into one that claims the later time and the higher offset —
    /// cleaning is cumulative, so that offset was reached by that time, and a merged
    /// history never allows a delete the whole one would not. Merged: passes already
    /// `delete_retention_ms` old (only their newest counts), and passes in one slice
    /// of 1/32 of `delete_retention_ms` (the horizon then trails by at most a slice).
    /// Were the list still long (a retention far above the passes' spread), the
    /// oldest are merged. Dropping the oldest instead, as before, stalled the horizon
    /// for good on a partition cleaned more than 64 times per retention.
    fn thin_passes(&mut self, now_ms: i64, delete_retention_ms: i64) {
        let slice = (delete_retention_ms / 32).max(1);
        let old = |p: &CleanPass| now_ms.saturating_sub(p.cleaned_ms) >= delete_retention_ms;
        let mut kept: Vec<CleanPass> = Vec::with_capacity(self.passes.len());
        for p in self.passes.drain(..) {
            match kept.last_mut() {
                Some(last)
                    if (old(last) && old(&p))
                        || last.cleaned_ms.div_euclid(slice) == p.cleaned_ms.div_euclid(slice) =>
                {
                    *last = merged(*last, p);
                }
                _ => kept.push(p),
            }
        }
        while kept.len() > MAX_PASSES_KEPT {
            let first = kept.remove(0);
            kept[0] = merged(first, kept[0]);
        }
        self.passes = kept;
    }
}

/// One pass standing for two: the later time, the higher offset.
fn merged(a: CleanPass, b: CleanPass) -> CleanPass {
    CleanPass {
        clean_offset: a.clean_offset.max(b.clean_offset),
        cleaned_ms: a.cleaned_ms.max(b.cleaned_ms),
    }
}

/// What cleaning a partition would do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Segments from the first that may be cleaned (all sealed).
    pub cleanable: usize,
    /// Index of the first dirty one among them.
    pub first_dirty: usize,
    pub dirty_bytes: u64,
    pub total_bytes: u64,
    /// Past `max.compaction.lag.ms`, or tombstones and markers are now past their
    /// delete horizon: cleaned whatever the ratio.
    pub overdue: bool,
}

impl Plan {
    pub fn dirty_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / self.total_bytes as f64
        }
    }

    /// Whether the partition should be cleaned now.
    pub fn due(&self, config: &LogConfig) -> bool {
        self.overdue || (self.dirty_bytes > 0 && self.dirty_ratio() >= config.min_cleanable_dirty_ratio)
    }
}

/// Which segments of `log` may be cleaned: sealed ones wholly below the active
/// segment (the one holding the last record) and `lso` (open transactions are never cleaned), whose newest record is at
/// least `min.compaction.lag.ms` old. None when nothing is dirty.
pub fn plan(
    log: &mut PartitionLog,
    clean_offset: i64,
    deletes_due: bool,
    lso: i64,
    now_ms: i64,
) -> Result<Option<Plan>, LogError> {
    let config = log.config().clone();
    let n = log.segments().len();
    // The segment holding the log's last record is never cleaned, as Kafka's active
    // segment, which holds the log end, never is. A take-over starts a fresh, empty
    // active segment (`PartitionLog::start_fresh_segment`): cleaning the sealed one
    // before it could remove its last records and leave a gap at the log's end, which
    // no fetch gets past (nothing after it to answer with), and a consumer reading
    // to the end never arrives
    // (`a_reader_reaches_the_log_end_after_a_take_over_and_cleaning`).
    let last = (0..n).rev().find(|&i| log.segments()[i].size() > 0).unwrap_or(n - 1);
    let active_base = log.segments()[last].base_offset();
    let uncleanable = active_base.min(lso);
    let mut cleanable = 0;
    for i in 0..n - 1 {
        let next_base = log.segments()[i + 1].base_offset();
        if next_base > uncleanable {
            break;
        }
        // Only with a minimum lag (a sealed segment's newest timestamp may need a scan
        // of its headers, under the caller's lock; the cleaner's own segments inherit
        // theirs, see PartitionLog::replace_cleaned).
        if config.min_compaction_lag_ms > 0
            && now_ms.saturating_sub(log.segment_max_timestamp(i)?) < config.min_compaction_lag_ms
        {
            break;
        }
        cleanable = i + 1;
    }
    // The first segment holding dirty records: the one whose end (the next
    // segment's base) is past the clean offset.
    let first_dirty = (0..cleanable)
        .find(|&i| log.segments()[i + 1].base_offset() > clean_offset)
        .unwrap_or(cleanable);
    let segments = &log.segments()[..cleanable];
    if first_dirty == cleanable && !(deletes_due && cleanable > 0) {
        return Ok(None);
    }
    let dirty_bytes: u64 = segments[first_dirty..].iter().map(|s| s.size()).sum();
    let total_bytes: u64 = segments.iter().map(|s| s.size()).sum();
    let mut oldest_dirty = None;
    if let Some(first) = segments.get(first_dirty) {
        // The first dirty batch (a pass may have ended inside this segment).
        first.for_each_header(|_, h| {
            if h.last_offset() < clean_offset {
                return true;
            }
            oldest_dirty = Some(h.base_timestamp);
            false
        })?;
    }
    let overdue = oldest_dirty.is_some_and(|ts| ts >= 0 && now_ms.saturating_sub(ts) > config.max_compaction_lag_ms);
    Ok(Some(Plan {
        cleanable,
        first_dirty,
        dirty_bytes,
        total_bytes,
        overdue: overdue || deletes_due,
    }))
}

/// Everything a pass needs, taken under the partition lock.
#[derive(Debug, Clone)]
pub struct CleanInput {
    pub dir: PathBuf,
    /// (base offset, size) of the cleanable segments, from the first.
    pub segments: Vec<(i64, u64)>,
    /// Base offset of the segment after the last cleanable one.
    pub end_base: i64,
    /// Where cleaning reached (records from here on are dirty).
    pub clean_offset: i64,
    pub first_dirty: usize,
    pub aborted: Vec<AbortedTxn>,
    /// Producer id -> base offset of its last batch, for producers still tracked.
    pub last_batch_of: HashMap<i64, i64>,
    pub delete_horizon: i64,
    pub index_interval: u32,
    pub segment_bytes: u64,
    /// Marks this pass's temporary files (broker id and leader epoch), so no other
    /// writer's are taken for ours.
    pub tag: String,
}

/// Limits of a pass.
#[derive(Clone, Copy)]
pub struct CleanLimits<'a> {
    /// `log.cleaner.dedupe.buffer.size`: bytes for the offset map.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: read plus written; None = unthrottled.
    pub io_max_bytes_per_second: Option<f64>,
    /// Asked before each segment: true stops the pass (shutdown, lost lease), which
    /// then leaves the log as it was.
    pub stop: &'a (dyn Fn() -> bool + Sync),
}

/// Never stop.
pub fn never() -> bool {
    false
}

/// A finished pass's output.
#[derive(Debug, Clone)]
pub struct CleanOutput {
    pub tag: String,
    pub groups: Vec<SwapGroup>,
    /// Sizes of the replaced segments as planned (checked before the swap).
    pub replaced_sizes: Vec<(i64, u64)>,
    /// ABORT markers removed: their aborted transactions need no entry any more.
    pub removed_aborts: Vec<(i64, i64)>,
    pub report: CleanReport,
}

/// A 128-bit hash of a record key (two independent SipHash-1-3 halves): the map
/// holds hashes, not keys, so its size does not depend on key sizes.
fn key_hash(key: &[u8]) -> u128 {
    let half = |seed: u8| {
        let mut h = std::hash::DefaultHasher::new();
        seed.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    ((half(0) as u128) << 64) | half(1) as u128
}

/// One record of a batch's (decompressed) records section.
struct Rec {
    /// Its bytes, length prefix included.
    range: std::ops::Range<usize>,
    offset_delta: i64,
    key: Option<std::ops::Range<usize>>,
    tombstone: bool,
}

fn parse_records(buf: &[u8], count: i32) -> Option<Vec<Rec>> {
    let mut out = Vec::with_capacity(count.clamp(0, 100_000) as usize);
    let mut pos = 0usize;
    for _ in 0..count {
        let start = pos;
        let len = batch::read_varint(buf, &mut pos)?;
        let end = pos.checked_add(usize::try_from(len).ok()?)?;
        if end > buf.len() {
            return None;
        }
        let body = &buf[..end];
        pos += 1; // attributes
        batch::read_varint(body, &mut pos)?; // timestamp delta
        let offset_delta = batch::read_varint(body, &mut pos)?;
        let key_len = batch::read_varint(body, &mut pos)?;
        let key = if key_len < 0 {
            None
        } else {
            let k = pos..pos.checked_add(key_len as usize)?;
            if k.end > end {
                return None;
            }
            pos = k.end;
            Some(k)
        };
        let value_len = batch::read_varint(body, &mut pos)?;
        out.push(Rec {
            range: start..end,
            offset_delta,
            key,
            tombstone: value_len < 0,
        });
        pos = end;
    }
    (pos == buf.len()).then_some(out)
}

/// The records of a data batch, decompressed; None when they cannot be read.
fn batch_records(bytes: &[u8], h: &BatchHeader) -> Option<(Vec<u8>, Codec, Vec<Rec>)> {
    let (plain, codec) = decompress(h.compression(), &bytes[HEADER_LEN..], MAX_DECOMPRESSED_BATCH).ok()?;
    let recs = parse_records(&plain, h.record_count)?;
    Some((plain, codec, recs))
}

/// For produce to a compacted topic, which must refuse records without a key (the
/// cleaner could never tell which one is the latest): whether every record of the
/// batch `bytes` has a key. Err when its records cannot be read.
pub fn all_records_keyed(bytes: &[u8], h: &BatchHeader) -> Result<bool, String> {
    let (plain, _) = decompress(h.compression(), &bytes[HEADER_LEN..], MAX_PRODUCED_DECOMPRESSED)
        .map_err(|e| format!("the batch's records cannot be read: {e}"))?;
    let recs = parse_records(&plain, h.record_count)
        .ok_or_else(|| format!("the batch's {} records do not parse", h.record_count))?;
    Ok(recs.iter().all(|r| r.key.is_some()))
}

/// The most a batch produced to a compacted topic may expand to when its keys are
/// checked (a bound on what one request can make the broker allocate).
pub const MAX_PRODUCED_DECOMPRESSED: usize = 64 << 20;

/// A batch with only `kept` of its records: same base offset, last offset delta,
/// timestamps, producer fields and codec; new length, count and CRC.
fn rebuild_batch(orig: &[u8], codec: Codec, plain: &[u8], kept: &[&Rec]) -> std::io::Result<Vec<u8>> {
    let mut records = Vec::with_capacity(kept.iter().map(|r| r.range.len()).sum());
    for r in kept {
        records.extend_from_slice(&plain[r.range.clone()]);
    }
    let payload = compress(codec, &records)?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&orig[..HEADER_LEN]);
    out.extend_from_slice(&payload);
    let length = (out.len() - batch::LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[57..61].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// The error that ends a pass asked to stop.
fn stopped_error(dir: &Path) -> LogError {
    VolumeError::Invalid {
        path: dir.to_path_buf(),
        detail: "cleaning stopped (shutdown or lost leadership); the log is as it was".into(),
    }
    .into()
}

/// Keeps a pass's read and write rate under a limit.
struct Throttle<'a> {
    limit: Option<f64>,
    start: std::time::Instant,
    bytes: u64,
    calls: u64,
    stop: &'a (dyn Fn() -> bool + Sync),
    dir: &'a Path,
}

impl Throttle<'_> {
    /// Counts `n` bytes read or written, sleeping as the limit needs (in short steps,
    /// so a stop is noticed within a tenth of a second).
    fn account(&mut self, n: usize) -> Result<(), LogError> {
        self.bytes += n as u64;
        self.calls += 1;
        if self.calls.is_multiple_of(64) && (self.stop)() {
            return Err(stopped_error(self.dir));
        }
        if let Some(limit) = self.limit {
            let due = std::time::Duration::from_secs_f64(self.bytes as f64 / limit);
            while due > self.start.elapsed() {
                if (self.stop)() {
                    return Err(stopped_error(self.dir));
                }
                std::thread::sleep((due - self.start.elapsed()).min(std::time::Duration::from_millis(100)));
            }
        }
        Ok(())
    }
}

/// Visits every valid batch of a sealed segment (gaps allowed) until `f` returns false.
fn for_each_batch(
    dir: &Path,
    base: i64,
    size: u64,
    mut f: impl FnMut(&BatchHeader, &[u8]) -> Result<bool, LogError>,
) -> Result<(), LogError> {
    let path = seg_path(dir, base, "log");
    let file = crate::fsutil::open_regular(&path).map_err(|e| VolumeError::io(&path, e))?;
    let mut scanner = BatchScanner::new(&file, size, base).allowing_gaps();
    loop {
        match scanner.next_batch().map_err(|e| VolumeError::io(&path, e))? {
            Scanned::Batch { header, bytes, .. } => {
                if !f(&header, bytes)? {
                    return Ok(());
                }
            }
            Scanned::Bad { pos, reason } => {
                return Err(VolumeError::Invalid {
                    path,
                    detail: format!("not a valid segment at byte {pos}: {reason}"),
                }
                .into())
            }
            Scanned::End => return Ok(()),
        }
    }
}

fn is_aborted(aborted: &[AbortedTxn], h: &BatchHeader) -> bool {
    h.is_transactional()
        && !h.is_control()
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id && a.first_offset <= h.base_offset && h.base_offset <= a.last_offset
        })
}

/// Step 2 of a pass: builds the offset map over the dirty segments (as many whole
/// segments as the map holds) and writes the cleaned segments as `*.cleaned` files.
/// Reads only sealed segment files and writes only files named by `input.tag`.
pub fn clean(input: &CleanInput, limits: CleanLimits<'_>, now_ms: i64) -> Result<CleanOutput, LogError> {
    let dir = &input.dir;
    let mut throttle = Throttle {
        limit: limits.io_max_bytes_per_second.filter(|l| *l > 0.0 && l.is_finite()),
        start: std::time::Instant::now(),
        bytes: 0,
        calls: 0,
        stop: limits.stop,
        dir,
    };
    let stopped = || -> Result<(), LogError> {
        if (limits.stop)() {
            return Err(stopped_error(&input.dir));
        }
        Ok(())
    };
    let capacity = limits.dedupe_buffer_bytes / MAP_BYTES_PER_ENTRY;
    // The map covers the dirty records from the clean offset on, batch by batch, until
    // it is full: cleaning then reaches the end of the last batch mapped (which may
    // lie inside a segment; the next pass starts there, as Apache's cleaner does).
    let mut map: HashMap<u128, i64> = HashMap::new();
    // (A pass with nothing dirty never moves the clean offset back, even when the
    // cleanable range shrank since.)
    let mut dirty_to = input.end_base.max(input.clean_offset);
    let mut full = false;
    for &(base, size) in input.segments.iter().skip(input.first_dirty) {
        stopped()?;
        for_each_batch(dir, base, size, |h, bytes| {
            if h.last_offset() < input.clean_offset {
                return Ok(true);
            }
            throttle.account(bytes.len())?;
            if map.len() + h.record_count.max(0) as usize > capacity {
                if map.is_empty() {
                    return Err(VolumeError::Invalid {
                        path: seg_path(dir, base, "log"),
                        detail: format!(
                            "the batch at offset {} has {} records, more than the cleaner's offset map holds ({capacity}); raise log.cleaner.dedupe.buffer.size",
                            h.base_offset, h.record_count
                        ),
                    }
                    .into());
                }
                dirty_to = h.base_offset;
                full = true;
                return Ok(false);
            }
            if h.is_control() || is_aborted(&input.aborted, h) {
                return Ok(true);
            }
            if let Some((plain, _, recs)) = batch_records(bytes, h) {
                for r in &recs {
                    if let Some(k) = &r.key {
                        map.insert(key_hash(&plain[k.clone()]), h.base_offset + r.offset_delta);
                    }
                }
            }
            Ok(true)
        })?;
        if full {
            break;
        }
    }
    // The segments rewritten: every one holding an offset below where the map ends.
    let mapped_end = input
        .segments
        .iter()
        .position(|&(base, _)| base >= dirty_to)
        .unwrap_or(input.segments.len());

    // Groups of consecutive segments, each at most segment.bytes before cleaning.
    let mut groups: Vec<Vec<(i64, u64)>> = Vec::new();
    let mut current: Vec<(i64, u64)> = Vec::new();
    let mut current_bytes = 0u64;
    for (i, &(base, size)) in input.segments[..mapped_end].iter().enumerate() {
        // Index entries hold offsets relative to the group's base in 32 bits (as
        // Apache's groups, a group spans fewer than 2^31 offsets).
        let end = input.segments.get(i + 1).map_or(input.end_base, |s| s.0);
        let too_wide = current.first().is_some_and(|&(first, _)| end - first > i32::MAX as i64);
        if !current.is_empty() && (current_bytes + size > input.segment_bytes || too_wide) {
            groups.push(std::mem::take(&mut current));
            current_bytes = 0;
        }
        current.push((base, size));
        current_bytes += size;
    }
    if !current.is_empty() {
        groups.push(current);
    }

    let mut report = CleanReport {
        started_ms: now_ms,
        dirty_from: input
            .segments
            .get(input.first_dirty)
            .map_or(input.end_base, |s| s.0.max(input.clean_offset)),
        dirty_to,
        segments_before: mapped_end,
        map_entries: map.len(),
        delete_horizon: input.delete_horizon,
        ..Default::default()
    };
    let mut ongoing_committed: HashSet<i64> = HashSet::new();
    let mut aborted_kept: HashSet<i64> = HashSet::new();
    let mut removed_aborts = Vec::new();
    let mut out_groups = Vec::new();
    let written = (|| -> Result<(), LogError> {
        for group in &groups {
            let new_base = group[0].0;
            let log_tmp = cleaned_path(dir, new_base, "log", &input.tag);
            let io = |e| VolumeError::io(&log_tmp, e);
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&log_tmp)
                .map_err(io)?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            let mut pos = 0u64;
            let mut index: Vec<u8> = Vec::new();
            let mut since_index = u64::MAX;
            let mut txnindex: Vec<u8> = Vec::new();
            for &(base, size) in group {
                stopped()?;
                report.bytes_before += size;
                for_each_batch(dir, base, size, |h, bytes| {
                    throttle.account(bytes.len())?;
                    report.records_read += h.record_count.max(0) as u64;
                    let last_of_producer =
                        h.has_producer_id() && input.last_batch_of.get(&h.producer_id) == Some(&h.base_offset);
                    let keep: Option<std::borrow::Cow<'_, [u8]>> = if h.is_control() {
                        let commit = batch::control_marker_type(bytes);
                        let data_kept = if commit == Some(false) {
                            aborted_kept.remove(&h.producer_id)
                        } else {
                            ongoing_committed.remove(&h.producer_id)
                        };
                        let discard = !data_kept && h.base_offset < input.delete_horizon;
                        if !data_kept && !discard {
                            report.deletes_pending += 1;
                        }
                        if discard {
                            report.markers_removed += 1;
                            if commit == Some(false) {
                                removed_aborts.push((h.producer_id, h.base_offset));
                            }
                            None
                        } else {
                            if commit == Some(false) {
                                if let Some(a) = input
                                    .aborted
                                    .iter()
                                    .find(|a| a.producer_id == h.producer_id && a.last_offset == h.base_offset)
                                {
                                    // The last stable offset when the abort was written is not kept;
                                    // its marker offset stands in (nothing reads that field).
                                    txnindex.extend_from_slice(&txn_index_entry(a, a.last_offset));
                                }
                            }
                            Some(bytes.into())
                        }
                    } else if is_aborted(&input.aborted, h) {
                        report.records_removed += h.record_count.max(0) as u64;
                        if last_of_producer {
                            // Its producer's sequence and epoch must survive a rebuild of the
                            // producer state: the batch stays, emptied, and so does its marker.
                            aborted_kept.insert(h.producer_id);
                            Some(empty_batch(bytes).into())
                        } else {
                            report.aborted_batches_removed += 1;
                            None
                        }
                    } else {
                        match batch_records(bytes, h) {
                            None => {
                                report.unreadable_batches_kept += 1;
                                if h.is_transactional() {
                                    ongoing_committed.insert(h.producer_id);
                                }
                                Some(bytes.into())
                            }
                            Some((plain, codec, recs)) => {
                                let mut kept = Vec::with_capacity(recs.len());
                                for r in &recs {
                                    let offset = h.base_offset + r.offset_delta;
                                    // A record without a key (written before the topic was
                                    // compacted) is dropped, as Apache's cleaner does.
                                    let latest = match &r.key {
                                        None => false,
                                        Some(k) => map.get(&key_hash(&plain[k.clone()])).is_none_or(|m| offset >= *m),
                                    };
                                    if !latest {
                                        continue;
                                    }
                                    if r.tombstone {
                                        if offset < input.delete_horizon {
                                            report.tombstones_removed += 1;
                                            continue;
                                        }
                                        report.deletes_pending += 1;
                                    }
                                    kept.push(r);
                                }
                                report.records_removed += (recs.len() - kept.len()) as u64;
                                let retained = !kept.is_empty() || last_of_producer;
                                if retained && h.is_transactional() {
                                    ongoing_committed.insert(h.producer_id);
                                }
                                if kept.len() == recs.len() {
                                    Some(bytes.into())
                                } else if kept.is_empty() {
                                    last_of_producer.then(|| empty_batch(bytes).into())
                                } else {
                                    Some(rebuild_batch(bytes, codec, &plain, &kept).map_err(io)?.into())
                                }
                            }
                        }
                    };
                    if let Some(b) = keep {
                        if since_index >= input.index_interval as u64 {
                            index.extend_from_slice(&((h.base_offset - new_base) as u32).to_be_bytes());
                            index.extend_from_slice(&(pos as u32).to_be_bytes());
                            since_index = 0;
                        }
                        w.write_all(&b).map_err(io)?;
                        throttle.account(b.len())?;
                        pos += b.len() as u64;
                        since_index += b.len() as u64;
                    }
                    Ok(true)
                })?;
            }
            let file = w.into_inner().map_err(|e| io(e.into_error()))?;
            file.sync_all().map_err(io)?;
            report.bytes_after += pos;
            write_synced(&cleaned_path(dir, new_base, "index", &input.tag), &index)?;
            let has_txnindex = !txnindex.is_empty();
            if has_txnindex {
                write_synced(&cleaned_path(dir, new_base, "txnindex", &input.tag), &txnindex)?;
            }
            out_groups.push(SwapGroup {
                new_base,
                replaces: group.iter().map(|g| g.0).collect(),
                txnindex: has_txnindex,
            });
        }
        Ok(())
    })();
    if let Err(e) = written {
        remove_cleaned_files(dir, Some(&input.tag));
        return Err(e);
    }
    report.segments_after = out_groups.len();
    Ok(CleanOutput {
        tag: input.tag.clone(),
        groups: out_groups,
        replaced_sizes: input.segments[..mapped_end].to_vec(),
        removed_aborts,
        report,
    })
}

/// A batch's header alone: no records (uncompressed, so no reader has to decode an
/// empty compressed payload), same offsets, producer and sequence fields.
fn empty_batch(orig: &[u8]) -> Vec<u8> {
    let mut out = orig[..HEADER_LEN].to_vec();
    let length = (HEADER_LEN - batch::LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = i16::from_be_bytes([out[21], out[22]]) & !0x07;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[57..61].copy_from_slice(&0i32.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let io = |e| VolumeError::io(path, e);
    let mut f = OpenOptions::new().write(true).create_new(true).open(path).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    Ok(())
}

/// Step 3 of a pass, under the partition lock: checks the replaced segments are
/// still there as planned (retention, DeleteRecords or a take-over may have changed
/// the log meanwhile: then the pass is dropped), records the swap, applies it and
/// reopens the new segments. Returns false when the pass was dropped;
/// [`LogError::SwapIncomplete`] when the swap was recorded but could not be finished
/// (the caller must reopen the partition, whose open finishes it).
pub fn install(log: &mut PartitionLog, out: &CleanOutput, now_ms: i64) -> Result<bool, LogError> {
    let dir = log.dir().to_path_buf();
    let present: Vec<(i64, u64)> = log
        .segments()
        .iter()
        .take(out.replaced_sizes.len())
        .map(|s| (s.base_offset(), s.size()))
        .collect();
    if present != out.replaced_sizes || log.segments().len() <= out.replaced_sizes.len() {
        remove_cleaned_files(&dir, Some(&out.tag));
        return Ok(false);
    }
    let manifest = SwapManifest {
        version: SWAP_FORMAT_VERSION,
        tag: out.tag.clone(),
        groups: out.groups.clone(),
    };
    let path = dir.join(SWAP_FILE);
    // From the record's write on, a failure leaves it unknown whether the swap is
    // decided (the rename may have happened, its directory fsync not), and the
    // segments in memory may no longer describe the files: the partition must be
    // reopened (which finishes a recorded swap, or drops the cleaned files) before it
    // serves again. Until then its log refuses reads and appends.
    let incomplete = |log: &mut PartitionLog, e: VolumeError| {
        let why = e.to_string();
        log.set_broken(&why);
        LogError::SwapIncomplete(why)
    };
    if let Err(e) = write_json(&path, &manifest) {
        return Err(incomplete(log, VolumeError::io(&path, e)));
    }
    crate::failpoint::hit(crate::failpoint::CLEAN_AFTER_SWAP_RECORD);
    if let Err(e) = apply_swap(&dir, &manifest) {
        return Err(incomplete(log, e));
    }
    crate::failpoint::hit(crate::failpoint::CLEAN_AFTER_SWAP);
    if let Err(e) = log.replace_cleaned(&out.groups, now_ms) {
        return Err(incomplete(
            log,
            VolumeError::io(&dir, std::io::Error::other(e.to_string())),
        ));
    }
    if let Err(e) = fs::remove_file(&path)
        .map_err(|e| VolumeError::io(&path, e))
        .and_then(|()| sync_dir(&dir).map_err(|e| VolumeError::io(&dir, e)))
    {
        return Err(incomplete(log, e));
    }
    Ok(true)
}

/// A compacted partition as kaasctl shows it, read without writing anything.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionView {
    /// Offsets below this are clean.
    pub clean_offset: i64,
    /// Bytes of sealed segments at or past the clean offset, and of all sealed ones:
    /// their ratio is what `min.cleanable.dirty.ratio` is compared with (the broker
    /// also holds back segments past the last stable offset or younger than
    /// `min.compaction.lag.ms`).
    pub dirty_bytes: u64,
    pub sealed_bytes: u64,
    pub dirty_ratio: f64,
    pub state: Option<CleanerState>,
    /// A swap a crash interrupted: the next broker to open the partition finishes it.
    pub swap_pending: bool,
}

/// The cleaner's view of the partition in `dir`.
pub fn view(dir: &Path) -> Result<CompactionView, VolumeError> {
    let state = CleanerState::read(dir)?;
    let clean_offset = state.as_ref().map_or(i64::MIN, |s| s.clean_offset);
    let segments = crate::log::scan::segment_files(dir)?;
    let sealed = &segments[..segments.len().saturating_sub(1)];
    let sealed_bytes: u64 = sealed.iter().map(|s| s.size).sum();
    // Dirty: every sealed segment that ends past the clean offset (the broker's rule;
    // a pass may have ended inside one).
    let dirty_bytes: u64 = sealed
        .iter()
        .zip(&segments[1..])
        .filter(|(_, next)| next.base_offset > clean_offset)
        .map(|(s, _)| s.size)
        .sum();
    Ok(CompactionView {
        clean_offset: clean_offset.max(segments.first().map_or(0, |s| s.base_offset)),
        dirty_bytes,
        sealed_bytes,
        dirty_ratio: if sealed_bytes == 0 {
            0.0
        } else {
            dirty_bytes as f64 / sealed_bytes as f64
        },
        state,
        swap_pending: dir.join(SWAP_FILE).exists(),
    })
}

#[cfg(test)]
mod tests;
