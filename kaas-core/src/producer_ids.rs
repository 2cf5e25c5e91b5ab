//! The producer-id block allocator (`__cluster/producer_ids.json`, guarded by
//! `producer_ids.lock`). A broker claims a block of ids durably before handing any of
//! them out, so ids are unique across brokers and restarts (a crash wastes at most the
//! rest of a block, never reuses one).
//!
//! Transactional producers get their ids from the same blocks moved up by
//! [`TRANSACTIONAL_BASE`]: block `[s, s+1000)` serves either idempotent ids `s..` or
//! transactional ids `TRANSACTIONAL_BASE + s..`, never both, so ids stay unique and
//! the file keeps its format (older brokers on the volume draw plain blocks). A
//! partition refuses a non-transactional batch under a transactional id
//! ([`is_transactional`], `idempotence.rs`): producer ids are no secret, and such a
//! batch could otherwise fence a transactional producer or take its sequence numbers
//! from a client without WRITE on its transactional id (docs/security.md).

use crate::error::{read_versioned_json, VolumeError};
use crate::fsutil::write_json;
use crate::layout::Volume;
use serde::{Deserialize, Serialize};
use std::ops::Range;

crate::versioned!(ProducerIdBlocks);

pub const PRODUCER_IDS_FORMAT_VERSION: u32 = 1;
pub const BLOCK_SIZE: i64 = 1000;
/// The largest block size a file may state.
pub const MAX_BLOCK_SIZE: i64 = 1_000_000;
/// Where transactional producer ids start (2^48: far above any plain id a volume
/// reaches, far below i64::MAX).
pub const TRANSACTIONAL_BASE: i64 = 1 << 48;

