//! The seed's store tests (txn_state.rs in the KIP-360 page), one per rule.

use super::*;

const BROKER: Actor = Actor::Broker { id: 0 };

fn pids() -> impl FnMut() -> i64 {
    let mut next = 1000;
    move || {
        next += 1;
        next
    }
}

fn ready(o: InitOutcome) -> (TxnEntry, Option<(i64, i16)>) {
    match o {
        InitOutcome::Ready { entry, fence } => (entry, fence),
        other => panic!("expected Ready, got {other:?}"),
    }
}

fn init(e: Option<&TxnEntry>, claim: (i64, i16), alloc: &mut dyn FnMut() -> i64) -> InitOutcome {
    init_producer_id(e, "tx", 60_000, claim, 10, &BROKER, alloc)
}

fn tp(t: &str, p: i32) -> TopicPartition {
    TopicPartition {
        topic: t.into(),
        partition: p,
    }
}

#[test]
fn transactional_rejoin_bumps_epoch() {
    let mut alloc = pids();
    let (e0, f0) = ready(init(None, (-1, -1), &mut alloc));
    assert_eq!((e0.producer_id, e0.producer_epoch, f0), (1001, 0, None));
    let (e1, f1) = ready(init(Some(&e0), (-1, -1), &mut alloc));
    assert_eq!((e1.producer_id, e1.producer_epoch), (1001, 1));
    assert_eq!(f1, Some((1001, 1)), "epoch > 0 is fenced everywhere");
    let (e2, _) = ready(init(Some(&e1), (-1, -1), &mut alloc));
    // An unclaimed bump is a new instance: it remembers no previous epoch (Apache's
    // NO_PRODUCER_EPOCH), so the instance it replaced cannot pass for a retry.
    assert_eq!((e2.producer_id, e2.producer_epoch, e2.last_epoch), (1001, 2, -1));
}

#[test]
fn a_replaced_instance_cannot_claim_its_way_onto_the_new_epoch() {
    let mut alloc = pids();
    // Instance A gets (pid, 0); instance B starts without a claim and gets (pid, 1).
    let (a, _) = ready(init(None, (-1, -1), &mut alloc));
    let (b, _) = ready(init(Some(&a), (-1, -1), &mut alloc));
    assert_eq!(b.producer_epoch, 1);
    // A comes back claiming its old identity: fenced, and fenced again on every retry.
    for _ in 0..3 {
        assert_eq!(
            init(Some(&b), (a.producer_id, 0), &mut alloc),
            InitOutcome::Reject(TxnError::ProducerFenced)
        );
    }
    // B's own claimed bump still works and is retry-safe.
    let (b2, _) = ready(init(Some(&b), (b.producer_id, 1), &mut alloc));
    assert_eq!((b2.producer_epoch, b2.last_epoch), (2, 1));
    assert_eq!(
        init(Some(&b2), (b.producer_id, 0), &mut alloc),
        InitOutcome::Reject(TxnError::ProducerFenced)
    );
}

#[test]
fn epoch_overflow_rotates_to_fresh_pid() {
    let mut alloc = pids();
    let (mut e, _) = ready(init(None, (-1, -1), &mut alloc));
    e.producer_epoch = i16::MAX - 1;
    let (rotated, fence) = ready(init(Some(&e), (-1, -1), &mut alloc));
    assert_eq!((rotated.producer_id, rotated.producer_epoch), (1002, 0));
    assert_eq!(rotated.last_producer_id, 1001);
    assert_eq!(fence, None, "a fresh id needs no fencing");
}

