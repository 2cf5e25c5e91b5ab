use super::*;
use crate::txn::{init_producer_id, Actor, InitOutcome, TxnState};
use proptest::prelude::*;

/// A lock held under no holder's line is never taken over (by the time rule).
const NEVER: UnnamedHold = UnnamedHold::NEVER;

/// Taken over once held under no holder's line for `after`.
fn unnamed_after(after: std::time::Duration) -> UnnamedHold {
    UnnamedHold {
        after,
        gap: std::time::Duration::from_secs(15),
    }
}

fn entry(id: &str) -> TxnEntry {
    match init_producer_id(None, id, 60_000, (-1, -1), 1, &Actor::Broker { id: 0 }, &mut || 7) {
        InitOutcome::Ready { entry, .. } => entry,
        other => panic!("{other:?}"),
    }
}

/// `e` after one more transition (history extended, oldest dropped past the bound).
fn stepped(e: &TxnEntry, at_ms: i64) -> TxnEntry {
    let mut next = e.clone();
    next.txn_seq += 1;
    next.last_update_ms = at_ms;
    next.history.push_back(Transition {
        at_ms,
        from: e.state,
        to: TxnState::Ongoing,
        producer_id: e.producer_id,
        epoch: e.producer_epoch,
        reason: "test".into(),
        by: Actor::Broker { id: 1 },
    });
    while next.history.len() > HISTORY_LEN {
        next.history.pop_front();
    }
    next
}

fn store() -> (tempfile::TempDir, TxnStateStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TxnStateStore::new(Volume::new(dir.path()));
    (dir, store)
}

/// A slot's lock and its state, caught up, as a writer holds them.
/// A journal for the group commit to sync, for tests that give it generations without
/// writing their lines (the lines themselves do not matter there).
fn empty_journal(store: &TxnStateStore, slot: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(store.dir()).unwrap();
    std::fs::write(store.journal_path(slot), b"").unwrap();
    std::fs::metadata(store.journal_path(slot)).unwrap().ino()
}

/// The journal inode given to the group commit by a test whose journal is never
/// synced.
const JOURNAL: u64 = 1;

fn locked(store: &TxnStateStore, slot: u32) -> (SlotLock, SlotState) {
    let lock = store.lock_slot(slot).unwrap();
    let mut state = None;
    store.catch_up(&lock, &mut state).unwrap();
    (lock, state.unwrap())
}

fn journal_len(store: &TxnStateStore, slot: u32) -> u64 {
    std::fs::metadata(store.journal_path(slot)).map_or(0, |m| m.len())
}

#[test]
fn the_slot_is_fnv1a_of_the_id_modulo_50() {
    // FNV-1a("a") = 0xe40c292c; 0xe40c292c % 50 = 38.
    assert_eq!(slot_for("a"), 0xe40c_292c % 50);
    assert_eq!(slot_for(""), 0x811c_9dc5 % 50);
    assert!((0..1000).all(|i| slot_for(&format!("txn-{i}")) < SLOTS));
}

#[test]
fn updates_bump_the_generation_and_survive_a_reload() {
    let (_dir, store) = store();
    let slot = slot_for("t1");
    assert!(store.stamp(slot).is_none());
    store
        .update(slot, 5, |entries| {
            entries.insert("t1".into(), entry("t1"));
            ((), true)
        })
        .unwrap();
    store.update(slot, 6, |_| ((), false)).unwrap();
    let file = store.read_slot(slot).unwrap();
    assert_eq!(file.generation, 1, "an unchanged update does not write");
    assert_eq!(file.updated_ms, 5);
    let stamp = store.stamp(slot).unwrap();
    store
        .update(slot, 7, |entries| {
            entries.get_mut("t1").unwrap().timeout_ms = 1;
            ((), true)
        })
        .unwrap();
    assert_ne!(store.stamp(slot).unwrap(), stamp);
    assert_eq!(store.read_slot(slot).unwrap().generation, 2);
    assert_eq!(store.get("t1").unwrap().unwrap().timeout_ms, 1);
    assert!(store.lock_path(slot).exists());
    let cp: SlotFile = serde_json::from_slice(&std::fs::read(store.slot_path(slot)).unwrap()).unwrap();
    assert_eq!(
        (cp.version, cp.generation, cp.entries.len()),
        (SLOT_FORMAT_VERSION, 0, 0),
        "a version-2 checkpoint is written before the first line; small journals are not folded"
    );
    store
        .update(slot, 8, |entries| {
            entries.remove("t1");
            ((), true)
        })
        .unwrap();
    let file = store.read_slot(slot).unwrap();
    assert_eq!((file.generation, file.entries.len()), (3, 0));
}

#[test]
fn a_corrupt_slot_file_is_an_error_naming_it_and_is_never_overwritten() {
    let (_dir, store) = store();
    std::fs::create_dir_all(store.dir()).unwrap();
    std::fs::write(store.slot_path(3), b"{\"version\": 2, \"slot\": 3, \"gener").unwrap();
    let err = store.read_slot(3).unwrap_err().to_string();
    assert!(err.contains("slot-3.json"), "{err}");
    assert!(store.update(3, 1, |_| ((), true)).is_err());
    assert_eq!(
        std::fs::read(store.slot_path(3)).unwrap(),
        b"{\"version\": 2, \"slot\": 3, \"gener"
    );
    assert!(!store.journal_path(3).exists());
    std::fs::write(store.slot_path(4), b"{\"version\": 3}").unwrap();
    assert!(store
        .read_slot(4)
        .unwrap_err()
        .to_string()
        .contains("unknown format version 3"));
}

/// ARCHITECTURE §3: a transition costs O(1) bytes, whatever the number of ids.
#[test]
fn a_transition_appends_one_short_line_whatever_the_slot_holds() {
    let (_dir, store) = store();
    let grow = |slot: u32, ids: usize| -> u64 {
        let mut guard = store.lock(slot).unwrap();
        let mut ops = Vec::new();
        for i in 0..ids {
            let mut e = entry(&format!("id-{slot}-{i}"));
            for k in 0..HISTORY_LEN as i64 {
                e = stepped(&e, k);
            }
            ops.push(SlotOp::Put(e));
        }
        guard.commit(&ops, 1).unwrap();
        let target = guard.entry(&format!("id-{slot}-0")).unwrap().clone();
        let before = journal_len(&store, slot);
        guard.commit(&[SlotOp::Put(stepped(&target, 99))], 2).unwrap();
        let after = journal_len(&store, slot);
        assert!(after > before, "the transition went to the journal");
        after - before
    };
    let one = grow(1, 1);
    let many = grow(2, 2_000);
    assert!(one < 1_024, "one transition wrote {one} bytes");
    assert!(
        many.abs_diff(one) < 16,
        "a transition wrote {many} bytes in a slot of 2,000 ids, {one} in a slot of one"
    );
    // The history is stored as a delta and read back whole.
    let read = store.read_slot(2).unwrap();
    let e = &read.entries["id-2-0"];
    assert_eq!(e.history.len(), HISTORY_LEN);
    assert_eq!(e.history.back().unwrap().at_ms, 99);
    assert_eq!(e.txn_seq, HISTORY_LEN as u64 + 1);
}

