//! Coordinator regression tests for the holes issue 8 names: each drives the real
//! coordinator and partition code of an in-process broker on a temporary volume.
//! (One file of ~900 lines: one regression test per hole, each a story read alone;
//! their shared setup is the first 60 lines.)

use super::*;
use crate::broker::{AppendRejected, Broker, TopicError};
use crate::handlers::test_support::{broker, broker_with, peer_lease};
use kaas_core::batch::{build_batch, validate_all};
use kaas_core::offsets::GroupOffsets;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

/// Appends one transactional batch as a Produce request would.
fn produce_txn(b: &Broker, tid: &str, pid: i64, epoch: i16, seq: i32) -> Result<i64, AppendRejected> {
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let mut batch = build_batch(0, 1, Some((pid, epoch, seq)), 0x10, &[(None, Some(b"v"))]);
    let headers = validate_all(&batch).unwrap();
    match b.append(&partition, &mut batch, &headers, Some(tid))? {
        (kaas_core::partition::AppendOutcome::Appended(info), _) => Ok(info.base_offset),
        (other, _) => panic!("{other:?}"),
    }
}

fn lso_and_end(b: &Broker) -> (i64, i64) {
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let state = partition.state();
    (state.last_stable_offset(), state.log.log_end_offset())
}

async fn setup() -> (tempfile::TempDir, Arc<Broker>, i64) {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let (pid, epoch) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
    assert_eq!(epoch, 0);
    (dir, b, pid)
}

/// Moves "tx" to PrepareCommit as a coordinator on broker `by` that queued its
/// markers for other brokers would.
fn prepare_with_queued_markers(store: &TxnStateStore, pid: i64, by: i32) -> TxnEntry {
    store
        .update(slot_for("tx"), now_ms(), |entries| {
            let EndOutcome::Prepare(mut e) =
                txn::end_txn(&entries["tx"], pid, 0, true, now_ms(), &Actor::Broker { id: by }).unwrap()
            else {
                panic!()
            };
            e.markers_queued = true;
            entries.insert("tx".into(), e.clone());
            (e, true)
        })
        .unwrap()
}

fn code(r: Result<i64, AppendRejected>) -> i16 {
    match r {
        Err(AppendRejected::Txn(e)) => e.code(),
        other => panic!("expected a transaction refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_late_transactional_batch_after_end_txn_is_invalid_txn_state() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    b.txn.end_txn(&b, "tx", pid, 0, false).await.unwrap();
    // The producer's retry (or a delayed batch) of the same identity after the abort.
    assert_eq!(code(produce_txn(&b, "tx", pid, 0, 1)), 48);
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end, "no transaction left open on the partition");
    // After a commit too.
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 1).unwrap();
    b.txn.end_txn(&b, "tx", pid, 0, true).await.unwrap();
    assert_eq!(code(produce_txn(&b, "tx", pid, 0, 2)), 48);
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end);
}

#[tokio::test]
async fn verification_sees_a_transition_written_by_another_process() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    // kaasctl (another writer of the slot) force-aborts behind the broker's back.
    let store = TxnStateStore::new(b.volume.clone());
    let admin = Actor::Admin {
        tool: "test".into(),
        user: "t".into(),
    };
    store
        .update(slot_for("tx"), now_ms(), |entries| {
            let next = txn::force_abort(&entries["tx"], "test", now_ms(), &admin).unwrap();
            entries.insert("tx".into(), next);
            ((), true)
        })
        .unwrap();
    assert_eq!(code(produce_txn(&b, "tx", pid, 0, 1)), 90, "the zombie epoch is fenced");
}

#[tokio::test]
async fn init_producer_id_and_the_reaper_end_verification_of_the_old_epoch() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    // A new instance: abort-first, then a clean bump.
    assert!(b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.is_err());
    assert_eq!(code(produce_txn(&b, "tx", pid, 0, 1)), 90);
    let (pid2, e2) = b.txn.init_producer_id(&b, "tx", 1, (-1, -1)).await.unwrap();
    assert_eq!((pid2, e2), (pid, 2));
    b.txn.add(&b, "tx", pid, 2, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 2, 0).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    b.txn.reap(&b, 60_000).await;
    assert_eq!(code(produce_txn(&b, "tx", pid, 2, 1)), 90, "reaped: epoch 2 is fenced");
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end);
}

#[tokio::test]
async fn a_stale_finish_of_transaction_n_never_closes_transaction_n_plus_1() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &["g".into()]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    let ongoing_n = b.txn.store().get("tx").unwrap().unwrap();
    let stale_prepare_n = match txn::end_txn(&ongoing_n, pid, 0, true, now_ms(), &b.txn.actor()).unwrap() {
        EndOutcome::Prepare(e) => e,
        other => panic!("{other:?}"),
    };
    b.txn.end_txn(&b, "tx", pid, 0, true).await.unwrap();
    // Transaction N+1 at the same epoch: records and staged offsets.
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &["g".into()]).await.unwrap();
    let first = produce_txn(&b, "tx", pid, 0, 1).unwrap();
    b.txn
        .stage_offsets(&b, "tx", pid, 0, "g", &[("t".into(), 0, 99, -1, None)], &|_| Ok(()))
        .await
        .unwrap();
    // A stale copy of N (a reaper's earlier read, a late EndTxn helper) tries to finish.
    assert_eq!(b.txn.finish(&b, &stale_prepare_n).await.unwrap(), Finished::Stale);
    let (lso, end) = lso_and_end(&b);
    assert_eq!(
        (lso, end),
        (first, first + 1),
        "N+1 is still open: no COMMIT landed on it"
    );
    let offsets = GroupOffsets::load(&b.volume, "g").unwrap();
    assert!(offsets.get("t", 0).is_none(), "N+1's staged offset was not committed");
    assert!(offsets.has_pending("t", 0));
    // N+1 aborts: its records and offsets go.
    b.txn.end_txn(&b, "tx", pid, 0, false).await.unwrap();
    let offsets = GroupOffsets::load(&b.volume, "g").unwrap();
    assert!(offsets.get("t", 0).is_none() && offsets.pending.is_empty());
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end);
}

#[tokio::test]
async fn a_queued_marker_applies_only_to_the_transaction_it_names() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let first_n = produce_txn(&b, "tx", pid, 0, 0).unwrap();
    // The coordinator (standing in for one on another broker) prepares N and queues
    // its marker for this broker.
    let store = b.txn.store().clone();
    let prepared = prepare_with_queued_markers(&store, pid, 1);
    let marker = MarkerEntry::new("tx", pid, 0, true, vec![tp("t", 0)], Some(prepared.txn_seq), 1, 1);
    let path = marker_queue::enqueue(&b.volume, 0, &marker).unwrap();
    crate::broker::process_marker_queue(&b).await;
    assert!(!path.exists());
    assert_eq!(lso_and_end(&b), (first_n + 2, first_n + 2), "N committed");
    let entry = store.get("tx").unwrap().unwrap();
    assert_eq!(
        entry.state,
        TxnState::CompleteCommit,
        "the last applied entry completes N"
    );
    // N+1 at the same epoch; then a late duplicate of N's queue entry shows up.
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let first = produce_txn(&b, "tx", pid, 0, 1).unwrap();
    let late = marker_queue::enqueue(&b.volume, 0, &marker).unwrap();
    crate::broker::process_marker_queue(&b).await;
    assert!(!late.exists(), "the stale entry is consumed");
    assert_eq!(lso_and_end(&b), (first, first + 1), "N+1 is still open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_staged_concurrently_with_an_abort_never_outlive_it() {
    let (_d, b, pid) = setup().await;
    for round in 0..40 {
        b.txn.add(&b, "tx", pid, 0, &[], &["g".into()]).await.unwrap();
        let stager = {
            let b = b.clone();
            tokio::spawn(async move {
                b.txn
                    .stage_offsets(&b, "tx", pid, 0, "g", &[("t".into(), 0, round, -1, None)], &|_| Ok(()))
                    .await
            })
        };
        b.txn.end_txn(&b, "tx", pid, 0, false).await.unwrap();
        let staged = stager.await.unwrap();
        let offsets = GroupOffsets::load(&b.volume, "g").unwrap();
        assert!(
            offsets.pending.is_empty(),
            "round {round}: offsets staged for an aborted transaction outlived it (stage: {staged:?})"
        );
        assert!(offsets.get("t", 0).is_none());
        if let Err(e) = staged {
            assert_eq!(e.code(), 48, "a stage after the abort is INVALID_TXN_STATE");
        }
    }
}

#[tokio::test]
async fn a_zombie_epoch_cannot_stage_offsets() {
    let (_d, b, pid) = setup().await;
    let (_, e1) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
    b.txn.add(&b, "tx", pid, e1, &[], &["g".into()]).await.unwrap();
    let zombie = b
        .txn
        .stage_offsets(&b, "tx", pid, 0, "g", &[("t".into(), 0, 5, -1, None)], &|_| Ok(()))
        .await;
    assert_eq!(zombie.unwrap_err().code(), 90);
    assert!(GroupOffsets::load(&b.volume, "g").unwrap().pending.is_empty());
}

#[tokio::test]
async fn an_idle_transactional_id_expires_but_one_in_flight_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = <crate::config::Config as clap::Parser>::parse_from([
        "kaas-server",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--transactional-id-expiration-ms",
        "20",
    ]);
    let b = Broker::open(config, crate::listeners::Endpoints::plaintext("127.0.0.1", 9092)).unwrap();
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let (idle_pid, _) = b.txn.init_producer_id(&b, "idle", 60_000, (-1, -1)).await.unwrap();
    let (busy_pid, _) = b.txn.init_producer_id(&b, "busy", 60_000, (-1, -1)).await.unwrap();
    b.txn.add(&b, "busy", busy_pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    b.txn.reap(&b, 60_000).await;
    assert!(b.txn.store().get("idle").unwrap().is_none(), "expired");
    assert_eq!(b.txn.store().get("busy").unwrap().unwrap().state, TxnState::Ongoing);
    // The id starts over with a fresh producer id.
    let (again, epoch) = b.txn.init_producer_id(&b, "idle", 60_000, (-1, -1)).await.unwrap();
    assert_ne!(again, idle_pid);
    assert_eq!(epoch, 0);
}

#[tokio::test]
async fn fences_in_the_fence_logs_survive_a_restart_without_snapshots() {
    use kaas_core::fence_log::{FenceLog, ADMIN_WRITER};
    let dir = tempfile::tempdir().unwrap();
    let fenced = [(1, 7i64, 3i16), (0, 8, 2), (ADMIN_WRITER, 9, 5)];
    {
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
        for (_, pid, epoch) in fenced {
            let mut batch = build_batch(0, 1, Some((pid, epoch - 1, 0)), 0, &[(None, Some(b"before"))]);
            let headers = validate_all(&batch).unwrap();
            b.append(&partition, &mut batch, &headers, None).unwrap();
        }
    }
    // A peer's bump, this broker's own bump, and a kaasctl force-abort's fence, none
    // of which any log or snapshot of the partition remembers (as after a kill -9);
    // and a fence of a producer this partition never saw.
    let volume = kaas_core::Volume::new(dir.path());
    for (writer, pid, epoch) in fenced.into_iter().chain([(1, 10, 4)]) {
        let mut log = FenceLog::load(&volume, writer).unwrap();
        log.append(pid, epoch, None, now_ms());
        log.save(&volume).unwrap();
    }
    let b = broker(dir.path());
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    assert!(
        partition.state().producers.get(10).is_none(),
        "no state is made up for producers a partition never saw"
    );
    for (_, pid, epoch) in fenced {
        let mut batch = build_batch(0, 1, Some((pid, epoch - 1, 1)), 0, &[(None, Some(b"zombie"))]);
        let headers = validate_all(&batch).unwrap();
        let refused = b.append(&partition, &mut batch, &headers, None);
        assert!(
            matches!(
                refused,
                Err(AppendRejected::Append(kaas_core::partition::AppendError::Sequence(
                    kaas_core::idempotence::SequenceError::StaleEpoch { .. }
                )))
            ),
            "producer {pid} at epoch {}: {refused:?}",
            epoch - 1
        );
    }
}

