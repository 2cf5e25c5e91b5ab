//! The process's global allocator: the system allocator, except that requests of
//! [`HUGE`] bytes or more are served by an anonymous `mmap` with `MAP_NORESERVE`.
//!
//! Why: `kafka-protocol`'s decoders size a `Vec` from the element count on the wire
//! before reading any element, so a request of a few bytes can ask for hundreds of
//! gigabytes. With the system allocator that allocation fails and Rust aborts the
//! whole process. A `MAP_NORESERVE` mapping only reserves address space: no page is
//! touched until written, the decoder then runs out of bytes after a handful of
//! elements and returns an error, and the mapping is unmapped on drop. No legitimate
//! request needs anything near [`HUGE`] (requests are capped far lower by
//! `--max-request-bytes`), so normal traffic never takes this path. See
//! docs/protocol-safety.md.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations of at least this many bytes go to `mmap(MAP_NORESERVE)`.
pub const HUGE: usize = 1 << 30;

pub struct GuardedAlloc;

// SAFETY: every method upholds the GlobalAlloc contract:
// - small layouts are forwarded unchanged to `System`, which upholds it itself;
// - huge layouts get a fresh private anonymous mapping of exactly `layout.size()` bytes,
//   page-aligned (so aligned for any `layout.align()` up to the page size; larger
//   alignments are forwarded to `System`), zero-filled by the kernel, or null when the
//   kernel refuses (which GlobalAlloc allows: the caller handles the error);
// - `dealloc` receives the same layout that allocated the block (a GlobalAlloc
//   requirement on the caller), so the size test routes every block back to the
//   allocator that made it, and `munmap` gets the exact address and length of the
//   mapping;
// - `realloc` uses the default implementation (alloc + copy + dealloc) whenever
//   either side is huge, so blocks never move between the two allocators.
unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            map(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            map(layout.size())
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !is_huge(layout) && !is_huge(new_layout) {
            return System.realloc(ptr, layout, new_size);
        }
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
    }
}

fn is_huge(layout: Layout) -> bool {
    layout.size() >= HUGE && layout.align() <= 4096
}

unsafe fn map(size: usize) -> *mut u8 {
    let p = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_huge_untouched_vec_is_cheap_and_freed() {
        // 64 GiB of capacity: far above this machine's memory, fine as reserved space.
        let v: Vec<u64> = Vec::with_capacity(8 << 30);
        assert!(v.capacity() >= 8 << 30);
        drop(v);
        let mut small: Vec<u8> = Vec::with_capacity(16);
        small.extend_from_slice(b"still works");
        assert_eq!(&small, b"still works");
    }
}