#[test]
fn a_journal_past_its_bound_is_folded_into_the_checkpoint() {
    let (_dir, store) = store();
    let mut guard = store.lock(9).unwrap();
    let mut e = entry("fold-me");
    let mut n = 0;
    let mut before_fold = 0;
    loop {
        let len = journal_len(&store, 9);
        if len < before_fold {
            break;
        }
        before_fold = len;
        e = stepped(&e, n);
        guard.commit(&[SlotOp::Put(e.clone())], n).unwrap();
        n += 1;
        assert!(n < 100_000, "never folded");
    }
    assert_eq!(journal_len(&store, 9), 0, "the fold empties the journal");
    assert!(
        before_fold <= FOLD_MIN_BYTES && before_fold > FOLD_MIN_BYTES - 1_024,
        "folded at {before_fold} journal bytes"
    );
    let cp: SlotFile = serde_json::from_slice(&std::fs::read(store.slot_path(9)).unwrap()).unwrap();
    assert_eq!((cp.version, cp.generation), (SLOT_FORMAT_VERSION, n as u64));
    assert_eq!(cp.entries["fold-me"], e);
    guard.commit(&[SlotOp::Put(stepped(&e, -1))], 0).unwrap();
    assert_eq!(store.read_slot(9).unwrap().generation, n as u64 + 1);
}

#[test]
fn a_version_1_slot_file_opens_and_is_migrated_in_place() {
    let (_dir, store) = store();
    let slot = slot_for("legacy");
    let mut legacy = SlotFile::empty(slot);
    legacy.version = LEGACY_SLOT_FORMAT_VERSION;
    legacy.generation = 41;
    legacy.updated_ms = 3;
    legacy.entries.insert("legacy".into(), entry("legacy"));
    std::fs::create_dir_all(store.dir()).unwrap();
    crate::fsutil::write_json(&store.slot_path(slot), &legacy).unwrap();
    let read = store.read_slot(slot).unwrap();
    assert_eq!((read.version, read.generation), (1, 41));
    assert_eq!(read.entries, legacy.entries);
    store
        .update(slot, 4, |entries| {
            entries.get_mut("legacy").unwrap().timeout_ms = 5;
            ((), true)
        })
        .unwrap();
    let cp: SlotFile = serde_json::from_slice(&std::fs::read(store.slot_path(slot)).unwrap()).unwrap();
    assert_eq!(
        (cp.version, cp.generation),
        (SLOT_FORMAT_VERSION, 41),
        "migrated before the first append"
    );
    let read = store.read_slot(slot).unwrap();
    assert_eq!((read.version, read.generation), (2, 42));
    assert_eq!(read.entries["legacy"].timeout_ms, 5);
}

#[test]
fn a_torn_last_line_is_ignored_by_readers_and_cut_off_by_the_next_writer() {
    let (_dir, store) = store();
    let e = entry("t");
    let slot = slot_for("t");
    store.lock(slot).unwrap().commit(&[SlotOp::Put(e.clone())], 1).unwrap();
    let good = journal_len(&store, slot);
    let mut f = OpenOptions::new().append(true).open(store.journal_path(slot)).unwrap();
    f.write_all(br#"{"version":1,"generation":2,"at_ms":2,"put":{"transactional_id":"t","#)
        .unwrap();
    drop(f);
    let read = store.read_slot(slot).unwrap();
    assert_eq!((read.generation, &read.entries["t"]), (1, &e));
    // Garbage ending in a newline (a torn page) with nothing valid after it: the same.
    let mut f = OpenOptions::new().append(true).open(store.journal_path(slot)).unwrap();
    f.write_all(b"\0\0\0\n\0\0").unwrap();
    drop(f);
    assert_eq!(store.read_slot(slot).unwrap().generation, 1);
    let next = stepped(&e, 3);
    store
        .lock(slot)
        .unwrap()
        .commit(&[SlotOp::Put(next.clone())], 3)
        .unwrap();
    let read = store.read_slot(slot).unwrap();
    assert_eq!((read.generation, &read.entries["t"]), (2, &next));
    let bytes = std::fs::read(store.journal_path(slot)).unwrap();
    assert!(bytes[good as usize..].starts_with(br#"{"version":1,"generation":2,"#));
    assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 2);
}

#[test]
fn the_cheap_catch_up_reads_another_writers_lines_and_leaves_torn_ends_and_folds_to_the_full_one() {
    let (_dir, store) = store();
    let slot = slot_for("t");
    let e = entry("t");
    store.lock(slot).unwrap().commit(&[SlotOp::Put(e.clone())], 1).unwrap();
    let (lock, st) = locked(&store, slot);
    drop(lock);
    let mut cached = Some(st);

    // Another writer (kaasctl, a broker before this one) appended a line.
    let next = stepped(&e, 2);
    store
        .lock(slot)
        .unwrap()
        .commit(&[SlotOp::Put(next.clone())], 2)
        .unwrap();
    let lock = store.lock_slot(slot).unwrap();
    assert!(store.catch_up_cheaply(&lock, &mut cached).unwrap());
    let st = cached.as_ref().unwrap();
    assert_eq!((st.generation(), st.entry("t")), (2, Some(&next)));
    drop(lock);

    // A torn last line: not cheap; the full catch-up cuts it and the state is whole.
    let good = journal_len(&store, slot);
    let mut f = OpenOptions::new().append(true).open(store.journal_path(slot)).unwrap();
    f.write_all(br#"{"version":1,"generation":3,"at_ms":3,"put"#).unwrap();
    drop(f);
    let lock = store.lock_slot(slot).unwrap();
    assert!(!store.catch_up_cheaply(&lock, &mut cached).unwrap());
    store.catch_up(&lock, &mut cached).unwrap();
    assert_eq!(journal_len(&store, slot), good);
    assert_eq!(cached.as_ref().unwrap().generation(), 2);
    drop(lock);

    // Another writer folded (a new checkpoint): not cheap; the full one reads it.
    {
        let mut guard = store.lock(slot).unwrap();
        guard.commit(&[SlotOp::Put(stepped(&next, 4))], 4).unwrap();
        guard.fold().unwrap();
    }
    let lock = store.lock_slot(slot).unwrap();
    assert!(!store.catch_up_cheaply(&lock, &mut cached).unwrap());
    store.catch_up(&lock, &mut cached).unwrap();
    let st = cached.as_ref().unwrap();
    assert_eq!((st.generation(), st.entry("t")), (3, Some(&stepped(&next, 4))));
    assert_eq!(journal_len(&store, slot), 0);

    // Nothing cached: not cheap.
    assert!(!store.catch_up_cheaply(&lock, &mut None).unwrap());
}

#[test]
fn an_invalid_line_followed_by_valid_ones_is_corruption_naming_the_offset() {
    let (_dir, store) = store();
    let slot = slot_for("t");
    let mut guard = store.lock(slot).unwrap();
    let e = entry("t");
    guard.commit(&[SlotOp::Put(e.clone())], 1).unwrap();
    guard.commit(&[SlotOp::Put(stepped(&e, 2))], 2).unwrap();
    guard.commit(&[SlotOp::Remove("t".into())], 3).unwrap();
    drop(guard);
    let path = store.journal_path(slot);
    let mut bytes = std::fs::read(&path).unwrap();
    let first_end = bytes.iter().position(|b| *b == b'\n').unwrap();
    bytes[first_end + 5] = b'#';
    std::fs::write(&path, &bytes).unwrap();
    let err = store.read_slot(slot).unwrap_err().to_string();
    assert!(
        err.contains("slot-") && err.contains(".journal") && err.contains(&format!("byte {}", first_end + 1)),
        "{err}"
    );
    assert!(store.update(slot, 3, |_| ((), true)).is_err());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "a corrupt journal is left as it is"
    );
    // A gap in the generations is corruption too.
    let mut gap = std::fs::read(&path).unwrap();
    gap.truncate(first_end + 1);
    let mut line: JournalLine = serde_json::from_slice(&gap[..first_end]).unwrap();
    line.generation = 5;
    line.history_appended = false;
    gap.extend(serde_json::to_vec(&line).unwrap());
    gap.push(b'\n');
    std::fs::write(&path, &gap).unwrap();
    let err = store.read_slot(slot).unwrap_err().to_string();
    assert!(err.contains("generation 5 follows generation 1"), "{err}");
}

#[test]
fn a_crash_between_the_checkpoint_and_emptying_the_journal_loses_nothing() {
    let (_dir, store) = store();
    let slot = 4;
    let (lock, mut st) = locked(&store, slot);
    let mut e = entry("x");
    for i in 0..5 {
        e = stepped(&e, i);
        store.append(&lock, &mut st, &[SlotOp::Put(e.clone())], i).unwrap();
    }
    let journal = std::fs::read(store.journal_path(slot)).unwrap();
    store.fold(&lock, &mut st).unwrap();
    // As if the truncation never happened: the old lines are back behind the new
    // checkpoint.
    std::fs::write(store.journal_path(slot), &journal).unwrap();
    drop(lock);
    let read = store.read_slot(slot).unwrap();
    assert_eq!((read.generation, &read.entries["x"]), (5, &e));
    let next = stepped(&e, 9);
    store
        .lock(slot)
        .unwrap()
        .commit(&[SlotOp::Put(next.clone())], 9)
        .unwrap();
    let read = store.read_slot(slot).unwrap();
    assert_eq!((read.generation, &read.entries["x"]), (6, &next));
}

#[test]
fn concurrent_appends_share_one_fdatasync() {
    let (_dir, store) = store();
    let group = GroupCommit::default();
    let (lock, mut st) = locked(&store, 0);
    let marks: Vec<Mark> = (0..3)
        .map(|i| {
            let g = store
                .append(&lock, &mut st, &[SlotOp::Put(entry(&format!("g{i}")))], i)
                .unwrap();
            group.appended(0, g, st.journal())
        })
        .collect();
    for m in &marks {
        group.wait_durable(&store, 0, *m).unwrap();
    }
    assert_eq!(group.syncs(), 1, "three waiting transitions, one fdatasync");
    group.flush(&store).unwrap();
    assert_eq!(group.syncs(), 1, "nothing left to flush");
    let g = store.append(&lock, &mut st, &[SlotOp::Remove("g0".into())], 9).unwrap();
    group.appended(0, g, st.journal());
    group.flush(&store).unwrap();
    assert_eq!(group.syncs(), 2);
}

#[test]
fn a_reader_without_the_lock_never_sees_a_torn_or_backward_state_across_folds() {
    let (_dir, store) = store();
    let slot = 7;
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            let (lock, mut st) = locked(&store, slot);
            let mut e = entry("c");
            for i in 1..=400u64 {
                // The entry's txn_seq always equals the generation its line makes.
                e.txn_seq = st.generation() + 1;
                e.last_update_ms = i as i64;
                store
                    .append(&lock, &mut st, &[SlotOp::Put(e.clone())], i as i64)
                    .unwrap();
                if i % 25 == 0 {
                    store.fold(&lock, &mut st).unwrap();
                }
            }
        })
    };
    let mut reader: Option<SlotState> = None;
    let mut last = 0;
    let mut reads = 0;
    while !writer.is_finished() || reads == 0 {
        let st = match &mut reader {
            Some(st) => {
                store.refresh(st).unwrap();
                st
            }
            None => reader.insert(store.load(slot).unwrap()),
        };
        if let Some(e) = st.entry("c") {
            assert_eq!(e.txn_seq, st.generation(), "a state mixing two versions");
        }
        assert!(st.generation() >= last, "went back from {last} to {}", st.generation());
        last = st.generation();
        reads += 1;
    }
    writer.join().unwrap();
    let st = reader.as_mut().unwrap();
    store.refresh(st).unwrap();
    assert_eq!(st.generation(), 400);
    assert_eq!(store.read_slot(slot).unwrap(), st.file);
}

