use super::*;
use crate::batch::build_batch;
use std::io::Write;

fn batch(n: usize, ts: i64) -> Vec<u8> {
    let recs: Vec<crate::batch::PlainRecord> = (0..n).map(|_| (None, Some(&b"value"[..]))).collect();
    build_batch(0, ts, None, 0, &recs)
}

fn append(log: &mut PartitionLog, n: usize, ts: i64) -> AppendInfo {
    let mut b = batch(n, ts);
    let headers = log.validate(&b).unwrap();
    log.append(&mut b, &headers, 0, ts).unwrap()
}

#[test]
fn appends_assign_consecutive_offsets_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(append(&mut log, 3, 1).base_offset, 0);
    let info = append(&mut log, 2, 2);
    assert_eq!((info.base_offset, info.last_offset, info.next_offset), (3, 4, 5));
    drop(log);
    let log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 5);
    assert!(log.truncations.is_empty());
    let data = log.read(3, 1 << 20, i64::MAX, true).unwrap();
    let h = crate::batch::validate(&data, 0).unwrap();
    assert_eq!(h.base_offset, 3);
}

#[test]
fn read_returns_at_least_one_whole_batch_even_past_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 10, 1);
    append(&mut log, 10, 1);
    let one = log.read(0, 1, i64::MAX, true).unwrap();
    assert_eq!(crate::batch::HeaderIter::new(&one).count(), 1);
    let both = log.read(5, 1 << 20, i64::MAX, true).unwrap();
    assert_eq!(crate::batch::HeaderIter::new(&both).count(), 2);
    let capped = log.read(0, 1 << 20, 10, true).unwrap();
    assert!(log.read(0, 1, i64::MAX, false).unwrap().is_empty());
    assert_eq!(crate::batch::HeaderIter::new(&capped).count(), 1);
    assert!(log.read(20, 100, i64::MAX, true).unwrap().is_empty());
    assert!(matches!(
        log.read(21, 100, i64::MAX, true),
        Err(LogError::OutOfRange { .. })
    ));
}

#[test]
fn reads_into_reused_buffers_return_exactly_the_batches_asked_for() {
    // Reads of different lengths, one after the other, so later ones reuse the
    // buffers earlier ones gave back (read_buffers): each returns exactly the bytes of
    // its batches, never a byte a longer earlier read left behind.
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let mut stored = Vec::new();
    for i in 0..20 {
        let info = append(&mut log, 1 + i % 7, i as i64);
        stored.push((info.base_offset, info.next_offset));
    }
    let whole = log.read(0, 1 << 20, i64::MAX, true).unwrap();
    let mut at = 0;
    let mut bytes_of = Vec::new();
    for (_, h) in crate::batch::HeaderIter::new(&whole) {
        bytes_of.push(whole.slice(at..at + h.total_len()));
        at += h.total_len();
    }
    assert_eq!(at, whole.len());
    drop(whole);
    for round in 0..3 {
        for (i, (base, _)) in stored.iter().enumerate() {
            // Up to the next batch (max_offset) or a byte budget of one batch.
            let max_offset = if round == 1 { i64::MAX } else { stored[i].1 };
            let data = log
                .read(*base, if round == 2 { 1 } else { 1 << 20 }, max_offset, true)
                .unwrap();
            let expected: Vec<u8> = if round == 1 {
                bytes_of[i..].iter().flat_map(|b| b.iter().copied()).collect()
            } else {
                bytes_of[i].to_vec()
            };
            assert_eq!(data.as_ref(), &expected[..], "round {round}, batch {i}");
        }
    }
}

#[test]
fn a_garbage_tail_is_truncated_to_the_last_good_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 2, 1);
    append(&mut log, 2, 1);
    let path = log.segments()[0].log_path().to_path_buf();
    let good = log.size_bytes();
    drop(log);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&[0xAB; 100]).unwrap();
    drop(f);
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.truncations.len(), 1);
    assert_eq!(log.truncations[0].valid_bytes, good);
    assert_eq!(log.truncations[0].cut_bytes, 100);
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(append(&mut log, 1, 1).base_offset, 4);
}