/// A rotation from a completed transaction kept its Complete* state, partitions and
/// groups under the fresh producer id: EndTxn(commit) of the new id at epoch 0 was
/// answered as a retry of a commit it never made (Apache: INVALID_TXN_STATE), and
/// DescribeTransactions showed a finished transaction for an id that never had one.
#[test]
fn a_rotation_resets_to_empty() {
    let mut alloc = pids();
    let (e, _) = ready(init(None, (-1, -1), &mut alloc));
    let ongoing = add_to_txn(&e, 1001, 0, &[tp("t", 0)], &[], 2, &BROKER)
        .unwrap()
        .unwrap();
    let EndOutcome::Prepare(prepared) = end_txn(&ongoing, 1001, 0, true, 3, &BROKER).unwrap() else {
        panic!()
    };
    let mut done = complete(&prepared, 4, &BROKER).unwrap();
    done.producer_epoch = i16::MAX - 1;
    let (rotated, _) = ready(init(Some(&done), (-1, -1), &mut alloc));
    assert_eq!((rotated.producer_id, rotated.producer_epoch), (1002, 0));
    assert_eq!(rotated.state, TxnState::Empty);
    assert!(rotated.partitions.is_empty() && rotated.groups.is_empty());
    assert_eq!(
        end_txn(&rotated, 1002, 0, true, 5, &BROKER).err(),
        Some(TxnError::InvalidTxnState)
    );
}

#[test]
fn epoch_exhaustion_rotates_one_short_of_max() {
    assert!(!is_epoch_exhausted(i16::MAX - 2));
    assert!(is_epoch_exhausted(i16::MAX - 1));
    let mut alloc = pids();
    let (mut e, _) = ready(init(None, (-1, -1), &mut alloc));
    e.producer_epoch = i16::MAX - 2;
    let (bumped, _) = ready(init(Some(&e), (-1, -1), &mut alloc));
    assert_eq!((bumped.producer_id, bumped.producer_epoch), (1001, i16::MAX - 1));
    let (rotated, _) = ready(init(Some(&bumped), (-1, -1), &mut alloc));
    assert_eq!((rotated.producer_id, rotated.producer_epoch), (1002, 0));
}

#[test]
fn a_claimed_bump_is_retry_safe() {
    let mut alloc = pids();
    let (e0, _) = ready(init(None, (-1, -1), &mut alloc));
    let (e1, first_fence) = ready(init(Some(&e0), (1001, 0), &mut alloc));
    assert_eq!(e1.producer_epoch, 1);
    assert_eq!(first_fence, Some((1001, 1)));
    // The answer was lost; the producer retries with the same claim.
    let (again, fence) = ready(init(Some(&e1), (1001, 0), &mut alloc));
    assert_eq!((again.producer_id, again.producer_epoch), (1001, 1));
    assert_eq!(
        fence, first_fence,
        "the retry fences again: the first attempt may have stopped before its fence was raised"
    );
    assert_eq!(again, e1, "a retry changes nothing");
}

#[test]
fn a_stale_claim_is_fenced_not_bumped() {
    let mut alloc = pids();
    let (e0, _) = ready(init(None, (-1, -1), &mut alloc));
    let (e1, _) = ready(init(Some(&e0), (-1, -1), &mut alloc));
    let (e2, _) = ready(init(Some(&e1), (-1, -1), &mut alloc));
    // A zombie of epoch 0 re-calls InitProducerId after epochs 1 and 2 took over.
    assert_eq!(
        init(Some(&e2), (1001, 0), &mut alloc),
        InitOutcome::Reject(TxnError::ProducerFenced)
    );
    assert_eq!(
        init(Some(&e2), (4242, 2), &mut alloc),
        InitOutcome::Reject(TxnError::ProducerFenced)
    );
}

#[test]
fn a_half_set_claim_is_invalid_request() {
    let mut alloc = pids();
    assert_eq!(
        init(None, (1001, -1), &mut alloc),
        InitOutcome::Reject(TxnError::InvalidRequest)
    );
    assert_eq!(
        init(None, (-1, 3), &mut alloc),
        InitOutcome::Reject(TxnError::InvalidRequest)
    );
}

#[test]
fn a_fresh_entry_accepts_any_claim() {
    let mut alloc = pids();
    let (e, _) = ready(init(None, (77, 12), &mut alloc));
    assert_eq!((e.producer_id, e.producer_epoch), (1001, 0));
}