#[test]
fn history_deltas_extend_and_trim() {
    let e = entry("h");
    let mut long = e.clone();
    for i in 0..HISTORY_LEN as i64 + 3 {
        long = stepped(&long, i);
    }
    let next = stepped(&long, 100);
    assert_eq!(appended_history(&long.history, &next.history), Some(1));
    assert_eq!(appended_history(&e.history, &e.history), Some(0));
    let twice = stepped(&stepped(&e, 1), 2);
    assert_eq!(appended_history(&e.history, &twice.history), Some(2));
    // A history that does not extend the old one is stored whole.
    assert_eq!(appended_history(&next.history, &e.history), None);
}

#[derive(Debug, Clone)]
enum Step {
    Put(usize),
    Remove(usize),
    Fold,
    /// A writer crashed mid-append: part of a line, no newline.
    Torn(usize),
    /// The writer drops its cached state and reads everything again.
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..6usize).prop_map(Step::Put),
        1 => (0..6usize).prop_map(Step::Remove),
        1 => Just(Step::Fold),
        1 => (1..60usize).prop_map(Step::Torn),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Against a map as the reference: whatever mix of transitions, folds, torn
    /// appends and reopenings, a fresh read, the writer's cached state and a reader
    /// refreshing from an old state all equal the model, at the model's generation.
    #[test]
    fn the_store_matches_a_map_of_entries(steps in proptest::collection::vec(step(), 1..60)) {
        let (_dir, store) = store();
        let slot = 11;
        let mut model: BTreeMap<String, TxnEntry> = BTreeMap::new();
        let mut generation = 0u64;
        let mut lock = Some(store.lock_slot(slot).unwrap());
        let mut state = None;
        store.catch_up(lock.as_ref().unwrap(), &mut state).unwrap();
        let mut reader = store.load(slot).unwrap();
        for (i, s) in steps.iter().enumerate() {
            let held = lock.as_ref().unwrap();
            let st = state.as_mut().unwrap();
            match s {
                Step::Put(k) => {
                    let id = format!("id-{k}");
                    let next = match model.get(&id) {
                        Some(e) => stepped(e, i as i64),
                        None => entry(&id),
                    };
                    generation = store.append(held, st, &[SlotOp::Put(next.clone())], i as i64).unwrap();
                    model.insert(id, next);
                }
                Step::Remove(k) => {
                    let id = format!("id-{k}");
                    if model.remove(&id).is_some() {
                        generation = store.append(held, st, &[SlotOp::Remove(id)], i as i64).unwrap();
                    }
                }
                Step::Fold => store.fold(held, st).unwrap(),
                Step::Torn(n) => {
                    let mut f = OpenOptions::new().create(true).append(true).open(store.journal_path(slot)).unwrap();
                    let line = br#"{"version":1,"generation":999999,"at_ms":0,"remove":"id-0"}"#;
                    f.write_all(&line[..(*n).min(line.len() - 1)]).unwrap();
                    // The crashed writer is gone; the next one catches up.
                    drop(lock.take());
                    lock = Some(store.lock_slot(slot).unwrap());
                    store.catch_up(lock.as_ref().unwrap(), &mut state).unwrap();
                }
                Step::Reopen => {
                    state = None;
                    store.catch_up(held, &mut state).unwrap();
                }
            }
            let st = state.as_ref().unwrap();
            prop_assert_eq!(&st.file.entries, &model);
            prop_assert_eq!(st.generation(), generation);
            let fresh = store.read_slot(slot).unwrap();
            prop_assert_eq!(&fresh.entries, &model);
            prop_assert_eq!(fresh.generation, generation);
            if i % 3 == 0 {
                store.refresh(&mut reader).unwrap();
                prop_assert_eq!(&reader.file.entries, &model);
                prop_assert_eq!(reader.generation(), generation);
            }
        }
    }
}

