use super::*;
use crate::batch::{build_batch, validate_all};

fn produce(p: &mut PartitionState, pid: i64, epoch: i16, seq: i32, n: usize) -> Result<AppendOutcome, AppendError> {
    let recs: Vec<crate::batch::PlainRecord> = (0..n).map(|_| (None, Some(&b"value"[..]))).collect();
    let mut b = build_batch(0, 1, Some((pid, epoch, seq)), 0, &recs);
    let h = validate_all(&b).unwrap();
    p.append(&mut b, &h, 0, 1)
}

fn produce_txn(p: &mut PartitionState, pid: i64, epoch: i16, seq: i32) -> AppendInfo {
    let recs: Vec<crate::batch::PlainRecord> = vec![(None, Some(&b"txn"[..]))];
    let mut b = build_batch(0, 1, Some((pid, epoch, seq)), 0x10, &recs);
    let h = validate_all(&b).unwrap();
    match p.append(&mut b, &h, 0, 1).unwrap() {
        AppendOutcome::Appended(i) => i,
        other => panic!("{other:?}"),
    }
}

#[test]
fn open_transactions_pin_the_last_stable_offset_until_their_marker() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 1, 0, 0, 2).unwrap(); // offsets 0-1, not transactional
    produce_txn(&mut p, 7, 0, 0); // offset 2
    produce(&mut p, 1, 0, 2, 1).unwrap(); // offset 3
    produce_txn(&mut p, 8, 0, 0); // offset 4
    assert_eq!(p.last_stable_offset(), 2);
    let marker = p.write_marker(7, 0, true, 0, 0, 1).unwrap().unwrap();
    assert_eq!(marker.base_offset, 5);
    assert_eq!(p.last_stable_offset(), 4);
    p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap();
    assert_eq!(p.last_stable_offset(), 7);
    assert_eq!(
        p.aborted,
        vec![AbortedTxn {
            producer_id: 8,
            first_offset: 4,
            last_offset: 6
        }]
    );
    assert_eq!(p.aborted_in_range(0, 4), vec![]);
    assert_eq!(p.aborted_in_range(0, 5).len(), 1);
    // A second marker for a closed transaction is a no-op.
    assert_eq!(p.write_marker(8, 0, false, 0, 0, 1).unwrap(), None);
}

/// What a partition knows of the coordinator's transaction number of each open
/// transaction (issue 24: a coordinator's notice is judged against it).
#[test]
fn a_partition_knows_which_transaction_is_open_only_for_what_it_saw_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.open_txn_seq(7, 1), OpenTxn::None);
    // Transaction 1 opened here by a verified batch.
    let was_open = p.has_open_txn(7);
    produce_txn(&mut p, 7, 0, 0);
    p.note_txn_seq(7, 1, was_open);
    assert_eq!(p.open_txn_seq(7, 1), OpenTxn::Named);
    assert_eq!(
        p.open_txn_seq(7, 0),
        OpenTxn::Later,
        "a notice of an earlier transaction"
    );
    assert_eq!(
        p.open_txn_seq(7, 2),
        OpenTxn::Unknown,
        "a later one cannot be finishing"
    );
    // A second batch of the same transaction keeps the number.
    produce_txn(&mut p, 7, 0, 1);
    p.note_txn_seq(7, 1, true);
    assert_eq!(p.open_txn_seq(7, 1), OpenTxn::Named);
    p.write_marker(7, 0, true, 0, 0, 1).unwrap().unwrap();
    assert_eq!(p.open_txn_seq(7, 1), OpenTxn::None);
    // Transaction 2, then the partition opened again: open, number unknown.
    produce_txn(&mut p, 7, 0, 2);
    p.note_txn_seq(7, 2, false);
    drop(p);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.open_txn_seq(7, 2), OpenTxn::Unknown);
    // A batch continuing a transaction of unknown number leaves it unknown.
    produce_txn(&mut p, 7, 0, 3);
    p.note_txn_seq(7, 2, true);
    assert_eq!(p.open_txn_seq(7, 2), OpenTxn::Unknown);
    // A marker closing a transaction of unknown number.
    p.write_marker(7, 0, false, 0, 0, 1).unwrap().unwrap();
    produce_txn(&mut p, 7, 0, 4);
    p.note_txn_seq(7, 3, false);
    assert_eq!(p.open_txn_seq(7, 3), OpenTxn::Named);
    // A stale-epoch marker is ignored and keeps the number of the open transaction.
    produce_txn(&mut p, 7, 1, 0);
    p.note_txn_seq(7, 3, true);
    assert_eq!(p.write_marker(7, 0, true, 0, 0, 1).unwrap(), None);
    assert_eq!(p.open_txn_seq(7, 3), OpenTxn::Named);
}

