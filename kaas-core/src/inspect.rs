//! Read-only views of volume state for admin tools: nothing here writes a file, so
//! kaasctl may look at a partition a broker is appending to, or at a torn tail it
//! must not "repair" by reading. Each batch is validated exactly as recovery would,
//! and what recovery would cut is reported instead of cut.

use crate::batch::{control_marker_type, BatchHeader};
use crate::error::VolumeError;
use crate::idempotence::ProducerStateTable;
pub use crate::log::scan::{segment_files, SegmentFile};
use crate::log::scan::{BatchScanner, Scanned};
use crate::partition::{
    replay, snapshot_mismatch, AbortedTxn, BatchId, ProducerStateSnapshot, SNAPSHOT_FORMAT_WITH_IDENTITY,
};
use std::path::{Path, PathBuf};

/// Where a scan stopped early: what recovery at the next broker start would cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTail {
    pub path: PathBuf,
    pub position: u64,
    pub reason: String,
}

/// Calls `f` for every valid batch of the partition from the segment holding `from`
/// on, stopping at the first invalid byte (returned). `f` gets the whole batch bytes.
pub fn scan_batches(dir: &Path, from: i64, f: impl FnMut(&BatchHeader, &[u8])) -> Result<Option<BadTail>, VolumeError> {
    scan_batches_of(&segment_files(dir)?, from, f)
}

/// [`scan_batches`] over an already listed set of segment files.
fn scan_batches_of(
    segments: &[SegmentFile],
    from: i64,
    mut f: impl FnMut(&BatchHeader, &[u8]),
) -> Result<Option<BadTail>, VolumeError> {
    let first = segments.iter().rposition(|s| s.base_offset <= from).unwrap_or(0);
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate().skip(first) {
        let file = crate::fsutil::open_regular(&seg.path).map_err(|e| VolumeError::io(&seg.path, e))?;
        let mut scanner = BatchScanner::new(&file, seg.size, seg.base_offset);
        if i < last {
            // Sealed: the log cleaner may have left gaps in it.
            scanner = scanner.allowing_gaps();
        }
        loop {
            match scanner.next_batch().map_err(|e| VolumeError::io(&seg.path, e))? {
                Scanned::Batch { header, bytes, .. } => {
                    if header.last_offset() >= from {
                        f(&header, bytes);
                    }
                }
                Scanned::Bad { pos, reason } => {
                    return Ok(Some(BadTail {
                        path: seg.path.clone(),
                        position: pos,
                        reason,
                    }))
                }
                Scanned::End => break,
            }
        }
    }
    Ok(None)
}

/// A partition as a broker would see it after opening it, computed without writing.
#[derive(Debug, Clone)]
pub struct PartitionInspection {
    pub dir: PathBuf,
    pub segments: Vec<SegmentFile>,
    pub log_start_offset: i64,
    /// End of the valid log (what a broker would serve after recovery).
    pub log_end_offset: i64,
    pub last_stable_offset: i64,
    /// The snapshot's (offset, written_ms), if there is one.
    pub snapshot: Option<(i64, i64)>,
    /// Why the next open would delete the snapshot (it does not belong to this log,
    /// see [`crate::partition::snapshot_mismatch`]); the view is then replayed from
    /// the log start, as the broker would.
    pub snapshot_rejected: Option<String>,
    pub producers: ProducerStateTable,
    pub aborted: Vec<AbortedTxn>,
    /// Data recovery would cut, if any.
    pub bad_tail: Option<BadTail>,
    /// Control batches seen in the replayed range: (offset, producer id, epoch, commit).
    pub markers: Vec<(i64, i64, i16, bool)>,
}

/// The end of the valid log, as recovery would find it: the last segment is scanned
/// (sealed ones are trusted, as at open).
fn valid_log_end(segments: &[SegmentFile]) -> Result<i64, VolumeError> {
    let Some(last) = segments.last() else {
        return Ok(0);
    };
    let mut end = last.base_offset;
    scan_batches_of(std::slice::from_ref(last), last.base_offset, |h, _| {
        end = h.next_offset()
    })?;
    Ok(end)
}

