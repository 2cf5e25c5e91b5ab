use super::*;
use crate::batch::{build_batch, validate_all};
use crate::log::LogConfig;
use crate::offsets::CommittedOffset;
use crate::txn::{add_to_txn, init_producer_id, InitOutcome};

/// Review finding: a lock-free read can fail for a healthy slot; the fix judges
/// again under the lock and moves nothing that reads fine, and never a slot of a
/// newer format (its build reads it).
#[test]
fn quarantine_moves_only_what_is_still_unreadable_under_the_lock() {
    let (_d, volume, _) = setup();
    let store = TxnStateStore::new(volume.clone());
    let slot = slot_for("stuck");
    let actor = Actor::Admin {
        tool: "kaasctl".into(),
        user: "test".into(),
    };
    assert!(quarantine_slot(&volume, slot, false, &actor, &[], 5).unwrap().is_none());
    assert!(store.get("stuck").unwrap().is_some(), "a healthy slot is left alone");
    std::fs::write(store.slot_path(slot), b"{\"version\": 9}").unwrap();
    assert!(matches!(
        quarantine_slot(&volume, slot, false, &actor, &[], 6),
        Err(AdminError::Volume(VolumeError::UnknownVersion { found: 9, .. }))
    ));
    assert!(store.slot_path(slot).exists());
    // An I/O error (here: a directory where the checkpoint should be) may pass.
    std::fs::remove_file(store.slot_path(slot)).unwrap();
    std::fs::create_dir(store.slot_path(slot)).unwrap();
    assert!(matches!(
        quarantine_slot(&volume, slot, false, &actor, &[], 6),
        Err(AdminError::Volume(VolumeError::Io { .. }))
    ));
    std::fs::remove_dir(store.slot_path(slot)).unwrap();
    std::fs::write(store.slot_path(slot), b"{ torn").unwrap();
    // Entries only the checkpoint held would be lost: refused unless accepted.
    let refused = quarantine_slot(&volume, slot, false, &actor, &[], 7)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("checkpoint does not parse") && refused.contains("--accept-slot-loss"),
        "{refused}"
    );
    assert!(std::fs::read(store.slot_path(slot)).unwrap() == b"{ torn", "untouched");
    let rescue = quarantine_slot(&volume, slot, true, &actor, &[], 7)
        .unwrap()
        .expect("rescued");
    assert_eq!(rescue.accepted_loss.len(), 1, "{rescue:?}");
    assert_eq!(rescue.kept_aside.len(), 2, "checkpoint and journal: {rescue:?}");
    assert!(rescue.kept_aside.iter().all(|p| p.exists()));
    assert!(!rescue.checkpoint_kept);
    // The checkpoint is lost, but the journal still held the entry's line.
    assert_eq!(store.get("stuck").unwrap().map(|e| e.state), Some(TxnState::Ongoing));
}

fn setup() -> (tempfile::TempDir, Volume, TxnEntry) {
    let dir = tempfile::tempdir().unwrap();
    let volume = Volume::new(dir.path());
    TopicMeta::new("t", 1, Default::default(), 0).write(&volume).unwrap();
    let broker = Actor::Broker { id: 0 };
    let InitOutcome::Ready { entry, .. } = init_producer_id(None, "stuck", 60_000, (-1, -1), 1, &broker, &mut || 42)
    else {
        panic!()
    };
    let tp = TopicPartition {
        topic: "t".into(),
        partition: 0,
    };
    let entry = add_to_txn(&entry, 42, 0, &[tp], &["g".into()], 2, &broker)
        .unwrap()
        .unwrap();
    TxnStateStore::new(volume.clone())
        .update(slot_for("stuck"), 2, |e| {
            e.insert("stuck".into(), entry.clone());
            ((), true)
        })
        .unwrap();
    let mut p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    let mut b = build_batch(0, 1, Some((42, 0, 0)), 0x10, &[(None, Some(b"open"))]);
    let h = validate_all(&b).unwrap();
    p.append(&mut b, &h, 0, 1).unwrap();
    let mut offsets = GroupOffsets::new("g");
    offsets.stage(
        42,
        0,
        "stuck",
        "t",
        0,
        CommittedOffset {
            offset: 9,
            leader_epoch: -1,
            metadata: None,
            commit_ms: 1,
        },
    );
    offsets.save(&volume).unwrap();
    (dir, volume, entry)
}

#[test]
fn force_abort_with_no_broker_alive_writes_markers_directly_and_completes() {
    let (_d, volume, _) = setup();
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    assert_eq!((plan.epoch_before, plan.marker_epoch, plan.commit), (0, 1, false));
    assert_eq!(plan.partitions[0].1, MarkerRoute::Direct);
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    let report = execute(&volume, &plan, &admin, &["kaasctl".into()], 10, Duration::from_secs(1)).unwrap();
    assert!(report.completed);
    assert_eq!(
        (report.after.state, report.after.producer_epoch),
        (TxnState::CompleteAbort, 1)
    );
    let p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 2, "the ABORT marker unblocked the partition");
    assert_eq!(p.aborted.len(), 1);
    assert!(GroupOffsets::load(&volume, "g").unwrap().pending.is_empty());
    assert_eq!(FenceLog::load(&volume, ADMIN_WRITER).unwrap().fences[&42].epoch, 1);
    let audit = list_audit(&volume).unwrap();
    assert_eq!(audit.len(), 1);
    let rec = audit[0].1.as_ref().unwrap();
    assert_eq!(rec.before.as_ref().unwrap().state, TxnState::Ongoing);
    assert_eq!(rec.after.as_ref().unwrap().history.back().unwrap().by, admin);
    // A second abort finds nothing to abort.
    assert!(matches!(
        plan_abort(&volume, "stuck", &[]),
        Err(AdminError::WrongState { .. })
    ));
}