/// A transaction left open on the partition while its entry completed without the
/// marker (a lost queue entry, or data from before produce-time verification).
async fn hanging(b: &Broker, pid: i64, seq: i32, commit: bool) -> i64 {
    b.txn.add(b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let first = produce_txn(b, "tx", pid, 0, seq).unwrap();
    b.txn
        .store()
        .update(slot_for("tx"), now_ms(), |entries| {
            let EndOutcome::Prepare(p) =
                txn::end_txn(&entries["tx"], pid, 0, commit, now_ms(), &Actor::Broker { id: 0 }).unwrap()
            else {
                panic!()
            };
            let done = txn::complete(&p, now_ms(), &Actor::Broker { id: 0 }).unwrap();
            entries.insert("tx".into(), done);
            ((), true)
        })
        .unwrap();
    first
}

#[tokio::test]
async fn reconcile_ends_hanging_transactions_with_the_recorded_outcome_and_counts_them() {
    let (_d, b, pid) = setup().await;
    let first = hanging(&b, pid, 0, false).await;
    assert_eq!(lso_and_end(&b), (first, first + 1), "hanging: the LSO is stuck");
    assert_eq!(b.txn.reconcile(&b).await, 1);
    assert_eq!(lso_and_end(&b), (first + 2, first + 2), "ABORT marker written");
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(partition.state().aborted.len(), 1);
    // A commit the coordinator recorded gets its COMMIT.
    let first = hanging(&b, pid, 1, true).await;
    assert_eq!(b.txn.reconcile(&b).await, 1);
    assert_eq!(lso_and_end(&b), (first + 2, first + 2));
    assert_eq!(partition.state().aborted.len(), 1, "committed, not aborted");
    assert_eq!(b.txn.reconcile_repairs(), 2);
    // Nothing left to do, and a transaction in flight is left alone.
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let open = produce_txn(&b, "tx", pid, 0, 2).unwrap();
    assert_eq!(b.txn.reconcile(&b).await, 0);
    assert_eq!(lso_and_end(&b), (open, open + 1));
}

/// Issue 25 item 12a, on the broker: a hanging-transaction repair queued by
/// `kaasctl txn repair --fix` names the offset the judged transaction is open since,
/// and the leader judges it again where it applies it (slot locked, partition read
/// again). Ended meanwhile and followed by the producer's next transaction at the
/// same epoch, it writes nothing; still hanging, it is ended.
#[tokio::test]
async fn a_queued_hanging_repair_is_judged_again_where_it_is_applied() {
    let (_d, b, pid) = setup().await;
    let first = hanging(&b, pid, 0, false).await;
    let repair = |since: i64| {
        let mut m = MarkerEntry::new("tx", pid, 0, false, vec![tp("t", 0)], None, -1, now_ms());
        m.hanging_since = Some(since);
        m
    };
    let queued = marker_queue::enqueue(&b.volume, 0, &repair(first)).unwrap();
    // Before this broker polls its queue, its reconcile ends that transaction and the
    // producer begins its next one on t-0 at the same epoch.
    assert_eq!(b.txn.reconcile(&b).await, 1);
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let open = produce_txn(&b, "tx", pid, 0, 1).unwrap();
    crate::broker::process_marker_queue(&b).await;
    assert!(!queued.exists(), "the repair is consumed");
    assert_eq!(lso_and_end(&b), (open, open + 1), "the next transaction is still open");
    // That one ends; another hangs, and its repair ends it.
    b.txn.end_txn(&b, "tx", pid, 0, false).await.unwrap();
    let first = hanging(&b, pid, 2, false).await;
    let queued = marker_queue::enqueue(&b.volume, 0, &repair(first)).unwrap();
    crate::broker::process_marker_queue(&b).await;
    assert!(!queued.exists());
    assert_eq!(lso_and_end(&b), (first + 2, first + 2), "ABORT marker written");
}

/// WriteTxnMarkers ABORT naming no transaction, as Kafka's tools send it
/// (`kafka-transactions.sh abort`): it ends a hanging transaction at once (judged as
/// the reconcile backstop judges, the slot locked), and writes nothing — refused, with
/// the code said — for one its coordinator recorded committed (its marker is COMMIT),
/// for a live one (`test_an_admin_abort_of_a_live_transaction_is_refused_and_of_nothing_open_writes_nothing`
/// with a real client), or at another epoch; with nothing open, 0 and nothing written.
#[tokio::test]
async fn an_abort_from_a_tool_ends_only_a_hanging_transaction_whose_outcome_is_abort() {
    const INVALID_PRODUCER_EPOCH: i16 = 47;
    const INVALID_TXN_STATE: i16 = 48;
    let (_d, b, pid) = setup().await;
    let abort = |epoch: i16| {
        let b = b.clone();
        async move {
            b.txn
                .apply_notified(&b, pid, epoch, false, None, &[tp("t", 0)])
                .await
                .codes
        }
    };
    // Its coordinator committed it: ABORT would undo part of a committed transaction.
    let first = hanging(&b, pid, 0, true).await;
    assert_eq!(abort(0).await, vec![(tp("t", 0), INVALID_TXN_STATE)]);
    assert_eq!(lso_and_end(&b), (first, first + 1), "nothing written");
    assert_eq!(b.txn.reconcile(&b).await, 1, "the backstop writes its COMMIT");
    // An aborted one, hanging: ended at once, by the tool's ABORT.
    let first = hanging(&b, pid, 1, false).await;
    assert_eq!(
        abort(1).await,
        vec![(tp("t", 0), INVALID_PRODUCER_EPOCH)],
        "another epoch"
    );
    assert_eq!(lso_and_end(&b), (first, first + 1));
    assert_eq!(abort(0).await, vec![(tp("t", 0), 0)]);
    assert_eq!(lso_and_end(&b), (first + 2, first + 2), "ABORT marker written");
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(partition.state().aborted.len(), 1);
    // Asked again: nothing open, nothing written.
    assert_eq!(abort(0).await, vec![(tp("t", 0), 0)]);
    assert_eq!(lso_and_end(&b), (first + 2, first + 2));
    // A live one is refused and stays open.
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let open = produce_txn(&b, "tx", pid, 0, 2).unwrap();
    assert_eq!(abort(0).await, vec![(tp("t", 0), INVALID_TXN_STATE)]);
    assert_eq!(lso_and_end(&b), (open, open + 1), "the live transaction is still open");
    assert_eq!(b.txn.reconcile(&b).await, 0);
}

#[tokio::test]
async fn reconcile_aborts_an_open_transaction_no_coordinator_entry_knows() {
    let (_d, b, pid) = setup().await;
    let first = hanging(&b, pid, 0, true).await;
    b.txn
        .store()
        .update(slot_for("tx"), now_ms(), |entries| {
            entries.remove("tx");
            ((), true)
        })
        .unwrap();
    assert_eq!(b.txn.reconcile(&b).await, 1);
    assert_eq!(lso_and_end(&b), (first + 2, first + 2));
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(partition.state().aborted.len(), 1, "no entry: ABORT");
}

#[tokio::test]
async fn reconcile_never_closes_a_transaction_of_an_id_created_after_it_read_the_slots() {
    let (_d, b, _) = setup().await;
    // What reconcile's first, lock-free read of the slots saw: no such producer.
    let index_before: Vec<TxnEntry> = Vec::new();
    let (pid, epoch) = b.txn.init_producer_id(&b, "fresh", 60_000, (-1, -1)).await.unwrap();
    b.txn.add(&b, "fresh", pid, epoch, &[tp("t", 0)], &[]).await.unwrap();
    let first = produce_txn(&b, "fresh", pid, epoch, 0).unwrap();
    let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let seen = index_before.iter().find(|e| e.producer_id == pid);
    let repaired = b
        .txn
        .reconcile_one(&b, &partition, &tp("t", 0), seen, (pid, epoch, first), None)
        .await
        .unwrap();
    assert!(
        matches!(repaired, super::recovery::Reconciled::Covered { .. }),
        "the live transaction was left alone: {repaired:?}"
    );
    assert_eq!(lso_and_end(&b), (first, first + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_and_kaasctl_writing_one_group_file_lose_no_update() {
    let (_d, b, _) = setup().await;
    let volume = b.volume.clone();
    let tool = std::thread::spawn(move || {
        for i in 0..40 {
            GroupOffsets::update(&volume, "g", |o| {
                let offset = kaas_core::offsets::CommittedOffset {
                    offset: i,
                    leader_epoch: -1,
                    metadata: None,
                    commit_ms: 1,
                };
                o.set("by-kaasctl", i as i32, offset);
                ((), true)
            })
            .unwrap();
        }
    });
    for i in 0..40 {
        b.groups
            .commit_offsets("g", &[("by-broker".into(), i, i as i64, -1, None)])
            .unwrap();
    }
    tool.join().unwrap();
    let g = GroupOffsets::load(&b.volume, "g").unwrap();
    assert_eq!(
        g.offsets["by-kaasctl"].len(),
        40,
        "kaasctl's updates survived the broker's"
    );
    assert_eq!(
        g.offsets["by-broker"].len(),
        40,
        "the broker's updates survived kaasctl's"
    );
    assert_eq!(
        b.groups.fetch_offsets("g").unwrap(),
        g,
        "the broker's cache sees the file"
    );
}

#[tokio::test]
async fn a_broker_whose_lease_is_not_renewed_stops_appending_and_writing_markers() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    b.lease_renewed();
    let first = produce_txn(&b, "tx", pid, 0, 0).unwrap();
    // The lease task has not renewed for more than half the session timeout (5 s).
    b.renewed_at(std::time::Instant::now() - std::time::Duration::from_secs(6));
    assert!(matches!(
        produce_txn(&b, "tx", pid, 0, 1),
        Err(AppendRejected::LeaseExpired)
    ));
    // Nor does it coordinate its slots meanwhile (its peers may have taken them
    // over): EndTxn is NOT_COORDINATOR, nothing decided here.
    let err = b.txn.end_txn(&b, "tx", pid, 0, true).await.unwrap_err();
    assert_eq!(err.code(), 16, "a stale lease coordinates nothing: {err}");
    assert_eq!(
        b.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::Ongoing,
        "nothing decided"
    );
    assert_eq!(lso_and_end(&b), (first, first + 1), "nothing was appended");
    // Renewed again: the retry lands.
    b.lease_renewed();
    b.txn.end_txn(&b, "tx", pid, 0, true).await.unwrap();
    assert_eq!(lso_and_end(&b), (first + 2, first + 2));
}

#[tokio::test]
async fn a_second_broker_on_the_volume_never_opens_a_partition_another_process_writes() {
    let (dir, b, _) = setup().await;
    let other = second_broker(dir.path(), "1");
    let t = other.topic("t").unwrap();
    let err = t
        .partition(0)
        .unwrap()
        .clone()
        .err()
        .expect("offline on the second broker");
    assert!(
        err.reason.contains("which holds its owner.lock") && err.elsewhere,
        "{err}"
    );
    // The first broker keeps appending.
    let (pid, _) = b.txn.init_producer_id(&b, "tx2", 60_000, (-1, -1)).await.unwrap();
    b.txn.add(&b, "tx2", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx2", pid, 0, 0).unwrap();
    // Once it is gone, the partition can be opened.
    drop(b);
    drop(other);
    let again = broker(dir.path());
    assert!(again.topic("t").unwrap().partition(0).unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_deleted_through_another_broker_is_let_go_by_its_leader() {
    let (dir, b0, _) = setup().await;
    let b1 = second_broker(dir.path(), "1");
    b0.create_topic("d", 2, Default::default()).await.unwrap();
    sync(&b1).await.unwrap();
    assert!(b1
        .topic("d")
        .unwrap()
        .partition(0)
        .unwrap()
        .as_ref()
        .is_err_and(|o| o.elsewhere));
    b1.delete_topic("d", None).await.unwrap();
    assert!(
        b0.volume.partition_dir("d", 0).exists(),
        "broker 1 left alone the logs broker 0 writes"
    );
    sync(&b0).await.unwrap();
    assert!(matches!(b0.topic("d"), Err(TopicError::Unknown(_))));
    assert!(!b0.volume.partition_dir("d", 0).exists(), "their leader removed them");
    // The name is free again, and its new partitions are written by whoever creates it.
    b1.create_topic("d", 1, Default::default()).await.unwrap();
    assert!(b1.topic("d").unwrap().partition(0).unwrap().is_ok());
}

/// A delete by topic id, through a broker that has not yet seen (at its volume sync)
/// that the topic was deleted and created again under the same name through another
/// broker, deletes nothing: the id asked for is gone (UNKNOWN_TOPIC_ID). Before, the
/// broker found the name by the id it still knew and removed the new topic's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_delete_by_id_leaves_a_topic_created_again_elsewhere() {
    let (dir, b0, _) = setup().await;
    let b1 = second_broker(dir.path(), "1");
    b0.create_topic("s", 1, Default::default()).await.unwrap();
    let old_id = b0.topic("s").unwrap().meta.topic_id;
    sync(&b1).await.unwrap();
    b1.delete_topic("s", None).await.unwrap();
    b1.create_topic("s", 1, Default::default()).await.unwrap();
    let new_id = b1.topic("s").unwrap().meta.topic_id;
    assert_ne!(old_id, new_id);
    // Broker 0 has not synced: it still knows the old topic by name and id.
    assert_eq!(b0.topic("s").unwrap().meta.topic_id, old_id);
    let refused = b0.delete_topic("s", Some(old_id)).await;
    assert!(
        matches!(refused, Err(TopicError::UnknownId(id)) if id == old_id),
        "{refused:?}"
    );
    let on_disk = kaas_core::topic::TopicMeta::read(&b0.volume.topic_file("s")).unwrap();
    assert_eq!(on_disk.topic_id, new_id, "the topic created again is still there");
    // Asked for by name, the topic of that name now is deleted.
    b0.delete_topic("s", None).await.unwrap();
    assert!(!b0.volume.topic_file("s").exists());
}

/// A topic deleted and created again through a peer while broker 0 still leads the old
/// topic's partition (it holds the lock; its sync has not come): the partition's
/// `owner.json` is the old topic's, and the peer named broker 0, at the old topic's
/// leader epoch, as the new topic's leader. Producers were sent to a broker serving
/// the deleted topic, and a Java client kept the old epoch for the new topic id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_again_elsewhere_is_not_led_by_the_old_topics_leader() {
    let (dir, b0, _) = setup().await;
    let (peer, _) = peer_and_its_topic();
    let b1 = second_broker(dir.path(), &peer.to_string());
    b0.set_live_brokers(live(&[0, peer]));
    b1.set_live_brokers(live(&[0, peer]));
    sync(&b1).await.unwrap();
    assert_eq!(b1.partition_leadership_for_clients("t", 0).map(|l| l.0), Some(0));
    let old_id = b1.topic("t").unwrap().meta.topic_id;
    b1.delete_topic("t", None).await.unwrap();
    b1.create_topic("t", 1, Default::default()).await.unwrap();
    assert_ne!(b1.topic("t").unwrap().meta.topic_id, old_id);
    assert!(
        b1.topic("t").unwrap().partition(0).unwrap().is_err(),
        "broker 0 holds the lock"
    );
    assert_eq!(b1.partition_leadership_for_clients("t", 0), None);
    assert_eq!(b1.partition_leader("t", 0), None);
}

/// CreateTopics (or a produce's auto-create) for a name whose topic file exists but
/// cannot be read by this broker (damaged, of a newer format in a rolling upgrade, an
/// I/O error), the topic unknown to it so far: the file was taken for "no topic", the
/// partitions were opened under a fresh id, and one nobody held had the unreadable
/// topic's segments cleared as another topic's leftovers, before the create found the
/// file and answered TOPIC_ALREADY_EXISTS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_over_an_unreadable_topic_file_is_refused_and_clears_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b1 = second_broker(dir.path(), "1");
    let b0 = broker(dir.path());
    b0.create_topic("u", 1, Default::default()).await.unwrap();
    append_to(&b0, "u", 0, (b0.next_producer_id().unwrap(), 0, 0), None).unwrap();
    let b0_ = b0.clone();
    tokio::task::spawn_blocking(move || b0_.release_partitions("test"))
        .await
        .unwrap();
    let file = b0.volume.topic_file("u");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    assert!(
        kaas_core::topic::TopicMeta::read(&file).is_err(),
        "the file reads as unreadable"
    );
    let segment = b0.volume.partition_dir("u", 0).join("00000000000000000000.log");
    let before = std::fs::metadata(&segment).unwrap().len();
    assert!(before > 0);
    let refused = b1.create_topic("u", 1, Default::default()).await;
    assert!(matches!(refused, Err(TopicError::Broken(..))), "{:?}", refused.err());
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        before,
        "the records are still there"
    );
}

/// A topic whose file was unreadable when the broker started is refused
/// (KAFKA_STORAGE_ERROR) until the file is repaired, as the log line says; the entry
/// was kept for good: a repaired topic was listed twice in Metadata (once as a storage
/// error, which makes clients refresh at every answer), and once deleted it could not
/// be created again through this broker until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_unreadable_at_start_is_served_once_repaired_and_created_again_once_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let b0 = broker(dir.path());
    b0.create_topic("u", 1, Default::default()).await.unwrap();
    let file = b0.volume.topic_file("u");
    drop(b0);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let b = broker(dir.path());
    assert_eq!(b.broken_topics().len(), 1);
    assert!(matches!(
        b.create_topic("u", 1, Default::default()).await,
        Err(TopicError::Broken(..))
    ));
    std::fs::write(&file, &text).unwrap();
    sync(&b).await.unwrap();
    assert!(b.broken_topics().is_empty(), "repaired");
    assert!(b.topic("u").is_ok());
    b.delete_topic("u", None).await.unwrap();
    sync(&b).await.unwrap();
    b.create_topic("u", 1, Default::default()).await.unwrap();
}

/// InitProducerId looked at the fence log (is it readable?) through its mutex on the
/// runtime's worker, and a fence holds that mutex across its save (a write, fsyncs,
/// a reload after a failure): InitProducerIds arriving during a slow save blocked
/// every worker, and the broker served nothing, its lease renewal included.
#[test]
fn a_fence_log_save_in_progress_stalls_no_worker() {
    let rt = crate::handlers::test_support::two_worker_runtime();
    let dir = tempfile::tempdir().unwrap();
    let b = rt.block_on(async { broker(dir.path()) });
    let held = b.txn.fence_log.lock().unwrap();
    let inits: Vec<_> = ["tx-a", "tx-b"]
        .into_iter()
        .map(|tid| {
            let b = b.clone();
            rt.spawn(async move { b.txn.init_producer_id(&b, tid, 60_000, (-1, -1)).await })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let free = crate::handlers::test_support::runs_a_new_task(&rt);
    drop(held);
    assert!(free, "the runtime's workers are stalled on the fence log's mutex");
    for h in inits {
        rt.block_on(h).unwrap().unwrap();
    }
}

/// A leader frozen (a paused VM) while its topic was deleted and created again
/// elsewhere, and the new topic's partition taken by another broker once the frozen
/// one's lock lapsed: thawed, before anything told it of the take-over, its volume
/// sync found its topic gone and removed the partition's directory by path, the
/// successor's segments and `owner.json` with it, records acknowledged to clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thawed_leader_never_removes_the_directory_a_topic_created_again_took() {
    let (_dir, b, _) = setup().await;
    append_to(&b, "t", 0, (b.next_producer_id().unwrap(), 0, 0), None).unwrap();
    sync(&b).await.unwrap();
    // Meanwhile, elsewhere: t deleted and created again, its partition 0 taken by
    // broker 7, which wrote a record there.
    let (segment, record) = created_again_elsewhere(&b, "t");
    sync(&b).await.unwrap();
    assert_eq!(
        std::fs::metadata(&segment).map(|m| m.len()).ok(),
        Some(record.len() as u64),
        "the successor's segment is whole"
    );
}

/// Topic `name` deleted and created again elsewhere, its partition 0 led by broker 7,
/// which wrote a record there (the old files but the owner ones gone): that segment
/// and the record.
fn created_again_elsewhere(b: &Broker, name: &str) -> (std::path::PathBuf, Vec<u8>) {
    use kaas_core::batch::build_batch;
    use kaas_core::topic::{PartitionOwner, TopicMeta};
    std::fs::remove_file(b.volume.topic_file(name)).unwrap();
    let created = TopicMeta::new(name, 1, Default::default(), now_ms());
    assert!(created.create(&b.volume).unwrap());
    let part = b.volume.partition_dir(name, 0);
    for f in std::fs::read_dir(&part).unwrap() {
        let f = f.unwrap().path();
        if !f.file_name().unwrap().to_string_lossy().starts_with("owner.") {
            std::fs::remove_file(f).unwrap();
        }
    }
    PartitionOwner {
        version: 1,
        broker: 7,
        leader_epoch: 0,
        released: false,
        updated_ms: now_ms(),
        topic_id: Some(created.topic_id),
    }
    .write(&PartitionOwner::path(&b.volume, name, 0))
    .unwrap();
    let record = build_batch(0, now_ms(), None, 0, &[(None, Some(b"the successor's"))]).to_vec();
    let segment = part.join("00000000000000000000.log");
    std::fs::write(&segment, &record).unwrap();
    (segment, record)
}

/// A broker whose copy of a partition was broken (its `owner.json` unreadable when the
/// broker picked the topic up: any other broker's partition stays so on it for good)
/// removed that partition's directory by path — no lock, no check of the topic id —
/// when it found the topic deleted: the directory of the topic of the same name,
/// created again meanwhile and led by another broker, acknowledged records with it
/// (found by a review of topic lifecycle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_partition_of_a_deleted_topic_never_removes_the_directory_a_topic_created_again_took() {
    use kaas_core::topic::{PartitionOwner, TopicMeta};
    let (_dir, b, _) = setup().await;
    let old = TopicMeta::new("u", 1, Default::default(), now_ms());
    assert!(old.create(&b.volume).unwrap());
    let part = b.volume.partition_dir("u", 0);
    std::fs::create_dir_all(&part).unwrap();
    std::fs::write(PartitionOwner::path(&b.volume, "u", 0), b"{ not json").unwrap();
    sync(&b).await.unwrap();
    match b.topic("u").unwrap().partition(0) {
        Some(Err(o)) => assert!(!o.elsewhere, "broken here, not led elsewhere: {o}"),
        Some(Ok(_)) => panic!("expected a broken partition: led here"),
        None => panic!("expected a broken partition: none"),
    }
    // Meanwhile, elsewhere: u deleted and created again, its partition 0 led by
    // broker 7, which wrote a record there.
    let (segment, record) = created_again_elsewhere(&b, "u");
    sync(&b).await.unwrap();
    assert_eq!(
        std::fs::metadata(&segment).map(|m| m.len()).ok(),
        Some(record.len() as u64),
        "the successor's segment is whole"
    );
}

/// A delete cut by a crash between the removal of the topic's file and of its
/// partitions' directories was never finished: nothing looked for directories no
/// topic names, and the deleted records stayed on the volume for good (found by a
/// review of topic lifecycle). Swept by the volume sync (its first round, then every
/// minute): under each one's lock, once untouched for a minute; a directory some
/// topic names, one just made, one whose lock is held, or one without a partition's
/// lock files stays. A deleted partition's directory renamed away for removal and
/// left there by a crash is removed too, once a minute old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_directories_no_topic_names_are_swept() {
    use kaas_core::topic::PartitionOwner;
    let (_dir, b, _) = setup().await;
    let old = |dir: &std::path::Path| {
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3_600);
        std::fs::File::open(dir).unwrap().set_modified(past).unwrap();
    };
    let orphan = |name: &str, aged: bool| {
        let dir = b.volume.root().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("00000000000000000000.log"), b"deleted records").unwrap();
        std::fs::write(dir.join("owner.lock"), b"").unwrap();
        if aged {
            old(&dir);
        }
        dir
    };
    let deleted = orphan("gone-0", true);
    let beyond = orphan("t-3", true); // t has one partition
    let fresh = orphan("new-0", false);
    let held = orphan("held-0", true);
    // A directory of the same shape that no partition left (no lock files).
    let stranger = b.volume.root().join("notes-1");
    std::fs::create_dir_all(&stranger).unwrap();
    old(&stranger);
    let lock = PartitionOwner::lock(&b.volume, "held", 0).unwrap();
    old(&held);
    let live = b.volume.partition_dir("t", 0);
    old(&live);
    // Renamed away for removal (`Volume::deleted_dir`) by a remover a crash cut
    // short; and one a remover is removing now.
    let cut_short = b.volume.deleted_dir().join("gone-1.0123abcd");
    std::fs::create_dir_all(&cut_short).unwrap();
    std::fs::write(cut_short.join("owner.lock"), b"").unwrap();
    old(&cut_short);
    let being_removed = b.volume.deleted_dir().join("gone-2.4567abcd");
    std::fs::create_dir_all(&being_removed).unwrap();
    let swept = tokio::task::block_in_place(|| b.sweep_orphan_partition_dirs());
    assert_eq!(swept, 3);
    assert!(!cut_short.exists(), "a removal a crash cut short is finished");
    assert!(being_removed.exists(), "left to its remover");
    assert!(!deleted.exists() && !beyond.exists(), "no topic names them");
    assert!(fresh.exists(), "made a moment ago: a creator may be about to lock it");
    assert!(held.exists(), "its lock is held");
    assert!(live.exists(), "t-0 is t's");
    assert!(stranger.exists(), "not a partition's");
    drop(lock);
}