#[test]
fn a_retried_rotation_gets_the_same_answer() {
    let mut alloc = pids();
    let (mut e, _) = ready(init(None, (-1, -1), &mut alloc));
    e.producer_epoch = i16::MAX - 1;
    let (rotated, _) = ready(init(Some(&e), (1001, i16::MAX - 1), &mut alloc));
    assert_eq!((rotated.producer_id, rotated.producer_epoch), (1002, 0));
    let (again, fence) = ready(init(Some(&rotated), (1001, i16::MAX - 1), &mut alloc));
    assert_eq!((again.producer_id, again.producer_epoch), (1002, 0));
    assert_eq!(again, rotated);
    assert_eq!(fence, None, "a fresh producer id at epoch 0 has nothing to fence");
}

#[test]
fn the_pre_rotation_pid_is_stale_once_the_new_session_moves() {
    let mut alloc = pids();
    let (mut e, _) = ready(init(None, (-1, -1), &mut alloc));
    e.producer_epoch = i16::MAX - 1;
    let (rotated, _) = ready(init(Some(&e), (1001, i16::MAX - 1), &mut alloc));
    let (moved, _) = ready(init(Some(&rotated), (1002, 0), &mut alloc));
    assert_eq!((moved.producer_id, moved.producer_epoch), (1002, 1));
    assert_eq!(
        init(Some(&moved), (1001, i16::MAX - 1), &mut alloc),
        InitOutcome::Reject(TxnError::ProducerFenced)
    );
}

#[test]
fn a_rejoin_mid_ongoing_prepares_an_abort_at_a_bumped_epoch() {
    let mut alloc = pids();
    let (e0, _) = ready(init(None, (-1, -1), &mut alloc));
    let ongoing = add_to_txn(&e0, 1001, 0, &[tp("t", 0), tp("t", 1)], &[], 20, &BROKER)
        .unwrap()
        .unwrap();
    let InitOutcome::AbortFirst { entry } = init(Some(&ongoing), (-1, -1), &mut alloc) else {
        panic!("expected AbortFirst")
    };
    assert_eq!(entry.state, TxnState::PrepareAbort);
    assert_eq!(entry.producer_epoch, 1);
    assert_eq!(entry.partitions.len(), 2, "the partition list stays for the markers");
    // While PrepareAbort, a rejoin is told to come back.
    assert_eq!(
        init(Some(&entry), (-1, -1), &mut alloc),
        InitOutcome::Reject(TxnError::ConcurrentTransactions)
    );
    // Once the markers landed, the retry bumps a second time: the fence epoch 1 is never handed out.
    let done = complete(&entry, 30, &BROKER).unwrap();
    let (clean, fence) = ready(init(Some(&done), (-1, -1), &mut alloc));
    assert_eq!((clean.producer_epoch, clean.state), (2, TxnState::CompleteAbort));
    assert_eq!(fence, Some((1001, 2)));
    assert!(clean.partitions.is_empty());
}