#[test]
fn force_abort_with_a_live_owner_queues_the_markers_and_leaves_prepare_abort_until_they_land() {
    let (_d, volume, _) = setup();
    led_by(&volume, 0, 0);
    let (plan, _) = plan_abort(&volume, "stuck", &[0]).unwrap();
    assert_eq!(plan.partitions[0].1, MarkerRoute::Queue { broker: 0 });
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    let report = execute(&volume, &plan, &admin, &[], 10, Duration::from_millis(200)).unwrap();
    assert!(!report.completed);
    assert_eq!(report.after.state, TxnState::PrepareAbort);
    let queued = marker_queue::list(&volume, 0).unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].1.as_ref().unwrap().producer_epoch, 1);
}

#[test]
fn a_deleted_topic_needs_no_marker() {
    let (_d, volume, _) = setup();
    std::fs::remove_file(volume.topic_file("t")).unwrap();
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    let report = execute(&volume, &plan, &admin, &[], 10, Duration::ZERO).unwrap();
    assert_eq!(report.after.state, TxnState::CompleteAbort);
    assert!(report.markers_written.is_empty(), "nothing was written");
}

#[test]
fn a_plan_made_stale_by_the_broker_is_refused() {
    let (_d, volume, _) = setup();
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    TxnStateStore::new(volume.clone())
        .update(plan.slot, 3, |e| {
            e.get_mut("stuck").unwrap().producer_epoch = 5;
            ((), true)
        })
        .unwrap();
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    assert!(matches!(
        execute(&volume, &plan, &admin, &[], 10, Duration::ZERO),
        Err(AdminError::Changed(_))
    ));
}

/// `owner.json` of t-0: `broker` leads it at `leader_epoch` and did not let it go.
fn led_by(volume: &Volume, broker: i32, leader_epoch: i32) {
    PartitionOwner {
        version: crate::topic::OWNER_FORMAT_VERSION,
        broker,
        leader_epoch,
        released: false,
        updated_ms: 1,
        topic_id: None,
    }
    .write(&PartitionOwner::path(volume, "t", 0))
    .unwrap();
}

/// Issue 25 item 6: a direct marker write follows the brokers' take-over rules. The
/// last owner (broker 2, judged dead by wall clock) did not let go: it may only be
/// frozen, or its NFS lock lapsed. kaasctl records a leadership of its own in
/// `owner.json` before it reads the log — so that broker's next acknowledgment,
/// checked against `owner.json` after its fsync, is refused — starts a segment of its
/// own (what that broker appends later is never read), and releases the partition
/// when done.
#[test]
fn a_direct_marker_write_takes_the_partition_over_as_a_broker_would() {
    let (_d, volume, _) = setup();
    let path = PartitionOwner::path(&volume, "t", 0);
    led_by(&volume, 2, 7);
    let segments = |v: &Volume| {
        PartitionState::open(&v.partition_dir("t", 0), LogConfig::default(), 0)
            .unwrap()
            .log
            .segments()
            .len()
    };
    assert_eq!(segments(&volume), 1);
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    assert_eq!(plan.partitions[0].1, MarkerRoute::Direct);
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    let report = execute(&volume, &plan, &admin, &[], 10, Duration::ZERO).unwrap();
    assert_eq!(report.markers_written.len(), 1);
    let owner = PartitionOwner::read(&path).unwrap();
    assert_eq!(
        (owner.broker, owner.leader_epoch, owner.released),
        (ADMIN_WRITER, 8, true),
        "a leadership of its own, at the next leader epoch, let go when done"
    );
    assert_eq!(segments(&volume), 2, "a segment of its own");
    let p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 2, "the ABORT marker landed");
    let told = crate::topic::DeposedNotice::read(&volume, 2).unwrap();
    assert_eq!(
        (told.by, told.partition, told.leader_epoch),
        (ADMIN_WRITER, 0, 8),
        "broker 2, which did not let go, is told"
    );
}

/// A topic deleted while kaasctl waited for its partition's gate to write a marker
/// directly: the deleting broker renames the directory away whole, and the lock made
/// the directory again. kaasctl read the topic before the lock, so it went on:
/// recorded a leadership of the deleted topic in the new directory (and looked for an
/// open transaction there). The topic is read again under the lock.
#[test]
fn a_topic_deleted_while_a_direct_marker_waits_for_its_lock_gets_no_leadership() {
    // kaasctl tries the gate for about 200 ms: on a machine so slow that this thread
    // wakes up later than that, the abort finds the gate held (an error, nothing
    // written), and the round is tried again.
    for _round in 0..5 {
        let (_d, volume, _) = setup();
        let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
        assert_eq!(plan.partitions[0].1, MarkerRoute::Direct);
        // The deleting broker, holding the partition's gate and lock.
        let held = PartitionOwner::lock(&volume, "t", 0).unwrap();
        let abort = {
            let (volume, plan) = (volume.clone(), plan.clone());
            std::thread::spawn(move || {
                let admin = Actor::Admin {
                    tool: "kaasctl".into(),
                    user: "ops".into(),
                };
                execute(&volume, &plan, &admin, &[], 10, Duration::ZERO)
            })
        };
        // Within the time kaasctl tries the gate for (or before it reads the topic).
        std::thread::sleep(Duration::from_millis(50));
        std::fs::remove_file(volume.topic_file("t")).unwrap();
        let dir = volume.partition_dir("t", 0);
        std::fs::rename(&dir, volume.root().join("renamed-away")).unwrap();
        drop(held);
        let Ok(report) = abort.join().unwrap() else {
            continue;
        };
        assert_eq!(report.after.state, TxnState::CompleteAbort);
        assert!(report.markers_written.is_empty(), "nothing was written");
        assert!(
            !dir.join("owner.json").exists(),
            "no leadership recorded for a topic that is gone"
        );
        return;
    }
    panic!("the abort never got the partition's gate in five rounds");
}

