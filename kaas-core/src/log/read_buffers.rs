//! Reused buffers for reads of whole batches (Fetch). A fetch reads up to a
//! partition's `max_bytes` (librdkafka asks for 1 MiB) into one buffer that becomes the
//! response's record bytes. A fresh buffer of that size each time was zero-filled and
//! then page-faulted in page by page, and freed (given back to the kernel) when the
//! response was sent: page faults and page clearing took over 40% of the broker's CPU
//! while a consumer read from the start (docs/performance.md#profiles). A buffer
//! handed back here keeps its pages and the bytes it already holds, so the next read
//! of the same size neither zero-fills nor faults.
//!
//! At most [`KEEP`] buffers of at most [`MAX_KEPT`] bytes each are kept: what this
//! costs when idle is bounded (docs/limits.md).

use bytes::Bytes;
use std::sync::Mutex;

/// Buffers kept for reuse.
pub const KEEP: usize = 8;
/// Largest buffer kept; a larger one (a read for one huge batch) is freed when done.
pub const MAX_KEPT: usize = 2 << 20;

/// Kept buffers, each initialised (read into or zeroed) over its whole length.
static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer to read `len` bytes into, from [`take`].
pub struct ReadBuffer {
    /// Initialised over its whole length, which is at least `len`.
    buf: Vec<u8>,
    len: usize,
}

impl ReadBuffer {
    /// The `len` bytes to read into (a kept buffer still holds its old contents).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The first `keep` bytes as shared bytes; the buffer comes back for reuse once
    /// the last clone of them is dropped.
    pub fn freeze(self, keep: usize) -> Bytes {
        assert!(keep <= self.len, "keeping {keep} bytes of a {}-byte read", self.len);
        if keep == 0 {
            give_back(self.buf);
            return Bytes::new();
        }
        Bytes::from_owner(Returned { buf: self.buf, keep })
    }
}

/// A buffer of `len` bytes to read into: a kept one when there is one, else a new
/// zeroed one. Only the part of a kept buffer past what it held before is zeroed.
pub fn take(len: usize) -> ReadBuffer {
    let kept = {
        let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
        // The smallest kept buffer that holds `len` bytes, else the longest.
        let fit = (0..free.len())
            .filter(|&i| free[i].len() >= len)
            .min_by_key(|&i| free[i].len())
            .or_else(|| (0..free.len()).max_by_key(|&i| free[i].len()));
        fit.map(|i| free.swap_remove(i))
    };
    let buf = match kept {
        Some(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0);
            }
            buf
        }
        None => vec![0; len],
    };
    ReadBuffer { buf, len }
}

fn give_back(buf: Vec<u8>) {
    if buf.len() > MAX_KEPT {
        return;
    }
    let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
    if free.len() < KEEP {
        free.push(buf);
    }
}

/// The owner of a frozen buffer: shows its first `keep` bytes, hands it back when
/// dropped.
struct Returned {
    buf: Vec<u8>,
    keep: usize,
}

impl AsRef<[u8]> for Returned {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.keep]
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool is process-wide: tests that look at it run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn kept() -> usize {
        FREE.lock().unwrap().len()
    }

    #[test]
    fn a_reused_buffer_shows_only_what_the_new_read_put_in_it() {
        let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        FREE.lock().unwrap().clear();
        let mut big = take(10_000);
        big.as_mut_slice().fill(0xAA);
        drop(big.freeze(10_000));
        let mut small = take(100);
        assert_eq!(small.as_mut_slice().len(), 100);
        small.as_mut_slice()[..40].copy_from_slice(&[7; 40]);
        let bytes = small.freeze(40);
        assert_eq!(
            &bytes[..],
            &[7u8; 40][..],
            "the old contents past the read are not shown"
        );
        drop(bytes);
        // Longer than any kept buffer holds: the extension is zeroed, never stale.
        let longer = take(20_000);
        assert_eq!(longer.as_slice().len(), 20_000);
        assert!(longer.as_slice()[..10_000].iter().all(|b| *b == 0xAA || *b == 7));
        assert!(longer.as_slice()[10_000..].iter().all(|b| *b == 0));
        drop(longer.freeze(0));
    }

    #[test]
    fn a_buffer_comes_back_only_when_its_last_clone_is_dropped_and_the_pool_is_bounded() {
        let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        FREE.lock().unwrap().clear();
        let mut buf = take(1_000);
        buf.as_mut_slice().fill(3);
        let bytes = buf.freeze(1_000);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(kept(), 0, "a slice still holds it");
        assert_eq!(&slice[..], &[3u8; 10][..]);
        drop(slice);
        assert_eq!(kept(), 1);
        // More buffers out at once than are kept: only KEEP come back.
        let out: Vec<Bytes> = (0..KEEP + 3).map(|_| take(100).freeze(100)).collect();
        drop(out);
        assert_eq!(kept(), KEEP);
        // A buffer larger than MAX_KEPT is not kept.
        FREE.lock().unwrap().clear();
        drop(take(MAX_KEPT + 1).freeze(MAX_KEPT + 1));
        assert_eq!(kept(), 0);
    }
}