/// Review finding: a reader that read the new checkpoint while the old journal was
/// still in place must never use its position in the old journal as one in the new.
#[test]
fn a_position_in_the_journal_before_a_fold_is_never_used_after_it() {
    let (_dir, store) = store();
    let slot = 5;
    let (lock, mut st) = locked(&store, slot);
    let mut e = entry("x");
    for i in 0..5 {
        e = stepped(&e, i);
        store.append(&lock, &mut st, &[SlotOp::Put(e.clone())], i).unwrap();
    }
    let old_inode = st.journal_inode;
    let old_len = st.journal_len;
    store.fold(&lock, &mut st).unwrap();
    assert_ne!(st.journal_inode, old_inode, "a fold installs a new journal file");
    for i in 5..20 {
        e = stepped(&e, i);
        store.append(&lock, &mut st, &[SlotOp::Put(e.clone())], i).unwrap();
    }
    assert!(st.journal_len > old_len);
    // What a lock-free read in the fold's window kept: the new checkpoint (generation
    // 5), and the old journal's file and length.
    let mut stale = store.load(slot).unwrap();
    stale.file = store.read_checkpoint(slot).unwrap().0;
    assert_eq!(stale.file.generation, 5);
    stale.journal_inode = old_inode;
    stale.journal_len = old_len;
    let journal_before = std::fs::read(store.journal_path(slot)).unwrap();
    let mut refreshed = stale.clone();
    store.refresh(&mut refreshed).unwrap();
    assert_eq!((refreshed.generation(), &refreshed.file.entries["x"]), (20, &e));
    drop(lock);
    let lock = store.lock_slot(slot).unwrap();
    let mut held = Some(stale);
    store.catch_up(&lock, &mut held).unwrap();
    assert_eq!(held.unwrap().generation(), 20);
    assert_eq!(
        std::fs::read(store.journal_path(slot)).unwrap(),
        journal_before,
        "nothing acknowledged was cut"
    );
}

/// Review finding: after a slot was moved aside its generations start again; what
/// was known durable of the old history must not cover the new one.
#[test]
fn group_commit_forgets_what_was_durable_when_the_history_restarts() {
    let (_dir, store) = store();
    let group = GroupCommit::default();
    let journal = empty_journal(&store, 3);
    let old = group.appended(3, 5_000, journal);
    group.wait_durable(&store, 3, old).unwrap();
    assert_eq!(group.syncs(), 1);
    assert!(group.is_durable(3, old));
    let new = group.appended(3, 1, journal);
    assert!(
        !group.is_durable(3, new),
        "generation 1 of a new history is not durable"
    );
    group.wait_durable(&store, 3, new).unwrap();
    assert_eq!(group.syncs(), 2);
}

/// Issue 25 item 10: a writer that appended in the old history and waits only after
/// the slot started again (moved aside, then appended to by another transition) must
/// not have its generation credited to the new history — nor be told its line is
/// durable: no sync of the new journal covers it.
#[test]
fn a_late_wait_from_before_a_restart_credits_nothing_to_the_new_history() {
    let (_dir, store) = store();
    let group = GroupCommit::default();
    let journal = empty_journal(&store, 4);
    let late = group.appended(4, 500, journal);
    // The slot is moved aside and starts again; a transition of the new history is
    // appended and synced.
    let first = group.appended(4, 1, journal);
    group.wait_durable(&store, 4, first).unwrap();
    // The old writer's wait comes now.
    let err = group.wait_durable(&store, 4, late).unwrap_err().to_string();
    assert!(err.contains("new history"), "{err}");
    // Generations of the new history up to 500 still each need a sync.
    let next = group.appended(4, 2, journal);
    assert!(
        !group.is_durable(4, next),
        "generation 2 of the new history is not durable yet"
    );
    let syncs = group.syncs();
    group.wait_durable(&store, 4, next).unwrap();
    assert_eq!(group.syncs(), syncs + 1);
}

/// Review finding (issue 25 item 10): the journal moved aside between an append and
/// its sync, no new append since: the sync finds no journal, and the waiter is told
/// its line is gone, not that it is durable.
#[test]
fn a_wait_whose_journal_was_moved_aside_is_an_error() {
    let (_dir, store) = store();
    let group = GroupCommit::default();
    let (lock, mut st) = locked(&store, 5);
    let g = store.append(&lock, &mut st, &[SlotOp::Put(entry("moved"))], 1).unwrap();
    let mark = group.appended(5, g, st.journal());
    drop(lock);
    std::fs::rename(store.journal_path(5), store.dir().join("slot-5.journal.corrupt-1")).unwrap();
    let err = group.wait_durable(&store, 5, mark).unwrap_err().to_string();
    assert!(err.contains("new history"), "{err}");
    assert!(!group.is_durable(5, mark));
}

/// This process appends "kept" (waited for: durable) and then "dropped" (not yet) to
/// `slot` and lets the lock go; another process then takes the lock and renames in a
/// journal holding the first line and then what `rest` makes of it (as a repair's
/// rescue keeping the valid prefix does). Returns the mark of "dropped".
fn appended_then_replaced(
    dir: &std::path::Path,
    store: &TxnStateStore,
    group: &GroupCommit,
    slot: u32,
    rest: impl Fn(&str) -> String,
) -> Mark {
    let (lock, mut st) = locked(store, slot);
    let kept = store.append(&lock, &mut st, &[SlotOp::Put(entry("kept"))], 1).unwrap();
    group
        .wait_durable(store, slot, group.appended(slot, kept, st.journal()))
        .unwrap();
    let g = store
        .append(&lock, &mut st, &[SlotOp::Put(entry("dropped"))], 2)
        .unwrap();
    let mark = group.appended(slot, g, st.journal());
    drop(lock);
    let other = TxnStateStore::new(Volume::new(dir));
    let other_lock = other.lock_slot(slot).unwrap();
    let journal = std::fs::read_to_string(store.journal_path(slot)).unwrap();
    assert_eq!(journal.lines().count(), 2);
    let first_line = journal.lines().next().unwrap();
    let replacement = store.dir().join(format!("slot-{slot}.journal.rescue"));
    std::fs::write(&replacement, format!("{first_line}\n{}", rest(first_line))).unwrap();
    std::fs::rename(&replacement, store.journal_path(slot)).unwrap();
    drop(other_lock);
    assert!(!other.read_slot(slot).unwrap().entries.contains_key("dropped"));
    mark
}

/// Issue 25 item 10: the journal replaced by another process between this process's
/// append and its sync — a repair's rescue that dropped the line, written and renamed
/// in under the slot lock this process let go — is not the journal the line went to:
/// the sync of the new one must not count the line durable (it did: the sync synced
/// whatever journal was there and credited everything appended before it).
#[test]
fn a_wait_whose_journal_another_process_replaced_is_an_error() {
    let (dir, store) = store();
    let group = GroupCommit::default();
    let mark = appended_then_replaced(dir.path(), &store, &group, 6, |_| String::new());
    let err = group.wait_durable(&store, 6, mark).unwrap_err().to_string();
    assert!(err.contains("replaced"), "{err}");
    assert!(!group.is_durable(6, mark));
    // This process's next transition goes to the new journal and is synced there.
    let (lock, mut st) = locked(&store, 6);
    let next = store.append(&lock, &mut st, &[SlotOp::Put(entry("next"))], 3).unwrap();
    let next = group.appended(6, next, st.journal());
    drop(lock);
    group.wait_durable(&store, 6, next).unwrap();
    assert!(group.is_durable(6, next));
}

