//! Issue 25 item 14 and the simulation's fsync errors: a process whose fdatasync of a
//! slot journal fails marks the journal (`FOLD_DUE_MODE`, a mode bit set with
//! `fchmod`), so that whoever holds the slot next — another process, also after the
//! failing one died — rewrites the slot from what it reads before appending. Without
//! the mark only the failing process knew: another process appended behind the lines
//! that may never reach the disk, its own sync succeeded (Linux reports a write-back
//! error once), and its acknowledged line would be cut off with them when the page
//! cache drops them or the power goes.
//! Its own test binary: the failpoint is process-wide.

mod common;

use common::entry;
use kaas_core::layout::Volume;
use kaas_core::txn_store::{GroupCommit, SlotOp, TxnStateStore, FOLD_DUE_MODE};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

#[test]
fn a_journal_whose_sync_failed_is_rewritten_by_whoever_holds_the_slot_next() {
    // This binary has this one test and nothing has read the failpoints yet: the
    // first sync fails.
    std::env::set_var("KAAS_FAILPOINTS", "txn-journal-sync=error*1");
    let dir = tempfile::tempdir().unwrap();
    let slot = kaas_core::txn::slot_for("t1");
    let failing = TxnStateStore::for_broker(Volume::new(dir.path()), 0);
    let group = GroupCommit::default();
    let journal = failing.journal_path(slot);
    let append = |store: &TxnStateStore, id: &str, at: i64| {
        let lock = store.lock_slot(slot).unwrap();
        let mut state = None;
        store.catch_up(&lock, &mut state).unwrap();
        let st = state.as_mut().unwrap();
        let g = store.append(&lock, st, &[SlotOp::Put(entry(id))], at).unwrap();
        (g, st.journal())
    };
    let (g, j) = append(&failing, "t1", 1);
    group.appended(slot, g, j);
    // The failing process appends again, lets the lock go (group commit), and its
    // sync fails.
    let (g, j) = append(&failing, "t2", 2);
    let err = group
        .wait_durable(&failing, slot, group.appended(slot, g, j))
        .unwrap_err();
    assert!(err.to_string().contains("txn-journal-sync"), "{err}");
    let marked = std::fs::metadata(&journal).unwrap();
    assert_ne!(marked.permissions().mode() & FOLD_DUE_MODE, 0, "the journal is marked");

    // A process whose sync of the marked journal succeeds (the kernel told the
    // failing one) counts nothing in it durable: lines it appended behind the
    // failed ones would be cut off with them.
    let behind = TxnStateStore::for_broker(Volume::new(dir.path()), 2);
    let behind_group = GroupCommit::default();
    let err = behind_group.sync_now(&behind, slot).unwrap_err().to_string();
    assert!(err.contains("marked for a rewrite"), "{err}");
    assert!(behind_group.poisoned(slot));

    // Another process holds the slot next (the failing one may be dead): it does
    // not take its cached copy on the cheap path, rewrites the slot from what it
    // reads, and appends to the fresh journal.
    let other = TxnStateStore::for_broker(Volume::new(dir.path()), 1);
    let mut cached = Some(other.load(slot).unwrap());
    let lock = other.lock_slot(slot).unwrap();
    assert!(
        !other.catch_up_cheaply(&lock, &mut cached).unwrap(),
        "a rewrite is due: not the cheap path"
    );
    other.catch_up(&lock, &mut cached).unwrap();
    let rewritten = std::fs::metadata(&journal).unwrap();
    assert_ne!(rewritten.ino(), marked.ino(), "a fresh journal before the next append");
    assert_eq!(
        rewritten.permissions().mode() & FOLD_DUE_MODE,
        0,
        "and it carries no mark"
    );
    let st = cached.as_mut().unwrap();
    assert!(
        st.entry("t1").is_some() && st.entry("t2").is_some(),
        "nothing read was lost"
    );
    other.append(&lock, st, &[SlotOp::Put(entry("t3"))], 3).unwrap();
    other.sync(slot).unwrap();
    drop(lock);

    // Only once: the holder after it reads the slot as it is.
    let lock = other.lock_slot(slot).unwrap();
    let mut state = None;
    other.catch_up(&lock, &mut state).unwrap();
    assert_eq!(std::fs::metadata(&journal).unwrap().ino(), rewritten.ino());
    assert!(state.unwrap().entry("t3").is_some());
}
