//! Reused buffers for reads of whole batches (Fetch). A fetch reads up to a
//! partition's `max_bytes` (librdkafka asks for 1 MiB) into one buffer that becomes the
//! response's record bytes (copied into the response when it is encoded). A fresh
//! buffer of that size each time was zero-filled, then page-faulted in page by page,
//! and freed (often given back to the kernel) once the response was encoded: page
//! faults and page clearing took over 40% of the broker's CPU while a consumer read
//! from the start (docs/performance.md#profiles). A buffer handed back here keeps its
//! pages and the bytes it already holds, so the next read of up to its size neither
//! zero-fills nor faults.
//!
//! At most [`KEEP`] buffers of at most [`MAX_KEPT`] bytes each are kept: what this
//! costs when idle is bounded (docs/limits.md).

use bytes::Bytes;
use std::sync::Mutex;

/// Buffers kept for reuse.
pub(super) const KEEP: usize = 8;
/// Largest buffer kept; a larger read gets a buffer of its own, freed when done.
pub(super) const MAX_KEPT: usize = 2 << 20;

/// The buffers fetches read into.
static FETCH: Pool = Pool::new();

/// A buffer to read `len` bytes of the log into, for a fetch (see [`Pool::take`]).
pub(super) fn take(len: usize) -> ReadBuffer {
    #[cfg(test)]
    TAKEN.with(|t| t.set(t.get() + len));
    FETCH.take(len)
}

#[cfg(test)]
thread_local! {
    /// Bytes this thread's fetch reads asked buffers for: what a read read, whatever
    /// it kept (tests of what a read costs).
    pub(super) static TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Kept buffers, each initialised (read into or zeroed) over its whole length.
pub(super) struct Pool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl Pool {
    pub(super) const fn new() -> Pool {
        Pool {
            free: Mutex::new(Vec::new()),
        }
    }

    fn free(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `len` bytes to read into: the smallest kept one that holds them
    /// (its old contents still there, to be overwritten), else a new zeroed one.
    pub(super) fn take(&'static self, len: usize) -> ReadBuffer {
        let kept = if len > MAX_KEPT {
            None
        } else {
            let mut free = self.free();
            (0..free.len())
                .filter(|&i| free[i].len() >= len)
                .min_by_key(|&i| free[i].len())
                .map(|i| free.swap_remove(i))
        };
        ReadBuffer {
            buf: kept.unwrap_or_else(|| vec![0; len]),
            len,
            pool: self,
        }
    }

    /// Keeps `buf` if it is small enough and either there is room or it is larger than
    /// the smallest kept one (which it replaces): the pool comes to hold the sizes the
    /// reads ask for.
    fn give_back(&self, buf: Vec<u8>) {
        if buf.capacity() > MAX_KEPT {
            return;
        }
        let mut free = self.free();
        if free.len() < KEEP {
            free.push(buf);
        } else if let Some(i) = (0..free.len()).min_by_key(|&i| free[i].len()) {
            if free[i].len() < buf.len() {
                free[i] = buf;
            }
        }
    }
}

/// A buffer to read `len` bytes into, from [`Pool::take`]; frozen, the owner of the
/// shared bytes. Back to its pool when dropped: unused, or with the last clone of its
/// bytes.
pub(super) struct ReadBuffer {
    /// Initialised over its whole length, which is at least `len`.
    buf: Vec<u8>,
    len: usize,
    pool: &'static Pool,
}

impl ReadBuffer {
    /// The `len` bytes to read into (a kept buffer still holds its old contents).
    pub(super) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The first `keep` bytes as shared bytes.
    pub(super) fn freeze(mut self, keep: usize) -> Bytes {
        assert!(keep <= self.len, "keeping {keep} bytes of a {}-byte read", self.len);
        if keep == 0 {
            return Bytes::new();
        }
        self.len = keep;
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for ReadBuffer {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool of the test's own (the fetch pool is shared with every other test).
    fn pool() -> &'static Pool {
        Box::leak(Box::new(Pool::new()))
    }

    fn kept(pool: &Pool) -> Vec<usize> {
        let mut sizes: Vec<usize> = pool.free().iter().map(Vec::len).collect();
        sizes.sort();
        sizes
    }

    #[test]
    fn a_reused_buffer_shows_only_what_the_new_read_put_in_it() {
        let pool = pool();
        let mut big = pool.take(10_000);
        big.as_mut_slice().fill(0xAA);
        drop(big.freeze(10_000));
        assert_eq!(kept(pool), [10_000]);
        let mut small = pool.take(100);
        assert_eq!(kept(pool), [] as [usize; 0], "the kept buffer is reused");
        assert_eq!(small.as_mut_slice().len(), 100);
        small.as_mut_slice()[..40].copy_from_slice(&[7; 40]);
        let bytes = small.freeze(40);
        assert_eq!(
            &bytes[..],
            &[7u8; 40][..],
            "the old contents past the read are not shown"
        );
        drop(bytes);
        assert_eq!(kept(pool), [10_000], "back whole, for a longer read next");
        // Longer than any kept buffer: a new zeroed one, never a stale extension.
        let longer = pool.take(20_000);
        assert!(longer.as_slice().iter().all(|b| *b == 0));
        drop(longer);
        assert_eq!(kept(pool), [10_000, 20_000], "dropped unused, it is kept too");
    }

    #[test]
    fn a_buffer_comes_back_only_when_its_last_clone_is_dropped_and_the_pool_is_bounded() {
        let pool = pool();
        let mut buf = pool.take(1_000);
        buf.as_mut_slice().fill(3);
        let bytes = buf.freeze(1_000);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert!(kept(pool).is_empty(), "a slice still holds it");
        assert_eq!(&slice[..], &[3u8; 10][..]);
        drop(slice);
        assert_eq!(kept(pool), [1_000]);
        // More buffers out at once than are kept: KEEP come back, the largest.
        let out: Vec<Bytes> = (0..KEEP + 3).map(|i| pool.take(2_000 + i).freeze(10)).collect();
        drop(out);
        let sizes = kept(pool);
        assert_eq!(sizes.len(), KEEP);
        assert_eq!(sizes[0], 2_003, "the smallest were replaced by larger ones");
        // A read larger than MAX_KEPT neither takes a kept buffer nor is kept.
        let huge = pool.take(MAX_KEPT + 1);
        assert_eq!(kept(pool), sizes);
        drop(huge.freeze(MAX_KEPT + 1));
        assert_eq!(kept(pool), sizes);
    }
}