#[test]
fn aborted_transactions_and_open_ones_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0);
    p.write_marker(8, 0, false, 0, 0, 1).unwrap();
    produce_txn(&mut p, 9, 0, 0); // left open
    drop(p);
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(
        p.aborted,
        vec![AbortedTxn {
            producer_id: 8,
            first_offset: 0,
            last_offset: 1
        }]
    );
    assert_eq!(p.last_stable_offset(), 2);
    // Without its index file the abort is re-derived from the log.
    drop(p);
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "txnindex") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.aborted.len(), 1);
}

#[test]
fn an_abort_marker_at_a_bumped_epoch_fences_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 7, 0, 0);
    p.write_marker(7, 1, false, 0, 0, 1).unwrap().unwrap();
    let recs: Vec<crate::batch::PlainRecord> = vec![(None, Some(&b"zombie"[..]))];
    let mut b = build_batch(0, 1, Some((7, 0, 1)), 0x10, &recs);
    let h = validate_all(&b).unwrap();
    assert!(matches!(
        p.append(&mut b, &h, 0, 1),
        Err(AppendError::Sequence(SequenceError::StaleEpoch { .. }))
    ));
}

#[test]
fn a_marker_older_than_the_producers_epoch_never_closes_its_newer_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    // A hanging transaction at epoch 3, a repair queued for it, then the producer's
    // new session at epoch 5 opens a transaction here before the repair lands.
    produce_txn(&mut p, 7, 5, 0);
    assert_eq!(p.write_marker(7, 3, false, 0, 0, 1).unwrap(), None);
    assert_eq!(p.last_stable_offset(), 0, "epoch 5's transaction is still open");
    assert!(p.aborted.is_empty());
    assert!(p.write_marker(7, 5, true, 0, 0, 1).unwrap().is_some());
    assert_eq!(p.last_stable_offset(), 2);
}

#[test]
fn a_restart_keeps_the_dedupe_window_from_snapshot_and_log_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 7, 0, 0, 2).unwrap();
    p.write_snapshot(1).unwrap();
    produce(&mut p, 7, 0, 2, 2).unwrap(); // only in the log tail
    drop(p);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.replayed_from, 2);
    assert_eq!(
        produce(&mut p, 7, 0, 0, 2).unwrap(),
        AppendOutcome::Duplicate {
            base_offset: 0,
            last_offset: 1
        }
    );
    assert_eq!(
        produce(&mut p, 7, 0, 2, 2).unwrap(),
        AppendOutcome::Duplicate {
            base_offset: 2,
            last_offset: 3
        }
    );
    assert!(matches!(
        produce(&mut p, 7, 0, 9, 1),
        Err(AppendError::Sequence(SequenceError::OutOfOrder { .. }))
    ));
    assert!(matches!(
        produce(&mut p, 7, 0, 4, 1).unwrap(),
        AppendOutcome::Appended(_)
    ));
}

#[test]
fn without_a_snapshot_the_whole_log_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 7, 0, 0, 1).unwrap();
    drop(p);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(matches!(
        produce(&mut p, 7, 0, 0, 1).unwrap(),
        AppendOutcome::Duplicate { .. }
    ));
}

#[test]
fn a_roll_writes_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 150,
        ..LogConfig::default()
    };
    let mut p = PartitionState::open(dir.path(), config.clone(), 0).unwrap();
    for seq in 0..4 {
        produce(&mut p, 7, 0, seq, 1).unwrap();
    }
    let snap = ProducerStateSnapshot::read(dir.path())
        .unwrap()
        .expect("written on roll");
    assert!(snap.offset > 0);
    assert_eq!(snap.producers[0].producer_id, 7);
    assert_eq!(snap.version, SNAPSHOT_FORMAT_VERSION);
    // It names the batch it ends with, as stored in the log.
    let last = p.log.batch_ending_at(snap.offset).unwrap().unwrap();
    assert_eq!(snap.last_batch, Some(BatchId::of(&last)));
    assert_eq!(last.last_offset(), snap.offset - 1);
    drop(p);
    let p = PartitionState::open(dir.path(), config, 0).unwrap();
    assert_eq!(p.replayed_from, snap.offset);
}

