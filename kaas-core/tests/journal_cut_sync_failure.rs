//! Issue 25 item 14: cutting a torn tail off a transaction slot's journal ends with an
//! fdatasync; when that fails, nothing later in this process may count on the
//! journal's pages (the kernel reports a write-back error once, and may have dropped
//! them), so the slot is written again from memory — a fold into a fresh checkpoint
//! and journal — before its next write, as after a failed sync of an append.
//! Its own test binary: the failpoint is process-wide.

mod common;

use common::entry;
use kaas_core::layout::Volume;
use kaas_core::txn_store::{SlotOp, TxnStateStore};
use std::io::Write;
use std::os::unix::fs::MetadataExt;

#[test]
fn a_failed_sync_of_a_torn_tails_cut_has_the_slot_written_again_before_its_next_write() {
    // This binary has this one test and nothing has read the failpoints yet.
    std::env::set_var("KAAS_FAILPOINTS", "txn-journal-cut-sync=error*1");
    let dir = tempfile::tempdir().unwrap();
    let store = TxnStateStore::for_broker(Volume::new(dir.path()), 0);
    let slot = kaas_core::txn::slot_for("t1");
    {
        let lock = store.lock_slot(slot).unwrap();
        let mut state = None;
        store.catch_up(&lock, &mut state).unwrap();
        let st = state.as_mut().unwrap();
        store.append(&lock, st, &[SlotOp::Put(entry("t1"))], 5).unwrap();
        store.sync(slot).unwrap();
    }
    // An append cut by a crash: half a line at the journal's end.
    let journal = store.journal_path(slot);
    let inode = std::fs::metadata(&journal).unwrap().ino();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap()
        .write_all(br#"{"version":2,"generation":"#)
        .unwrap();

    // The next holder cuts it; the cut's fdatasync fails.
    let lock = store.lock_slot(slot).unwrap();
    let mut state = None;
    let err = store.catch_up(&lock, &mut state).unwrap_err();
    assert!(err.to_string().contains("txn-journal-cut-sync"), "{err}");
    drop(lock);

    // A reader without the lock reads the slot meanwhile (as the coordinator's
    // cache is filled); the holder after it (this process) does not take that copy
    // as it is on the cheap path, and writes the slot again from memory first.
    let mut state = Some(store.load(slot).unwrap());
    let lock = store.lock_slot(slot).unwrap();
    assert!(
        !store.catch_up_cheaply(&lock, &mut state).unwrap(),
        "a rewrite is due: not the cheap path"
    );
    store.catch_up(&lock, &mut state).unwrap();
    assert_ne!(
        std::fs::metadata(&journal).unwrap().ino(),
        inode,
        "a fresh journal: the slot was folded from memory before anything else"
    );
    assert!(state.as_ref().unwrap().entry("t1").is_some(), "nothing lost");
    let st = state.as_mut().unwrap();
    store.append(&lock, st, &[SlotOp::Remove("t1".into())], 6).unwrap();
    store.sync(slot).unwrap();
    // And only once: the next holder reads the slot as it is.
    drop(lock);
    let inode = std::fs::metadata(&journal).unwrap().ino();
    let lock = store.lock_slot(slot).unwrap();
    let mut state = None;
    store.catch_up(&lock, &mut state).unwrap();
    assert_eq!(std::fs::metadata(&journal).unwrap().ino(), inode);
    assert!(state.unwrap().entry("t1").is_none());
}
