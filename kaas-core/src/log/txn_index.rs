//! The `.txnindex` file beside each segment: the aborted transactions whose ABORT
//! marker is in that segment, in Apache Kafka's entry layout, so read_committed
//! fetches can list them without scanning the log. Written by the partition (at each
//! ABORT marker) and by the cleaner (for a cleaned segment); read at open, where a
//! crash's leftovers are cut ([`recover_txn_indexes`]), and by read-only inspection.

use crate::error::VolumeError;
use crate::log::{LogError, PartitionLog};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
/// torn tail is cut, and entries whose marker is at or past the log end (a marker the
/// crash lost while its entry was durable) are removed, the file being replaced
/// atomically; so are entries of a sealed segment's file whose marker is at or past
/// the next segment's base (a leader that had lost the partition wrote them after its
/// successor rolled), and entries whose offset in the log holds no ABORT marker of
/// their producer ([`marker_in_log`]): whatever wrote one (a deposed leader by its own
/// idea of the log, a bug, a hand edit), a read_committed consumer would skip the
/// producer's committed records it covers. Each change is logged with the path.
///
/// An entry whose marker is at or past `synced_below` (the offset the producer-state
/// snapshot covers, where the replay starts) may never have been fsynced: its writer
/// fsyncs it before it returns, and a crash can come between. Read back here from the
/// page cache, it was taken for durable, and nothing fsynced it again: the next
/// snapshot covered its marker, and a power cut then took the entry with it, and
/// read_committed readers were served the transaction's aborted records. So a file
/// kept with such an entry is fsynced here, and then its directory (the file may be
/// new). Below `synced_below` every entry's contents are durable: no snapshot is
/// written while an entry its offset covers is not fsynced (its name, when a first
/// attempt created the file and failed before the directory's fsync, rests on the
/// snapshot's own directory fsync, in the same directory). (`test_an_abort_index_entry_a_crash_left_unsynced_survives_a_later_power_cut`.)
pub(crate) fn recover_txn_indexes(
    dir: &Path,
    log: &PartitionLog,
    synced_below: i64,
) -> Result<Vec<AbortedTxn>, LogError> {
    let mut synced_a_file = false;
    let log_end = log.log_end_offset();
    let segment_bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
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
            } else if !marker_in_log(log, &a)? {
                dropped += 1;
                let (topic, partition) = crate::layout::partition_ids(&path);
                tracing::warn!(topic, partition, path = %path.display(), producer_id = a.producer_id, first_offset = a.first_offset, marker_offset = a.last_offset,
                    "removing an aborted-transaction entry whose offset in the log holds no ABORT marker of its producer");
            } else {
                kept.extend_from_slice(chunk);
                out.push(a);
            }
        }
        if torn != 0 {
            let (topic, partition) = crate::layout::partition_ids(&path);
            tracing::warn!(topic, partition, path = %path.display(), cut_bytes = torn, "cutting a torn .txnindex tail");
        }
        let unsynced = kept
            .chunks_exact(TXN_INDEX_ENTRY_LEN)
            .any(|e| parse_txn_index_entry(e).last_offset >= synced_below);
        if dropped > 0 {
            crate::fsutil::atomic_write(&path, &kept).map_err(|e| VolumeError::io(&path, e))?;
        } else if torn != 0 || unsynced {
            let f = crate::fsutil::open_volume_file(std::fs::OpenOptions::new().write(true), &path)
                .map_err(|e| VolumeError::io(&path, e))?;
            f.set_len(kept.len() as u64)
                .and_then(|_| f.sync_data())
                .map_err(|e| VolumeError::io(&path, e))?;
            synced_a_file = true;
        }
    }
    if synced_a_file {
        crate::fsutil::sync_dir(dir).map_err(|e| VolumeError::io(dir, e))?;
    }
    Ok(out)
}

/// Whether the log holds `a`'s ABORT marker: a control batch of `a.producer_id`, of
/// type ABORT, ending at `a.last_offset` (a marker batch holds one record). Every
/// writer of an entry writes it for such a marker: the partition right after
/// appending it, the cleaner only for a marker it keeps. An entry whose marker lies
/// below the log start is kept unchecked (its records are no longer served, and the
/// entry is not loaded). One read of the batch holding the offset per entry.
fn marker_in_log(log: &PartitionLog, a: &AbortedTxn) -> Result<bool, LogError> {
    if a.last_offset < log.log_start_offset() {
        return Ok(true);
    }
    // Only the batch holding the offset (a marker is far smaller than 256 bytes; a
    // larger batch there is read whole, and is no marker).
    let bytes = log.read_stored(a.last_offset, 256)?;
    let Some((_, h)) = crate::batch::HeaderIter::new(&bytes).next() else {
        return Ok(false);
    };
    Ok(h.is_control()
        && h.has_producer_id()
        && h.producer_id == a.producer_id
        && h.last_offset() == a.last_offset
        && crate::batch::control_marker_type(&bytes[..h.total_len()]) == Some(false))
}