/// A volume sync rung by a cluster notice between the once-a-second rounds is not one
/// of them (docs/cluster.md#cluster-notices): however often peers ring, the sweep of
/// orphaned directories keeps to its first round and every `SWEEP_ROUNDS`-th counted
/// one. Were rung syncs counted, the `SWEEP_ROUNDS + 1` below would have swept the
/// orphan; the counted rounds then do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_rung_between_rounds_are_not_counted_and_do_not_run_the_sweep() {
    use std::sync::atomic::Ordering::Relaxed;
    let (_dir, b, _) = setup().await;
    tokio::task::block_in_place(|| b.sync_with_volume()); // the first round sweeps
    let rounds = b.sync_rounds.load(Relaxed);
    let orphan = b.volume.root().join("gone-0");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join("00000000000000000000.log"), b"deleted records").unwrap();
    std::fs::write(orphan.join("owner.lock"), b"").unwrap();
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3_600);
    std::fs::File::open(&orphan).unwrap().set_modified(past).unwrap();
    for _ in 0..=crate::cluster::SWEEP_ROUNDS {
        tokio::task::block_in_place(|| b.sync_with_volume_between_rounds());
    }
    assert_eq!(b.sync_rounds.load(Relaxed), rounds, "no rung sync is a round");
    assert!(orphan.exists(), "no rung sync swept");
    for _ in 0..crate::cluster::SWEEP_ROUNDS {
        let round = b.sync_rounds.load(Relaxed);
        tokio::task::block_in_place(|| b.sync_with_volume());
        if round.is_multiple_of(crate::cluster::SWEEP_ROUNDS) {
            break;
        }
    }
    assert!(!orphan.exists(), "the counted round swept it");
}

/// A Prepare* stamped by a broker whose wall clock runs ahead of this one's (within
/// the tolerated skew, or any amount for kaasctl's host): the start's recovery, which
/// is to finish every Prepare* of the slots it owns, skipped it, and the reaper left
/// it until this broker's clock passed the other's stamp plus its wait. Meanwhile the
/// committed transaction stayed invisible to read_committed consumers and the
/// producer's next transaction waited. Whether an entry sat still is judged on this
/// broker's own clock, by how long it has seen it unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_stamped_by_a_clock_ahead_is_finished_at_start_and_by_the_reaper() {
    let prepare_ahead = |b: &Broker, tid: &str, pid: i64, ahead_ms: i64| {
        let at = now_ms() + ahead_ms;
        b.txn
            .store()
            .update(slot_for(tid), at, |es| {
                let EndOutcome::Prepare(p) =
                    txn::end_txn(&es[tid], pid, 0, true, at, &Actor::Broker { id: 1 }).unwrap()
                else {
                    panic!()
                };
                es.insert(tid.into(), p);
                ((), true)
            })
            .unwrap();
    };
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    prepare_ahead(&b, "tx", pid, 8_000);
    b.txn.recover(&b).await;
    assert_eq!(
        b.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end, "the commit is visible");
    // The reaper: an hour ahead, seen unchanged for its wait by this broker's clock.
    let (pid2, _) = b.txn.init_producer_id(&b, "tx2", 60_000, (-1, -1)).await.unwrap();
    b.txn.add(&b, "tx2", pid2, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx2", pid2, 0, 0).unwrap();
    prepare_ahead(&b, "tx2", pid2, 3_600_000);
    b.txn.reap(&b, 300).await; // first seen now
    assert!(
        b.txn.store().get("tx2").unwrap().unwrap().state.is_prepare(),
        "not yet: just seen"
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    b.txn.reap(&b, 300).await;
    assert_eq!(
        b.txn.store().get("tx2").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end);
}

/// A topic deleted and created again through another broker: this broker's volume
/// sync, finding the old topic gone, dropped the groups' offsets of the topic by name,
/// those committed and staged for the new topic since included (the deleting broker had
/// dropped the old topic's before it removed the file). An exactly-once job on the new
/// topic lost its committed position, or its transaction's offsets, and re-read its
/// input. The sync drops nothing of a name that is on the volume again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_finding_a_topic_created_again_keeps_the_new_topics_offsets() {
    let (dir, b0, _) = setup().await;
    let b1 = second_broker(dir.path(), "1");
    sync(&b1).await.unwrap();
    b1.delete_topic("t", None).await.unwrap();
    b1.create_topic("t", 1, Default::default()).await.unwrap();
    b1.groups.commit_offsets("g", &[("t".into(), 0, 3, -1, None)]).unwrap();
    b1.groups
        .stage_offsets(
            "g",
            7,
            0,
            "tx",
            &[("t".into(), 0, 5, -1, None)],
            &|| Ok(()),
            &|_| Ok(()),
        )
        .unwrap()
        .unwrap();
    sync(&b0).await.unwrap();
    let g = kaas_core::offsets::GroupOffsets::load(&b0.volume, "g").unwrap();
    assert_eq!(
        g.get("t", 0).map(|o| o.offset),
        Some(3),
        "the new topic's committed offset"
    );
    assert!(g.has_pending("t", 0), "the new topic's staged offset");
}