#[test]
fn a_snapshot_of_an_empty_log_names_no_batch_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    p.write_snapshot(1).unwrap();
    let snap = ProducerStateSnapshot::read(dir.path()).unwrap().unwrap();
    assert_eq!((snap.offset, snap.last_batch), (0, None));
    drop(p);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(ProducerStateSnapshot::path(dir.path()).exists());
    produce(&mut p, 7, 0, 0, 1).unwrap();
    drop(p);
    // Once the log has data, an identity of "no batch" at offset 0 still matches.
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(ProducerStateSnapshot::path(dir.path()).exists());
    assert_eq!(p.replayed_from, 0);
}

#[test]
fn snapshot_checks_cover_every_rule() {
    let id = |base_offset, crc| Some(BatchId { base_offset, crc });
    let snap = |version, offset, last_batch| ProducerStateSnapshot {
        version,
        offset,
        last_batch,
        written_ms: 0,
        producers: vec![],
    };
    // Format 2: exactly the batch it names, inside the log.
    assert_eq!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, id(8, 5)), None);
    assert_eq!(snapshot_mismatch(&snap(2, 12, id(8, 5)), 0, 12, id(8, 5)), None);
    assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, id(8, 6))
        .unwrap()
        .contains("another timeline"));
    assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, id(9, 5)).is_some());
    assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 0, 12, None).is_some());
    assert!(snapshot_mismatch(&snap(2, 13, id(8, 5)), 0, 12, None)
        .unwrap()
        .contains("log ends at 12"));
    assert!(snapshot_mismatch(&snap(2, 10, id(8, 5)), 11, 20, None)
        .unwrap()
        .contains("below the log start"));
    // At the log start: "no batch" proves itself; a named batch retention deleted does not.
    assert_eq!(snapshot_mismatch(&snap(2, 0, None), 0, 12, None), None);
    assert_eq!(snapshot_mismatch(&snap(2, 11, None), 11, 20, None), None);
    assert!(snapshot_mismatch(&snap(2, 11, id(8, 5)), 11, 20, None).is_some());
    // Format 1: within the log and on a batch boundary.
    assert_eq!(snapshot_mismatch(&snap(1, 10, None), 0, 12, id(8, 5)), None);
    assert_eq!(snapshot_mismatch(&snap(1, 0, None), 0, 12, None), None);
    assert!(snapshot_mismatch(&snap(1, 10, None), 0, 12, None)
        .unwrap()
        .contains("batch boundary"));
    assert!(snapshot_mismatch(&snap(1, 13, None), 0, 12, None).is_some());
}

#[test]
fn an_index_entry_that_cannot_be_written_blocks_snapshots_until_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0
                                  // The index file cannot be opened for writing (a directory sits at its path).
    let index = dir.path().join(format!("{:020}.txnindex", 0));
    std::fs::create_dir(&index).unwrap();
    // The marker is in the log and must still be made durable by the caller: Ok.
    let info = p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap();
    assert_eq!(info.base_offset, 1);
    assert_eq!(p.aborted.len(), 1, "served as aborted right away");
    assert!(
        p.write_snapshot(1).is_err(),
        "no snapshot may cover a non-durable entry"
    );
    assert!(!ProducerStateSnapshot::path(dir.path()).exists());
    std::fs::remove_dir(&index).unwrap();
    p.write_snapshot(1).unwrap();
    assert_eq!(
        read_txn_indexes(dir.path()).unwrap(),
        vec![AbortedTxn {
            producer_id: 8,
            first_offset: 0,
            last_offset: 1
        }]
    );
}

#[test]
fn a_corrupt_snapshot_refuses_the_partition_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SNAPSHOT_FILE), b"{\"version\": 1, \"offset\": ").unwrap();
    let err = PartitionState::open(dir.path(), LogConfig::default(), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(SNAPSHOT_FILE), "{err}");
    std::fs::write(dir.path().join(SNAPSHOT_FILE), b"{\"version\": 7}").unwrap();
    let err = PartitionState::open(dir.path(), LogConfig::default(), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("unknown format version 7"), "{err}");
}

fn segment0(dir: &Path) -> PathBuf {
    dir.join(format!("{:020}.log", 0))
}

/// Cuts the first segment to `len` bytes, as a crash that lost unsynced log data
/// (recovery then finds the log ending there).
fn lose_log_tail(dir: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(segment0(dir)).unwrap();
    f.set_len(len).unwrap();
}

fn txnindex_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        .collect();
    out.sort();
    out
}