#[test]
fn a_direct_marker_is_refused_while_a_process_holds_the_partitions_owner_lock() {
    let (_d, volume, _) = setup();
    led_by(&volume, 2, 7);
    // A broker whose lease looks dead but whose process still writes the log (a
    // broker opens the partition's gate once its leadership is recorded).
    let mut held = PartitionOwner::lock(&volume, "t", 0).unwrap();
    held.open_gate();
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    assert_eq!(plan.partitions[0].1, MarkerRoute::Direct);
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    let err = execute(&volume, &plan, &admin, &[], 10, Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("partition t-0 is being written by broker 2 (leader epoch 7), which holds its owner.lock"),
        "{err}"
    );
    // The abort is decided all the same (PrepareAbort at the fencing epoch is durable,
    // the producer fenced): the error says so and the audit journal has it. Before,
    // it read "writing the marker to t-0: ...", nothing audited, and an operator ran it
    // again (aborting the restarted producer's next transaction).
    assert!(
        err.contains("the abort is decided and its producer fenced, and it is now PrepareAbort at epoch 1")
            && err.contains("Do not run the abort again"),
        "{err}"
    );
    assert_eq!(list_audit(&volume).unwrap().len(), 1, "audited");
    let p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 0, "nothing was written");
    drop(held);
}

#[test]
fn a_plan_for_transaction_n_is_refused_once_n_plus_1_runs_at_the_same_epoch() {
    let (_d, volume, _) = setup();
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    // While the operator reads the plan, N ends and N+1 begins with other groups.
    TxnStateStore::new(volume.clone())
        .update(plan.slot, 3, |e| {
            let entry = e.get_mut("stuck").unwrap();
            entry.txn_seq += 1;
            entry.groups.insert("other".into());
            ((), true)
        })
        .unwrap();
    assert!(matches!(
        execute(&volume, &plan, &admin, &[], 10, Duration::ZERO),
        Err(AdminError::Changed(_))
    ));
    // A fresh plan sees the new groups and may proceed.
    let (fresh, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    assert!(fresh.groups.contains(&"other".to_string()));
    assert!(execute(&volume, &fresh, &admin, &[], 10, Duration::ZERO).is_ok());
}

fn ops() -> Actor {
    Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    }
}

fn t0() -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition: 0,
    }
}

fn set_entry(volume: &Volume, f: impl FnOnce(&mut TxnEntry)) {
    TxnStateStore::new(volume.clone())
        .update(slot_for("stuck"), 3, |e| {
            f(e.get_mut("stuck").unwrap());
            ((), true)
        })
        .unwrap();
}

fn staged(volume: &Volume, offset: i64) {
    GroupOffsets::update(volume, "g", |o| {
        o.stage(
            42,
            0,
            "stuck",
            "t",
            0,
            CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: None,
                commit_ms: 1,
            },
        );
        ((), true)
    })
    .unwrap();
}

/// Issue 25 item 12b: `txn repair --fix` finishing transaction N (PrepareCommit)
/// committed the group's staged offsets of (producer id, epoch) outside the slot
/// lock. If the coordinator finished N meanwhile and the producer began N+1 at the
/// same epoch and staged its offsets, those were committed with N's outcome before
/// N+1 decided anything. Now they are finished under the slot lock, only while the
/// entry is still N's Prepare*: the repair reports the change and touches nothing.
#[test]
fn a_finish_racing_the_coordinator_touches_nothing_of_the_next_transaction() {
    let (_d, volume, _) = setup();
    set_entry(&volume, |e| e.state = TxnState::PrepareCommit);
    let entry = TxnStateStore::new(volume.clone()).get("stuck").unwrap().unwrap();
    let plan = plan_finish(&volume, &entry, &[]).unwrap();
    let race = || {
        // The coordinator finishes N (its offset 9 committed, its marker written) ...
        GroupOffsets::update(&volume, "g", |o| ((), o.commit_pending(42, 0))).unwrap();
        let dir = volume.partition_dir("t", 0);
        let mut p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
        p.write_marker(42, 0, true, 0, 0, 3).unwrap().expect("N's marker");
        // ... and the producer begins N+1 at the same epoch: a batch, offsets staged.
        set_entry(&volume, |e| {
            e.state = TxnState::Ongoing;
            e.txn_seq += 1;
        });
        let mut b = build_batch(0, 1, Some((42, 0, 1)), 0x10, &[(None, Some(b"next"))]);
        let h = validate_all(&b).unwrap();
        p.append(&mut b, &h, 0, 4).unwrap();
        p.write_snapshot(4).unwrap();
        staged(&volume, 20);
    };
    let result = execute_with(&volume, &plan, &ops(), &[], 10, Duration::ZERO, &mut |at| {
        if at == Between::TransitionAndFinish {
            race()
        }
    });
    assert!(matches!(result, Err(AdminError::Changed(_))), "{result:?}");
    let offsets = GroupOffsets::load(&volume, "g").unwrap();
    assert_eq!(offsets.get("t", 0).map(|o| o.offset), Some(9), "N's offset, not N+1's");
    assert!(offsets.pending.contains_key(&42), "N+1's offsets still staged");
    let p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 2, "N+1's batch still open");
}