/// Loads the snapshot (an unreadable one is an error, as for the broker), checks it
/// against the log as the broker's open would (a snapshot it would delete is reported
/// in `snapshot_rejected` and not used) and replays the log after it; with
/// `full_replay`, replays the whole log instead (to list every marker and abort).
pub fn inspect_partition(dir: &Path, full_replay: bool) -> Result<PartitionInspection, VolumeError> {
    let segments = segment_files(dir)?;
    // Replay starts at the first segment; clients read from the log start, which
    // DeleteRecords may have moved past it.
    let log_start = segments.first().map(|s| s.base_offset).unwrap_or(0);
    let client_log_start = crate::log::LogStartFile::read(dir)?.unwrap_or(0).max(log_start);
    let snapshot = ProducerStateSnapshot::read(dir)?;
    let mut producers = ProducerStateTable::default();
    let mut from = log_start;
    // Aborts are re-derived from here, as at open (the log start for a format-1 snapshot).
    let mut derive_from = log_start;
    let mut snap_info = None;
    let mut snapshot_rejected = None;
    let mut broker_view: Option<(i64, ProducerStateTable)> = None;
    if let Some(s) = snapshot {
        snap_info = Some((s.offset, s.written_ms));
        let log_end = valid_log_end(&segments)?;
        let mut ending = None;
        if s.offset > log_start && s.offset <= log_end {
            scan_batches_of(&segments, s.offset - 1, |h, _| {
                if h.last_offset() == s.offset - 1 {
                    ending = Some(BatchId::of(h));
                }
            })?;
        }
        snapshot_rejected = snapshot_mismatch(&s, log_start, log_end, ending);
        if full_replay && snapshot_rejected.is_none() {
            // The broker's own view, for the last stable offset: it opens from the
            // snapshot, which keeps an open transaction whose first batch lay in a
            // segment deleted since (retention, DeleteRecords); a replay of what is
            // left would miss it.
            broker_view = Some((
                s.offset,
                ProducerStateTable {
                    producers: s.producers.iter().map(|e| (e.producer_id, e.clone())).collect(),
                },
            ));
        }
        if !full_replay && snapshot_rejected.is_none() {
            from = s.offset;
            if s.version >= SNAPSHOT_FORMAT_WITH_IDENTITY {
                derive_from = s.offset;
            }
            producers.producers = s.producers.into_iter().map(|e| (e.producer_id, e)).collect();
        }
    }
    let mut aborted = Vec::new();
    if derive_from < from {
        let mut scratch = ProducerStateTable::default();
        scan_batches_of(&segments, derive_from, |h, bytes| {
            let marker = (h.is_control() && h.has_producer_id())
                .then(|| control_marker_type(bytes))
                .flatten();
            aborted.extend(replay(&mut scratch, h, marker));
        })?;
    }
    let mut markers = Vec::new();
    let mut end = from;
    let bad_tail = scan_batches_of(&segments, from, |h, bytes| {
        let marker = (h.is_control() && h.has_producer_id())
            .then(|| control_marker_type(bytes))
            .flatten();
        if let Some(commit) = marker {
            markers.push((h.base_offset, h.producer_id, h.producer_epoch, commit));
        }
        if let Some((since, view)) = broker_view.as_mut() {
            if h.base_offset >= *since {
                replay(view, h, marker);
            }
        }
        aborted.extend(replay(&mut producers, h, marker));
        end = h.next_offset();
    })?;
    // Before the replayed range, aborts are known from the .txnindex files.
    let mut indexed = crate::partition::read_txn_indexes(dir)?;
    indexed.retain(|a| a.last_offset < from && a.last_offset >= log_start);
    indexed.extend(aborted);
    indexed.sort_by_key(|a| a.last_offset);
    indexed.dedup();
    if segments.is_empty() {
        end = 0;
    } else if end < from {
        end = from;
    }
    // The broker's rule (`PartitionState::last_stable_offset`): the first open
    // transaction's first offset, or the log end, never below the log start.
    let first_open = match &broker_view {
        Some((_, view)) => view.first_open_offset(),
        None => producers.first_open_offset(),
    };
    let lso = first_open.unwrap_or(end).max(client_log_start.min(end));
    Ok(PartitionInspection {
        dir: dir.to_path_buf(),
        segments,
        log_start_offset: client_log_start.min(end),
        log_end_offset: end,
        last_stable_offset: lso,
        snapshot: snap_info,
        snapshot_rejected,
        producers,
        aborted: indexed,
        bad_tail,
        markers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, validate_all};
    use crate::log::LogConfig;
    use crate::partition::PartitionState;

    /// The last stable offset kaasctl computes is the broker's, also after segments
    /// went: a full replay (`kaasctl groups`) began at the first segment left and
    /// missed an open transaction whose first batch lay in a deleted one (the
    /// broker's snapshot keeps it: its consumers were stuck while `groups` showed
    /// nothing blocked), and neither view was floored at the log start as the
    /// broker's is.
    #[test]
    fn the_last_stable_offset_is_the_brokers_after_segments_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        let mut b = build_batch(0, 1, Some((7, 0, 0)), 0x10, &[(None, Some(b"open"))]);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 1).unwrap(); // offset 0, never ended
        let mut b = build_batch(0, 1, None, 0, &[(None, Some(b"plain"))]);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 1).unwrap(); // 1
        p.roll(1).unwrap();
        let mut b = build_batch(0, 1, None, 0, &[(None, Some(b"plain"))]);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 1).unwrap(); // 2, in the segment at 2
        p.write_snapshot(1).unwrap(); // at 3
        p.delete_records(2).unwrap(); // segment 0 goes
        drop(p);
        // What the broker serves from these files.
        let broker = PartitionState::open(dir.path(), LogConfig::default(), 0)
            .unwrap()
            .last_stable_offset();
        assert_eq!(broker, 2, "the open transaction pins it at the log start");
        for full in [false, true] {
            let view = inspect_partition(dir.path(), full).unwrap();
            assert_eq!(view.last_stable_offset, broker, "full replay: {full}");
        }
    }

    #[test]
    fn inspection_matches_what_the_broker_would_open_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        for (pid, attr) in [(7i64, 0x10i16), (8, 0x10), (9, 0)] {
            let mut b = build_batch(0, 1, Some((pid, 0, 0)), attr, &[(None, Some(b"v"))]);
            let h = validate_all(&b).unwrap();
            p.append(&mut b, &h, 0, 1).unwrap();
        }
        p.write_marker(7, 0, false, 0, 0, 1).unwrap();
        p.write_snapshot(1).unwrap();
        let mut b = build_batch(0, 1, Some((9, 0, 1)), 0, &[(None, Some(b"tail"))]);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 1).unwrap();
        let (end, lso, aborted) = (p.log.log_end_offset(), p.last_stable_offset(), p.aborted.clone());
        drop(p);
        let seg = dir.path().join(format!("{:020}.log", 0));
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes.extend_from_slice(&[0xEE; 10]);
        std::fs::write(&seg, &bytes).unwrap();

        let view = inspect_partition(dir.path(), false).unwrap();
        assert_eq!((view.log_end_offset, view.last_stable_offset), (end, lso));
        assert_eq!(view.aborted, aborted);
        assert_eq!(view.producers.get(8).unwrap().txn_first_offset, Some(1));
        let tail = view.bad_tail.unwrap();
        assert_eq!(tail.position, bytes.len() as u64 - 10);
        assert_eq!(std::fs::read(&seg).unwrap(), bytes, "inspection must not truncate");
        let full = inspect_partition(dir.path(), true).unwrap();
        assert_eq!(full.markers, vec![(3, 7, 0, false)]);
    }

    #[test]
    fn inspection_rejects_a_snapshot_the_broker_would_delete_without_deleting_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        let append = |p: &mut PartitionState, pid: i64, seq: i32| {
            let mut b = build_batch(0, 1, Some((pid, 0, seq)), 0, &[(None, Some(b"v"))]);
            let h = validate_all(&b).unwrap();
            p.append(&mut b, &h, 0, 1).unwrap();
        };
        append(&mut p, 7, 0); // offset 0
        let keep = p.log.size_bytes();
        append(&mut p, 7, 1); // offset 1
        p.write_snapshot(1).unwrap();
        let stale = std::fs::read(ProducerStateSnapshot::path(dir.path())).unwrap();
        drop(p);
        let seg = dir.path().join(format!("{:020}.log", 0));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(keep)
            .unwrap();
        let view = inspect_partition(dir.path(), false).unwrap();
        assert!(view.snapshot_rejected.unwrap().contains("the log ends at 1"));
        assert!(
            ProducerStateSnapshot::path(dir.path()).exists(),
            "inspection writes nothing"
        );
        let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        append(&mut p, 9, 0); // offset 1, another timeline
        drop(p);
        std::fs::write(ProducerStateSnapshot::path(dir.path()), &stale).unwrap();
        let view = inspect_partition(dir.path(), false).unwrap();
        assert!(view.snapshot_rejected.unwrap().contains("another timeline"));
        assert_eq!(
            view.producers.get(9).unwrap().batches.len(),
            1,
            "replayed from the log start"
        );
        let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(view.producers, p.producers);
        assert_eq!(view.log_end_offset, p.log.log_end_offset());
    }
}