#[test]
fn a_snapshot_past_the_recovered_log_end_is_deleted_and_never_trusted_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 7, 0, 0, 1).unwrap(); // offset 0
    let keep = p.log.size_bytes();
    produce(&mut p, 7, 0, 1, 1).unwrap(); // offset 1
    produce(&mut p, 7, 0, 2, 1).unwrap(); // offset 2
    p.write_snapshot(1).unwrap(); // covers [0, 3)
    drop(p);
    lose_log_tail(dir.path(), keep);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.log.log_end_offset(), 1);
    assert!(
        !ProducerStateSnapshot::path(dir.path()).exists(),
        "a snapshot of a tail recovery cut must be deleted"
    );
    assert_eq!(p.replayed_from, 0);
    // Another producer grows the log past the old snapshot's offset.
    produce(&mut p, 9, 0, 0, 3).unwrap(); // offsets 1-3
    drop(p);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    // Producer 7's sequences 1 and 2 were lost: their retry is new data, not a
    // duplicate of producer 9's records.
    assert!(matches!(
        produce(&mut p, 7, 0, 1, 1).unwrap(),
        AppendOutcome::Appended(_)
    ));
    assert!(matches!(
        produce(&mut p, 9, 0, 0, 3).unwrap(),
        AppendOutcome::Duplicate { base_offset: 1, .. }
    ));
}

#[test]
fn a_snapshot_whose_last_batch_is_not_in_the_log_is_deleted_and_the_log_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 7, 0, 0, 1).unwrap(); // offset 0
    let keep = p.log.size_bytes();
    produce(&mut p, 7, 0, 1, 1).unwrap(); // offset 1
    p.write_snapshot(1).unwrap(); // covers [0, 2)
    let stale = std::fs::read(ProducerStateSnapshot::path(dir.path())).unwrap();
    drop(p);
    lose_log_tail(dir.path(), keep);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 9, 0, 0, 1).unwrap(); // offset 1 again, another timeline
    drop(p);
    // The old snapshot comes back (say its unlink never reached the disk): its
    // offset is inside the log again, but offset 1 holds another batch now.
    std::fs::write(ProducerStateSnapshot::path(dir.path()), &stale).unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(!ProducerStateSnapshot::path(dir.path()).exists());
    assert_eq!(p.replayed_from, 0);
    assert!(matches!(
        produce(&mut p, 9, 0, 0, 1).unwrap(),
        AppendOutcome::Duplicate { base_offset: 1, .. }
    ));
    assert!(matches!(
        produce(&mut p, 7, 0, 1, 1).unwrap(),
        AppendOutcome::Appended(_)
    ));
}

#[test]
fn an_old_snapshot_is_kept_on_a_batch_boundary_and_its_aborts_are_rederived() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0
    p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
    produce(&mut p, 1, 0, 0, 2).unwrap(); // offsets 2-3
    p.write_snapshot(1).unwrap(); // covers [0, 4)
    drop(p);
    // As written by a build before format 2, whose .txnindex was never fsynced
    // and whose entry a crash therefore lost.
    let path = ProducerStateSnapshot::path(dir.path());
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.insert("version".into(), 1.into());
    obj.remove("last_batch");
    let v1 = serde_json::to_vec(&v).unwrap();
    std::fs::write(&path, &v1).unwrap();
    for f in txnindex_files(dir.path()) {
        std::fs::remove_file(f).unwrap();
    }
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.replayed_from, 4, "an old snapshot on a batch boundary is used");
    assert_eq!(
        p.aborted,
        vec![AbortedTxn {
            producer_id: 8,
            first_offset: 0,
            last_offset: 1
        }],
        "the abort before the old snapshot is re-derived from the log"
    );
    assert!(matches!(
        produce(&mut p, 1, 0, 0, 2).unwrap(),
        AppendOutcome::Duplicate { base_offset: 2, .. }
    ));
    drop(p);
    // An old snapshot whose offset is inside a batch proves nothing: deleted.
    obj_offset(&path, &v1, 3);
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.replayed_from, 0);
    assert!(!path.exists());
}