/// Issue 25 item 12a: a hanging transaction shown to the operator may be over by
/// the time the repair is confirmed — ended by a broker's reconcile — and the same
/// producer may have begun its next transaction at the same epoch on that
/// partition. The repair's marker used to be written blindly at (producer id,
/// epoch), closing that transaction's early batches. Now it is judged again under
/// the slot lock and written only to the transaction open since the offset shown.
#[test]
fn a_hanging_repair_judged_before_the_next_transaction_leaves_it_alone() {
    let (_d, volume, _) = setup();
    // Hanging: open on t-0 since 0, while its entry is over.
    set_entry(&volume, |e| {
        e.state = TxnState::CompleteAbort;
        e.partitions.clear();
    });
    let entry = TxnStateStore::new(volume.clone()).get("stuck").unwrap().unwrap();
    assert!(matches!(
        crate::reconcile::judge(Some(&entry), &t0(), 42, 0),
        crate::reconcile::Verdict::Hanging { commit: false, .. }
    ));
    let shown = HangingTxn {
        tp: t0(),
        producer_id: 42,
        epoch: 0,
        first_offset: 0,
        transactional_id: Some("stuck".into()),
        commit: false,
    };
    // Meanwhile a broker ends it, and the producer begins N+1 on t-0.
    let dir = volume.partition_dir("t", 0);
    let mut p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    p.write_marker(42, 0, false, 0, 0, 3).unwrap().expect("ended");
    let mut b = build_batch(0, 1, Some((42, 0, 1)), 0x10, &[(None, Some(b"next"))]);
    let h = validate_all(&b).unwrap();
    p.append(&mut b, &h, 0, 4).unwrap();
    p.write_snapshot(4).unwrap();
    drop(p);
    set_entry(&volume, |e| {
        e.state = TxnState::Ongoing;
        e.txn_seq += 1;
        e.partitions.insert(t0());
    });
    let end = end_hanging(&volume, &shown, &[], &ops(), &[], 10).unwrap();
    assert!(matches!(end, HangingEnd::NotHanging(_)), "{end:?}");
    let p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 2, "N+1's batch at 2 is still open");

    // Not covered either (its entry is over again), but what is open there now began
    // at 2, not at the 0 shown: still nothing written.
    drop(p);
    set_entry(&volume, |e| {
        e.state = TxnState::CompleteAbort;
        e.partitions.clear();
    });
    let end = end_hanging(&volume, &shown, &[], &ops(), &[], 11).unwrap();
    assert!(
        matches!(end, HangingEnd::NotHanging(ref why) if why.contains("since offset 0")),
        "{end:?}"
    );
    let p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 2);
    // The transaction open since 2, shown as such, is ended.
    drop(p);
    let now = HangingTxn {
        first_offset: 2,
        ..shown
    };
    assert_eq!(
        end_hanging(&volume, &now, &[], &ops(), &[], 12).unwrap(),
        HangingEnd::Written
    );
    let p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 4);
}

/// Damages the journal line at `index` in place (a bad sector, a stray write).
fn damage_line(store: &TxnStateStore, slot: u32, index: usize) -> Vec<u8> {
    let journal = store.journal_path(slot);
    let mut bytes = std::fs::read(&journal).unwrap();
    let start = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .nth(index)
        .expect("that many lines");
    for b in &mut bytes[start..start + 10] {
        *b = b'#';
    }
    std::fs::write(&journal, &bytes).unwrap();
    bytes
}

/// Issue 25 item 13, the trap of a rescue: a dropped line may have been an epoch
/// bump, and the coordinator would hand that epoch out again at the next bump — two
/// producers at one (producer id, epoch). A bump's fence is recorded after its line
/// is durable, so the fence logs tell: an idle entry is raised to its fenced epoch,
/// and the next bump goes past it.
#[test]
fn a_rescue_raises_an_idle_entry_to_the_epoch_its_fence_records() {
    let (_d, volume, _) = setup();
    let store = TxnStateStore::new(volume.clone());
    let slot = slot_for("stuck");
    let set = |at: i64, f: &dyn Fn(&mut TxnEntry)| {
        store
            .update(slot, at, |e| {
                f(e.get_mut("stuck").unwrap());
                ((), true)
            })
            .unwrap()
    };
    set(3, &|e| e.state = TxnState::CompleteCommit);
    store.lock(slot).unwrap().fold().unwrap();
    // InitProducerId bumps to epoch 1 (its line, then its fence); then another line.
    set(4, &|e| {
        e.state = TxnState::Empty;
        e.producer_epoch = 1;
    });
    let mut fences = FenceLog::empty(0);
    fences.append(42, 1, Some("stuck"), 4);
    fences.save(&volume).unwrap();
    set(5, &|e| e.timeout_ms = 30_000);
    damage_line(&store, slot, 0);
    // The damaged line does not parse: accepted (it names "stuck", idle here).
    let rescue = quarantine_slot(&volume, slot, true, &ops(), &[], 7)
        .unwrap()
        .expect("rescued");
    assert_eq!(rescue.epochs_raised, vec![("stuck".to_string(), 0, 1)], "{rescue:?}");
    let entry = store.get("stuck").unwrap().unwrap();
    assert_eq!((entry.state, entry.producer_epoch), (TxnState::CompleteCommit, 1));
    let InitOutcome::Ready { entry: next, .. } =
        init_producer_id(Some(&entry), "stuck", 60_000, (-1, -1), 8, &ops(), &mut || 99)
    else {
        panic!()
    };
    assert_eq!((next.producer_id, next.producer_epoch), (42, 2), "never epoch 1 again");
}

/// Another transactional id of the same slot as "stuck".
fn neighbour_of_stuck() -> String {
    (0..)
        .map(|i| format!("other-{i}"))
        .find(|t| slot_for(t) == slot_for("stuck"))
        .unwrap()
}

