//! One segment: `<base offset, 20 digits>.log` holding record batches back to back and
//! `<base offset>.index`, a sparse index of 8-byte entries (relative offset u32 BE,
//! byte position u32 BE), one entry per `index.interval.bytes` of log.

use super::scan::{BatchScanner, Scanned};
use super::Truncation;
use crate::batch::{self, BatchHeader, HEADER_LEN};
use crate::fsutil::open_volume_file;
use bytes::Bytes;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

pub const INDEX_ENTRY_LEN: usize = 8;

#[derive(Debug, Error)]
pub enum SegmentError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl SegmentError {
    pub fn io(path: &Path, source: io::Error) -> Self {
        SegmentError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A segment's log file, as appends, fsyncs and reads share it. Its fsyncs go through
/// [`LogFile::sync`], which makes a failure sticky: Linux reports a writeback error
/// once per open file, so after one fsync failed, the next fsync of the same file
/// (a roll's seal, the next waiter's) returns Ok over pages the disk never got. Here
/// every later fsync of the file fails too, so nothing it held is ever taken for
/// durable (the partition is opened again from its files instead).
const EARLIER_FAILURE: &str = "an earlier fsync of this file failed: what was written to it may never reach the disk";

#[derive(Debug)]
pub struct LogFile {
    file: File,
    /// An fsync of this file failed; held through each fsync, so none can slip
    /// between a failure and its record.
    failed: std::sync::Mutex<bool>,
}

impl LogFile {
    fn new(file: File) -> Arc<LogFile> {
        Arc::new(LogFile {
            file,
            failed: std::sync::Mutex::new(false),
        })
    }

    /// Whether `e` is [`Self::sync`]'s refusal after an earlier failure (already
    /// reported when it happened).
    pub fn is_earlier_failure(e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::Other && e.get_ref().is_some_and(|inner| inner.to_string() == EARLIER_FAILURE)
    }

    /// fdatasync (`all`: fsync, metadata too), failing for good once one failed.
    pub fn sync(&self, all: bool) -> io::Result<()> {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if *failed {
            return Err(io::Error::other(EARLIER_FAILURE));
        }
        let synced = crate::failpoint::check(crate::failpoint::LOG_FSYNC).and_then(|()| {
            if all {
                self.file.sync_all()
            } else {
                self.file.sync_data()
            }
        });
        synced.inspect_err(|_| *failed = true)
    }
}

// No `Deref` to the `File`: an fsync that bypassed [`LogFile::sync`] would bring the
// once-reported error back. Reads and writes inside this module use `.file`.
impl std::os::fd::AsFd for LogFile {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    index_path: PathBuf,
    /// The log file, held open while the segment takes appends. None once sealed:
    /// reads open it by path, so a partition's open files do not grow with its
    /// segments (a topic with a tiny `segment.ms` cannot exhaust descriptors).
    file: Option<Arc<LogFile>>,
    /// The index file, only while the segment takes appends (a sealed segment's index
    /// is in memory).
    index_file: Option<File>,
    size: u64,
    next_offset: i64,
    index: Vec<(u32, u32)>,
    index_interval: u32,
    bytes_since_index: u32,
    created_ms: i64,
    /// Newest batch max timestamp; None until computed (lazily for sealed segments).
    max_timestamp: Option<i64>,
    /// A failed append left bytes past `size` (or index entries past `index`) that
    /// could not be cut off then: the next append cuts them first, or fails too.
    torn_tail: bool,
    /// (device, inode) of the log file this segment's size and index describe: a
    /// sealed segment's file is opened by path for each read, and a file renamed over
    /// it by another process (a successor's cleaner) is refused, never read with this
    /// index.
    identity: (u64, u64),
}

#[cfg(test)]
thread_local! {
    /// Segment scans (`for_each_header`) on this thread: tests of what a lookup costs.
    pub(crate) static SCANS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// (device, inode) of an open file.
fn file_identity(file: &File) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// A segment file's name: its base offset as 20 digits, then `ext`.
pub(crate) fn file_name(base: i64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

/// Opens (creating if missing; emptied when `truncate`) a segment's offset index: never
/// through a symlink, and only a regular file.
fn open_index(path: &Path, truncate: bool) -> Result<File, SegmentError> {
    open_volume_file(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate),
        path,
    )
    .map_err(|e| SegmentError::io(path, e))
}

impl Segment {
    pub fn create(dir: &Path, base: i64, index_interval: u32, now_ms: i64) -> Result<Segment, SegmentError> {
        let log_path = dir.join(file_name(base, "log"));
        let index_path = dir.join(file_name(base, "index"));
        // Never over an existing segment: a deposed leader rolling late must fail
        // here, not write into (and truncate the index of) its successor's segment.
        let file = open_volume_file(OpenOptions::new().read(true).append(true).create_new(true), &log_path)
            .map_err(|e| SegmentError::io(&log_path, e))?;
        let index_file = open_index(&index_path, true).and_then(|f| {
            crate::fsutil::sync_dir(dir).map_err(|e| SegmentError::io(dir, e))?;
            Ok(f)
        });
        let identity = file_identity(&file).map_err(|e| SegmentError::io(&log_path, e))?;
        let index_file = match index_file {
            Ok(f) => f,
            Err(e) => {
                // The log file is ours and empty: removed, so a later roll (the disk has
                // room again) does not fail on it with "file exists" — but only if the
                // name still is our file (a new leader may have replaced it meanwhile).
                if crate::fsutil::same_file(&file, &log_path).unwrap_or(false) {
                    let _ = fs::remove_file(&log_path);
                }
                return Err(e);
            }
        };
        Ok(Segment {
            base_offset: base,
            log_path,
            index_path,
            file: Some(LogFile::new(file)),
            index_file: Some(index_file),
            size: 0,
            next_offset: base,
            index: Vec::new(),
            index_interval,
            bytes_since_index: 0,
            created_ms: now_ms,
            max_timestamp: Some(-1),
            torn_tail: false,
            identity,
        })
    }

    /// Opens an existing segment. The active (last) one is fully scanned: every batch's
    /// CRC is checked, offsets must follow on, and anything after the last good batch is
    /// truncated. Sealed segments trust their index unless it is unusable; `next_base`
    /// is the base offset of the segment after a sealed one, and batches at or past it
    /// are cut off (what a writer that lost the partition may have appended to a
    /// segment its successor had already closed: docs/cluster.md).
    pub fn open(
        dir: &Path,
        base: i64,
        index_interval: u32,
        next_base: Option<i64>,
        now_ms: i64,
    ) -> Result<(Segment, Option<Truncation>), SegmentError> {
        let active = next_base.is_none();
        let log_path = dir.join(file_name(base, "log"));
        let index_path = dir.join(file_name(base, "index"));
        let file = open_volume_file(OpenOptions::new().read(true).append(true), &log_path)
            .map_err(|e| SegmentError::io(&log_path, e))?;
        let meta = file.metadata().map_err(|e| SegmentError::io(&log_path, e))?;
        let index_file = open_index(&index_path, false)?;
        let created_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
            .unwrap_or(now_ms);
        let mut seg = Segment {
            base_offset: base,
            log_path,
            index_path,
            file: Some(LogFile::new(file)),
            index_file: Some(index_file),
            size: meta.len(),
            next_offset: base,
            index: Vec::new(),
            index_interval,
            bytes_since_index: 0,
            created_ms,
            max_timestamp: None,
            torn_tail: false,
            identity: {
                use std::os::unix::fs::MetadataExt;
                (meta.dev(), meta.ino())
            },
        };
        let cut = if active {
            seg.recover(None)?
        } else {
            let mut cut = None;
            if !seg.load_index()? {
                cut = seg.recover(next_base)?;
            }
            seg.next_offset = seg.scan_last_offset()?;
            if next_base.is_some_and(|next| seg.next_offset > next) {
                cut = seg.recover(next_base)?;
            }
            cut
        };
        if active {
            // The active segment's age is its first batch's: the file's modification
            // time is its last write, which for a partition in use is about the
            // restart, so every restart would put off `segment.ms` (and retention with
            // it) again. Apache's rolling time is the first batch's timestamp too;
            // a timestamp past the last write (a producer's clock ahead) is not
            // believed.
            let mut first = None;
            seg.for_each_header(|_, h| {
                first = Some(h.max_timestamp);
                false
            })?;
            if let Some(ts) = first.filter(|ts| *ts >= 0) {
                seg.created_ms = seg.created_ms.min(ts);
            }
        } else {
            seg.close_files();
        }
        Ok((seg, cut))
    }

    /// Lets go of the open files of a segment that takes no more appends.
    fn close_files(&mut self) {
        self.file = None;
        self.index_file = None;
    }

    /// The log file for reading: the open one, or (sealed) opened now, read-only.
    fn reader(&self) -> Result<Arc<LogFile>, SegmentError> {
        match &self.file {
            Some(f) => Ok(f.clone()),
            None => {
                let file =
                    crate::fsutil::open_regular(&self.log_path).map_err(|e| SegmentError::io(&self.log_path, e))?;
                if file_identity(&file).map_err(|e| SegmentError::io(&self.log_path, e))? != self.identity {
                    return Err(SegmentError::io(
                        &self.log_path,
                        io::Error::other(
                            "the segment file was replaced since it was opened (rewritten by another broker, \
                             which leads the partition now): not read with this broker's stale index",
                        ),
                    ));
                }
                Ok(LogFile::new(file))
            }
        }
    }

    /// The log file for writing: only a segment that still takes appends has one.
    fn writer(&self) -> Result<&Arc<LogFile>, SegmentError> {
        self.file.as_ref().ok_or_else(|| {
            SegmentError::io(
                &self.log_path,
                io::Error::other("the segment is sealed and takes no more writes"),
            )
        })
    }

    /// The index file for writing (reopened if a sealed segment's index is rewritten).
    fn index_writer(&mut self) -> Result<&File, SegmentError> {
        if self.index_file.is_none() {
            self.index_file = Some(open_index(&self.index_path, false)?);
        }
        Ok(self.index_file.as_ref().expect("just opened"))
    }

    /// Scans every batch, rebuilding the index; truncates at the first bad batch, or at
    /// the first batch at or past `limit` (the next segment's base offset).
    fn recover(&mut self, limit: Option<i64>) -> Result<Option<Truncation>, SegmentError> {
        let mut index = Vec::new();
        let mut since_index = 0u32;
        let mut max_ts = -1;
        let mut reason = None;
        let mut stray_at: Option<(u64, i64)> = None;
        let file = self.reader()?;
        let mut scanner = BatchScanner::new(&file.file, self.size, self.base_offset);
        if limit.is_some() {
            // A sealed segment may have been rewritten by the log cleaner.
            scanner = scanner.allowing_gaps();
        }
        loop {
            match scanner.next_batch().map_err(|e| SegmentError::io(&self.log_path, e))? {
                Scanned::Batch { pos, header, .. } => {
                    if limit.is_some_and(|l| header.base_offset >= l) {
                        reason = Some(format!(
                            "batch at offset {} belongs past this segment's successor (base {}): written by a leader that had lost the partition",
                            header.base_offset,
                            limit.unwrap_or_default()
                        ));
                        stray_at = Some((pos, header.base_offset));
                        break;
                    }
                    if index.is_empty() || since_index >= self.index_interval {
                        index.push(((header.base_offset - self.base_offset) as u32, pos as u32));
                        since_index = 0;
                    }
                    since_index += header.total_len() as u32;
                    max_ts = max_ts.max(header.max_timestamp);
                }
                Scanned::Bad { reason: r, .. } => {
                    reason = Some(r);
                    break;
                }
                Scanned::End => break,
            }
        }
        let (pos, expected) = match stray_at {
            Some((pos, offset)) => (pos, offset),
            None => (scanner.position(), scanner.next_offset()),
        };
        let cut = if pos < self.size {
            let cut = Truncation {
                path: self.log_path.clone(),
                valid_bytes: pos,
                cut_bytes: self.size - pos,
                reason: reason.unwrap_or_else(|| "trailing bytes".into()),
            };
            let f = self.writer()?;
            f.file
                .set_len(pos)
                .and_then(|_| f.sync(true))
                .map_err(|e| SegmentError::io(&self.log_path, e))?;
            self.size = pos;
            Some(cut)
        } else {
            None
        };
        self.next_offset = expected;
        self.index = index;
        self.bytes_since_index = since_index;
        self.max_timestamp = Some(max_ts);
        self.rewrite_index()?;
        Ok(cut)
    }

    /// Loads the index file; false when it is missing, ragged or inconsistent.
    fn load_index(&mut self) -> Result<bool, SegmentError> {
        let bytes = crate::fsutil::read_capped(&self.index_path, crate::fsutil::MAX_STATE_FILE_BYTES)
            .map_err(|e| SegmentError::io(&self.index_path, e))?;
        if bytes.is_empty() && self.size > 0 || bytes.len() % INDEX_ENTRY_LEN != 0 {
            return Ok(false);
        }
        let mut index = Vec::with_capacity(bytes.len() / INDEX_ENTRY_LEN);
        for chunk in bytes.chunks_exact(INDEX_ENTRY_LEN) {
            let rel = u32::from_be_bytes(chunk[0..4].try_into().expect("4"));
            let pos = u32::from_be_bytes(chunk[4..8].try_into().expect("4"));
            if let Some(&(prev_rel, prev_pos)) = index.last() {
                if rel <= prev_rel || pos <= prev_pos {
                    return Ok(false);
                }
            }
            if pos as u64 >= self.size {
                return Ok(false);
            }
            index.push((rel, pos));
        }
        self.index = index;
        Ok(true)
    }

    /// Finds the log end of a sealed segment by walking headers from the last index entry.
    fn scan_last_offset(&self) -> Result<i64, SegmentError> {
        let mut pos = self.index.last().map(|e| e.1 as u64).unwrap_or(0);
        let mut next = self.base_offset;
        let mut head = [0u8; HEADER_LEN];
        let file = self.reader()?;
        while pos + HEADER_LEN as u64 <= self.size {
            self.read_exact_at(&file.file, &mut head, pos)?;
            let Ok(h) = BatchHeader::parse(&head, pos as usize) else {
                break;
            };
            next = h.next_offset();
            pos += h.total_len() as u64;
        }
        Ok(next)
    }

    fn rewrite_index(&mut self) -> Result<(), SegmentError> {
        let mut bytes = Vec::with_capacity(self.index.len() * INDEX_ENTRY_LEN);
        for (rel, pos) in &self.index {
            bytes.extend_from_slice(&rel.to_be_bytes());
            bytes.extend_from_slice(&pos.to_be_bytes());
        }
        let index_file = self.index_writer()?;
        index_file
            .set_len(0)
            .and_then(|_| index_file.write_all_at(&bytes, 0))
            .map_err(|e| SegmentError::io(&self.index_path, e))
    }

    fn read_exact_at(&self, file: &File, buf: &mut [u8], pos: u64) -> Result<(), SegmentError> {
        file.read_exact_at(buf, pos)
            .map_err(|e| SegmentError::io(&self.log_path, e))
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    /// The log file: the open one of a segment that takes appends, or (sealed) opened
    /// now, read-only (enough for fsync).
    pub fn file(&self) -> Result<Arc<LogFile>, SegmentError> {
        self.reader()
    }

    /// Writes batches whose offsets were already assigned, starting at `first_offset`.
    /// Appends whole batches. On failure (ENOSPC, EIO half-way through a write) the
    /// segment is as before: whatever part of the batch reached the files is cut off
    /// again, so the next append never lands after garbage; if even the cut fails, the
    /// next append retries it first and refuses to write until it succeeds.
    pub fn append(&mut self, records: &[u8], headers: &[BatchHeader], first_offset: i64) -> Result<(), SegmentError> {
        if self.torn_tail {
            self.cut_torn_tail()?;
        }
        let mut pos = self.size;
        let mut offset = first_offset;
        let mut since_index = self.bytes_since_index;
        let mut max_ts = self.max_timestamp;
        let mut new_entries = Vec::new();
        for h in headers {
            if self.index.is_empty() && new_entries.is_empty() || since_index >= self.index_interval {
                new_entries.push(((offset - self.base_offset) as u32, pos as u32));
                since_index = 0;
            }
            since_index += h.total_len() as u32;
            if let Some(ts) = max_ts.as_mut() {
                *ts = (*ts).max(h.max_timestamp);
            }
            offset += h.last_offset_delta as i64 + 1;
            pos += h.total_len() as u64;
        }
        let writer = self.writer()?;
        let written = crate::failpoint::check(crate::failpoint::SEGMENT_WRITE)
            .and_then(|()| (&writer.file).write_all(records))
            .map_err(|e| SegmentError::io(&self.log_path, e))
            .and_then(|()| {
                if new_entries.is_empty() {
                    return Ok(());
                }
                let mut bytes = Vec::with_capacity(new_entries.len() * INDEX_ENTRY_LEN);
                for (rel, p) in &new_entries {
                    bytes.extend_from_slice(&rel.to_be_bytes());
                    bytes.extend_from_slice(&p.to_be_bytes());
                }
                let at = (self.index.len() * INDEX_ENTRY_LEN) as u64;
                self.index_writer()?
                    .write_all_at(&bytes, at)
                    .map_err(|e| SegmentError::io(&self.index_path, e))
            });
        if let Err(e) = written {
            self.torn_tail = true;
            if let Err(cut) = self.cut_torn_tail() {
                let (topic, partition) = crate::layout::partition_ids(&self.log_path);
                tracing::error!(topic, partition, path = %self.log_path.display(), error = %cut, "cannot cut a failed append off the segment; appends wait until it can be");
            }
            return Err(e);
        }
        self.index.extend(new_entries);
        self.bytes_since_index = since_index;
        self.max_timestamp = max_ts;
        self.size = pos;
        self.next_offset = offset;
        Ok(())
    }

    /// Cuts the segment back to its first `len` bytes (a size it had: a batch
    /// boundary). For a log whose fsync failed: the bytes written since the last good
    /// fsync may still be readable here (Linux keeps the pages it could not write; a
    /// FUSE or network volume may serve them from its own cache) while the disk never
    /// got them, and a recovery that read them would answer an idempotent retry as a
    /// duplicate of records that are gone. The cut is not fsynced (the disk is failing):
    /// until the next fsync of the file makes it durable, a crash leaves at most what
    /// the disk got of the cut bytes, none of it ever acknowledged, and recovery cuts
    /// what is torn. Afterwards this segment is fit only to be opened again from its
    /// files (its next offset and timestamps are not cut back).
    pub fn cut_back_to(&mut self, len: u64) -> Result<(), SegmentError> {
        if len >= self.size {
            return Ok(());
        }
        self.size = len;
        self.index.retain(|&(_, pos)| u64::from(pos) < len);
        self.torn_tail = true;
        self.cut_torn_tail()
    }

    /// Cuts the log and the index back to what this segment holds.
    fn cut_torn_tail(&mut self) -> Result<(), SegmentError> {
        self.writer()?
            .file
            .set_len(self.size)
            .map_err(|e| SegmentError::io(&self.log_path, e))?;
        let index_len = (self.index.len() * INDEX_ENTRY_LEN) as u64;
        self.index_writer()?
            .set_len(index_len)
            .map_err(|e| SegmentError::io(&self.index_path, e))?;
        self.torn_tail = false;
        Ok(())
    }

    /// Whether [`Self::seal`] fsynced this segment (it takes no more writes).
    pub fn is_sealed(&self) -> bool {
        self.file.is_none()
    }

    /// fsyncs the log and index of a segment that will receive no more appends.
    pub fn seal(&mut self) -> Result<(), SegmentError> {
        if self.file.is_none() {
            // Sealed already (a roll that sealed it could not create the next segment;
            // the retry comes here again).
            return Ok(());
        }
        if self.torn_tail {
            // Never fsync a failed append's garbage into a segment that stays.
            self.cut_torn_tail()?;
        }
        self.writer()?
            .sync(true)
            .map_err(|e| SegmentError::io(&self.log_path, e))?;
        self.index_writer()?
            .sync_all()
            .map_err(|e| SegmentError::io(&self.index_path, e))?;
        self.close_files();
        Ok(())
    }

    /// Byte position of the batch that holds `offset`, or None if the segment ends first.
    fn locate(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, SegmentError> {
        self.locate_in(&self.reader()?.file, offset)
    }

    /// Where the batch holding `offset` starts at the earliest, by the index alone:
    /// the position of the last index entry at or below it.
    fn indexed_position(&self, offset: i64) -> u64 {
        let rel = (offset - self.base_offset).max(0);
        match self.index.binary_search_by_key(&(rel as u32), |e| e.0) {
            Ok(i) => self.index[i].1 as u64,
            Err(0) => 0,
            Err(i) => self.index[i - 1].1 as u64,
        }
    }

    /// [`Self::locate`] through an already open log file.
    fn locate_in(&self, file: &File, offset: i64) -> Result<Option<(u64, BatchHeader)>, SegmentError> {
        let mut pos = self.indexed_position(offset);
        let mut head = [0u8; HEADER_LEN];
        while pos + HEADER_LEN as u64 <= self.size {
            self.read_exact_at(file, &mut head, pos)?;
            let Ok(h) = BatchHeader::parse(&head, pos as usize) else {
                return Ok(None);
            };
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.total_len() as u64;
        }
        Ok(None)
    }

    /// The header of the batch that holds `offset`, or None if the segment ends first.
    pub fn batch_holding(&self, offset: i64) -> Result<Option<BatchHeader>, SegmentError> {
        Ok(self.locate(offset)?.map(|(_, h)| h))
    }

    /// Whole batches from the one holding `offset`, up to `max_bytes` (but at least one
    /// batch when `min_one`), stopping before any batch that starts at or after `max_offset`.
    /// None when the segment ends before `offset` (the batch holding it, if any, is in a
    /// later segment); Some, perhaps empty, when the answer is this segment's: a batch
    /// that holds `offset` but does not fit is answered with nothing, never with a
    /// later segment's batches, which would skip the records between.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one: bool,
    ) -> Result<Option<Bytes>, SegmentError> {
        let file = self.reader()?;
        let Some((start, first)) = self.locate_in(&file.file, offset)? else {
            return Ok(None);
        };
        if first.base_offset >= max_offset {
            return Ok(Some(Bytes::new()));
        }
        if !min_one && first.total_len() > max_bytes {
            return Ok(Some(Bytes::new()));
        }
        // Read no further than `max_offset` (the last stable offset or the high
        // watermark, both batch boundaries): the bytes past it are not answered, and
        // behind an open transaction reading them would cost every fetch and long-poll
        // wake-up up to `max_bytes` for nothing (`a_read_reads_nothing_past_max_offset`).
        // The index says where `max_offset`'s batch starts at the earliest: past the
        // bytes this read may take, nothing needs finding.
        let first_end = start + first.total_len() as u64;
        let mut end = self.size.min(start + max_bytes.max(first.total_len()) as u64);
        if max_offset < self.next_offset && self.indexed_position(max_offset) < end {
            if let Some((at, h)) = self.locate_in(&file.file, max_offset)? {
                end = end.min(if h.base_offset >= max_offset {
                    at
                } else {
                    at + h.total_len() as u64
                });
            }
        }
        // The first batch lies below `max_offset` (checked above): always whole, as far
        // as the segment holds it (a header claiming more, in a damaged segment, is
        // read as far as there are bytes, as before).
        let want = (end.max(first_end).min(self.size) - start) as usize;
        // A reused buffer: no zero-fill and no page faults per fetch (read_buffers).
        let mut buf = super::read_buffers::take(want);
        self.read_exact_at(&file.file, buf.as_mut_slice(), start)?;
        let mut keep = 0;
        for (at, h) in batch::HeaderIter::new(buf.as_slice()) {
            if h.base_offset >= max_offset {
                break;
            }
            keep = at + h.total_len();
        }
        Ok(Some(buf.freeze(keep)))
    }

    /// Newest batch timestamp in the segment (scanned once, then cached).
    pub fn max_timestamp(&mut self) -> Result<i64, SegmentError> {
        if let Some(ts) = self.max_timestamp {
            return Ok(ts);
        }
        let mut max = -1;
        self.for_each_header(|_, h| {
            max = max.max(h.max_timestamp);
            true
        })?;
        self.max_timestamp = Some(max);
        Ok(max)
    }

    /// When the segment's file was last written, in ms since the epoch: the age of a
    /// segment without a batch timestamp (emptied by the cleaner, or only records
    /// stamped -1), as Apache's `LogSegment.largestTimestamp` falls back to.
    pub fn modified_ms(&self) -> Result<i64, SegmentError> {
        let modified = fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .map_err(|e| SegmentError::io(&self.log_path, e))?;
        Ok(match modified.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(_) => 0,
        })
    }

    /// The newest batch timestamp if known without a scan.
    pub fn cached_max_timestamp(&self) -> Option<i64> {
        self.max_timestamp
    }

    /// Sets the newest batch timestamp (a known upper bound) so no scan is needed.
    pub fn set_max_timestamp(&mut self, ts: i64) {
        self.max_timestamp = Some(ts);
    }

    /// (offset, timestamp) of the first batch ending at or after `from` whose max
    /// timestamp is >= `ts`.
    pub fn find_timestamp(&mut self, ts: i64, from: i64) -> Result<Option<(i64, i64)>, SegmentError> {
        if self.max_timestamp()? < ts {
            return Ok(None);
        }
        let mut found = None;
        self.for_each_header(|_, h| {
            if h.max_timestamp >= ts && !h.is_control() && h.last_offset() >= from {
                found = Some((h.base_offset, h.max_timestamp));
                return false;
            }
            true
        })?;
        Ok(found)
    }

    /// Visits every batch header in order until `f` returns false.
    pub fn for_each_header(&self, mut f: impl FnMut(u64, &BatchHeader) -> bool) -> Result<(), SegmentError> {
        #[cfg(test)]
        SCANS.with(|s| s.set(s.get() + 1));
        let mut pos = 0u64;
        let mut head = [0u8; HEADER_LEN];
        let file = self.reader()?;
        while pos + HEADER_LEN as u64 <= self.size {
            self.read_exact_at(&file.file, &mut head, pos)?;
            let Ok(h) = BatchHeader::parse(&head, pos as usize) else {
                break;
            };
            if !f(pos, &h) {
                break;
            }
            pos += h.total_len() as u64;
        }
        Ok(())
    }

    /// Removes the segment's files: log, index and aborted-transaction index.
    /// Replaces an empty segment's files with new empty ones (each renamed into
    /// place, so the segment is never missing, even after a crash), leaving whoever
    /// still has the old files open writing to files nobody reads.
    pub fn replace_empty(self, now_ms: i64) -> Result<Segment, SegmentError> {
        let dir = self.log_path.parent().map(Path::to_path_buf).unwrap_or_default();
        let (base, interval) = (self.base_offset, self.index_interval);
        for path in [self.log_path.clone(), self.index_path.clone()] {
            let tmp = crate::fsutil::temp_path(&path);
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| SegmentError::io(&tmp, e))?;
            fs::rename(&tmp, &path).map_err(|e| SegmentError::io(&path, e))?;
        }
        crate::fsutil::sync_dir(&dir).map_err(|e| SegmentError::io(&dir, e))?;
        drop(self);
        let (seg, _) = Segment::open(&dir, base, interval, None, now_ms)?;
        Ok(seg)
    }

    pub fn delete(self) -> Result<(), SegmentError> {
        fs::remove_file(&self.log_path).map_err(|e| SegmentError::io(&self.log_path, e))?;
        for path in [self.index_path.clone(), self.log_path.with_extension("txnindex")] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(SegmentError::io(&path, e)),
            }
        }
        Ok(())
    }
}