fn obj_offset(path: &Path, json: &[u8], offset: i64) {
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    v.as_object_mut().unwrap().insert("offset".into(), offset.into());
    std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn a_torn_txnindex_tail_is_cut_at_open_so_later_entries_stay_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0
    p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
    drop(p);
    let index = txnindex_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&index).unwrap();
    assert_eq!(bytes.len(), TXN_INDEX_ENTRY_LEN);
    bytes.extend_from_slice(&[0xAB; 10]); // a torn second entry
    std::fs::write(&index, &bytes).unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(std::fs::metadata(&index).unwrap().len(), TXN_INDEX_ENTRY_LEN as u64);
    produce_txn(&mut p, 9, 0, 0); // offset 2
    p.write_marker(9, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 3
    p.write_snapshot(1).unwrap(); // both aborts now come from the index alone
    drop(p);
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(std::fs::metadata(&index).unwrap().len(), 2 * TXN_INDEX_ENTRY_LEN as u64);
    assert_eq!(
        p.aborted,
        vec![
            AbortedTxn {
                producer_id: 8,
                first_offset: 0,
                last_offset: 1
            },
            AbortedTxn {
                producer_id: 9,
                first_offset: 2,
                last_offset: 3
            }
        ]
    );
}

#[test]
fn txnindex_entries_past_the_recovered_log_end_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0
    let keep = p.log.size_bytes();
    p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
    drop(p);
    // The index entry reached the disk, the marker did not.
    lose_log_tail(dir.path(), keep);
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.aborted, vec![]);
    assert_eq!(
        read_txn_indexes(dir.path()).unwrap(),
        vec![],
        "the file no longer lists it"
    );
    assert_eq!(p.last_stable_offset(), 0, "the transaction is open again");
    // Whatever lands at offset 1 in this timeline (here a COMMIT) must not be
    // described by the vanished ABORT's entry.
    p.write_marker(8, 0, true, 0, 0, 1).unwrap().unwrap(); // COMMIT at 1
    drop(p);
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.aborted, vec![]);
    assert_eq!(p.aborted_in_range(0, 2), vec![]);
}

/// An entry whose offset holds no ABORT marker of its producer is removed at open,
/// wherever it came from: a deposed leader that wrote its ABORT's entry by its own idea
/// of the log into its successor's index, which holds a COMMIT of the producer there
/// or another producer's records. Kept, it would have read_committed consumers skip
/// the producer's committed records it covers. The snapshot covers the whole log, so
/// no replay re-derives (or contradicts) the entries: the log alone judges them.
#[test]
fn txnindex_entries_whose_offset_holds_no_abort_marker_of_their_producer_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0
    p.write_marker(8, 0, true, 0, 0, 1).unwrap().unwrap(); // COMMIT at 1
    produce_txn(&mut p, 9, 0, 0); // offset 2
    p.write_marker(9, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 3
    p.write_snapshot(1).unwrap();
    drop(p);
    let real = AbortedTxn {
        producer_id: 9,
        first_offset: 2,
        last_offset: 3,
    };
    let strays = [
        // Producer 8's committed transaction: a COMMIT at 1.
        AbortedTxn {
            producer_id: 8,
            first_offset: 0,
            last_offset: 1,
        },
        // Producer 9's records at 2, no marker.
        AbortedTxn {
            producer_id: 9,
            first_offset: 2,
            last_offset: 2,
        },
        // Producer 9's ABORT at 3, named for producer 8.
        AbortedTxn {
            producer_id: 8,
            first_offset: 0,
            last_offset: 3,
        },
    ];
    let index = txnindex_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&index).unwrap();
    for a in &strays {
        bytes.extend_from_slice(&txn_index_entry(a, a.last_offset));
    }
    std::fs::write(&index, &bytes).unwrap();
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.aborted, vec![real]);
    assert_eq!(
        p.aborted_in_range(0, 2),
        vec![],
        "producer 8's committed records are served"
    );
    assert_eq!(
        read_txn_indexes(dir.path()).unwrap(),
        vec![real],
        "the file no longer lists them"
    );
}

#[test]
fn nothing_is_written_when_any_batch_of_a_request_is_out_of_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    let one: Vec<crate::batch::PlainRecord> = vec![(None, Some(b"v"))];
    let mut b = build_batch(0, 1, Some((7, 0, 0)), 0, &one);
    b.extend(build_batch(0, 1, Some((7, 0, 5)), 0, &one));
    let h = validate_all(&b).unwrap();
    assert!(p.append(&mut b, &h, 0, 1).is_err());
    assert_eq!(p.log.log_end_offset(), 0);
    let mut b = build_batch(0, 1, Some((7, 0, 0)), 0, &one);
    b.extend(build_batch(0, 1, Some((7, 0, 1)), 0, &one));
    let h = validate_all(&b).unwrap();
    assert!(matches!(
        p.append(&mut b, &h, 0, 1).unwrap(),
        AppendOutcome::Appended(_)
    ));
    assert_eq!(p.log.log_end_offset(), 2);
}