#[test]
fn a_torn_last_batch_and_a_corrupt_crc_are_both_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 2, 1);
    let first_len = log.size_bytes();
    append(&mut log, 2, 1);
    let path = log.segments()[0].log_path().to_path_buf();
    drop(log);
    // Flip a payload byte in the second batch.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(log.truncations[0].reason.contains("CRC"), "{:?}", log.truncations);
    assert_eq!(log.size_bytes(), first_len);
    drop(log);
    // Tear the remaining batch in half.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
}

/// Segments of `segment_bytes`, an index entry every 100 bytes.
fn small_segments(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

#[test]
fn segments_roll_by_size_and_reads_cross_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_segments(300);
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    for _ in 0..20 {
        append(&mut log, 2, 1);
    }
    assert!(log.segments().len() > 3, "{}", log.segments().len());
    drop(log);
    let log = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(log.log_end_offset(), 40);
    for offset in 0..40 {
        let data = log.read(offset, 1, i64::MAX, true).unwrap();
        let h = crate::batch::validate(&data, 0).unwrap();
        assert!(h.base_offset <= offset && offset <= h.last_offset(), "{offset}");
    }
}

/// A segment never spans more than i32::MAX offsets past its base: index entries hold
/// 32-bit relative offsets, and past that they wrapped and reads looked up the wrong
/// batch. A compressed batch may claim up to 2^31 - 1 records (its records are not
/// counted on produce), so three of them in one segment wrapped it.
#[test]
fn a_segment_rolls_before_its_relative_offsets_would_pass_i32_max() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    let huge = || {
        let mut b = batch(1, 1);
        b[21..23].copy_from_slice(&1i16.to_be_bytes()); // gzip: records not counted
        b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    };
    let mut bases = Vec::new();
    for i in 0..4 {
        let mut b = if i % 2 == 0 { huge() } else { batch(1, 1) };
        let headers = log.validate(&b).unwrap();
        bases.push(log.append(&mut b, &headers, 0, 1).unwrap().base_offset);
    }
    for s in log.segments() {
        assert!(
            s.next_offset() - 1 - s.base_offset() <= i32::MAX as i64,
            "segment {} ends at {}",
            s.base_offset(),
            s.next_offset()
        );
    }
    for reopened in [false, true] {
        for &base in &bases {
            let data = log.read(base, 1, i64::MAX, true).unwrap();
            let h = crate::batch::validate(&data, 0).unwrap();
            assert_eq!(h.base_offset, base, "reopened: {reopened}");
        }
        drop(log);
        log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    }
}

/// ListOffsets' -3: the first record batch carrying the largest timestamp at or past
/// the log start, found without reading every batch header of the partition each
/// time (it used to, under the partition lock).
#[test]
fn the_max_timestamp_lookup_scans_only_the_segments_that_could_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_segments(400);
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    // Timestamps rise, with a peak (twice: the first counts) in an early segment.
    let mut stamps = Vec::new();
    for i in 0..60i64 {
        let ts = if i == 6 || i == 7 { 10_000 } else { 100 + i };
        stamps.push(ts);
        append(&mut log, 1, ts);
    }
    assert!(log.segments().len() >= 5, "{}", log.segments().len());
    let brute = |log: &PartitionLog| {
        let start = log.log_start_offset();
        let mut best: Option<(i64, i64)> = None;
        for seg in log.segments() {
            seg.for_each_header(|_, h| {
                if !h.is_control() && h.last_offset() >= start && best.is_none_or(|(_, t)| h.max_timestamp > t) {
                    best = Some((h.base_offset.max(start), h.max_timestamp));
                }
                true
            })
            .unwrap();
        }
        best
    };
    for reopened in [false, true] {
        let scans = || super::segment::SCANS.with(|s| s.get());
        assert_eq!(log.max_timestamp_offset().unwrap(), Some((6, 10_000)));
        let before = scans();
        assert_eq!(log.max_timestamp_offset().unwrap(), Some((6, 10_000)));
        assert!(
            scans() - before <= 1,
            "a repeated lookup scanned {} segments",
            scans() - before
        );
        assert_eq!(log.max_timestamp_offset().unwrap(), brute(&log), "reopened: {reopened}");
        drop(log);
        log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    }
    // The log start moved past the peak's batches but not past their segment: that
    // segment's kept newest timestamp is the peak's, an upper bound no longer reached;
    // later segments must still be looked at (a review found them skipped).
    let peak_segment_end = log.segments().iter().map(|s| s.base_offset()).find(|b| *b > 7).unwrap();
    assert!(
        peak_segment_end > 8,
        "offset 8 shares the peak's segment: {peak_segment_end}"
    );
    log.advance_start(8).unwrap();
    assert_eq!(log.max_timestamp_offset().unwrap(), Some((59, stamps[59])));
    assert_eq!(log.max_timestamp_offset().unwrap(), brute(&log));
}