/// The journal's lines: one transition of "stuck" to PrepareCommit, then changes of
/// a neighbour of the same slot, the first of them to be damaged.
fn prepare_commit_then_neighbour_lines(volume: &Volume) -> (TxnStateStore, u32, String) {
    let store = TxnStateStore::new(volume.clone());
    let slot = slot_for("stuck");
    let other = neighbour_of_stuck();
    store.lock(slot).unwrap().fold().unwrap();
    store
        .update(slot, 4, |e| {
            e.get_mut("stuck").unwrap().state = TxnState::PrepareCommit;
            ((), true)
        })
        .unwrap();
    for at in [5, 6] {
        store
            .update(slot, at, |e| {
                let mut n = e["stuck"].clone();
                n.transactional_id = other.clone();
                n.producer_id = 77;
                n.state = TxnState::CompleteAbort;
                n.partitions.clear();
                n.last_update_ms = at;
                e.insert(other.clone(), n);
                ((), true)
            })
            .unwrap();
    }
    (store, slot, other)
}

/// Issue 25 item 13: a slot whose journal has a damaged line was moved aside whole,
/// checkpoint included, and left empty: a PrepareCommit it held — its markers partly
/// written — then looked like an open transaction no coordinator knows, and the
/// reconcile backstop aborted it on the partitions not marked yet (a partial
/// commit). The rescue keeps the checkpoint and the journal's valid prefix.
#[test]
fn a_rescued_slot_keeps_its_checkpoint_and_the_journals_valid_prefix() {
    let (_d, volume, _) = setup();
    let (store, slot, other) = prepare_commit_then_neighbour_lines(&volume);
    let bytes = damage_line(&store, slot, 1);
    assert!(store.load(slot).is_err(), "a damaged line with a valid one after it");
    // A damaged line's effect is unknown: refused, naming the id its text shows.
    let refused = refusal(&volume, slot);
    assert!(
        refused.contains("do not parse") && refused.contains(&format!("{other:?}")),
        "{refused}"
    );
    let rescue = quarantine_slot(&volume, slot, true, &ops(), &[], 7)
        .unwrap()
        .expect("rescued");
    assert!(rescue.checkpoint_kept && rescue.accepted_loss.len() == 1, "{rescue:?}");
    assert_eq!((rescue.lines_kept, rescue.lines_dropped), (1, 2), "{rescue:?}");
    assert!(rescue.dropped_at.is_some());
    assert_eq!(rescue.maybe_stale, vec![other.clone()], "named by the dropped lines");
    let entry = store.get("stuck").unwrap().expect("kept");
    assert_eq!(
        entry.state,
        TxnState::PrepareCommit,
        "the decided commit survives: the reaper finishes it"
    );
    assert_eq!(entry.partitions.len(), 1);
    assert!(
        store.get(&other).unwrap().is_none(),
        "the neighbour's lines were dropped"
    );
    // The damaged files are kept as they were.
    let kept_journal = rescue
        .kept_aside
        .iter()
        .find(|p| p.to_string_lossy().contains("journal"))
        .unwrap();
    assert_eq!(std::fs::read(kept_journal).unwrap(), bytes);
    assert_eq!(
        std::fs::metadata(store.journal_path(slot)).unwrap().len(),
        0,
        "a fresh journal"
    );
}

/// Review of item 13: a rescue that drops a line which may have moved on an entry
/// with a transaction in flight would bring back a Prepare* already finished — and
/// the reaper would finish it again, closing the producer's next transaction's
/// batches on its partitions and committing its staged offsets. Refused, the files
/// untouched, unless the operator accepts the loss.
#[test]
fn a_rescue_that_could_finish_a_transaction_twice_is_refused_unless_accepted() {
    let (_d, volume, _) = setup();
    let store = TxnStateStore::new(volume.clone());
    let slot = slot_for("stuck");
    store.lock(slot).unwrap().fold().unwrap();
    for (state, at) in [
        (TxnState::PrepareCommit, 4),
        (TxnState::CompleteCommit, 5),
        (TxnState::Ongoing, 6),
    ] {
        store
            .update(slot, at, |e| {
                let entry = e.get_mut("stuck").unwrap();
                entry.state = state;
                entry.last_update_ms = at;
                ((), true)
            })
            .unwrap();
    }
    // The CompleteCommit line is damaged: the rescued entry would be PrepareCommit.
    let bytes = damage_line(&store, slot, 1);
    let refused = refusal(&volume, slot);
    assert!(
        refused.contains("\"stuck\"") && refused.contains("in flight"),
        "{refused}"
    );
    assert_eq!(std::fs::read(store.journal_path(slot)).unwrap(), bytes, "untouched");
    assert!(!store.slot_path(slot).with_extension("json.corrupt-7").exists());
    // A damaged line naming no readable id: any entry in flight may be stale.
    let (_d2, volume2, _) = setup();
    let (store2, slot2, _) = prepare_commit_then_neighbour_lines(&volume2);
    let journal = store2.journal_path(slot2);
    let mut text = std::fs::read(&journal).unwrap();
    let second = text.iter().position(|b| *b == b'\n').unwrap() + 1;
    let end = second + text[second..].iter().position(|b| *b == b'\n').unwrap();
    text[second..end].iter_mut().for_each(|b| *b = b'#');
    std::fs::write(&journal, &text).unwrap();
    let refused = refusal(&volume2, slot2);
    assert!(refused.contains("do not parse: what they did is unknown"), "{refused}");
    // Accepted: rescued, the risk recorded.
    let rescue = quarantine_slot(&volume, slot, true, &ops(), &[], 8)
        .unwrap()
        .expect("rescued");
    assert_eq!(
        rescue.accepted_loss.len(),
        2,
        "in flight, and a line that does not parse: {rescue:?}"
    );
    assert_eq!(store.get("stuck").unwrap().unwrap().state, TxnState::PrepareCommit);
}