/// A control batch below a log start that DeleteRecords moved past it, with no
/// producer-state snapshot after it (a crash before the next roll or shutdown): the
/// replay at open reads the marker's type all the same, and the partition opens.
#[test]
fn a_marker_below_a_moved_log_start_is_replayed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0
    p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 1
    produce(&mut p, 1, 0, 0, 2).unwrap(); // offsets 2-3
    p.delete_records(2).unwrap();
    drop(p);
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.log.log_start_offset(), 2);
    assert_eq!(p.log.log_end_offset(), 4);
    assert!(!p.has_open_txn(8), "the ABORT closed producer 8's transaction");
}

/// A transaction whose first batch lay in a segment deleted since (retention,
/// DeleteRecords), its ABORT indexed with that first offset: a full replay at open
/// (no snapshot: a kill -9 after a take-over's fresh segment) derives the abort from
/// the transaction's first surviving batch, a different first offset, and indexed it a
/// second time. librdkafka's read_committed consumer lets each ABORT marker pass one
/// aborted start offset of its producer: with two for one marker, the producer's next
/// committed transaction read in the same fetch was dropped as aborted.
#[test]
fn a_full_replay_never_indexes_an_abort_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce_txn(&mut p, 8, 0, 0); // offset 0, the transaction's first batch
    p.roll(1).unwrap(); // a segment at 1, no snapshot (a take-over's fresh segment)
    produce_txn(&mut p, 8, 0, 1); // offset 1
    p.write_marker(8, 0, false, 0, 0, 1).unwrap().unwrap(); // ABORT at 2, indexed {8, 0, 2}
    p.delete_records(2).unwrap(); // segment 0 goes
    drop(p); // kill -9: no snapshot
    let expected = vec![AbortedTxn {
        producer_id: 8,
        first_offset: 0,
        last_offset: 2,
    }];
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(
        p.log.first_segment_base(),
        1,
        "the replay starts past the transaction's first batch"
    );
    assert_eq!(p.aborted, expected);
    drop(p);
    // Nor was a second entry written for the next open.
    let p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(p.aborted, expected);
}

/// Producer state has no bound but time (`producer.id.expiration.ms`), and a snapshot
/// was written whatever its size: past the 256 MiB every state-file read is capped
/// at, the partition could no longer be opened by any broker (the next restart or
/// take-over answered KAFKA_STORAGE_ERROR for good), though the log it summarises
/// was fine. A snapshot no reader would take is not written: the previous one stays,
/// and the next open replays more of the log.
#[test]
fn a_snapshot_no_reader_would_take_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    produce(&mut p, 1, 0, 0, 1).unwrap();
    p.write_snapshot(1).unwrap();
    let before = std::fs::read(ProducerStateSnapshot::path(dir.path())).unwrap();
    for pid in 2..300 {
        produce(&mut p, pid, 0, 0, 1).unwrap();
    }
    let e = p.write_snapshot_within(1, 10_000).unwrap_err().to_string();
    assert!(
        e.contains("producer-state.snapshot") && e.contains("not written"),
        "{e}"
    );
    assert_eq!(std::fs::read(ProducerStateSnapshot::path(dir.path())).unwrap(), before);
    drop(p);
    let p = PartitionState::open(dir.path(), LogConfig::default(), 1).unwrap();
    assert_eq!(
        p.producers.producers.len(),
        299,
        "the log after the old snapshot replayed"
    );
}

/// [`a_snapshot_no_reader_would_take_is_not_written`] at the real cap: 900,000
/// producers of one record each (a few requests' worth of batches; a pretty-printed
/// snapshot of them took 280 MB, and the partition did not open again).
#[test]
fn a_partition_with_a_million_producers_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = PartitionState::open(dir.path(), LogConfig::default(), 0).unwrap();
    for chunk in 0..90i64 {
        let mut recs = Vec::new();
        for i in 0..10_000i64 {
            recs.extend(build_batch(
                0,
                1,
                Some((chunk * 10_000 + i, 0, 0)),
                0,
                &[(None, Some(b"v"))],
            ));
        }
        let hs = validate_all(&recs).unwrap();
        p.append(&mut recs, &hs, 0, 1).unwrap();
    }
    let _ = p.write_snapshot(1);
    drop(p);
    PartitionState::open(dir.path(), LogConfig::default(), 1).expect("reopens");
}