/// The live set is set by the lease task at each tick, and a stale lease took this
/// broker out of it only then: a renewal hung on the volume stops the ticks, and the
/// broker went on answering as the coordinator of its groups and slots (heartbeats,
/// FindCoordinator naming itself) after its peers, seeing its lease expire, had taken
/// them over — two coordinators handing out the same partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_whose_lease_goes_stale_between_ticks_coordinates_nothing() {
    use kaas_core::ownership::{group_key, owner};
    let (_d, b, _) = setup().await;
    b.lease_renewed();
    b.set_live_brokers(live(&[0, 1]));
    let g = (0..)
        .map(|n| format!("g{n}"))
        .find(|g| owner(&group_key(g), &[0, 1]) == Some(0))
        .unwrap();
    assert!(b.owns_group(&g));
    // No tick since: the renewal hangs past half the session timeout.
    b.renewed_at(std::time::Instant::now() - std::time::Duration::from_secs(6));
    assert!(!b.owns_group(&g), "a stale lease coordinates nothing");
    assert_eq!(b.owner_of(&group_key(&g)), Some(1), "FindCoordinator names the peer");
    assert!((0..kaas_core::txn_store::SLOTS).all(|s| !b.owns_txn_slot(s)));
    b.lease_renewed();
    assert!(b.owns_group(&g));
}

use crate::handlers::test_support::second_broker;

fn live(ids: &[i32]) -> std::collections::BTreeMap<i32, crate::listeners::Endpoints> {
    ids.iter()
        .map(|i| (*i, crate::listeners::Endpoints::plaintext("127.0.0.1", 9092)))
        .collect()
}

/// A broker id that, alive beside broker 0, leaves partition t-0 with broker 0
/// (rendezvous placement), and a topic name whose partition 0 it gets.
fn peer_and_its_topic() -> (i32, String) {
    use kaas_core::ownership::{owner, partition_key};
    let peer = (1..)
        .find(|id| owner(&partition_key("t", 0), &[0, *id]) == Some(0))
        .unwrap();
    let topic = (0..)
        .map(|n| format!("x{n}"))
        .find(|x| owner(&partition_key(x, 0), &[0, peer]) == Some(peer))
        .unwrap();
    (peer, topic)
}