/// Review of item 13: the dropped lines may be what put an entry in flight — the
/// rescued entry is idle (CompleteCommit), the dropped lines took it to Ongoing and
/// then PrepareCommit, acknowledged, its markers partly written. Rescued as idle,
/// the reconcile backstop would abort what those markers did not reach. Refused,
/// naming it.
#[test]
fn a_rescue_is_refused_when_dropped_lines_put_an_idle_entry_in_flight() {
    let (_d, volume, _) = setup();
    let store = TxnStateStore::new(volume.clone());
    let slot = slot_for("stuck");
    set_entry(&volume, |e| e.state = TxnState::CompleteCommit);
    store.lock(slot).unwrap().fold().unwrap();
    set_entry(&volume, |e| e.state = TxnState::Ongoing);
    set_entry(&volume, |e| e.state = TxnState::PrepareCommit);
    // The first line's generation is damaged into a gap: every dropped line parses.
    let journal = store.journal_path(slot);
    let text = std::fs::read_to_string(&journal).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let generation = first["generation"].as_u64().unwrap();
    let broken = text.replacen(&format!("\"generation\":{generation}"), "\"generation\":999", 1);
    assert_ne!(broken, text);
    std::fs::write(&journal, broken).unwrap();
    let refused = refusal(&volume, slot);
    assert!(
        refused.contains("\"stuck\"") && refused.contains("in flight"),
        "{refused}"
    );
}

/// Why a rescue of `slot` without `--accept-slot-loss` is refused.
fn refusal(volume: &Volume, slot: u32) -> String {
    quarantine_slot(volume, slot, false, &ops(), &[], 7)
        .unwrap_err()
        .to_string()
}

/// Issue 24: a broker's finish of the same Prepare* may put the transaction's entry in
/// another leader's queue while kaasctl queues its own (leadership seen differently;
/// written without fsyncs for leaders the broker notifies). kaasctl completes only
/// once every queue file of the transaction is gone, not only its own.
#[test]
fn kaasctl_completes_only_once_every_queue_file_of_the_transaction_is_gone() {
    let (_d, volume, _) = setup();
    led_by(&volume, 0, 0);
    let (plan, _) = plan_abort(&volume, "stuck", &[0]).unwrap();
    let mut theirs = None;
    let mut broker_finish = || {
        let prepared = TxnStateStore::new(volume.clone()).get("stuck").unwrap().unwrap();
        let entry = MarkerEntry::new("stuck", 42, 1, false, vec![t0()], Some(prepared.txn_seq), 5, 1);
        let staged = marker_queue::stage_entries(&volume, &[(5, entry)], false).unwrap();
        theirs = Some(staged.publish().unwrap().remove(0));
    };
    // kaasctl's own entry is applied by its leader while kaasctl waits.
    let ours = marker_queue::queue_dir(&volume, 0);
    let leader = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            let files: Vec<_> = std::fs::read_dir(&ours)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                .unwrap_or_default();
            if let Some(f) = files.iter().find(|f| f.extension().is_some_and(|x| x == "json")) {
                std::fs::remove_file(f).unwrap();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("kaasctl queued nothing for broker 0");
    });
    let report = execute_with(&volume, &plan, &ops(), &[], 10, Duration::from_millis(600), &mut |at| {
        if at == Between::TransitionAndFinish {
            broker_finish()
        }
    })
    .unwrap();
    leader.join().unwrap();
    assert!(theirs.unwrap().exists());
    assert!(!report.completed, "the broker's entry is still queued");
    assert_eq!(report.after.state, TxnState::PrepareAbort);
    assert!(report.after.markers_queued);
}

/// Review finding (2026-12-06): kaasctl queued the markers for live leaders in one
/// hold of the slot lock and recorded `markers_queued` in the next. A coordinator's
/// finish taking the slot in between saw no `markers_queued` and took the notice
/// path: it wrote its own set of queue entries, removed the transaction's others
/// (kaasctl's entry for the coordinator's own partition among them), then failed on
/// its own marker; kaasctl recorded `markers_queued` over the entries left, and the
/// transaction completed once those were applied, without the removed partition's
/// marker. The entries and `markers_queued` are now written in the same hold, so the
/// coordinator that takes the slot next finds them recorded and leaves them be.
#[test]
fn kaasctl_records_its_queue_entries_in_the_hold_that_wrote_them() {
    let (_d, volume, _) = setup();
    led_by(&volume, 0, 0);
    let (plan, _) = plan_abort(&volume, "stuck", &[0]).unwrap();
    let store = TxnStateStore::new(volume.clone());
    let mut seen = None;
    let report = execute_with(&volume, &plan, &ops(), &[], 10, Duration::ZERO, &mut |at| {
        if at == Between::FinishAndWait {
            // What a coordinator taking the slot now would read.
            let entry = store.get("stuck").unwrap().unwrap();
            let queued = marker_queue::pending_files(&volume, 42, entry.producer_epoch, entry.txn_seq).unwrap();
            seen = Some((entry.markers_queued, queued.len()));
        }
    })
    .unwrap();
    assert_eq!(
        seen,
        Some((true, 1)),
        "(markers_queued, entries) as the slot's next holder finds them"
    );
    assert!(report.after.markers_queued);
    assert!(!report.completed, "broker 0 has not applied its entry");
}