/// The same, with a later transition of this process appended to the new journal
/// before the first one's wait: a sync of the new journal covers the later line,
/// not the first.
#[test]
fn a_wait_behind_a_later_append_to_a_replaced_journal_is_an_error() {
    let (dir, store) = store();
    let group = GroupCommit::default();
    // The rescue's journal has a line of its own at the dropped one's generation (as
    // a repair's later transition would be).
    let mark = appended_then_replaced(dir.path(), &store, &group, 8, |first_line| {
        let mut redo: serde_json::Value = serde_json::from_str(first_line).unwrap();
        redo["generation"] = serde_json::json!(2);
        format!("{redo}\n")
    });
    let (lock, mut st) = locked(&store, 8);
    assert_eq!(st.generation(), 2);
    let later = store.append(&lock, &mut st, &[SlotOp::Put(entry("later"))], 3).unwrap();
    let later = group.appended(8, later, st.journal());
    drop(lock);
    group.wait_durable(&store, 8, later).unwrap();
    let err = group.wait_durable(&store, 8, mark).unwrap_err().to_string();
    assert!(err.contains("replaced"), "{err}");
    assert!(!group.is_durable(8, mark));
}

/// Review findings: what a fold of this process records. Lines of this process not
/// yet durable that went to another journal than the one the folded state was read
/// from are not in the fold; and a fold of a state holding a peer's later lines
/// raises what a later append is judged against, so generations started again
/// below them (a slot moved aside) are a new history, never durable by the fold.
#[test]
fn a_fold_credits_only_what_it_read_and_what_came_before_it() {
    let group = GroupCommit::default();
    let lost = group.appended(9, 5, 1);
    group.folding(9, || group.made_durable(9, 9, 2, 3));
    assert!(
        !group.is_durable(9, lost),
        "its line went to journal 1; the fold read journal 2"
    );
    let mine = group.appended(9, 11, 3);
    group.folding(9, || group.made_durable(9, 50, 3, 4));
    assert!(group.is_durable(9, mine));
    let restarted = group.appended(9, 21, 5);
    assert!(
        !group.is_durable(9, restarted),
        "generation 21 after a fold at 50 is a new history"
    );
    // A fold of the same journal whose state ends below this process's line (it was
    // cut off the file since) does not hold it.
    let cut = group.appended(9, 22, 5);
    group.folding(9, || group.made_durable(9, 21, 5, 6));
    assert!(!group.is_durable(9, cut), "generation 22 is not in a fold at 21");
}

/// A fold by this process between an append and its sync (the next writer's, under
/// the lock) wrote the line into the new checkpoint and synced it: the wait is
/// answered, and the next append to the fold's journal restarts nothing.
#[test]
fn a_fold_by_this_process_between_an_append_and_its_sync_keeps_the_wait_durable() {
    let (_dir, store) = store();
    let group = GroupCommit::default();
    let (lock, mut st) = locked(&store, 7);
    let g = store.append(&lock, &mut st, &[SlotOp::Put(entry("a"))], 1).unwrap();
    let mark = group.appended(7, g, st.journal());
    let before = st.journal();
    group
        .fold(7, &mut st, |st| store.fold(&lock, st).map(|()| true))
        .unwrap();
    assert_ne!(st.journal(), before, "a fold installs a new journal");
    let next = store.append(&lock, &mut st, &[SlotOp::Put(entry("b"))], 2).unwrap();
    let next = group.appended(7, next, st.journal());
    drop(lock);
    group.wait_durable(&store, 7, mark).unwrap();
    group.wait_durable(&store, 7, next).unwrap();
}

/// Review finding: the kernel reports a failed write-back once; a later successful
/// sync proves nothing about the lines before it. A failed sync poisons the slot
/// until it is rewritten whole.
#[test]
fn a_failed_fdatasync_poisons_the_slot_until_it_is_rewritten() {
    let (_dir, store) = store();
    let group = GroupCommit::default();
    std::fs::create_dir_all(store.dir()).unwrap();
    // A socket where the journal should be: opening it fails (ENXIO).
    let socket = std::os::unix::net::UnixListener::bind(store.journal_path(2)).unwrap();
    let seven = group.appended(2, 7, JOURNAL);
    assert!(group.wait_durable(&store, 2, seven).is_err());
    assert!(group.poisoned(2));
    drop(socket);
    std::fs::remove_file(store.journal_path(2)).unwrap();
    let err = group.wait_durable(&store, 2, seven).unwrap_err().to_string();
    assert!(err.contains("earlier fdatasync"), "{err}");
    assert!(!group.is_durable(2, seven));
    assert!(
        group.flush(&store).is_ok(),
        "a poisoned slot is healed by its writer, not the flush"
    );
    group.made_durable(2, 7, JOURNAL, JOURNAL);
    assert!(!group.poisoned(2));
    assert!(group.is_durable(2, seven));
}

/// Review finding: a line of a newer format that this build cannot parse is refused,
/// never cut off as a torn write.
#[test]
fn a_journal_line_of_a_newer_version_is_refused_not_cut() {
    let (_dir, store) = store();
    let slot = slot_for("t");
    store.lock(slot).unwrap().commit(&[SlotOp::Put(entry("t"))], 1).unwrap();
    let mut f = OpenOptions::new().append(true).open(store.journal_path(slot)).unwrap();
    f.write_all(b"{\"version\":2,\"generation\":2,\"op\":\"something new\"}\n")
        .unwrap();
    drop(f);
    let before = std::fs::read(store.journal_path(slot)).unwrap();
    let err = store.read_slot(slot).unwrap_err().to_string();
    assert!(err.contains("unknown format version 2"), "{err}");
    assert!(store.lock(slot).is_err());
    assert_eq!(std::fs::read(store.journal_path(slot)).unwrap(), before);
}

#[test]
fn an_id_put_twice_in_one_append_reads_back_as_its_last_put() {
    let (_dir, store) = store();
    let slot = slot_for("twice");
    let first = entry("twice");
    store
        .lock(slot)
        .unwrap()
        .commit(&[SlotOp::Put(first.clone())], 1)
        .unwrap();
    let a = stepped(&first, 2);
    let b = stepped(&a, 3);
    store
        .lock(slot)
        .unwrap()
        .commit(&[SlotOp::Put(a), SlotOp::Put(b.clone())], 3)
        .unwrap();
    assert_eq!(store.read_slot(slot).unwrap().entries["twice"], b);
}

/// What a holder changes by path under `while_held` (a transaction's queue entries)
/// lands before a take-over or not at all: no take-over falls inside it (the gate is
/// held from its check to its end), and once the lock is taken over it runs nothing.
#[test]
fn no_take_over_falls_inside_while_held_and_a_deposed_holder_runs_nothing_there() {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    let (holder, taker) = (
        TxnStateStore::for_broker(volume.clone(), 2),
        TxnStateStore::for_broker(volume.clone(), 1),
    );
    let slot = slot_for("t1");
    let (held, _) = locked(&holder, slot);
    let mut seen = None;
    assert!(taker.steal_slot(slot, &|_| false, NEVER, &mut seen).unwrap().is_none());
    let inside = holder
        .while_held(held.id(), || {
            Ok(taker.steal_slot(slot, &|id| id == 2, NEVER, &mut seen.clone()))
        })
        .unwrap();
    assert!(matches!(inside, Ok(None)), "no take-over inside: {inside:?}");
    let stolen = taker
        .steal_slot(slot, &|id| id == 2, NEVER, &mut seen)
        .unwrap()
        .expect("taken over once it is done");
    let ran = std::cell::Cell::new(false);
    let after = holder.while_held(held.id(), || {
        ran.set(true);
        Ok(())
    });
    assert!(
        after.is_err() && !ran.get(),
        "the deposed holder runs nothing: {after:?}"
    );
    drop((held, stolen));
}