/// Whether `producer_id` was handed out to a transactional producer (by a broker of
/// this version or later; ids from before are below the base and not told apart).
pub fn is_transactional(producer_id: i64) -> bool {
    producer_id >= TRANSACTIONAL_BASE
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlocks {
    pub version: u32,
    /// First id of the next unclaimed block.
    pub next_block_start: i64,
    pub block_size: i64,
    pub last_claim_broker: i32,
    pub last_claim_ms: i64,
}

/// How long a claim waits for the allocator's lock before it fails (retriably: the
/// client's InitProducerId is answered COORDINATOR_NOT_AVAILABLE). Another broker holds
/// it for one small read and write; a paused holder, or a dead NFS client whose lock
/// outlives it, must not hold a claim (and the broker's thread) forever.
pub const ALLOCATOR_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Claims the next block under the allocator's exclusive lock (waiting at most
/// [`ALLOCATOR_LOCK_WAIT`] for it: [`VolumeError::Busy`]). Blocking file work.
pub fn claim_block(volume: &Volume, broker_id: i32) -> Result<Range<i64>, VolumeError> {
    claim_block_within(volume, broker_id, ALLOCATOR_LOCK_WAIT)
}

fn claim_block_within(volume: &Volume, broker_id: i32, wait: std::time::Duration) -> Result<Range<i64>, VolumeError> {
    let dir = volume.cluster_dir();
    crate::fsutil::create_dir_durable(&dir).map_err(|e| VolumeError::io(&dir, e))?;
    let lock_path = dir.join("producer_ids.lock");
    let lock = crate::fsutil::lock_exclusive_within(&lock_path, wait)
        .map_err(|e| VolumeError::io(&lock_path, e))?
        .ok_or_else(|| VolumeError::Busy {
            path: lock_path.clone(),
            waited_ms: wait.as_millis() as u64,
        })?;
    let path = dir.join("producer_ids.json");
    let current =
        match read_versioned_json::<ProducerIdBlocks>(&path, "producer id allocator", PRODUCER_IDS_FORMAT_VERSION) {
            Ok(c) => c,
            Err(e) if e.is_not_found() => ProducerIdBlocks {
                version: PRODUCER_IDS_FORMAT_VERSION,
                next_block_start: 0,
                block_size: BLOCK_SIZE,
                last_claim_broker: -1,
                last_claim_ms: 0,
            },
            Err(e) => return Err(e),
        };
    let start = current.next_block_start;
    let size = current.block_size.max(1);
    // A plain block must stay below the transactional range (its ids moved up by the
    // base must not overflow either): a file saying otherwise is corrupt, not reset.
    if start < 0 || size > MAX_BLOCK_SIZE || start.checked_add(size).is_none_or(|end| end > TRANSACTIONAL_BASE) {
        return Err(VolumeError::Invalid {
            path: path.clone(),
            detail: format!(
                "next_block_start {start} with block_size {size} leaves 0..{TRANSACTIONAL_BASE} (block size at most {MAX_BLOCK_SIZE})"
            ),
        });
    }
    let next = ProducerIdBlocks {
        next_block_start: start + size,
        block_size: size,
        last_claim_broker: broker_id,
        last_claim_ms: crate::now_ms(),
        ..current
    };
    write_json(&path, &next).map_err(|e| VolumeError::io(&path, e))?;
    // Dropping the file releases the lock.
    drop(lock);
    Ok(start..start + size)
}

/// Hands out producer ids from claimed blocks.
pub struct ProducerIdAllocator {
    volume: Volume,
    broker_id: i32,
    block: Range<i64>,
    transactional_block: Range<i64>,
}

impl ProducerIdAllocator {
    pub fn new(volume: Volume, broker_id: i32) -> Self {
        ProducerIdAllocator {
            volume,
            broker_id,
            block: 0..0,
            transactional_block: 0..0,
        }
    }

    /// An id for an idempotent producer.
    pub fn next_id(&mut self) -> Result<i64, VolumeError> {
        if self.block.is_empty() {
            self.block = claim_block(&self.volume, self.broker_id)?;
        }
        let id = self.block.start;
        self.block.start += 1;
        Ok(id)
    }

    /// An id for a transactional producer: at or above [`TRANSACTIONAL_BASE`].
    pub fn next_transactional_id(&mut self) -> Result<i64, VolumeError> {
        if self.transactional_block.is_empty() {
            let plain = claim_block(&self.volume, self.broker_id)?;
            self.transactional_block = TRANSACTIONAL_BASE + plain.start..TRANSACTIONAL_BASE + plain.end;
        }
        let id = self.transactional_block.start;
        self.transactional_block.start += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claim waits for the allocator's lock a bounded time: held elsewhere (a paused
    /// broker, a dead NFS client's lock), it fails with Busy instead of holding its
    /// thread forever; once the lock is free the next claim goes on.
    #[test]
    fn a_claim_waits_for_the_allocators_lock_a_bounded_time() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        crate::fsutil::create_dir_durable(&volume.cluster_dir()).unwrap();
        let held = crate::fsutil::lock_exclusive(&volume.cluster_dir().join("producer_ids.lock")).unwrap();
        let wait = std::time::Duration::from_millis(100);
        let started = std::time::Instant::now();
        assert!(matches!(
            claim_block_within(&volume, 0, wait),
            Err(VolumeError::Busy { .. })
        ));
        assert!(started.elapsed() >= wait);
        drop(held);
        assert_eq!(claim_block_within(&volume, 0, wait).unwrap(), 0..BLOCK_SIZE);
    }

    #[test]
    fn a_file_that_would_reach_the_transactional_range_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        for (start, size) in [(TRANSACTIONAL_BASE - 10, 1000), (-5, 1000), (0, i64::MAX)] {
            let file = ProducerIdBlocks {
                version: PRODUCER_IDS_FORMAT_VERSION,
                next_block_start: start,
                block_size: size,
                last_claim_broker: 0,
                last_claim_ms: 0,
            };
            write_json(&volume.cluster_dir().join("producer_ids.json"), &file).unwrap();
            assert!(claim_block(&volume, 0).is_err(), "{start} {size}");
        }
    }

    #[test]
    fn ids_are_unique_across_allocators_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let mut a = ProducerIdAllocator::new(volume.clone(), 0);
        let mut b = ProducerIdAllocator::new(volume.clone(), 1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1500 {
            assert!(seen.insert(a.next_id().unwrap()));
            assert!(seen.insert(b.next_id().unwrap()));
            let t = a.next_transactional_id().unwrap();
            assert!(is_transactional(t) && seen.insert(t) && seen.insert(t - TRANSACTIONAL_BASE));
        }
        // A "restarted" allocator starts on a fresh block.
        let mut c = ProducerIdAllocator::new(volume, 0);
        assert!(seen.insert(c.next_id().unwrap()));
    }

    #[test]
    fn a_corrupt_allocator_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        std::fs::create_dir_all(volume.cluster_dir()).unwrap();
        std::fs::write(volume.cluster_dir().join("producer_ids.json"), b"nope").unwrap();
        let err = claim_block(&volume, 0).unwrap_err().to_string();
        assert!(err.contains("producer_ids.json"), "{err}");
    }
}