/// A read stops at `max_offset` (a read_committed fetch's last stable offset, or the
/// high watermark) instead of reading `max_bytes` and keeping what lies below it: behind
/// an open transaction of megabytes, every fetch and every long-poll wake-up read a
/// whole `partition_max_bytes` for nothing, and a request naming many partitions (or
/// one many times) held that much memory per entry until it was answered.
#[test]
fn a_read_reads_nothing_past_max_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 1, 1);
    append(&mut log, 1, 1);
    for _ in 0..50 {
        append(&mut log, 100, 1);
    }
    let taken = || super::read_buffers::TAKEN.with(|t| t.get());
    for (offset, max_offset, min_one) in [(0, 2, true), (0, 2, false), (1, 2, false), (0, 1, true), (2, 102, true)] {
        let before = taken();
        let data = log.read(offset, 1 << 20, max_offset, min_one).unwrap();
        let kept: Vec<i64> = crate::batch::HeaderIter::new(&data)
            .map(|(_, h)| h.base_offset)
            .collect();
        assert!(kept.iter().all(|b| *b < max_offset) && !kept.is_empty(), "{kept:?}");
        assert_eq!(
            taken() - before,
            data.len(),
            "a read from {offset} below {max_offset} read more than the {} bytes it answered",
            data.len()
        );
    }
}

/// A fetch of a later partition in a request (`min_one` false: something was already
/// returned) whose batch at the fetch offset does not fit in what is left of the
/// response gets nothing for that partition, never the next segment's first batch:
/// that would be an answer from past the fetch offset, and every client takes the
/// gap for a compacted one and moves past the records it skipped.
#[test]
fn a_batch_too_big_for_what_is_left_is_never_skipped_for_the_next_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_segments(300);
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    // Each segment: a batch of one record, then one of ten (bigger), and the next
    // segment starts with a small one again.
    for _ in 0..6 {
        append(&mut log, 1, 1);
        append(&mut log, 10, 1);
    }
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    assert_eq!(
        bases,
        (0..6).map(|i| i * 11).collect::<Vec<_>>(),
        "one small and one big batch per segment"
    );
    let big = {
        let data = log.read(1, 1, i64::MAX, true).unwrap();
        crate::batch::validate(&data, 0).unwrap().total_len()
    };
    let end = log.log_end_offset();
    for reopened in [false, true] {
        for offset in 0..end {
            for room in [1, big - 1] {
                let data = log.read(offset, room, i64::MAX, false).unwrap();
                if let Some((_, h)) = crate::batch::HeaderIter::new(&data).next() {
                    assert!(
                        h.base_offset <= offset && offset <= h.last_offset(),
                        "a read at {offset} with {room} bytes of room answered the batch at {} (reopened: {reopened})",
                        h.base_offset
                    );
                }
            }
        }
        drop(log);
        log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    }
}

/// How many of this process's open descriptors point into `dir`.
fn open_files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

#[test]
fn only_the_active_segment_keeps_files_open_and_sealed_ones_are_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        index_interval_bytes: 100,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    for _ in 0..200 {
        append(&mut log, 2, 1);
    }
    assert!(log.segments().len() >= 100, "{}", log.segments().len());
    assert!(
        open_files_in(dir.path()) <= 2,
        "{} files open",
        open_files_in(dir.path())
    );
    drop(log);
    let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert!(
        open_files_in(dir.path()) <= 2,
        "{} files open after reopening",
        open_files_in(dir.path())
    );
    for offset in [0, 1, 77, 398, 399] {
        let data = log.read(offset, 1, i64::MAX, true).unwrap();
        let h = crate::batch::validate(&data, 0).unwrap();
        assert!(h.base_offset <= offset && offset <= h.last_offset(), "{offset}");
    }
    assert_eq!(log.offset_for_timestamp(1).unwrap().map(|(o, _)| o), Some(0));
}