/// Issue 25 item 8: a slot lock held by a broker judged dead (paused by SIGSTOP, a
/// frozen VM) is taken over; one held by a live broker or by kaasctl never is. The
/// deposed holder then acknowledges nothing (its lock file is no longer the slot's)
/// and writes nothing anyone reads: its append finds the journal replaced, its fold
/// finds the lock gone before it replaces anything.
#[test]
fn a_slot_lock_held_by_a_dead_broker_is_taken_over_and_its_holder_writes_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    let (paused, taker) = (
        TxnStateStore::for_broker(volume.clone(), 2),
        TxnStateStore::for_broker(volume.clone(), 1),
    );
    let slot = slot_for("t1");
    let (held, mut stale) = locked(&paused, slot);
    paused
        .append(&held, &mut stale, &[SlotOp::Put(entry("t1"))], 5)
        .unwrap();
    paused.sync(slot).unwrap();
    assert!(paused.holds(held.id()).unwrap());
    assert!(taker.try_lock_slot(slot).unwrap().is_none());
    // Its holder is not judged dead: nothing is taken.
    let judged = std::cell::RefCell::new(Vec::new());
    let judge = |h| {
        judged.borrow_mut().push(h);
        false
    };
    let mut seen = None;
    assert!(taker.steal_slot(slot, &judge, NEVER, &mut seen).unwrap().is_none());
    assert!(judged.borrow().is_empty(), "a holder line read once is not judged yet");
    assert!(taker.steal_slot(slot, &judge, NEVER, &mut seen).unwrap().is_none());
    assert_eq!(judged.into_inner(), vec![2], "the lock file names its holder");
    // Judged dead: taken over, under a new lock file.
    let stolen = taker
        .steal_slot(slot, &|id| id == 2, NEVER, &mut seen)
        .unwrap()
        .unwrap();
    assert!(stolen.stolen());
    assert!(
        !paused.holds(held.id()).unwrap(),
        "the deposed holder sees it lost the slot"
    );
    assert!(paused.check_held(held.id()).is_err());
    let mut taken = None;
    taker.catch_up(&stolen, &mut taken).unwrap();
    let mut taken = taken.unwrap();
    assert!(!stolen.stolen(), "the take-over started a fresh history");
    assert_eq!(taken.generation(), 1, "what the holder made durable is read");
    // The deposed holder thaws: its append and its fold are refused; its lines never
    // reach the files the new holder writes.
    let before = std::fs::read(store_files(&taker, slot).1).unwrap();
    let err = paused
        .append(&held, &mut stale, &[SlotOp::Put(stepped(&entry("t1"), 6))], 6)
        .unwrap_err();
    assert!(err.to_string().contains("taken over"), "{err}");
    assert!(paused.fold(&held, &mut stale).is_err());
    assert_eq!(std::fs::read(store_files(&taker, slot).1).unwrap(), before);
    taker
        .append(&stolen, &mut taken, &[SlotOp::Put(stepped(&entry("t1"), 7))], 7)
        .unwrap();
    let file = taker.read_slot(slot).unwrap();
    assert_eq!(file.generation, 2);
    assert_eq!(file.entries["t1"].last_update_ms, 7);
    // The new holder's lock is the only one anyone can take afterwards.
    drop(held);
    assert!(paused.try_lock_slot(slot).unwrap().is_none());
    drop(stolen);
    assert!(paused.try_lock_slot(slot).unwrap().is_some());
}

/// kaasctl's locks are never taken over: only a broker can be judged dead by its
/// lease. A lock file naming nobody (empty here) is not judged by any lease either:
/// it is taken over only once seen unchanged for the time given.
#[test]
fn a_slot_lock_held_by_kaasctl_is_never_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    let admin = TxnStateStore::new(volume.clone());
    let taker = TxnStateStore::for_broker(volume.clone(), 1);
    let slot = 3;
    let held = admin.lock_slot(slot).unwrap();
    let mut seen = None;
    for _ in 0..3 {
        assert!(taker.steal_slot(slot, &|_| true, NEVER, &mut seen).unwrap().is_none());
    }
    assert!(admin.holds(held.id()).unwrap());
    drop(held);
    std::fs::write(admin.lock_path(slot), b"").unwrap();
    let other = std::fs::OpenOptions::new()
        .write(true)
        .open(admin.lock_path(slot))
        .unwrap();
    other.lock().unwrap();
    for _ in 0..3 {
        assert!(taker.steal_slot(slot, &|_| true, NEVER, &mut seen).unwrap().is_none());
    }
    let stolen = taker.steal_slot(slot, &|_| false, unnamed_after(std::time::Duration::ZERO), &mut seen);
    assert!(stolen.unwrap().is_some_and(|l| l.stolen()));
    let line = SlotHolder::Broker(4).record();
    assert_eq!(SlotHolder::parse(line.as_bytes()), Some(SlotHolder::Broker(4)));
    assert_eq!(
        SlotHolder::parse(line.replace("broker 4", "broker 7").as_bytes()),
        None,
        "a torn line names nobody"
    );
    assert_eq!(SlotHolder::parse(b""), None);
}

/// Review of issue 25 item 8: a holder writes its line just after it takes the lock,
/// so a line read once may still name the holder before it — dead, maybe. A lock is
/// taken over only when the same line (same file, same holder process) is read twice
/// with the holder's lease confirmed dead; a new holder's line in between resets it.
#[test]
fn a_holder_line_that_changed_since_the_last_look_is_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    let (dead, live, taker) = (
        TxnStateStore::for_broker(volume.clone(), 5),
        TxnStateStore::for_broker(volume.clone(), 6),
        TxnStateStore::for_broker(volume.clone(), 1),
    );
    let slot = 9;
    drop(dead.lock_slot(slot).unwrap());
    // A live holder took it, but its line still names the dead one (the gap between
    // its flock and its write, or a line not yet on an NFS server).
    let held = live.lock_slot(slot).unwrap();
    std::fs::write(live.lock_path(slot), SlotHolder::Broker(5).record()).unwrap();
    let mut seen = None;
    assert!(taker
        .steal_slot(slot, &|id| id == 5, NEVER, &mut seen)
        .unwrap()
        .is_none());
    // Its line lands: the next look sees it changed, and the one after judges broker 6.
    std::fs::write(live.lock_path(slot), SlotHolder::Broker(6).record()).unwrap();
    for _ in 0..3 {
        assert!(taker
            .steal_slot(slot, &|id| id == 5, NEVER, &mut seen)
            .unwrap()
            .is_none());
    }
    assert!(live.holds(held.id()).unwrap());
    // kaasctl's blocking lock waits for the live holder, and gets the lock once a
    // take-over replaced the file under a paused one (it never waits on the old file).
    let admin = TxnStateStore::new(volume.clone());
    std::thread::scope(|s| {
        let waiter = s.spawn(|| admin.lock_slot(slot).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!waiter.is_finished());
        let stolen = taker
            .steal_slot(slot, &|id| id == 6, NEVER, &mut seen)
            .unwrap()
            .unwrap();
        drop(stolen);
        assert!(waiter.join().is_ok());
    });
    assert!(!live.holds(held.id()).unwrap());
}