/// Review finding (2026-12-05): a coordinator completes a transaction whose leaders
/// all answered "applied" first and unlinks its queue entries after, so an entry of a
/// completed transaction can outlive it (the coordinator killed in between). Addressed
/// to a broker that died too, `txn repair --fix` redelivered it blindly: its COMMIT
/// marker closed the producer's next transaction, open at the same epoch on that
/// partition. Now the entry is judged under the slot lock: one whose transaction is no
/// longer that Prepare* is spent, removed without writing anything.
#[test]
fn a_spent_entry_of_a_completed_transaction_is_removed_without_writing_a_marker() {
    let (_d, volume, entry) = setup();
    let n = entry.txn_seq;
    // Transaction N committed: its marker written, the slot entry Complete* ...
    let dir = volume.partition_dir("t", 0);
    let mut p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    p.write_marker(42, 0, true, 0, 0, 3).unwrap().expect("N's marker");
    set_entry(&volume, |e| e.state = TxnState::CompleteCommit);
    // ... and the producer began N+1 at the same epoch on the same partition.
    set_entry(&volume, |e| {
        e.state = TxnState::Ongoing;
        e.txn_seq = n + 1;
    });
    let mut b = build_batch(0, 1, Some((42, 0, 1)), 0x10, &[(None, Some(b"next"))]);
    let h = validate_all(&b).unwrap();
    p.append(&mut b, &h, 0, 4).unwrap();
    p.write_snapshot(4).unwrap();
    drop(p);
    // N's entry, left behind, addressed to broker 5, which is dead (nobody is live).
    let spent = MarkerEntry::new("stuck", 42, 0, true, vec![t0()], Some(n), 1, 1);
    let path = marker_queue::enqueue(&volume, 5, &spent).unwrap();
    assert_eq!(
        redeliver(&volume, &path, &spent, &[], &ops(), &[], 10).unwrap(),
        Redelivered::Spent
    );
    assert!(!path.exists(), "the spent entry is removed");
    let p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), 2, "N+1's batch still open: no marker written");
    // The entry of the Prepare* it names is still delivered.
    set_entry(&volume, |e| e.state = TxnState::PrepareCommit);
    drop(p);
    let due = MarkerEntry::new("stuck", 42, 0, true, vec![t0()], Some(n + 1), 1, 1);
    let path = marker_queue::enqueue(&volume, 5, &due).unwrap();
    assert_eq!(
        redeliver(&volume, &path, &due, &[], &ops(), &[], 11).unwrap(),
        Redelivered::Delivered
    );
    assert!(!path.exists());
    let p = PartitionState::open(&dir, LogConfig::default(), 0).unwrap();
    assert_eq!(p.last_stable_offset(), p.log.log_end_offset(), "N+1's marker written");
}

/// Review finding (2026-12-05): `txn repair --fix` read the entry before it took the
/// slot lock and delivered that copy under it: a coordinator that rewrote the entry
/// wider meanwhile (its finish retried with a partition's leader moved) lost the added
/// partition's marker when the file was then removed. The entry is read again under
/// the lock.
#[test]
fn an_entry_widened_while_the_repair_waited_is_delivered_whole() {
    let (_d, volume, entry) = setup();
    TopicMeta::new("u", 1, Default::default(), 0).write(&volume).unwrap();
    let u0 = TopicPartition {
        topic: "u".into(),
        partition: 0,
    };
    let mut p = PartitionState::open(&volume.partition_dir("u", 0), LogConfig::default(), 0).unwrap();
    let mut b = build_batch(0, 1, Some((42, 0, 0)), 0x10, &[(None, Some(b"open"))]);
    let h = validate_all(&b).unwrap();
    p.append(&mut b, &h, 0, 1).unwrap();
    p.write_snapshot(1).unwrap();
    drop(p);
    set_entry(&volume, |e| {
        e.partitions.insert(u0.clone());
        e.state = TxnState::PrepareCommit;
    });
    let seen = MarkerEntry::new("stuck", 42, 0, true, vec![t0()], Some(entry.txn_seq), 1, 1);
    let path = marker_queue::enqueue(&volume, 5, &seen).unwrap();
    // Rewritten wider before the repair takes the slot lock.
    let wider = MarkerEntry::new("stuck", 42, 0, true, vec![t0(), u0], Some(entry.txn_seq), 1, 2);
    marker_queue::enqueue(&volume, 5, &wider).unwrap();
    assert_eq!(
        redeliver(&volume, &path, &seen, &[], &ops(), &[], 10).unwrap(),
        Redelivered::Delivered
    );
    assert!(!path.exists());
    for topic in ["t", "u"] {
        let p = PartitionState::open(&volume.partition_dir(topic, 0), LogConfig::default(), 0).unwrap();
        assert_eq!(
            p.last_stable_offset(),
            p.log.log_end_offset(),
            "{topic}-0's marker written"
        );
    }
    // An entry gone by then (applied by its leader) is left alone.
    assert_eq!(
        redeliver(&volume, &path, &seen, &[], &ops(), &[], 11).unwrap(),
        Redelivered::Gone
    );
}

/// A marker kaasctl writes to a partition no broker owns is followed by a
/// producer-state snapshot; one too large to be written (past the state-file cap:
/// about a million live producer ids, here a cap made small) made the repair report
/// a failure after its marker was written, leave the partition's leadership to the
/// admin writer, and fail again at every retry (nothing open any more, the same
/// refusal). The snapshot is not needed: the marker stands.
#[test]
fn a_direct_marker_stands_when_the_snapshot_is_too_large_to_write() {
    let (_d, volume, _) = setup();
    {
        let mut p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
        for pid in 1_000..1_300 {
            let mut b = build_batch(0, 1, Some((pid, 0, 0)), 0, &[(None, Some(b"v"))]);
            let h = validate_all(&b).unwrap();
            p.append(&mut b, &h, 0, 1).unwrap();
        }
    }
    crate::partition::TEST_SNAPSHOT_CAP.with(|c| c.set(Some(10_000)));
    let written = write_marker_direct(&volume, &t0(), 42, 0, false, None, 10);
    crate::partition::TEST_SNAPSHOT_CAP.with(|c| c.set(None));
    assert_eq!(written.unwrap(), DirectWrite::Written);
    let p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    assert_eq!(
        p.last_stable_offset(),
        p.log.log_end_offset(),
        "the transaction is over"
    );
}