/// A log of 200-byte segments holding 4 records, whose next roll cannot create the
/// next segment's index (a directory stands in its way), and that roll, failed.
fn a_failed_roll(dir: &std::path::Path) -> (PartitionLog, LogConfig, std::path::PathBuf) {
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir, config.clone(), 0).unwrap();
    append(&mut log, 2, 1);
    append(&mut log, 2, 1);
    let blocker = dir.join(format!("{:020}.index", log.log_end_offset()));
    std::fs::create_dir(&blocker).unwrap();
    let mut b = batch(2, 1);
    let headers = log.validate(&b).unwrap();
    assert!(log.append(&mut b, &headers, 0, 1).is_err(), "the roll failed");
    (log, config, blocker)
}

/// A roll that sealed (fsynced) the active segment and then failed to create the next
/// leaves a segment whose every byte is durable: a cut back after the failure (to the
/// last fsync a waiter saw succeed, which may be older) has nothing to cut there, and
/// must not fail on the sealed file (it did: "the segment is sealed", logged as a cut
/// that could not be made, with the size in memory already cut).
#[test]
fn a_cut_back_after_a_failed_roll_keeps_the_sealed_segment_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = a_failed_roll(dir.path());
    let sealed = log.segments().last().unwrap().log_path().to_path_buf();
    let len = std::fs::metadata(&sealed).unwrap().len();
    assert!(!log.cut_back_to_durable((0, 0)).unwrap(), "nothing to cut");
    assert_eq!(std::fs::metadata(&sealed).unwrap().len(), len);
    assert_eq!(log.log_end_offset(), 4);
}

#[test]
fn a_roll_that_cannot_create_the_next_segment_is_retried_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, config, blocker) = a_failed_roll(dir.path());
    assert!(
        !dir.path().join(format!("{:020}.log", log.log_end_offset())).exists(),
        "the half-created segment is removed"
    );
    std::fs::remove_dir(&blocker).unwrap();
    append(&mut log, 2, 1);
    append(&mut log, 2, 1);
    assert_eq!(log.log_end_offset(), 8);
    drop(log);
    let log = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert!(log.truncations.is_empty());
}

#[test]
fn segments_roll_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
    let mut b = batch(1, 0);
    let h = log.validate(&b).unwrap();
    log.append(&mut b, &h, 0, 0).unwrap();
    let mut b = batch(1, 0);
    log.append(&mut b, &h, 0, 5000).unwrap();
    assert_eq!(log.segments().len(), 2);
}

/// An active segment reopened (a clean restart, a hand-over) took its age from the
/// file's modification time, its last write: about the restart for a partition in use,
/// so every restart put `segment.ms` off again, and with it the deletion of what
/// retention should have removed.
#[test]
fn a_reopened_segment_still_rolls_segment_ms_after_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 60_000,
        ..LogConfig::default()
    };
    let now = crate::now_ms();
    let mut log = PartitionLog::open(dir.path(), config.clone(), now - 3_600_000).unwrap();
    append(&mut log, 1, now - 3_600_000); // the segment began an hour ago
    drop(log); // its file was last written just now
    let mut log = PartitionLog::open(dir.path(), config.clone(), now).unwrap();
    append(&mut log, 1, now);
    assert_eq!(log.segments().len(), 2, "rolled: the segment is an hour old");
    // A first batch stamped in the future (a producer's clock) is not believed.
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config.clone(), now).unwrap();
    append(&mut log, 1, now + 3_600_000);
    drop(log);
    let mut log = PartitionLog::open(dir.path(), config, now).unwrap();
    append(&mut log, 1, now + 1);
    assert_eq!(log.segments().len(), 1);
}

#[test]
fn retention_deletes_old_segments_by_size_and_time_but_never_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        retention_bytes: 400,
        retention_ms: -1,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
    for _ in 0..20 {
        append(&mut log, 2, 1);
    }
    let before = log.segments().len();
    let deleted = log.enforce_retention(10, log.log_end_offset()).unwrap();
    assert!(!deleted.is_empty());
    assert_eq!(log.segments().len(), before - deleted.len());
    assert!(log.size_bytes() <= 400 + 200);
    assert_eq!(log.log_start_offset(), log.segments()[0].base_offset());

    let mut cfg = log.config().clone();
    cfg.retention_bytes = -1;
    cfg.retention_ms = 100;
    log.set_config(cfg);
    log.enforce_retention(1_000_000, log.log_end_offset()).unwrap();
    assert_eq!(log.segments().len(), 1);
    assert_eq!(
        log.log_start_offset(),
        40 - 2 * (log.size_bytes() as i64 / batch(2, 1).len() as i64)
    );
}