/// Beside broker 0 (`b0`, on the volume at `dir`): the peer of
/// [`peer_and_its_topic`], both live for each other, and its topic, created by the
/// peer (which leads its partition 0) and picked up by broker 0.
async fn peer_leading_its_topic(dir: &std::path::Path, b0: &Arc<Broker>) -> (Arc<Broker>, String) {
    let (peer, x) = peer_and_its_topic();
    let b1 = second_broker(dir, &peer.to_string());
    b0.set_live_brokers(live(&[0, peer]));
    b1.set_live_brokers(live(&[0, peer]));
    b1.create_topic(&x, 1, Default::default()).await.unwrap();
    sync(b0).await.unwrap();
    (b1, x)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_entry_reaches_each_partition_wherever_it_is_led_now() {
    let (dir, b0, pid) = setup().await;
    let (b1, x) = peer_leading_its_topic(dir.path(), &b0).await;
    let x = x.as_str();
    let parts = [tp("t", 0), tp(x, 0)];
    b0.txn
        .store()
        .update(slot_for("tx"), now_ms(), |entries| {
            let e = txn::add_to_txn(&entries["tx"], pid, 0, &parts, &[], now_ms(), &Actor::Broker { id: 0 })
                .unwrap()
                .unwrap();
            entries.insert("tx".into(), e);
            ((), true)
        })
        .unwrap();
    produce_txn(&b0, "tx", pid, 0, 0).unwrap();
    let x0 = b1.topic(x).unwrap().partition(0).unwrap().clone().unwrap();
    let mut batch = build_batch(0, 1, Some((pid, 0, 0)), 0x10, &[(None, Some(b"x"))]);
    let headers = validate_all(&batch).unwrap();
    b1.append(&x0, &mut batch, &headers, Some("tx")).unwrap();
    // Prepared by a coordinator that queued both markers to broker 7, which is gone.
    let prepared = prepare_with_queued_markers(b0.txn.store(), pid, 7);
    let marker = MarkerEntry::new("tx", pid, 0, true, parts.to_vec(), Some(prepared.txn_seq), 7, 1);
    let path = marker_queue::enqueue(&b0.volume, 7, &marker).unwrap();
    crate::broker::process_marker_queue(&b0).await;
    let left: MarkerEntry =
        kaas_core::error::read_versioned_json(&path, "marker queue entry", marker_queue::MARKER_FORMAT_VERSION)
            .unwrap();
    assert_eq!(left.partitions, vec![tp(x, 0)], "broker 0 applied t-0 and left x-0");
    assert_eq!(lso_and_end(&b0).0, lso_and_end(&b0).1, "t-0 committed");
    assert_eq!(
        b0.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::PrepareCommit
    );
    crate::broker::process_marker_queue(&b1).await;
    assert!(!path.exists());
    {
        let x = x0.state();
        assert_eq!(x.last_stable_offset(), x.log.log_end_offset(), "x-0 committed");
    }
    assert_eq!(
        b0.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit,
        "the last partition applied completed the transaction"
    );
}

/// A partition whose topic the coordinator deleted and another broker created again,
/// before the coordinator's volume sync picked the new topic up, is not "deleted,
/// nothing to end": the transaction wrote to it (verified by name), so the
/// transaction completes only once its marker is there (found by a review: the
/// coordinator's registry alone answered, and the transaction completed with the new
/// partition's transaction open and its LSO stuck).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_of_a_topic_created_again_elsewhere_gets_its_marker_before_the_transaction_completes() {
    let (dir, b0, _) = setup().await;
    let (b1, x) = peer_leading_its_topic(dir.path(), &b0).await;
    let x = x.as_str();
    // A transactional id broker 0 coordinates beside the peer.
    let tid = (0..)
        .map(|n| format!("tx{n}"))
        .find(|t| b0.owns_txn_slot(slot_for(t)))
        .unwrap();
    let tid = tid.as_str();
    let (pid, _) = b0.txn.init_producer_id(&b0, tid, 60_000, (-1, -1)).await.unwrap();
    b0.txn.add(&b0, tid, pid, 0, &[tp(x, 0)], &[]).await.unwrap();
    // Deleted through the coordinator, created again through the peer.
    b0.delete_topic(x, None).await.unwrap();
    sync(&b1).await.unwrap();
    b1.create_topic(x, 1, Default::default()).await.unwrap();
    assert!(b0.topic(x).is_err(), "broker 0 has not picked the new topic up");
    append_to(&b1, x, 0, (pid, 0, 0), Some(tid)).unwrap();
    let x0 = b1.topic(x).unwrap().partition(0).unwrap().clone().unwrap();
    let open = |p: &crate::broker::Partition| {
        let s = p.state();
        s.last_stable_offset() < s.log.log_end_offset()
    };
    assert!(open(&x0));

    // The decision is durable either way; its finish may fail and be retried.
    let _ = b0.txn.end_txn(&b0, tid, pid, 0, true).await;
    let state = b0.txn.store().get(tid).unwrap().unwrap().state;
    assert!(
        state != TxnState::CompleteCommit || !open(&x0),
        "completed with the new x-0's transaction open"
    );
    // Once the coordinator picked the topic up, the finish reaches its leader.
    sync(&b0).await.unwrap();
    b0.txn.reap(&b0, 0).await;
    crate::broker::process_marker_queue(&b1).await;
    b0.txn.reap(&b0, 0).await;
    assert!(!open(&x0), "x-0 committed");
    assert_eq!(
        b0.txn.store().get(tid).unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_a_dead_writer_are_taken_over_only_once_its_lease_expired_or_it_released_them() {
    let (dir, b0, _) = setup().await;
    let b1 = second_broker(dir.path(), "1");
    b1.create_topic("x", 1, Default::default()).await.unwrap();
    drop(b1); // its lock is free now, as after kill -9
    b0.set_live_brokers(live(&[0, 1])); // ...but its lease is still live
    sync(&b0).await.unwrap();
    assert!(
        b0.topic("x").unwrap().partition(0).unwrap().is_err(),
        "no take-over while its lease is live"
    );
    b0.set_live_brokers(live(&[0]));
    sync(&b0).await.unwrap();
    let x0 = b0.topic("x").unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(x0.leader_epoch, 1, "the take-over bumped the leader epoch");
    // A broker stepping down releases its partitions (owner.json released): another
    // may take them at once, and it takes them back itself once fresh again.
    drop(x0);
    let b0_ = b0.clone();
    tokio::task::spawn_blocking(move || b0_.release_partitions("test"))
        .await
        .unwrap();
    let owner =
        kaas_core::topic::PartitionOwner::read(&kaas_core::topic::PartitionOwner::path(&b0.volume, "x", 0)).unwrap();
    assert!(owner.released);
    assert!(b0.topic("x").unwrap().partition(0).unwrap().is_err());
    let b2 = second_broker(dir.path(), "2");
    assert!(
        b2.topic("x").unwrap().partition(0).unwrap().is_ok(),
        "released: taken at once"
    );
}

#[tokio::test]
async fn a_broker_whose_lease_is_stale_leaves_its_own_live_set_and_coordinates_nothing() {
    let (_d, b, _) = setup().await;
    b.renewed_at(std::time::Instant::now() - std::time::Duration::from_secs(6));
    b.set_live_brokers(live(&[0, 1]));
    assert!(!b.live_brokers().contains_key(&0));
    assert!((0..50).all(|s| !b.owns_txn_slot(s)));
    assert!(!b.owns_group("g"));
    b.lease_renewed();
    b.set_live_brokers(live(&[1]));
    assert!(b.live_brokers().contains_key(&0));
}

/// Appends one batch of `producer` = (pid, epoch, first sequence) to `topic`-`index`
/// on `b`, transactional when `tid` is given.
fn append_to(
    b: &Broker,
    topic: &str,
    index: i32,
    producer: (i64, i16, i32),
    tid: Option<&str>,
) -> Result<kaas_core::partition::AppendOutcome, AppendRejected> {
    let partition = b.topic(topic).unwrap().partition(index).unwrap().clone().unwrap();
    let attrs = if tid.is_some() { 0x10 } else { 0 };
    let mut batch = build_batch(0, 1, Some(producer), attrs, &[(None, Some(b"v"))]);
    let headers = validate_all(&batch).unwrap();
    b.append(&partition, &mut batch, &headers, tid).map(|(o, _)| o)
}

fn sync(b: &Arc<Broker>) -> tokio::task::JoinHandle<()> {
    let b = b.clone();
    tokio::task::spawn_blocking(move || b.sync_with_volume())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_broker_gets_its_partitions_by_hand_over_with_windows_and_open_transactions_intact() {
    use kaas_core::ownership::{owner, partition_key};
    use kaas_core::partition::AppendOutcome;
    let (dir, b0, tpid) = setup().await;
    // Alone, broker 0 leads all of h's partitions.
    b0.create_topic("h", 8, Default::default()).await.unwrap();
    let peer: i32 = 1;
    let moving: Vec<i32> = (0..8)
        .filter(|p| owner(&partition_key("h", *p), &[0, peer]) == Some(peer))
        .collect();
    assert!(!moving.is_empty() && moving.len() < 8, "{moving:?}");
    // An idempotent producer, as the InitProducerId handler makes one.
    let ipid = b0.next_producer_id().unwrap();
    let moved: Vec<TopicPartition> = moving.iter().map(|p| tp("h", *p)).collect();
    b0.txn.add(&b0, "tx", tpid, 0, &moved, &[]).await.unwrap();
    for &p in &moving {
        assert!(matches!(
            append_to(&b0, "h", p, (ipid, 0, 0), None).unwrap(),
            AppendOutcome::Appended(_)
        ));
        assert!(matches!(
            append_to(&b0, "h", p, (tpid, 0, 0), Some("tx")).unwrap(),
            AppendOutcome::Appended(_)
        ));
    }
    let handle = b0.topic("h").unwrap().partition(moving[0]).unwrap().clone().unwrap();
    // Broker 1 joins: broker 0 lets its partitions go, broker 1 takes them.
    let b1 = second_broker(dir.path(), &peer.to_string());
    b0.set_live_brokers(live(&[0, peer]));
    b1.set_live_brokers(live(&[0, peer]));
    let handed = || b0.handed_over.load(std::sync::atomic::Ordering::Relaxed);
    let before = handed();
    sync(&b0).await.unwrap();
    // What the volume sync loop reads to tell the new owner at once (a cluster
    // notice, docs/cluster.md#cluster-notices).
    assert!(
        handed() - before >= moving.len() as u64,
        "the hand-overs are counted (h's, and setup's t-0 if it moved too)"
    );
    for p in 0..8 {
        let here = b0.topic("h").unwrap().partition(p).unwrap().is_ok();
        assert_eq!(
            here,
            !moving.contains(&p),
            "h-{p} stays with broker 0 only if it is its owner"
        );
    }
    assert!(
        matches!(
            append_to_handle(&b0, &handle, (ipid, 0, 1)),
            Err(AppendRejected::NotLeader)
        ),
        "a request that looked the partition up before the hand-over appends nothing"
    );
    drop(handle);
    assert_eq!(b0.partition_leader("h", moving[0]), None, "released, not yet taken");
    sync(&b1).await.unwrap();
    for &p in &moving {
        let taken = b1.topic("h").unwrap().partition(p).unwrap().clone().unwrap();
        assert_eq!(taken.leader_epoch, 1, "the take-over bumped the leader epoch");
        // The idempotence window moved with it: a retry is a duplicate, the next
        // sequence is appended, a gap is refused.
        assert!(matches!(
            append_to(&b1, "h", p, (ipid, 0, 0), None).unwrap(),
            AppendOutcome::Duplicate { .. }
        ));
        assert!(matches!(
            append_to(&b1, "h", p, (ipid, 0, 1), None).unwrap(),
            AppendOutcome::Appended(_)
        ));
        assert!(append_to(&b1, "h", p, (ipid, 0, 5), None).is_err());
        // The open transaction moved with it: the last stable offset holds at its first batch.
        let state = taken.state();
        assert_eq!(
            state.last_stable_offset(),
            1,
            "h-{p}: the open transaction still bounds read_committed"
        );
    }
    assert_eq!(b0.partition_leader("h", moving[0]), Some(peer));
    // The transaction commits through broker 1's partitions (queued to it by broker 0).
    b0.txn.end_txn(&b0, "tx", tpid, 0, true).await.unwrap();
    crate::broker::process_marker_queue(&b1).await;
    for &p in &moving {
        let taken = b1.topic("h").unwrap().partition(p).unwrap().clone().unwrap();
        let state = taken.state();
        assert_eq!(
            state.last_stable_offset(),
            state.log.log_end_offset(),
            "h-{p} committed"
        );
    }
    // Broker 1 stops cleanly: its partitions come back to broker 0 at once.
    let b1_ = b1.clone();
    tokio::task::spawn_blocking(move || b1_.release_partitions("test stop"))
        .await
        .unwrap();
    drop(b1);
    b0.set_live_brokers(live(&[0]));
    sync(&b0).await.unwrap();
    for p in 0..8 {
        let back = b0.topic("h").unwrap().partition(p).unwrap().clone().unwrap();
        if moving.contains(&p) {
            assert_eq!(back.leader_epoch, 2);
            assert!(matches!(
                append_to(&b0, "h", p, (ipid, 0, 1), None).unwrap(),
                AppendOutcome::Duplicate { .. }
            ));
        }
    }
}

fn append_to_handle(
    b: &Broker,
    partition: &crate::broker::Partition,
    producer: (i64, i16, i32),
) -> Result<kaas_core::partition::AppendOutcome, AppendRejected> {
    let mut batch = build_batch(0, 1, Some(producer), 0, &[(None, Some(b"v"))]);
    let headers = validate_all(&batch).unwrap();
    b.append(partition, &mut batch, &headers, None).map(|(o, _)| o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topics_records_never_reappear_in_a_new_topic_of_the_same_name() {
    let (_d, b, _) = setup().await;
    let append_one = |b: &Broker, topic: &str| {
        let p = b.topic(topic).unwrap().partition(0).unwrap().clone().unwrap();
        let mut batch = build_batch(0, 1, None, 0, &[(None, Some(b"old"))]);
        let headers = validate_all(&batch).unwrap();
        b.append(&p, &mut batch, &headers, None).unwrap();
    };
    let release = |b: &Arc<Broker>| {
        let b = b.clone();
        tokio::task::spawn_blocking(move || b.release_partitions("test"))
    };
    // Deleted while nobody holds the partition (between a hand-over and the
    // take-over): the deleting broker takes the free lock and removes it.
    b.create_topic("d", 1, Default::default()).await.unwrap();
    append_one(&b, "d");
    release(&b).await.unwrap();
    b.delete_topic("d", None).await.unwrap();
    assert!(
        !b.volume.partition_dir("d", 0).join("owner.json").exists(),
        "unheld partition removed"
    );
    // Left behind anyway (its files outlived the topic file, e.g. their holder was
    // paused): a new topic of the same name starts empty. The leftover is made here by
    // copying another topic's partition (records, snapshot, owner.json naming its id).
    b.create_topic("e", 1, Default::default()).await.unwrap();
    append_one(&b, "e");
    release(&b).await.unwrap();
    let (from, to) = (b.volume.partition_dir("e", 0), b.volume.partition_dir("f", 0));
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    let f = b.create_topic("f", 1, Default::default()).await.unwrap();
    let p = f.partition(0).unwrap().clone().unwrap();
    assert_eq!(p.log_end_offset(), 0, "the old topic's record is gone");
    assert_eq!(p.topic_id, f.meta.topic_id);
    let owner =
        kaas_core::topic::PartitionOwner::read(&kaas_core::topic::PartitionOwner::path(&b.volume, "f", 0)).unwrap();
    assert_eq!(owner.topic_id, Some(f.meta.topic_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_dying_between_prepare_and_complete_is_finished_by_the_slots_next_owner() {
    let (dir, b0, pid) = setup().await;
    b0.txn.add(&b0, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b0, "tx", pid, 0, 0).unwrap();
    // EndTxn(commit) made durable in the slot, then broker 0 dies before any marker.
    b0.txn
        .store()
        .update(slot_for("tx"), now_ms(), |entries| {
            let EndOutcome::Prepare(e) =
                txn::end_txn(&entries["tx"], pid, 0, true, now_ms(), &Actor::Broker { id: 0 }).unwrap()
            else {
                panic!()
            };
            entries.insert("tx".into(), e);
            ((), true)
        })
        .unwrap();
    drop(b0); // as after kill -9: its locks are free, its lease stops
              // Broker 1, alone alive, leads t-0 (taken over) and owns the transaction's slot.
    let b1 = second_broker(dir.path(), "1");
    assert!(b1.owns_txn_slot(slot_for("tx")));
    let t0 = b1.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let lso = t0.state().last_stable_offset();
    assert!(lso < t0.log_end_offset(), "the transaction is open on t-0");
    b1.txn.reap(&b1, 0).await;
    assert_eq!(
        b1.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    let state = t0.state();
    assert_eq!(
        state.last_stable_offset(),
        state.log.log_end_offset(),
        "its COMMIT marker landed"
    );
    assert!(state.aborted.is_empty(), "committed, not aborted");
}

/// Review finding: a retried AddPartitionsToTxn whose first attempt was appended but
/// cut before its fdatasync (connection dropped, sync failed) finds the partition
/// already added; it is answered only once that state is durable — else the client
/// produces, a power loss drops the line, and the reconcile backstop judges the
/// transaction by the previous one.
#[tokio::test]
async fn a_retried_add_partitions_is_answered_only_once_its_state_is_durable() {
    let (_d, b, pid) = setup().await;
    let slot = slot_for("tx");
    // The first attempt: appended, never synced.
    {
        let held = b.txn.lock_slot(slot).await.unwrap();
        let current = b.txn.held_entry(&held, "tx").unwrap().unwrap();
        let added = txn::add_to_txn(&current, pid, 0, &[tp("t", 0)], &[], now_ms(), &b.txn.actor())
            .unwrap()
            .unwrap();
        let mark = b.txn.append(&held, &[SlotOp::Put(added)], now_ms()).unwrap().unwrap();
        assert!(!b.txn.group.is_durable(slot, mark));
    }
    let syncs = b.txn.journal_syncs();
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    assert_eq!(b.txn.journal_syncs(), syncs + 1, "the retry waited for a sync");
    // Every answer from a state the call did not write syncs the journal as it is
    // (what this process knows of a slot's generations proves nothing when another
    // process wrote, or the slot started its history again); retries are rare.
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    assert_eq!(b.txn.journal_syncs(), syncs + 2);
}

/// Review finding: the coordinator's ids, first and after the epochs run out, come
/// from the transactional range (partitions refuse plain batches under them).
#[tokio::test]
async fn transactional_producer_ids_come_from_their_own_range_also_when_epochs_run_out() {
    use kaas_core::producer_ids::is_transactional;
    let (_d, b, pid) = setup().await;
    assert!(is_transactional(pid), "{pid}");
    // Its epochs nearly spent, as a long life (or another process) leaves them.
    TxnStateStore::new(b.volume.clone())
        .update(slot_for("tx"), now_ms(), |entries| {
            let mut e = entries["tx"].clone();
            e.producer_epoch = i16::MAX - 1;
            entries.insert("tx".into(), e);
            ((), true)
        })
        .unwrap();
    let (pid2, epoch2) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
    assert!(
        pid2 != pid && is_transactional(pid2) && epoch2 == 0,
        "{pid} -> {pid2} at {epoch2}"
    );
}

#[tokio::test]
async fn a_prepare_read_from_the_files_is_made_durable_before_its_markers_are_written() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    // A coordinator in another process appends PrepareCommit and dies before its
    // fdatasync: the line is in the files (the page cache), not yet on the disk.
    let store = b.txn.store();
    let lock = store.lock_slot(slot_for("tx")).unwrap();
    let mut state = None;
    store.catch_up(&lock, &mut state).unwrap();
    let mut state = state.unwrap();
    let EndOutcome::Prepare(prepared) = txn::end_txn(
        state.entry("tx").unwrap(),
        pid,
        0,
        true,
        now_ms(),
        &Actor::Broker { id: 9 },
    )
    .unwrap() else {
        panic!("expected PrepareCommit")
    };
    store
        .append(&lock, &mut state, &[SlotOp::Put(prepared)], now_ms())
        .unwrap();
    drop(lock);
    let syncs = b.txn.journal_syncs();
    b.txn.recover(&b).await;
    assert_eq!(lso_and_end(&b), (2, 2), "the COMMIT marker landed");
    assert_eq!(store.get("tx").unwrap().unwrap().state, TxnState::CompleteCommit);
    assert!(
        b.txn.journal_syncs() > syncs,
        "the PrepareCommit line read from the files was fdatasync'd before its marker"
    );
}

/// Moves `tid` (initialised at epoch 0 as `pid`) through a transaction on t-0 to
/// PrepareCommit, as a coordinator on broker 7 that queued its marker would; returns
/// the queue entry's path.
fn prepared_with_a_queued_marker(b: &Broker, tid: &str, pid: i64) -> std::path::PathBuf {
    let store = b.txn.store();
    store
        .update(slot_for(tid), now_ms(), |entries| {
            let e = txn::add_to_txn(
                &entries[tid],
                pid,
                0,
                &[tp("t", 0)],
                &[],
                now_ms(),
                &Actor::Broker { id: 7 },
            )
            .unwrap()
            .unwrap();
            entries.insert(tid.into(), e);
            ((), true)
        })
        .unwrap();
    produce_txn(b, tid, pid, 0, 0).unwrap();
    let prepared = store
        .update(slot_for(tid), now_ms(), |entries| {
            let EndOutcome::Prepare(mut e) =
                txn::end_txn(&entries[tid], pid, 0, true, now_ms(), &Actor::Broker { id: 7 }).unwrap()
            else {
                panic!("expected PrepareCommit")
            };
            e.markers_queued = true;
            entries.insert(tid.into(), e.clone());
            (e, true)
        })
        .unwrap();
    let marker = MarkerEntry::new(tid, pid, 0, true, vec![tp("t", 0)], Some(prepared.txn_seq), 7, 1);
    marker_queue::enqueue(&b.volume, 7, &marker).unwrap()
}

/// Issue 25 item 8: a slot lock held by another process (paused, stuck) costs only
/// its own entries a round of the marker watcher; it never stalls the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_locked_elsewhere_holds_up_only_its_own_queue_entries() {
    let (_d, b, pid) = setup().await;
    let other = (0..)
        .map(|n| format!("other{n}"))
        .find(|id| slot_for(id) != slot_for("tx"))
        .unwrap();
    let (other_pid, _) = b.txn.init_producer_id(&b, &other, 60_000, (-1, -1)).await.unwrap();
    let stuck = prepared_with_a_queued_marker(&b, "tx", pid);
    let free = prepared_with_a_queued_marker(&b, &other, other_pid);
    // Another process holds "tx"'s slot lock and does not let go.
    let held_elsewhere = TxnStateStore::new(b.volume.clone()).lock_slot(slot_for("tx")).unwrap();
    let poll = tokio::time::timeout(Duration::from_secs(4), crate::broker::process_marker_queue(&b)).await;
    assert!(poll.is_ok(), "the poll gave up on the locked slot and finished");
    assert!(!free.exists(), "the other slot's entry was applied");
    assert_eq!(
        b.txn.store().get(&other).unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    assert!(stuck.exists(), "the locked slot's entry waits for the next round");
    assert_eq!(b.txn.store().get("tx").unwrap().unwrap().state, TxnState::PrepareCommit);
    // A request on the locked slot gets a retriable error instead of hanging.
    let started = std::time::Instant::now();
    let err = b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap_err();
    assert_eq!(err.code(), 14, "{err}");
    assert!(started.elapsed() < Duration::from_secs(8));
    drop(held_elsewhere);
    crate::broker::process_marker_queue(&b).await;
    assert!(!stuck.exists());
    assert_eq!(
        b.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end, "both transactions committed on t-0");
}

/// Issue 25 item 8: a slot lock held by a broker paused while holding it (SIGSTOP, a
/// frozen VM) stalls the slot only until that broker's lease is confirmed dead; then
/// the coordinator takes the lock over and the transaction goes on. The paused
/// holder, thawed, finds it lost the slot. (With the judge unset — the code before —
/// the second request got COORDINATOR_LOAD_IN_PROGRESS as the first does.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_lock_held_by_a_broker_confirmed_dead_is_taken_over() {
    let (_d, b, pid) = setup().await;
    let slot = slot_for("tx");
    let paused_store = TxnStateStore::for_broker(b.volume.clone(), 2);
    let paused = paused_store.lock_slot(slot).unwrap();
    // Broker 2 is not known dead (no lease at all): its lock is respected.
    let err = b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap_err();
    assert_eq!(err.code(), 14, "{err}");
    // Its lease says it stopped: confirmed dead, so its lock is taken over.
    kaas_core::broker::BrokerLease {
        stopped_ms: Some(1),
        ..peer_lease(2, "paused", 0)
    }
    .write(&b.volume)
    .unwrap();
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    assert!(
        !paused_store.holds(paused.id()).unwrap(),
        "the paused holder lost the slot"
    );
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    b.txn.end_txn(&b, "tx", pid, 0, true).await.unwrap();
    assert_eq!(
        b.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    let (lso, end) = lso_and_end(&b);
    assert_eq!(lso, end, "committed");
    // Thawed, the old holder cannot even read the slot for a write under its lock.
    let mut stale = None;
    assert!(paused_store
        .catch_up(&paused, &mut stale)
        .is_err_and(|e| e.to_string().contains("taken over")));
}

/// CI: a broker stopped by SIGSTOP in the few calls between taking or letting go of
/// a slot lock and its line in the lock file (here: locked, the file still naming its
/// last holder released) stalled the slot for its whole pause — nobody judged such a
/// lock. The coordinator now takes it over once it has read the file unchanged for
/// the session timeout, a stall it sees across requests that each wait less.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_lock_held_under_no_holders_line_is_taken_over_after_a_session_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker_with(dir.path(), &["--broker-session-timeout-ms", "1000"]);
    let slot = slot_for("tx");
    let last = TxnStateStore::for_broker(b.volume.clone(), 2);
    drop(last.lock_slot(slot).unwrap());
    // The next holder took the lock and stopped before writing its line.
    let stopped = std::fs::File::open(last.lock_path(slot)).unwrap();
    stopped.lock().unwrap();
    let started = Instant::now();
    let mut requests = 0;
    let held = loop {
        requests += 1;
        match b.txn.lock_slot_within(slot, Duration::from_millis(400)).await {
            Ok(held) => break held,
            Err(CoordError::SlotBusy { .. }) => {
                assert!(started.elapsed() < Duration::from_secs(10), "the slot stays stalled")
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "not before the session timeout"
    );
    assert!(requests >= 3, "seen across requests shorter than the stall: {requests}");
    drop(held);
    drop(stopped);
}

/// Review of issue 25 item 8: a holder whose slot lock was taken over while it was
/// paused (between reading a Prepare* and acting on it) neither commits nor discards
/// the group's staged offsets — keyed by producer and epoch, they may by then belong
/// to the producer's next transaction — and writes no marker: the check that the
/// slot's lock is still its own runs under the group's file lock, before the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_deposed_while_paused_finishes_no_staged_offsets() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &["g".into()]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    b.txn
        .stage_offsets(&b, "tx", pid, 0, "g", &[("t".into(), 0, 7, -1, None)], &|_| Ok(()))
        .await
        .unwrap();
    let ongoing = b.txn.store().get("tx").unwrap().unwrap();
    let EndOutcome::Prepare(prepared) = txn::end_txn(&ongoing, pid, 0, true, now_ms(), &b.txn.actor()).unwrap() else {
        panic!()
    };
    b.txn
        .store()
        .update(slot_for("tx"), now_ms(), |entries| {
            entries.insert("tx".into(), prepared.clone());
            ((), true)
        })
        .unwrap();
    let held = b.txn.lock_slot(slot_for("tx")).await.unwrap();
    // Paused here; broker 9 judges this broker dead and takes the slot over.
    let thief = TxnStateStore::for_broker(b.volume.clone(), 9);
    let mut seen = None;
    assert!(thief
        .steal_slot(
            slot_for("tx"),
            &|_| false,
            kaas_core::txn_store::UnnamedHold::NEVER,
            &mut seen
        )
        .unwrap()
        .is_none());
    let stolen = thief
        .steal_slot(
            slot_for("tx"),
            &|id| id == 0,
            kaas_core::txn_store::UnnamedHold::NEVER,
            &mut seen,
        )
        .unwrap()
        .unwrap();
    // Thawed: the finish it was in goes no further.
    assert!(b
        .txn
        .finish_held(&b, &held, &prepared, Some(Instant::now()), true)
        .await
        .is_err());
    let offsets = GroupOffsets::load(&b.volume, "g").unwrap();
    assert!(offsets.get("t", 0).is_none(), "the staged offset was not committed");
    assert!(offsets.has_pending("t", 0), "nor discarded");
    let (lso, end) = lso_and_end(&b);
    assert!(lso < end, "no marker written");
    drop((held, stolen));
}

/// Broker 0 coordinating a transactional id over t-0 (led here) and x-0 (led by a
/// peer, `b1`), with the peer links replaced by a channel the test reads: each
/// transaction's notice for the peer is handed to the test, which plays the links.
struct FastFinish {
    _dir: tempfile::TempDir,
    b0: Arc<Broker>,
    b1: Arc<Broker>,
    notices: tokio::sync::mpsc::Receiver<PeerNotice>,
    tid: String,
    pid: i64,
    x: String,
}

impl FastFinish {
    async fn new() -> FastFinish {
        let (dir, b0, _) = setup().await;
        let (b1, x) = peer_leading_its_topic(dir.path(), &b0).await;
        let tid = (0..)
            .map(|n| format!("fast{n}"))
            .find(|t| b0.owns_txn_slot(slot_for(t)))
            .unwrap();
        let (pid, _) = b0.txn.init_producer_id(&b0, &tid, 60_000, (-1, -1)).await.unwrap();
        let (sender, notices) = tokio::sync::mpsc::channel(16);
        b0.txn.notify_leaders_through(sender);
        FastFinish {
            _dir: dir,
            b0,
            b1,
            notices,
            tid,
            pid,
            x,
        }
    }

    /// One committed transaction over t-0 and x-0, answered at EndTxn: its notice for
    /// the peer and the path of the queue entry it names.
    async fn commit(&mut self, seq: i32) -> (MarkerNotice, std::path::PathBuf) {
        self.begin(seq).await;
        self.end().await
    }

    /// [`Self::commit`], its notice then applied by the peer and answered: the
    /// transaction is complete.
    async fn commit_applied(&mut self, seq: i32) -> (MarkerNotice, std::path::PathBuf) {
        let (notice, path) = self.commit(seq).await;
        let answer = self
            .b1
            .txn
            .apply_notified(&self.b1, self.pid, 0, true, notice.entry.txn_seq, &[tp(&self.x, 0)])
            .await;
        assert!(answer.applied);
        self.b0
            .txn
            .notice_answered(&self.b0, &notice, NoticeAnswer::Applied)
            .await;
        assert_eq!(self.current().state, TxnState::CompleteCommit);
        (notice, path)
    }

    /// A transaction over t-0 and x-0, a batch in each (`seq`: the batches' sequence).
    async fn begin(&self, seq: i32) {
        let (b0, tid, pid) = (&self.b0, self.tid.as_str(), self.pid);
        b0.txn
            .add(b0, tid, pid, 0, &[tp("t", 0), tp(&self.x, 0)], &[])
            .await
            .unwrap();
        produce_txn(b0, tid, pid, 0, seq).unwrap();
        let x0 = self.b1.topic(&self.x).unwrap().partition(0).unwrap().clone().unwrap();
        let mut batch = build_batch(0, 1, Some((pid, 0, seq)), 0x10, &[(None, Some(b"x"))]);
        let headers = validate_all(&batch).unwrap();
        self.b1.append(&x0, &mut batch, &headers, Some(tid)).unwrap();
    }

    /// EndTxn(commit) of the open transaction: its notice for the peer and the path of
    /// the queue entry it names.
    async fn end(&mut self) -> (MarkerNotice, std::path::PathBuf) {
        let (b0, tid, pid) = (&self.b0, self.tid.as_str(), self.pid);
        b0.txn.end_txn(b0, tid, pid, 0, true).await.unwrap();
        let Some(PeerNotice::Markers(notice)) = self.notices.try_recv().ok() else {
            panic!("no marker notice for the peer")
        };
        let path = marker_queue::entry_path(&b0.volume, notice.leader, &notice.entry);
        (*notice, path)
    }

    fn current(&self) -> TxnEntry {
        self.b0.txn.store().get(&self.tid).unwrap().unwrap()
    }

    fn x_committed(&self) -> bool {
        let x0 = self.b1.topic(&self.x).unwrap().partition(0).unwrap().clone().unwrap();
        let state = x0.state();
        state.last_stable_offset() == state.log.log_end_offset()
    }
}

/// Review finding (2026-12-06): a finish that rewrote the transaction's queue
/// entries for its own view of who leads what — narrowing an entry, or removing one
/// from a queue its view does not use — before its own markers were durable, and then
/// failed on one of them, left a partition with neither an entry nor a marker: another
/// finish of the same Prepare* (its notice answered meanwhile) then found only the
/// narrowed entries, handed them to the polls, and the transaction completed once they
/// were applied, with that partition's transaction open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_that_fails_on_its_own_marker_leaves_every_queued_partition_queued() {
    use kaas_core::ownership::{owner, partition_key};
    let mut f = FastFinish::new().await;
    let (b0, b1, tid, pid, x) = (f.b0.clone(), f.b1.clone(), f.tid.clone(), f.pid, f.x.clone());
    let peer = b1.config.broker_id;
    // A second topic led by the peer.
    let z = (0..)
        .map(|n| format!("z{n}"))
        .find(|z| owner(&partition_key(z, 0), &[0, peer]) == Some(peer))
        .unwrap();
    b1.create_topic(&z, 1, Default::default()).await.unwrap();
    sync(&b0).await.unwrap();
    let parts = [tp(&x, 0), tp(&z, 0)];
    b0.txn.add(&b0, &tid, pid, 0, &parts, &[]).await.unwrap();
    for (seq, part) in parts.iter().enumerate() {
        let p = b1.topic(&part.topic).unwrap().partition(0).unwrap().clone().unwrap();
        let mut batch = build_batch(0, 1, Some((pid, 0, seq as i32)), 0x10, &[(None, Some(b"v"))]);
        let headers = validate_all(&batch).unwrap();
        b1.append(&p, &mut batch, &headers, Some(&tid)).unwrap();
    }
    let open = |topic: &str| {
        let p = b1.topic(topic).unwrap().partition(0).unwrap().clone().unwrap();
        let s = p.state();
        s.last_stable_offset() < s.log.log_end_offset()
    };
    // F1, EndTxn's finish: one notice to the peer for both partitions, which answers
    // that it could not apply them (x-0 is being handed over, say).
    let (notice, path) = f.end().await;
    assert_eq!(notice.entry.partitions.len(), 2);
    let recorded = b0.txn.record_answer(&notice, NoticeAnswer::Failed);
    assert!(matches!(recorded, AnswerRecorded::Ready(_)), "{recorded:?}");
    // Meanwhile x-0's leadership reads as let go: a second finish of the Prepare*
    // (the sweep) takes the slot first, sees x-0 led by nobody — its own to write,
    // which fails (not open here) — and z-0 still the peer's.
    let owner_path = kaas_core::topic::PartitionOwner::path(&b0.volume, &x, 0);
    let mut x_owner = kaas_core::topic::PartitionOwner::read(&owner_path).unwrap();
    x_owner.released = true;
    x_owner.write(&owner_path).unwrap();
    b0.txn.reap(&b0, 0).await;
    assert_eq!(f.current().state, TxnState::PrepareCommit, "x-0's marker failed");
    // F1's answer is acted on; the peer's poll applies what is queued for it.
    b0.txn.act_on_answer(&b0, &notice, NoticeAnswer::Failed, recorded).await;
    crate::broker::process_marker_queue(&b1).await;
    let state = f.current().state;
    assert!(
        state != TxnState::CompleteCommit || !open(&x),
        "completed with x-0's transaction open (entry left: {:?})",
        marker_queue::read_entry(&path)
    );
    // Its leadership settled again, x-0 gets its marker and the transaction completes.
    x_owner.released = false;
    x_owner.write(&owner_path).unwrap();
    for _ in 0..3 {
        crate::broker::process_marker_queue(&b1).await;
        b0.txn.reap(&b0, 0).await;
    }
    assert!(!open(&x) && !open(&z), "both committed");
    assert_eq!(f.current().state, TxnState::CompleteCommit);
}

/// Issue 24: with peer links, a finish writes the peer's queue entry without its
/// fsyncs and tells the peer by a notice naming the transaction; the peer applies the
/// marker from the notice itself (no queue read, no slot lock) and echoes the number;
/// the coordinator removes the entry and completes once its own markers are durable
/// and every leader answered so. A late or repeated answer changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_naming_an_open_transaction_is_applied_from_the_notice() {
    let mut f = FastFinish::new().await;
    let (notice, path) = f.commit(0).await;
    let seq = notice.entry.txn_seq;
    assert_eq!(seq, Some(f.current().txn_seq), "the notice names its transaction");
    assert!(path.exists(), "the entry is on the volume before the notice goes");
    let prepared = f.current();
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    assert!(!prepared.markers_queued);
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
            .await;
    assert_eq!(answer.codes, vec![(tp(&f.x, 0), 0)]);
    assert!(answer.applied);
    assert!(f.x_committed(), "the marker is written");
    assert_eq!(
        f.current().state,
        TxnState::PrepareCommit,
        "the leader does not complete the transaction"
    );
    assert!(path.exists(), "the leader leaves the entry alone");
    f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Applied).await;
    assert!(!path.exists(), "the coordinator removed it");
    let done = f.current();
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert!(!done.markers_queued);
    assert!(f.b0.txn.unsynced_finishes().is_empty());
    // A late or repeated answer changes nothing.
    for answer in [NoticeAnswer::Applied, NoticeAnswer::Answered, NoticeAnswer::Failed] {
        f.b0.txn.notice_answered(&f.b0, &notice, answer).await;
        assert_eq!(f.current(), done);
    }
    assert!(!path.exists());
}

/// Issue 24: a leader that answers while the finish still holds the slot (its own
/// markers durable, waiting up to `NOTICE_ANSWER_WAIT`) has the transaction concluded
/// by that finish, under the lock it holds: the answer is recorded and wakes it. The
/// marker is written once, the entry removed, the transaction complete, nothing left
/// waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_answering_while_the_finish_holds_the_slot_is_concluded_by_that_finish() {
    let mut f = FastFinish::new().await;
    // Long enough that the answer certainly comes while the finish holds the slot.
    f.b0.txn.set_answer_wait(Duration::from_secs(30));
    f.begin(0).await;
    // The peer link: the notice applied at the leader, its answer sent back at once.
    let mut notices = std::mem::replace(&mut f.notices, tokio::sync::mpsc::channel(1).1);
    let (b0, b1, pid, x) = (f.b0.clone(), f.b1.clone(), f.pid, f.x.clone());
    let link = tokio::spawn(async move {
        let Some(PeerNotice::Markers(notice)) = notices.recv().await else {
            panic!("no marker notice for the peer")
        };
        let answer = b1
            .txn
            .apply_notified(&b1, pid, 0, true, notice.entry.txn_seq, &[tp(&x, 0)])
            .await;
        assert!(answer.applied);
        let recorded = b0.txn.record_answer(&notice, NoticeAnswer::Applied);
        assert!(
            matches!(recorded, AnswerRecorded::Recorded),
            "the answer is only recorded: the finish holding the slot concludes, not the answer's task ({recorded:?})"
        );
        notice
    });
    let started = Instant::now();
    f.b0.txn.end_txn(&f.b0, &f.tid, f.pid, 0, true).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "woken by the answer, not by the end of its wait"
    );
    let notice = link.await.unwrap();
    let path = marker_queue::entry_path(&f.b0.volume, notice.leader, &notice.entry);
    let done = f.current();
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert!(!done.markers_queued);
    assert!(
        removed_soon(&path).await,
        "the entry is removed (just after the completion, off the finish's path)"
    );
    assert!(f.b0.txn.unsynced_finishes().is_empty(), "nothing is left waiting");
    assert!(f.x_committed());
    let x0 = f.b1.topic(&f.x).unwrap().partition(0).unwrap().clone().unwrap();
    let end = x0.state().log.log_end_offset();
    assert_eq!(end, 2, "the batch and one marker");
}

/// Issue 24: an answer that comes while its finish still runs — another leader's
/// answer, or the coordinator's own markers, still outstanding, or the finish waiting
/// with the slot held — is recorded and nothing more: it neither takes the slot lock
/// (one look at the slot per transaction, by whoever completes the set) nor waits for
/// it. Before, every answer took the lock, and found nothing to do unless it was the
/// last: a lock cycle per leader per transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_while_the_finish_still_runs_is_only_recorded_without_the_slot_lock() {
    let mut f = FastFinish::new().await;
    let (notice, path) = f.commit(0).await;
    let key = (f.tid.clone(), f.pid, 0i16, notice.entry.txn_seq.unwrap());
    // As if the answer came while the finish still runs (its own markers being
    // written, or waiting for the answers with the slot held): it concludes then.
    {
        let mut finishes = f.b0.txn.unsynced_finishes();
        let waiting = finishes.get_mut(&key).unwrap();
        waiting.holder = Some(Arc::new(tokio::sync::Notify::new()));
    }
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, notice.entry.txn_seq, &[tp(&f.x, 0)])
            .await;
    assert!(answer.applied);
    let elsewhere = TxnStateStore::new(f.b0.volume.clone())
        .lock_slot(slot_for(&f.tid))
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(2),
        f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Applied),
    )
    .await
    .expect("an answer that completes nothing does not wait for the slot lock");
    drop(elsewhere);
    assert_eq!(
        f.b0.txn.unsynced_finishes()[&key].leaders[&notice.leader].1,
        Some(NoticeAnswer::Applied),
        "the answer is recorded"
    );
    assert_eq!(f.current().state, TxnState::PrepareCommit);
    assert!(path.exists());
    // The coordinator's markers durable: the set is complete, and concluded.
    {
        // The finish let go (it waited long enough): the next answer concludes.
        let mut finishes = f.b0.txn.unsynced_finishes();
        let waiting = finishes.get_mut(&key).unwrap();
        waiting.holder = None;
    }
    f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Applied).await;
    assert_eq!(f.current().state, TxnState::CompleteCommit);
    assert!(!path.exists());
    assert!(f.b0.txn.unsynced_finishes().is_empty());
}