/// Review of issue 25 item 8: a copy read when the slot had no journal (a first fold
/// cut between its two renames leaves a checkpoint alone) creates the journal with
/// its append — and refuses one that appeared since (a take-over's fresh history),
/// instead of appending a line of its stale copy to it.
#[test]
fn an_append_that_would_create_the_journal_refuses_one_that_appeared() {
    let (_dir, store) = store();
    let slot = slot_for("t1");
    store
        .update(slot, 5, |entries| {
            entries.insert("t1".into(), entry("t1"));
            ((), true)
        })
        .unwrap();
    store.lock(slot).unwrap().fold().unwrap();
    std::fs::remove_file(store.journal_path(slot)).unwrap();
    let (lock, mut state) = locked(&store, slot);
    std::fs::write(store.journal_path(slot), b"").unwrap();
    assert!(store
        .append(&lock, &mut state, &[SlotOp::Put(stepped(&entry("t1"), 6))], 6)
        .is_err());
    assert_eq!(journal_len(&store, slot), 0, "nothing written to it");
}

/// The checkpoint and journal paths of a slot.
/// Broker 2's and broker 1's stores on one fresh volume.
fn brokers_2_and_1() -> (tempfile::TempDir, TxnStateStore, TxnStateStore) {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    let (two, one) = (
        TxnStateStore::for_broker(volume.clone(), 2),
        TxnStateStore::for_broker(volume, 1),
    );
    (dir, two, one)
}

fn store_files(store: &TxnStateStore, slot: u32) -> (PathBuf, PathBuf) {
    (store.slot_path(slot), store.journal_path(slot))
}

/// Issue 25 item 9: a lost NFS lock fails nothing but I/O on the lock file itself,
/// and nobody replaces the file: a holder cut off past its lock lease keeps
/// appending while another process, which got the same lock file, writes the slot
/// too. Every holder writes its line into the lock file when it takes it, and the
/// check after each sync reads that line again: the first holder's next transition
/// is refused, not acknowledged.
#[test]
fn a_holder_whose_lock_lapsed_to_another_process_acknowledges_nothing_more() {
    let (_dir, store, _) = brokers_2_and_1();
    let slot = slot_for("t1");
    let mut guard = store.lock(slot).unwrap();
    guard.commit(&[SlotOp::Put(entry("t1"))], 5).unwrap();
    // Broker 1 took the same (lapsed) lock file and recorded itself in it.
    std::fs::write(store.lock_path(slot), SlotHolder::Broker(1).record()).unwrap();
    let err = guard
        .commit(&[SlotOp::Put(stepped(&entry("t1"), 6))], 6)
        .unwrap_err()
        .to_string();
    assert!(err.contains("lapsed") && err.contains("broker 1"), "{err}");
}

/// Review of item 9: in the Kubernetes StatefulSet every broker is PID 1, so the
/// process that replaces a broker whose NFS locks lapsed writes the same broker id
/// and pid; the holder line tells the two runs apart by a word drawn per process.
#[test]
fn a_holder_line_tells_two_runs_of_one_broker_with_one_pid_apart() {
    let (_dir, store, _) = brokers_2_and_1();
    let slot = slot_for("t1");
    let mut guard = store.lock(slot).unwrap();
    guard.commit(&[SlotOp::Put(entry("t1"))], 5).unwrap();
    let mine = std::fs::read_to_string(store.lock_path(slot)).unwrap();
    assert!(
        mine.starts_with(&format!("broker 2 pid {} run ", std::process::id())),
        "{mine}"
    );
    let who = format!("broker 2 pid {} run {}", std::process::id(), "0".repeat(32));
    let other = format!("{who} crc {:08x}\n", crc32c::crc32c(who.as_bytes()));
    assert_eq!(SlotHolder::parse(other.as_bytes()), Some(SlotHolder::Broker(2)));
    std::fs::write(store.lock_path(slot), &other).unwrap();
    let err = guard
        .commit(&[SlotOp::Put(stepped(&entry("t1"), 6))], 6)
        .unwrap_err()
        .to_string();
    assert!(err.contains("lapsed"), "{err}");
}

/// Review of item 9: a holder whose NFS lock lapsed may still flush writes of its own
/// into the journal — at the offsets it computed, over the lines of whoever took the
/// lock next. So a holder that finds the lock file naming another process starts a
/// fresh journal before its first append: those late writes land in a file nobody
/// reads. A broker that keeps a slot finds its own line and folds nothing.
#[test]
fn a_holder_that_finds_another_holders_line_starts_a_fresh_journal() {
    use std::os::unix::fs::MetadataExt;
    let (_dir, lapsed, next) = brokers_2_and_1();
    let slot = slot_for("t1");
    let journal = lapsed.journal_path(slot);
    let mut guard = lapsed.lock(slot).unwrap();
    guard.commit(&[SlotOp::Put(entry("t1"))], 5).unwrap();
    let inode = |p: &std::path::Path| std::fs::metadata(p).unwrap().ino();
    let old = inode(&journal);
    // The same holder again: its own line, the same journal.
    drop(guard);
    let mut guard = lapsed.lock(slot).unwrap();
    guard.commit(&[SlotOp::Put(stepped(&entry("t1"), 6))], 6).unwrap();
    assert_eq!(inode(&journal), old, "a slot kept by one holder is not folded");
    // Its lock lapses with a write still to flush through the descriptor it has, at
    // the offset it computed (an NFS client's append is a write at the end it knows).
    let late = std::fs::OpenOptions::new().write(true).open(&journal).unwrap();
    let its_end = std::fs::metadata(&journal).unwrap().len();
    std::mem::forget(guard); // never let go: its lock lapsed
                             // flock is per open file description, so in this process the leaked guard keeps
                             // it: stand in for the NFS server freeing it with a new lock file that names the
                             // lapsed holder, as the old one did.
    let line = std::fs::read(lapsed.lock_path(slot)).unwrap();
    std::fs::remove_file(lapsed.lock_path(slot)).unwrap();
    std::fs::write(lapsed.lock_path(slot), &line).unwrap();
    let taken = next.try_lock_slot(slot).unwrap().expect("free");
    let mut state = None;
    next.catch_up(&taken, &mut state).unwrap();
    let mut state = state.unwrap();
    assert_ne!(inode(&journal), old, "a fresh journal");
    assert_eq!(state.generation(), 2, "everything the last holder made durable is read");
    next.append(&taken, &mut state, &[SlotOp::Put(stepped(&entry("t1"), 7))], 7)
        .unwrap();
    next.sync(slot).unwrap();
    // The lapsed holder's late write lands in the old journal, not over this line.
    {
        use std::os::unix::fs::FileExt;
        late.write_all_at(&[b'x'; 300], its_end).unwrap();
    }
    drop(late);
    assert_eq!(
        next.load(slot).unwrap().generation(),
        3,
        "the acknowledged line is intact"
    );
}

/// A holder that let its lock go cleanly and checks it after its sync (group commit)
/// is not deposed when another holder has taken the lock in turn meanwhile: its line
/// was in the file before the next holder read it. Only a lock lost before it was let
/// go (another holder's line found at release) fails the check.
#[test]
fn a_lock_let_go_cleanly_and_taken_in_turn_still_checks_as_held() {
    use std::os::unix::fs::MetadataExt;
    let (_dir, first, next) = brokers_2_and_1();
    let slot = slot_for("t1");
    let (lock, mut state) = locked(&first, slot);
    first.append(&lock, &mut state, &[SlotOp::Put(entry("t1"))], 5).unwrap();
    let id = lock.id();
    drop(lock); // let go before the sync, as the group commit does
    let released = std::fs::read_to_string(first.lock_path(slot)).unwrap();
    assert!(released.contains("\nreleased broker 2 pid "), "{released}");
    let journal = || std::fs::metadata(first.journal_path(slot)).unwrap().ino();
    let before = journal();
    let (taken, state) = locked(&next, slot);
    assert_eq!(
        journal(),
        before,
        "let go cleanly: no fresh journal for the next holder"
    );
    assert_eq!(state.generation(), 1);
    first.sync(slot).unwrap();
    first.check_held(id).unwrap();
    drop(taken);
    // A lock lost before it was let go: its line is another holder's at release.
    let (lost, _) = locked(&first, slot);
    let lost_id = lost.id();
    std::fs::write(first.lock_path(slot), SlotHolder::Broker(1).record()).unwrap();
    drop(lost);
    let err = first.check_held(lost_id).unwrap_err().to_string();
    assert!(err.contains("lapsed"), "{err}");
}