/// Retention deletes a segment only once the high watermark reached the next one's
/// base, as Apache: a segment holding records readers may not read yet (appended with
/// acks=0/1, waiting for the flush) stays, whatever its size or age.
#[test]
fn retention_deletes_no_segment_holding_a_record_at_or_past_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        retention_bytes: 0,
        retention_ms: 1,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
    for _ in 0..20 {
        append(&mut log, 2, 1);
    }
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    assert!(bases.len() >= 4, "{bases:?}");
    // Nothing readable yet: nothing goes.
    assert_eq!(log.enforce_retention(1_000_000, 0).unwrap(), Vec::<i64>::new());
    // Readable up to inside the third segment: the first two go, the third holds a
    // record past the high watermark.
    assert_eq!(
        log.enforce_retention(1_000_000, bases[2] + 1).unwrap(),
        bases[..2].to_vec()
    );
    assert_eq!(log.log_start_offset(), bases[2]);
    // Up to the third's end exactly (the fourth's base): it goes too.
    assert_eq!(log.enforce_retention(1_000_000, bases[3]).unwrap(), vec![bases[2]]);
    // Everything readable: all but the active segment.
    log.enforce_retention(1_000_000, log.log_end_offset()).unwrap();
    assert_eq!(log.segments().len(), 1);
}

#[test]
fn a_topic_whose_cleanup_policy_lacks_delete_never_loses_data_to_retention() {
    let configs = |policy: &str| {
        [
            ("cleanup.policy", policy),
            ("retention.ms", "1"),
            ("retention.bytes", "1"),
            ("segment.bytes", "200"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    };
    for (policy, keeps) in [("compact", true), ("compact,delete", false), ("delete", false)] {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::topic::log_config_for(&LogConfig::default(), &configs(policy)).unwrap();
        let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
        for _ in 0..20 {
            append(&mut log, 2, 1);
        }
        let before = log.segments().len();
        assert!(before > 1);
        let deleted = log.enforce_retention(1_000_000, log.log_end_offset()).unwrap();
        assert_eq!(deleted.is_empty(), keeps, "cleanup.policy={policy}");
        if keeps {
            assert_eq!((log.segments().len(), log.log_start_offset()), (before, 0));
        }
    }
}

#[test]
fn oversize_batches_are_rejected_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_message_bytes: 100,
        ..LogConfig::default()
    };
    let log = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert!(matches!(log.validate(&batch(10, 1)), Err(LogError::TooLarge { .. })));
}

#[test]
fn offset_for_timestamp_finds_the_first_batch_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 2, 100);
    append(&mut log, 2, 200);
    append(&mut log, 2, 300);
    assert_eq!(log.offset_for_timestamp(150).unwrap(), Some((2, 200)));
    assert_eq!(log.offset_for_timestamp(50).unwrap(), Some((0, 100)));
    assert_eq!(log.offset_for_timestamp(301).unwrap(), None);
}

#[test]
fn a_batch_a_deposed_leader_appended_to_a_segment_its_successor_rolled_away_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    // The deposed leader's view: one segment, log end 3, its file handle kept open.
    let mut old = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut old, 3, 1);
    // Its successor takes over: recovers the log and starts a new segment at 3, then
    // appends there.
    let mut new = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    new.roll(1).unwrap();
    append(&mut new, 2, 2);
    // The deposed leader, resumed mid-append, writes a batch at offset 3 into the
    // segment it still has open.
    let stray = append(&mut old, 1, 3);
    assert_eq!(stray.base_offset, 3);
    drop(old);
    // The successor never serves it (its view of the old segment ends at 3)...
    let data = new.read(0, 1 << 20, i64::MAX, true).unwrap();
    let offsets: Vec<i64> = crate::batch::HeaderIter::new(&data)
        .map(|(_, h)| h.base_offset)
        .collect();
    assert_eq!(offsets, vec![0]);
    assert_eq!(new.log_end_offset(), 5);
    drop(new);
    // ...and a reopen cuts it off the old segment, whose index it had reached too.
    let log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.truncations.len(), 1, "{:?}", log.truncations);
    assert!(log.truncations[0].reason.contains("past this segment's successor"));
    assert_eq!(log.log_end_offset(), 5);
    let mut seen = Vec::new();
    let mut at = 0;
    while at < log.log_end_offset() {
        let data = log.read(at, 1 << 20, i64::MAX, true).unwrap();
        for (_, h) in crate::batch::HeaderIter::new(&data) {
            seen.push(h.base_offset);
            at = h.next_offset();
        }
    }
    assert_eq!(seen, vec![0, 3], "each offset once");
}