/// Issue 24: a lost or refused notice, or an answer that does not say the markers were
/// applied by the notice's number (a leader of the version before, or one that found
/// nothing to apply), hands the leader's markers to its poll: a durable queue entry is
/// written and only then is `markers_queued` recorded, so whoever finds it gone later
/// completes the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unapplied_notice_leaves_a_durable_entry_for_the_poll() {
    let mut f = FastFinish::new().await;
    for (seq, answer) in [(0, NoticeAnswer::Failed), (1, NoticeAnswer::Answered)] {
        let (notice, path) = f.commit(seq).await;
        f.b0.txn.notice_answered(&f.b0, &notice, answer).await;
        let spilled = f.current();
        assert_eq!(spilled.state, TxnState::PrepareCommit);
        assert!(spilled.markers_queued, "the entry is the record now");
        assert!(path.exists());
        assert!(!f.x_committed());
        crate::broker::process_marker_queue(&f.b1).await;
        assert!(!path.exists() && f.x_committed());
        assert_eq!(
            f.current().state,
            TxnState::CompleteCommit,
            "the leader that removed the last entry completed it"
        );
        assert!(f.b0.txn.unsynced_finishes().is_empty());
    }
    let (lso, end) = lso_and_end(&f.b0);
    assert_eq!(lso, end, "both transactions committed on t-0");
}