/// kaasctl's direct marker adopted a deleted topic's leftovers: it wrote the marker
/// into the old log and recorded its leadership under the new topic's id, so no
/// broker cleared the directory and the deleted records were served as the new
/// topic's (a review of kaasctl's write paths). And a partition where nothing of the
/// producer was open was reported as "marker written".
#[test]
fn a_direct_marker_never_adopts_a_deleted_topics_leftovers_under_the_new_topics_id() {
    let (_d, volume, _) = setup();
    let path = PartitionOwner::path(&volume, "t", 0);
    // The leftovers' owner.json names the deleted topic (another id) and a dead broker.
    let old_id = uuid::Uuid::new_v4();
    PartitionOwner {
        version: crate::topic::OWNER_FORMAT_VERSION,
        broker: 2,
        leader_epoch: 7,
        released: false,
        updated_ms: 1,
        topic_id: Some(old_id),
    }
    .write(&path)
    .unwrap();
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    assert_eq!(plan.partitions[0].1, MarkerRoute::Direct);
    let admin = ops();
    let report = execute(&volume, &plan, &admin, &[], 10, Duration::ZERO).unwrap();
    assert!(report.completed);
    assert!(report.markers_written.is_empty(), "{:?}", report.markers_written);
    let owner = PartitionOwner::read(&path).unwrap();
    assert_eq!(
        (owner.broker, owner.topic_id),
        (2, Some(old_id)),
        "the leftovers stay the deleted topic's, for the next broker to clear"
    );
    let p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    assert_eq!(p.log.log_end_offset(), 1, "nothing written into the old log");
}

#[test]
fn a_partition_with_nothing_open_is_not_reported_as_a_marker_written() {
    let (_d, volume, _) = setup();
    // The producer's batch is already ended there (a marker another process wrote).
    let mut p = PartitionState::open(&volume.partition_dir("t", 0), LogConfig::default(), 0).unwrap();
    p.write_marker(42, 0, false, 0, 0, 5).unwrap();
    drop(p);
    let (plan, _) = plan_abort(&volume, "stuck", &[]).unwrap();
    let admin = ops();
    let report = execute(&volume, &plan, &admin, &[], 10, Duration::ZERO).unwrap();
    assert!(report.completed);
    assert!(report.markers_written.is_empty(), "{:?}", report.markers_written);
}

/// An abort is in the audit journal from the moment it is decided: kaasctl stopped
/// while it waited for queued markers (Ctrl-C, or `q` in `kaasctl top` during the
/// wait) left a fenced producer and a durable PrepareAbort with no audit record, and
/// an operator reading "nothing happened" would abort the restarted producer's next
/// transaction (a review of kaasctl's write paths). One record per action: the one
/// written at the decision is brought up to date at the end.
#[test]
fn an_abort_is_audited_as_soon_as_it_is_decided() {
    let (_d, volume, _) = setup();
    // A live broker leads the partition: the marker is queued for it, and the wait
    // for it is where the tool may be stopped.
    led_by(&volume, 0, 0);
    let (plan, _) = plan_abort(&volume, "stuck", &[0]).unwrap();
    assert_eq!(plan.partitions[0].1, MarkerRoute::Queue { broker: 0 });
    let admin = ops();
    let mut seen_while_waiting = None;
    let report = execute_with(
        &volume,
        &plan,
        &admin,
        &["kaasctl".into()],
        10,
        Duration::from_millis(200),
        &mut |b| {
            if b == Between::FinishAndWait {
                let audit = list_audit(&volume).unwrap();
                seen_while_waiting = Some(
                    audit
                        .iter()
                        .map(|(_, r)| r.as_ref().unwrap().after.as_ref().unwrap().state)
                        .collect::<Vec<_>>(),
                );
            }
        },
    )
    .unwrap();
    assert_eq!(
        seen_while_waiting,
        Some(vec![TxnState::PrepareAbort]),
        "the decision is audited before the wait"
    );
    assert!(!report.completed, "nobody applied the queued marker");
    let audit = list_audit(&volume).unwrap();
    assert_eq!(audit.len(), 1, "one record per action");
    assert_eq!(audit[0].0, report.audit_file);
}

/// Two tools' records in the same millisecond list in the order their processes
/// started (pids count up): the golden test pins the clock, ran an abort as pid 998
/// and a repair as pid 1003, and `kaasctl audit` listed the repair first, since the
/// unpadded "1003" sorts before "998".
#[test]
fn audit_file_names_sort_by_process_id_as_a_number() {
    let earlier = audit_file_name(1_800_000_000_000, 998, "aaaaaaaa", 7, "open-tx");
    let later = audit_file_name(1_800_000_000_000, 1003, "aaaaaaaa", 0, "open-tx");
    assert!(earlier < later, "{earlier} must sort before {later}");
    let next_ms = audit_file_name(1_800_000_000_001, 1, "aaaaaaaa", 0, "open-tx");
    assert!(later < next_ms, "{later} must sort before {next_ms}");
    assert_eq!(
        audit_file_name(1_800_000_000_000, 4_294_967_295, "0123abcd", 999_999, "a b"),
        "001800000000000-4294967295-0123abcd-999999-a%20b.json"
    );
}