#[test]
fn a_deposed_leader_rolling_late_fails_instead_of_writing_into_its_successors_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut old = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut old, 3, 1);
    let mut new = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    new.start_fresh_segment(1).unwrap();
    append(&mut new, 2, 2);
    assert!(
        old.roll(3).is_err(),
        "the successor's segment file exists: never reopened for writing"
    );
    let reopened = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(reopened.log_end_offset(), 5);
    assert!(reopened.truncations.is_empty());
}

#[test]
fn an_empty_active_segment_is_replaced_so_a_deposed_writer_appends_where_nobody_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut old = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut old, 3, 1);
    old.roll(1).unwrap(); // an empty active segment at 3
    let mut new = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    new.start_fresh_segment(2).unwrap();
    assert_eq!(new.segments().len(), 2, "replaced, not rolled (same base)");
    append(&mut new, 2, 2);
    let stray = append(&mut old, 1, 3); // through the old, replaced file
    assert_eq!(stray.base_offset, 3);
    drop(old);
    drop(new);
    let log = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.log_end_offset(), 5);
    let data = log.read(3, 1 << 20, i64::MAX, true).unwrap();
    let batches: Vec<(i64, i32)> = crate::batch::HeaderIter::new(&data)
        .map(|(_, h)| (h.base_offset, h.last_offset_delta))
        .collect();
    assert_eq!(batches, vec![(3, 1)], "only the successor's two-record batch");
}

#[test]
fn delete_records_moves_the_log_start_durably_and_deletes_only_whole_segments_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    for _ in 0..20 {
        append(&mut log, 2, 1);
    }
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    assert!(bases.len() > 3, "{bases:?}");
    // Inside the third segment: the first two go, the third stays (it holds the start).
    let target = bases[2] + 1;
    let deleted = log.advance_start(target).unwrap();
    assert_eq!(deleted, bases[..2].to_vec());
    assert_eq!(log.log_start_offset(), target);
    assert_eq!(log.first_segment_base(), bases[2]);
    assert!(matches!(
        log.read(target - 1, 1 << 20, i64::MAX, true),
        Err(LogError::OutOfRange { .. })
    ));
    let data = log.read(target, 1 << 20, i64::MAX, true).unwrap();
    assert!(crate::batch::validate(&data, 0).unwrap().last_offset() >= target);
    // Never backwards; past the log end is refused.
    assert!(log.advance_start(1).unwrap().is_empty());
    assert_eq!(log.log_start_offset(), target);
    assert!(matches!(log.advance_start(41), Err(LogError::OutOfRange { .. })));
    // Timestamp lookups never answer below the start.
    assert_eq!(log.offset_for_timestamp(0).unwrap().map(|f| f.0), Some(target));
    drop(log);
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    assert_eq!(log.log_start_offset(), target);
    // Up to the log end: every sealed segment goes, the active one stays, empty of
    // anything readable.
    log.advance_start(40).unwrap();
    assert_eq!(
        (log.segments().len(), log.log_start_offset(), log.log_end_offset()),
        (1, 40, 40)
    );
    assert!(log.read(40, 1 << 20, i64::MAX, true).unwrap().is_empty());
    // A recorded start past a log end that a crash cut back is brought down to it.
    drop(log);
    let f = LogStartFile {
        version: 1,
        log_start_offset: 99,
    };
    crate::fsutil::write_json(&LogStartFile::path(dir.path()), &f).unwrap();
    let log = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(log.log_start_offset(), 40);
    // ...and recorded so at once: offsets from 40 on are written again, and must not
    // be hidden by the old record at the next open.
    assert_eq!(LogStartFile::read(dir.path()).unwrap(), Some(40));
}