/// Issue 24: a leader of the version before notices named their transaction applies
/// its queue entry and answers 0 — also when it found no entry (say, not seen yet
/// through an NFS attribute cache). The coordinator never reads such an answer as
/// applied: an entry still there goes through the poll; one gone was applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_without_the_number_is_never_taken_for_an_applied_marker() {
    let mut f = FastFinish::new().await;
    // The older leader sees the entry: applies it, removes it, answers 0.
    let (notice, path) = f.commit(0).await;
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, None, &[tp(&f.x, 0)])
            .await;
    assert_eq!(answer.codes, vec![(tp(&f.x, 0), 0)]);
    assert!(!answer.applied, "applied from the entry, not by the notice's number");
    assert!(!path.exists() && f.x_committed());
    f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Answered).await;
    assert_eq!(f.current().state, TxnState::CompleteCommit, "the entry gone: applied");
    // It does not see the entry: finds nothing, answers 0.
    let (notice, path) = f.commit(1).await;
    let hidden = f._dir.path().join("hidden-entry.json");
    std::fs::rename(&path, &hidden).unwrap();
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, None, &[tp(&f.x, 0)])
            .await;
    assert_eq!(answer.codes, vec![(tp(&f.x, 0), 0)]);
    assert!(!answer.applied);
    assert!(!f.x_committed(), "nothing was written");
    std::fs::rename(&hidden, &path).unwrap();
    f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Answered).await;
    assert_eq!(
        f.current().state,
        TxnState::PrepareCommit,
        "not completed over a missing marker"
    );
    assert!(f.current().markers_queued && path.exists());
    crate::broker::process_marker_queue(&f.b1).await;
    assert!(f.x_committed());
    assert_eq!(f.current().state, TxnState::CompleteCommit);
}

/// Issue 24: a coordinator that dies after its notice was applied — the answer lost
/// with the process, the entry never synced — is finished by the slot's next finish,
/// which writes the entries and notifies again: the leader finds nothing open for the
/// transaction and answers applied without writing. A torn entry of it in a queue
/// the next finish does not write to (a power cut) is removed by that finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_finish_cut_before_any_answer_is_finished_again_from_the_prepare_line() {
    let mut f = FastFinish::new().await;
    let (lost_with_the_process, path) = f.commit(0).await;
    let seq = lost_with_the_process.entry.txn_seq;
    let first =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
            .await;
    assert!(first.applied && f.x_committed());
    assert_eq!(f.current().state, TxnState::PrepareCommit, "nobody completed");
    let torn = marker_queue::queue_dir(&f.b0.volume, 9).join(path.file_name().unwrap());
    std::fs::create_dir_all(torn.parent().unwrap()).unwrap();
    std::fs::write(&torn, b"").unwrap();
    // The next owner's (here: the sweep's) finish of the Prepare* read from the files.
    // (Here the first finish is still waited for in this process: the new finish
    // replaces it.)
    let prepared = f.current();
    assert_eq!(f.b0.txn.finish(&f.b0, &prepared).await.unwrap(), Finished::Queued);
    assert!(path.exists(), "written again");
    assert!(
        !torn.exists(),
        "the finish wrote the whole set again and removed the rest"
    );
    let Some(PeerNotice::Markers(again)) = f.notices.try_recv().ok() else {
        panic!("the leader was notified again")
    };
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
            .await;
    assert_eq!(answer.codes, vec![(tp(&f.x, 0), 0)]);
    assert!(
        answer.applied,
        "nothing open there any more: nothing to write, by the number"
    );
    f.b0.txn.notice_answered(&f.b0, &again, NoticeAnswer::Applied).await;
    assert_eq!(f.current().state, TxnState::CompleteCommit);
    let x0 = f.b1.topic(&f.x).unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(
        x0.state().log.log_end_offset(),
        2,
        "one batch, one marker: the second notice wrote nothing"
    );
    assert!(
        !path.exists(),
        "the coordinator removed the entry its leader answered for"
    );
}

/// Issue 24: a clean stop hands the finishes whose notices were never answered (the
/// peer links are gone) to the leaders' polls: durable entries, marked, so the leader
/// completes the transaction rather than the slot's next owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_hands_unanswered_finishes_to_the_leaders_polls() {
    let mut f = FastFinish::new().await;
    let (_never_answered, path) = f.commit(0).await;
    assert!(!f.b0.txn.unsynced_finishes().is_empty());
    f.b0.txn.hand_unanswered_to_polls(&f.b0).await;
    assert!(f.current().markers_queued);
    assert!(f.b0.txn.unsynced_finishes().is_empty());
    crate::broker::process_marker_queue(&f.b1).await;
    assert!(!path.exists() && f.x_committed());
    assert_eq!(f.current().state, TxnState::CompleteCommit);
}

/// Issue 24: a notice that arrives late or twice — after its transaction completed and
/// the producer's next transaction opened on the partition at the same epoch — writes
/// nothing: the partition knows the later transaction is the one open. (A marker
/// written then would commit the next transaction's first batch early.) The same
/// replay without the number (through the queue) finds nothing either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_notice_never_closes_the_producers_next_transaction() {
    let mut f = FastFinish::new().await;
    let (first, _) = f.commit_applied(0).await;
    f.begin(1).await;
    assert!(!f.x_committed(), "the next transaction is open on x-0");
    for seq in [first.entry.txn_seq, None] {
        let late =
            f.b1.txn
                .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
                .await;
        assert_eq!(late.codes, vec![(tp(&f.x, 0), 0)]);
        assert!(!f.x_committed(), "a late notice ({seq:?}) closed the next transaction");
    }
    let (second, _) = f.end().await;
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, second.entry.txn_seq, &[tp(&f.x, 0)])
            .await;
    assert!(answer.applied);
    assert!(f.x_committed());
    f.b0.txn.notice_answered(&f.b0, &second, NoticeAnswer::Applied).await;
    assert_eq!(f.current().state, TxnState::CompleteCommit);
    let x0 = f.b1.topic(&f.x).unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(x0.state().log.log_end_offset(), 4, "two batches, two markers");
}

/// Issue 24: a partition opened again (a restart, a hand-over) knows a transaction is
/// open but not its number: the notice is applied from the queue entry of that very
/// transaction under the slot lock instead, and the answer says applied only when an
/// entry was. A leader that found no entry (not seen yet through an NFS attribute
/// cache) writes nothing and does not say applied, and the coordinator hands the entry
/// to the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_that_cannot_tell_which_transaction_is_open_asks_the_queue_entry() {
    let mut f = FastFinish::new().await;
    for hide_the_entry in [false, true] {
        f.begin(if hide_the_entry { 1 } else { 0 }).await;
        reopen_x0(&f).await;
        let (notice, path) = f.end().await;
        let hidden = f._dir.path().join("hidden-entry.json");
        if hide_the_entry {
            std::fs::rename(&path, &hidden).unwrap();
        }
        let seq = notice.entry.txn_seq;
        let answer =
            f.b1.txn
                .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
                .await;
        assert_eq!(answer.codes, vec![(tp(&f.x, 0), 0)]);
        if !hide_the_entry {
            assert!(answer.applied, "applied from the entry");
            assert!(f.x_committed() && !path.exists());
            f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Applied).await;
            assert_eq!(f.current().state, TxnState::CompleteCommit);
            continue;
        }
        assert!(!answer.applied, "no entry seen: nothing known durable");
        assert!(!f.x_committed(), "nothing written without the entry or the number");
        std::fs::rename(&hidden, &path).unwrap();
        f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Answered).await;
        assert!(f.current().markers_queued && path.exists(), "handed to the poll");
        crate::broker::process_marker_queue(&f.b1).await;
        assert!(f.x_committed());
        assert_eq!(f.current().state, TxnState::CompleteCommit);
    }
}

/// x-0 let go and opened again from its files by the peer (a restart, a hand-over):
/// its open transactions' numbers are unknown there.
async fn reopen_x0(f: &FastFinish) {
    let (b1, x) = (f.b1.clone(), f.x.clone());
    tokio::task::spawn_blocking(move || {
        b1.reopen_partition(&x, 0, "test: opened again");
        b1.sync_with_volume();
    })
    .await
    .unwrap();
}

/// Issue 24 (review): with the partition unable to tell, only the entry of the
/// transaction the notice names is applied: a stale entry of an earlier transaction of
/// the producer (left by a finish cut between its durable entry and its line) is never
/// taken for it, nor counted as applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_entry_of_an_earlier_transaction_never_answers_for_the_named_one() {
    let mut f = FastFinish::new().await;
    let (first, _) = f.commit(0).await;
    let seq = first.entry.txn_seq;
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
            .await;
    assert!(answer.applied);
    f.b0.txn.notice_answered(&f.b0, &first, NoticeAnswer::Applied).await;
    assert_eq!(f.current().state, TxnState::CompleteCommit);
    // The first transaction's entry, left on the volume (durable, never removed).
    let stale = marker_queue::enqueue(&f.b0.volume, first.leader, &first.entry).unwrap();
    f.begin(1).await;
    reopen_x0(&f).await;
    let (second, path) = f.end().await;
    let hidden = f._dir.path().join("hidden-entry.json");
    std::fs::rename(&path, &hidden).unwrap();
    let seq = second.entry.txn_seq;
    let answer =
        f.b1.txn
            .apply_notified(&f.b1, f.pid, 0, true, seq, &[tp(&f.x, 0)])
            .await;
    assert!(
        !answer.applied,
        "the stale entry does not answer for the second transaction"
    );
    assert!(stale.exists() && !f.x_committed());
    std::fs::rename(&hidden, &path).unwrap();
    f.b0.txn.notice_answered(&f.b0, &second, NoticeAnswer::Answered).await;
    crate::broker::process_marker_queue(&f.b1).await;
    assert!(f.x_committed());
    assert_eq!(f.current().state, TxnState::CompleteCommit);
    assert!(!stale.exists(), "dropped by the poll: its transaction is over");
}

/// A power cut can leave a queue entry's name durable without its bytes: the fast
/// finish of the version before wrote entries without fsyncs, and another entry's
/// directory fsync made the name durable. Seen in
/// tests/integration/test_power_cut.py: the empty entry of a completed transaction was
/// "left in place" at every poll for good, and `kaasctl doctor` reported it.
#[tokio::test]
async fn a_torn_queue_entry_is_removed_once_its_transaction_is_over_and_kept_while_it_is_being_finished() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    let store = b.txn.store().clone();
    let prepared = prepare_with_queued_markers(&store, pid, 1);
    let queue = marker_queue::queue_dir(&b.volume, 0);
    std::fs::create_dir_all(&queue).unwrap();
    // Its transaction is being finished: the coordinator's next finish rewrites it.
    let torn = queue.join(format!("{pid}-0-{}.json", prepared.txn_seq));
    std::fs::write(&torn, b"").unwrap();
    crate::broker::process_marker_queue(&b).await;
    assert!(torn.exists(), "an entry its Prepare transaction may still need is left");
    // A torn entry of a transaction that is over (an older one of the same producer).
    let old = queue.join(format!("{pid}-0-{}.json", prepared.txn_seq - 1));
    std::fs::write(&old, b"{\"transactional_id\": \"tx\", \"produ").unwrap();
    // And one whose producer no slot knows.
    let unknown = queue.join("999999-3-7.json");
    std::fs::write(&unknown, b"").unwrap();
    crate::broker::process_marker_queue(&b).await;
    assert!(!old.exists(), "a torn entry of a finished transaction is removed");
    assert!(!unknown.exists(), "a torn entry of a producer no slot holds is removed");
    assert!(torn.exists());
}