/// Review of the release line: a holder whose lock lapsed lets it go late, after
/// another holder wrote its own line in the same file. Its release line is written
/// after the first line and names itself, so it never erases nor releases the other
/// holder's line; the late holder knows its lock was lost.
#[test]
fn a_late_release_never_erases_the_next_holders_line() {
    let (_dir, lapsed, _) = brokers_2_and_1();
    let slot = slot_for("t1");
    let (lock, _) = locked(&lapsed, slot);
    let id = lock.id();
    // Broker 1 took the same file (the lapse) and wrote its line.
    std::fs::write(lapsed.lock_path(slot), SlotHolder::Broker(1).record()).unwrap();
    drop(lock);
    let contents = std::fs::read(lapsed.lock_path(slot)).unwrap();
    assert_eq!(
        first_line(&contents),
        SlotHolder::Broker(1).record().as_bytes(),
        "still broker 1's"
    );
    assert!(
        !SlotHolder::is_released(&contents),
        "broker 1 is not released by another's line"
    );
    assert!(lapsed.check_held(id).unwrap_err().to_string().contains("lapsed"));
}

/// CI: a broker stopped by SIGSTOP just after marking its slot lock line released,
/// before the unlock, stalled the slot for its whole pause: a lock held under a
/// released line named nobody to judge, so nobody took it over. (The next holder,
/// stopped between its lock and its own line, leaves the same file.) Neither the
/// released holder's lease nor anyone's judges it; the lock is taken over once
/// the file has read the same for the time given — the same file and bytes, looks
/// no further apart than a sighting allows.
#[test]
fn a_holder_stopped_between_its_release_mark_and_its_unlock_stalls_its_slot_only_for_a_while() {
    let (_dir, stopped, taker) = brokers_2_and_1();
    let slot = slot_for("t1");
    let (held, _) = locked(&stopped, slot);
    // Its release line is written; the unlock has not happened (the file is still
    // locked through its descriptor).
    let released = format!(
        "{}{}",
        SlotHolder::Broker(2).record(),
        SlotHolder::Broker(2).released_record()
    );
    std::fs::write(stopped.lock_path(slot), &released).unwrap();
    assert!(SlotHolder::is_released(released.as_bytes()));
    let judged = std::cell::Cell::new(false);
    let judge = |_| {
        judged.set(true);
        true
    };
    let mut seen = None;
    for _ in 0..3 {
        assert!(taker.steal_slot(slot, &judge, NEVER, &mut seen).unwrap().is_none());
    }
    assert!(!judged.get(), "a released line names nobody to judge by a lease");
    std::thread::sleep(std::time::Duration::from_millis(30));
    let stolen = taker
        .steal_slot(
            slot,
            &judge,
            unnamed_after(std::time::Duration::from_millis(20)),
            &mut seen,
        )
        .unwrap()
        .expect("held under a released line, unchanged for the time given: taken over");
    assert!(stolen.stolen(), "the take-over starts a fresh history");
    assert!(!stopped.holds(held.id()).unwrap(), "the stopped holder lost it");
    drop(stolen);
    // Nor before three looks, whatever the time given: a live holder passes
    // through that state, and one look (even two) may land in it.
    let (again, _) = locked(&stopped, slot);
    std::fs::write(stopped.lock_path(slot), &released).unwrap();
    let mut fresh = None;
    for _ in 0..2 {
        assert!(taker
            .steal_slot(slot, &judge, unnamed_after(std::time::Duration::ZERO), &mut fresh)
            .unwrap()
            .is_none());
    }
    assert!(stopped.holds(again.id()).unwrap());
    assert!(taker
        .steal_slot(slot, &judge, unnamed_after(std::time::Duration::ZERO), &mut fresh)
        .unwrap()
        .is_some());
}

/// Issue 25 item 14: a sync goes through a descriptor of the journal opened before
/// the first write it covers, kept from the first append to that journal: Linux
/// reports a write-back error to a descriptor open when it happened, but to one
/// opened later only if nobody saw it first — and another process (kaasctl, a peer's
/// `sync_now`) may fdatasync the same journal in between. Kept across syncs (an
/// append racing a sync is covered by the next one through it), replaced with the
/// journal. (The kernel's side cannot be provoked here; this shows which descriptor
/// is kept.)
#[test]
fn a_sync_goes_through_the_descriptor_its_first_append_opened() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let store = TxnStateStore::for_broker(Volume::new(dir.path()), 0);
    let slot = slot_for("t1");
    let journal = || std::fs::metadata(store.journal_path(slot)).unwrap().ino();
    let (lock, mut state) = locked(&store, slot);
    assert_eq!(store.kept_journal_inode(slot), None);
    store.append(&lock, &mut state, &[SlotOp::Put(entry("t1"))], 5).unwrap();
    assert_eq!(
        store.kept_journal_inode(slot),
        Some(journal()),
        "kept from the append's open"
    );
    // Another process syncs the journal in between; this one's syncs go through its
    // own descriptor, which it keeps.
    TxnStateStore::new(Volume::new(dir.path())).sync(slot).unwrap();
    store.sync(slot).unwrap();
    assert_eq!(store.kept_journal_inode(slot), Some(journal()));
    // A fold replaces the journal: the next append keeps a descriptor of the new one.
    store
        .append(&lock, &mut state, &[SlotOp::Put(stepped(&entry("t1"), 6))], 6)
        .unwrap();
    let old = journal();
    store.fold(&lock, &mut state).unwrap();
    assert_ne!(journal(), old);
    store.sync(slot).unwrap();
    store
        .append(
            &lock,
            &mut state,
            &[SlotOp::Put(stepped(&stepped(&entry("t1"), 6), 7))],
            7,
        )
        .unwrap();
    assert_eq!(store.kept_journal_inode(slot), Some(journal()));
}

/// kaasctl's wait for a slot lock had no end: a broker paused while it held the lock
/// of a slot nobody else needs (brokers take a lock over only when they need the
/// slot) kept `kaasctl txn abort` waiting for good, saying nothing. It gives up with
/// `Busy`, naming the lock file, and takes the lock once it is let go.
#[test]
fn a_slot_lock_held_elsewhere_is_given_up_on_after_the_wait() {
    let (_d, store) = store();
    let other = TxnStateStore::for_broker(store.volume.clone(), 3);
    let held = other.lock_slot(5).expect("first holder");
    let started = std::time::Instant::now();
    let wait = std::time::Duration::from_millis(300);
    match store.lock_slot_within(5, wait) {
        Err(VolumeError::Busy { path, waited_ms }) => {
            assert!(path.ends_with("slot-5.lock"), "{}", path.display());
            assert!(waited_ms >= 300, "{waited_ms}");
        }
        other => panic!("expected Busy, got {:?}", other.map(|_| ())),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    drop(held);
    store.lock_slot_within(5, wait).expect("taken once let go");
}