#[test]
fn a_timestamp_lookup_never_answers_below_the_log_start_nor_from_records_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
    append(&mut log, 2, 1_000); // offsets 0..1, newest 1000
    append(&mut log, 2, 10); // offsets 2..3, old
    append(&mut log, 2, 20); // offsets 4..5, old
    log.advance_start(3).unwrap();
    // Only a record below the start is at or after 500: nothing at or after the start is.
    assert_eq!(log.offset_for_timestamp(500).unwrap(), None);
    assert_eq!(log.offset_for_timestamp(15).unwrap().map(|f| f.0), Some(4));
    assert_eq!(log.offset_for_timestamp(5).unwrap().map(|f| f.0), Some(3));
}

#[test]
fn a_compacted_log_rolls_by_max_compaction_lag_ms_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        compact: true,
        max_compaction_lag_ms: 100,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    append(&mut log, 1, 0);
    assert!(log.would_roll(10, 1, 150), "past max.compaction.lag.ms");
    log.set_config(LogConfig {
        compact: false,
        ..config
    });
    assert!(
        !log.would_roll(10, 1, 150),
        "only segment.ms for a log that is not compacted"
    );
}

#[test]
fn a_crash_after_recording_the_start_leaves_segments_that_retention_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 200,
        retention_ms: -1,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    for _ in 0..20 {
        append(&mut log, 2, 1);
    }
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    drop(log);
    // Only the record of the new start made it.
    let f = LogStartFile {
        version: 1,
        log_start_offset: bases[2],
    };
    crate::fsutil::write_json(&LogStartFile::path(dir.path()), &f).unwrap();
    let mut log = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(log.log_start_offset(), bases[2]);
    assert_eq!(
        log.enforce_retention(0, log.log_end_offset()).unwrap(),
        bases[..2].to_vec()
    );
    // A broken record is an error naming the file, never a start of 0.
    drop(log);
    std::fs::write(
        LogStartFile::path(dir.path()),
        b"{\"version\":1,\"log_start_offset\":-4}",
    )
    .unwrap();
    let e = PartitionLog::open(dir.path(), LogConfig::default(), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("log-start.json") && e.contains("negative"), "{e}");
}

/// A leader deposed without knowing it yet (paused) reads its sealed segments by
/// path with the index it had. Its successor's cleaner renamed a smaller, rewritten
/// file over one of them: the old index pointed into the middle of a batch of the new
/// file, the segment answered "the offset is past my end", and the read went on to the
/// next segment — a consumer silently skipped the latest values of the keys in
/// between. A sealed segment's reads check the file is the one it indexed.
#[test]
fn a_sealed_segment_rewritten_by_another_process_is_never_read_with_the_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1_000,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut old = PartitionLog::open(dir.path(), config.clone(), 0).unwrap();
    while old.segments().len() < 3 {
        append(&mut old, 1, 1);
    }
    let (first_end, second_end) = (old.segments()[1].base_offset(), old.segments()[2].base_offset());
    assert!(first_end > 6, "{first_end}");
    // The successor's cleaning pass drops the first record and merges the first two
    // segments into one file, renamed over the first (as `apply_swap`).
    let mut kept = old.read(1, 1 << 20, first_end, true).unwrap().to_vec();
    kept.extend_from_slice(&old.read(first_end, 1 << 20, second_end, true).unwrap());
    let cleaned = dir.path().join("cleaned.tmp");
    std::fs::write(&cleaned, &kept).unwrap();
    std::fs::rename(&cleaned, dir.path().join("00000000000000000000.log")).unwrap();
    for offset in 0..first_end {
        match old.read(offset, 1 << 20, i64::MAX, true) {
            Err(e) => assert!(e.to_string().contains("00000000000000000000.log"), "{e}"),
            Ok(data) => {
                let first = crate::batch::HeaderIter::new(&data).next().map(|(_, h)| h.base_offset);
                assert_eq!(
                    first,
                    Some(offset.max(1)),
                    "a read at {offset} ({} bytes, first_end {first_end}) skipped records the rewritten segment kept",
                    data.len()
                );
            }
        }
    }
}