/// Whether the file at `path` is gone within 5 s: a completed transaction's queue
/// entries are removed just after its completion, without the finish waiting for it.
async fn removed_soon(path: &std::path::Path) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while path.exists() {
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// Issue 24: EndTxn's fast finish writes its queue entries on the same trip to the
/// blocking pool as the Prepare*'s fsync, right after it — so they are on the volume
/// when EndTxn is answered — and the finish that follows under the same hold of the
/// slot notifies with them without writing them again (the file the notice names is
/// the one there at the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_txn_queues_its_entries_with_the_prepare_and_the_finish_does_not_write_them_again() {
    use std::os::unix::fs::MetadataExt;
    let mut f = FastFinish::new().await;
    f.begin(0).await;
    let peer = f.b1.config.broker_id;
    let at_answer: std::sync::Mutex<Option<Result<(), String>>> = Default::default();
    let queued_at_answer: std::sync::Mutex<Vec<(std::path::PathBuf, u64)>> = Default::default();
    f.b0.txn
        .end_txn_answering(&f.b0, &f.tid, (f.pid, 0, true), |r| {
            *at_answer.lock().unwrap() = Some(r.map_err(|e| e.to_string()));
            // What the peer's queue holds when the client is answered.
            *queued_at_answer.lock().unwrap() = marker_queue::list(&f.b0.volume, peer)
                .unwrap()
                .into_iter()
                .map(|(path, _)| {
                    let ino = std::fs::metadata(&path).unwrap().ino();
                    (path, ino)
                })
                .collect();
        })
        .await;
    assert_eq!(at_answer.into_inner().unwrap(), Some(Ok(())), "answered: committed");
    let Some(PeerNotice::Markers(notice)) = f.notices.try_recv().ok() else {
        panic!("no marker notice for the peer")
    };
    let path = marker_queue::entry_path(&f.b0.volume, notice.leader, &notice.entry);
    let queued = queued_at_answer.into_inner().unwrap();
    assert_eq!(
        queued.len(),
        1,
        "the peer's entry was queued before the answer: {queued:?}"
    );
    assert_eq!(queued[0].0, path, "the one the notice names");
    assert_eq!(
        std::fs::metadata(&path).unwrap().ino(),
        queued[0].1,
        "the finish did not write it again"
    );
    // The notice lost (no link here): the entry is made durable for the peer's poll,
    // which applies it.
    assert_eq!(f.current().state, TxnState::PrepareCommit);
    f.b0.txn.notice_answered(&f.b0, &notice, NoticeAnswer::Failed).await;
    assert!(f.current().markers_queued);
    crate::broker::process_marker_queue(&f.b1).await;
    assert!(f.x_committed());
    assert_eq!(f.current().state, TxnState::CompleteCommit);
    assert!(!path.exists());
}

/// Issue 24: the entry of a transaction completed through its notices is removed
/// just after the completion, off the finish's path; a leader's poll that comes
/// between finds it and drops it, writing nothing (its marker is already durable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_finding_the_entry_of_a_completed_transaction_drops_it_unwritten() {
    let mut f = FastFinish::new().await;
    let (notice, path) = f.commit_applied(0).await;
    assert!(removed_soon(&path).await);
    // As if the poll came before the removal.
    marker_queue::stage_entries(&f.b0.volume, &[(notice.leader, notice.entry.clone())], false)
        .unwrap()
        .publish()
        .unwrap();
    let x0 = f.b1.topic(&f.x).unwrap().partition(0).unwrap().clone().unwrap();
    let end = x0.state().log.log_end_offset();
    crate::broker::process_marker_queue(&f.b1).await;
    assert!(!path.exists(), "dropped");
    assert_eq!(x0.state().log.log_end_offset(), end, "nothing written");
    assert_eq!(f.current().state, TxnState::CompleteCommit);
}

/// EndTxn's Prepare* of "tx" appended (not yet durable) under the slot lock held,
/// and broker 9's first look at that lock (a take-over needs two).
async fn prepare_appended_and_a_thief_looking(
    b: &Arc<Broker>,
    pid: i64,
) -> (
    HeldSlot<'_>,
    Mark,
    TxnStateStore,
    Option<kaas_core::txn_store::Sighting>,
) {
    b.txn.add(b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    let held = b.txn.lock_slot(slot_for("tx")).await.unwrap();
    let ongoing = b.txn.held_entry(&held, "tx").unwrap().unwrap();
    let EndOutcome::Prepare(prepared) = txn::end_txn(&ongoing, pid, 0, true, now_ms(), &b.txn.actor()).unwrap() else {
        panic!("not prepared")
    };
    let mark = b
        .txn
        .append(&held, &[SlotOp::Put(prepared)], now_ms())
        .unwrap()
        .expect("appended");
    let thief = TxnStateStore::for_broker(b.volume.clone(), 9);
    let mut seen = None;
    assert!(thief
        .steal_slot(
            slot_for("tx"),
            &|_| false,
            kaas_core::txn_store::UnnamedHold::NEVER,
            &mut seen
        )
        .unwrap()
        .is_none());
    (held, mark, thief, seen)
}

/// Review of issue 24: the queue entries EndTxn writes on its Prepare*'s fsync trip
/// are written only while this broker still holds the slot. A broker whose slot was
/// taken over while that fsync stalled (a frozen VM, a network volume) writes none:
/// the slot's new owner may have queued the same transaction's entries by then, for
/// leaders it sees, which a stale write must not replace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_riding_the_prepare_are_not_written_once_the_slot_is_taken_over() {
    let (_d, b, pid) = setup().await;
    // Stalled after the append; broker 9 judges this broker dead and takes the slot
    // over.
    let (held, mark, thief, mut seen) = prepare_appended_and_a_thief_looking(&b, pid).await;
    let never = kaas_core::txn_store::UnnamedHold::NEVER;
    let stolen = thief
        .steal_slot(slot_for("tx"), &|id| id == 0, never, &mut seen)
        .unwrap()
        .unwrap();
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let r = ran.clone();
    let answered = b
        .txn
        .durable_then(held.lock.id(), mark, move || {
            r.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
        .await;
    assert!(answered.is_err(), "nothing is acknowledged");
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "the entries were not written"
    );
    drop((held, stolen));
}

/// Review of issue 24 (second): a broker paused after the check that it still holds
/// the slot, and taken over meanwhile, must not rename its entries in afterwards: the
/// slot's next owner may have written the transaction's own by then — a narrower set,
/// if a partition's leader moved in between, whose leader would apply it and leave the
/// moved partition's marker unwritten. The entries are renamed in under the slot's
/// gate, checked held again (`TxnStateStore::while_held`, whose own test shows no
/// take-over falls inside it); here the take-over comes between the first check and
/// that one, and nothing is renamed in (seen written before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_take_over_falls_between_the_ownership_check_and_the_entries_written() {
    let (_d, b, pid) = setup().await;
    let (held, mark, thief, seen) = prepare_appended_and_a_thief_looking(&b, pid).await;
    let never = kaas_core::txn_store::UnnamedHold::NEVER;
    let entry = MarkerEntry::new("tx", pid, 0, true, vec![tp("t", 0)], Some(1), 0, now_ms());
    let path = marker_queue::entry_path(&b.volume, 7, &entry);
    let stolen = Arc::new(std::sync::Mutex::new(None));
    let (t, s, volume, store, lock) = (
        thief.clone(),
        stolen.clone(),
        b.volume.clone(),
        b.txn.store.clone(),
        held.lock.id(),
    );
    let written = b
        .txn
        .durable_then(lock, mark, move || {
            // Paused right after the check; broker 9 judges this broker dead.
            let mut seen = seen;
            *s.lock().unwrap() = t.steal_slot(slot_for("tx"), &|id| id == 0, never, &mut seen).unwrap();
            super::markers::enqueue_fast_entries(&volume, (&store, lock), &[(7, entry)])
        })
        .await;
    assert!(stolen.lock().unwrap().is_some(), "taken over");
    assert!(written.is_err(), "nothing acknowledged: {written:?}");
    assert!(!path.exists(), "no entry renamed in after the take-over");
    let left: Vec<_> = std::fs::read_dir(marker_queue::queue_dir(&b.volume, 7))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
    drop(held);
}

/// Review of issue 24: EndTxn's task is counted among the finishes a clean stop waits
/// for from its start — while it waits for the slot, makes the Prepare* durable and
/// writes the entries — not only once it answered: its request may be gone (the
/// connection closed), and it goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_txn_is_waited_for_by_a_clean_stop_from_its_start() {
    let (_d, b, pid) = setup().await;
    b.txn.add(&b, "tx", pid, 0, &[tp("t", 0)], &[]).await.unwrap();
    produce_txn(&b, "tx", pid, 0, 0).unwrap();
    // Another process holds the slot (broker 2, not known dead: respected).
    let other = TxnStateStore::for_broker(b.volume.clone(), 2);
    let elsewhere = other.lock_slot(slot_for("tx")).unwrap();
    let task = {
        let b = b.clone();
        tokio::spawn(async move {
            let answer = std::sync::Mutex::new(None);
            b.txn
                .end_txn_answering(&b, "tx", (pid, 0, true), |r| {
                    *answer.lock().unwrap() = Some(r.is_ok());
                })
                .await;
            answer.into_inner().unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        b.txn.finishing.load(std::sync::atomic::Ordering::Acquire),
        1,
        "counted while it waits for the slot"
    );
    drop(elsewhere);
    assert_eq!(task.await.unwrap(), Some(true), "committed");
    assert_eq!(b.txn.finishing.load(std::sync::atomic::Ordering::Acquire), 0);
    b.txn.wait_for_finishes(Duration::from_secs(1)).await;
    assert_eq!(
        b.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
}

/// A slot's cached state held for slow file work (an append folding the journal:
/// four fsyncs, and up to a second for the slot's gate) stalls no runtime worker. Its
/// readers — a transactional produce's verification, `entry` — took the state's
/// mutex on the worker: two of them stalled both workers of a 2-core runtime, lease
/// renewal included. They now wait for it off the workers when it is busy.
#[test]
fn a_slot_state_held_for_slow_file_work_stalls_no_worker() {
    let rt = crate::handlers::test_support::two_worker_runtime();
    let dir = tempfile::tempdir().unwrap();
    let b = rt.block_on(async {
        let b = broker(dir.path());
        b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
        b
    });
    let slot = slot_for("tx") as usize;
    let held = b.txn.states[slot].lock().unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let b = b.clone();
            rt.spawn(async move { b.txn.entry("tx").map(|e| e.is_some()) })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let ran = crate::handlers::test_support::runs_a_new_task(&rt);
    drop(held);
    assert!(ran, "the runtime's workers waited on the slot's state");
    for r in readers {
        assert!(rt.block_on(r).unwrap().unwrap());
    }
}

/// A DeleteTopics refused because `topic-files.lock` stayed held elsewhere (a broker
/// paused holding it) had already dropped the groups' offsets of the topic: the
/// topic stayed, its readers' offsets were gone (read again from
/// auto.offset.reset), and a transaction's staged offsets with them. The lock is
/// taken first now; a refused delete leaves the topic whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_refused_for_the_topic_files_lock_keeps_the_offsets() {
    let (_dir, b0, _) = setup().await;
    b0.create_topic("fl", 1, Default::default()).await.unwrap();
    b0.groups.commit_offsets("g", &[("fl".into(), 0, 3, -1, None)]).unwrap();
    let held = kaas_core::fsutil::lock_exclusive(&b0.volume.topic_files_lock()).unwrap();
    let refused = b0.delete_topic("fl", None).await;
    drop(held);
    let code = refused.map(|_| 0).unwrap_or_else(|e| e.code());
    assert_eq!(code, kafka_protocol::error::ResponseError::NotController.code());
    assert!(b0.topic("fl").is_ok(), "the topic stays");
    assert_eq!(
        b0.groups.fetch_offsets("g").unwrap().get("fl", 0).map(|o| o.offset),
        Some(3),
        "its readers' offsets stay"
    );
}

/// CreatePartitions through a broker that had not yet synced a growth made through
/// another was answered INVALID_CONFIG "retry", which no client retries (Java's
/// admin client fails the call, librdkafka too). It is NOT_CONTROLLER now, which
/// Java's admin client retries after a metadata refresh; by then the broker has
/// synced and judges the count against the topic as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growth_racing_one_elsewhere_is_answered_so_admin_clients_retry() {
    let (dir, b0, _) = setup().await;
    let b1 = second_broker(dir.path(), "1");
    b0.create_topic("g3", 1, Default::default()).await.unwrap();
    sync(&b1).await.unwrap();
    b1.create_partitions("g3", 3).await.unwrap();
    let raced = b0.create_partitions("g3", 5).await;
    let code = raced.map(|_| 0).unwrap_or_else(|e| e.code());
    assert_eq!(code, kafka_protocol::error::ResponseError::NotController.code());
    sync(&b0).await.unwrap();
    b0.create_partitions("g3", 5).await.unwrap();
    assert_eq!(b0.topic("g3").unwrap().meta.partitions, 5);
}

/// An own fence log unreadable at start refused every InitProducerId until the
/// broker was restarted, even once an operator had repaired the file (it was read
/// once, and again only after a failed save, which an unreadable log never reaches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_log_repaired_after_start_is_taken_up_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let volume = kaas_core::Volume::new(dir.path());
    let path = kaas_core::fence_log::fence_log_path(&volume, 0);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"{ not json").unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let refused = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await;
    assert!(matches!(refused, Err(CoordError::Volume(_))), "{refused:?}");
    assert_eq!(
        refused.unwrap_err().code(),
        15,
        "COORDINATOR_NOT_AVAILABLE: the client retries"
    );
    // The operator repairs it (here: removes it; a log with no fence is empty).
    std::fs::remove_file(&path).unwrap();
    let (pid, epoch) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
    // And a bump records its fence in the file.
    let (pid2, epoch2) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
    assert_eq!((pid2, epoch2), (pid, epoch + 1));
    assert!(path.exists(), "the bump's fence is recorded");
}
