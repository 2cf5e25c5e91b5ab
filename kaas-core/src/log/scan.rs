//! Reading a segment file batch by batch through a window, validating each batch
//! (header, length, CRC32C, offset continuity). Used by recovery, which truncates at
//! the first bad batch, and by read-only inspection (kaasctl), which only reports it.

use crate::batch::{self, BatchHeader, HEADER_LEN};
use crate::error::VolumeError;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Read size of the window.
const SCAN_CHUNK: usize = 1 << 20;

pub enum Scanned<'a> {
    /// A whole, valid batch at byte `pos`.
    Batch {
        pos: u64,
        header: BatchHeader,
        bytes: &'a [u8],
    },
    /// The file is not valid from byte `pos` on.
    Bad { pos: u64, reason: String },
    /// Clean end of file.
    End,
}

pub struct BatchScanner<'f> {
    file: &'f File,
    size: u64,
    pos: u64,
    expected: i64,
    buf: Vec<u8>,
    win_start: u64,
    done: bool,
    gaps: bool,
}

impl<'f> BatchScanner<'f> {
    /// Scans `size` bytes of `file`, whose first batch must have base offset `base`.
    pub fn new(file: &'f File, size: u64, base: i64) -> Self {
        BatchScanner {
            file,
            size,
            pos: 0,
            expected: base,
            buf: Vec::new(),
            win_start: 0,
            done: false,
            gaps: false,
        }
    }

    /// Lets offsets jump forward between batches, as they do in a segment the log
    /// cleaner rewrote (never backwards). The active segment is never cleaned, so
    /// its recovery keeps the strict rule.
    pub fn allowing_gaps(mut self) -> Self {
        self.gaps = true;
        self
    }

    /// Byte position after the last batch returned.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The offset the next batch must start at.
    pub fn next_offset(&self) -> i64 {
        self.expected
    }

    fn fill(&mut self, at: u64, at_least: usize) -> io::Result<()> {
        self.win_start = at;
        let len = ((self.size - at) as usize)
            .min(SCAN_CHUNK)
            .max(at_least.min((self.size - at) as usize));
        self.buf.resize(len, 0);
        self.file.read_exact_at(&mut self.buf, at)
    }

    pub fn next_batch(&mut self) -> io::Result<Scanned<'_>> {
        if self.done || self.pos >= self.size {
            self.done = true;
            return Ok(Scanned::End);
        }
        let pos = self.pos;
        let mut off = (pos - self.win_start) as usize;
        if off + HEADER_LEN > self.buf.len() {
            self.fill(pos, HEADER_LEN)?;
            off = 0;
        }
        let bad = |reason: String| Ok(Scanned::Bad { pos, reason });
        let header = match BatchHeader::parse(&self.buf[off..], pos as usize) {
            Ok(h) => h,
            Err(e) => {
                self.done = true;
                return bad(e.to_string());
            }
        };
        let total = header.total_len();
        if pos + total as u64 > self.size {
            self.done = true;
            return bad(format!(
                "torn batch at byte {pos}: needs {total} bytes, {} left",
                self.size - pos
            ));
        }
        if off + total > self.buf.len() {
            self.fill(pos, total)?;
            off = 0;
        }
        if let Err(e) = batch::validate(&self.buf[off..off + total], pos as usize) {
            self.done = true;
            return bad(e.to_string());
        }
        if header.base_offset != self.expected && !(self.gaps && header.base_offset > self.expected) {
            self.done = true;
            return bad(format!(
                "batch at byte {pos} has base offset {}, expected {}",
                header.base_offset, self.expected
            ));
        }
        self.expected = header.next_offset();
        self.pos = pos + total as u64;
        Ok(Scanned::Batch {
            pos,
            header,
            bytes: &self.buf[off..off + total],
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    pub base_offset: i64,
    pub path: PathBuf,
    pub size: u64,
}

/// Segment files of a partition directory, by base offset.
pub fn segment_files(dir: &Path) -> Result<Vec<SegmentFile>, VolumeError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| VolumeError::io(dir, e))? {
        let entry = entry.map_err(|e| VolumeError::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".log") {
            if let (20, Ok(base)) = (stem.len(), stem.parse::<i64>()) {
                let path = entry.path();
                let size = entry.metadata().map_err(|e| VolumeError::io(&path, e))?.len();
                out.push(SegmentFile {
                    base_offset: base,
                    path,
                    size,
                });
            }
        }
    }
    out.sort_by_key(|s| s.base_offset);
    Ok(out)
}