#[test]
fn epoch_mismatch_fences() {
    let mut alloc = pids();
    let (e0, _) = ready(init(None, (-1, -1), &mut alloc));
    let (e1, _) = ready(init(Some(&e0), (-1, -1), &mut alloc));
    assert_eq!(
        add_to_txn(&e1, 1001, 0, &[tp("t", 0)], &[], 1, &BROKER),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        add_to_txn(&e1, 9, 1, &[tp("t", 0)], &[], 1, &BROKER),
        Err(TxnError::InvalidProducerIdMapping)
    );
    let ongoing = add_to_txn(&e1, 1001, 1, &[tp("t", 0)], &[], 1, &BROKER)
        .unwrap()
        .unwrap();
    assert_eq!(
        end_txn(&ongoing, 1001, 0, true, 2, &BROKER),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn end_txn_visits_prepare_then_complete_and_retries_are_idempotent() {
    let mut alloc = pids();
    let (e0, _) = ready(init(None, (-1, -1), &mut alloc));
    assert_eq!(
        end_txn(&e0, 1001, 0, true, 1, &BROKER),
        Err(TxnError::InvalidTxnState),
        "EndTxn on Empty"
    );
    let ongoing = add_to_txn(&e0, 1001, 0, &[tp("t", 0)], &["g".into()], 1, &BROKER)
        .unwrap()
        .unwrap();
    assert_eq!(ongoing.txn_start_ms, 1);
    assert_eq!(
        add_to_txn(&ongoing, 1001, 0, &[tp("t", 0)], &[], 2, &BROKER),
        Ok(None),
        "nothing new"
    );
    let EndOutcome::Prepare(prepared) = end_txn(&ongoing, 1001, 0, true, 3, &BROKER).unwrap() else {
        panic!()
    };
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    assert_eq!(prepared.groups.len(), 1);
    assert_eq!(
        end_txn(&prepared, 1001, 0, true, 4, &BROKER),
        Ok(EndOutcome::InProgress)
    );
    assert_eq!(
        end_txn(&prepared, 1001, 0, false, 4, &BROKER),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        add_to_txn(&prepared, 1001, 0, &[tp("t", 1)], &[], 4, &BROKER),
        Err(TxnError::ConcurrentTransactions)
    );
    let done = complete(&prepared, 5, &BROKER).unwrap();
    assert_eq!(done.state, TxnState::CompleteCommit);
    assert!(done.partitions.is_empty() && done.groups.is_empty());
    assert_eq!(
        end_txn(&done, 1001, 0, true, 6, &BROKER),
        Ok(EndOutcome::AlreadyComplete)
    );
    assert_eq!(
        end_txn(&done, 1001, 0, false, 6, &BROKER),
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction starts from CompleteCommit.
    let next = add_to_txn(&done, 1001, 0, &[tp("t", 2)], &[], 7, &BROKER)
        .unwrap()
        .unwrap();
    assert_eq!((next.state, next.txn_start_ms), (TxnState::Ongoing, 7));
    assert_eq!(next.partitions.len(), 1);
}

#[test]
fn reaper_aborts_overdue_bumps_epoch_fires_hook() {
    let mut alloc = pids();
    let (e0, _) = ready(init(None, (-1, -1), &mut alloc));
    let ongoing = add_to_txn(&e0, 1001, 0, &[tp("t", 0)], &["g".into()], 1_000, &BROKER)
        .unwrap()
        .unwrap();
    assert!(!ongoing.is_overdue(61_000));
    assert!(ongoing.is_overdue(61_001));
    let aborting = force_abort(&ongoing, "transaction timeout", 61_001, &BROKER).unwrap();
    assert_eq!((aborting.state, aborting.producer_epoch), (TxnState::PrepareAbort, 1));
    // The groups are kept so the caller's offset hook discards their staged offsets.
    assert_eq!(aborting.groups.iter().collect::<Vec<_>>(), vec!["g"]);
    assert!(force_abort(&aborting, "again", 61_002, &BROKER).is_none());
    // The zombie producer of epoch 0 is fenced.
    assert_eq!(
        end_txn(&aborting, 1001, 0, true, 61_003, &BROKER),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn history_is_bounded_and_records_who_acted() {
    let mut alloc = pids();
    let (mut e, _) = ready(init(None, (-1, -1), &mut alloc));
    for i in 0..(HISTORY_LEN as i64 + 10) {
        e = ready(init(Some(&e), (-1, -1), &mut alloc)).0;
        e.last_update_ms = i;
    }
    assert_eq!(e.history.len(), HISTORY_LEN);
    let admin = Actor::Admin {
        tool: "kaasctl".into(),
        user: "ops".into(),
    };
    let ongoing = add_to_txn(&e, e.producer_id, e.producer_epoch, &[tp("t", 0)], &[], 5, &BROKER)
        .unwrap()
        .unwrap();
    let aborted = force_abort(&ongoing, "kaasctl txn abort", 6, &admin).unwrap();
    let last = aborted.history.back().unwrap();
    assert_eq!(
        (last.from, last.to, &last.by),
        (TxnState::Ongoing, TxnState::PrepareAbort, &admin)
    );
}

#[test]
fn a_timeout_above_the_maximum_is_rejected() {
    let mut alloc = pids();
    assert_eq!(
        init_producer_id(
            None,
            "tx",
            MAX_TRANSACTION_TIMEOUT_MS + 1,
            (-1, -1),
            0,
            &BROKER,
            &mut alloc
        ),
        InitOutcome::Reject(TxnError::InvalidTransactionTimeout)
    );
}
