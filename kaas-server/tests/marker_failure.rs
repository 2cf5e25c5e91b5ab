//! A marker append that fails (injected with the `marker-append` failpoint) leaves the
//! transaction in its Prepare state, answers EndTxn with a retriable error, and is
//! retried until it lands — by the client's retry or, without one, by the reaper.
//! Its own test binary: the failpoint is process-wide.

use kaas_core::batch::{build_batch, validate_all};
use kaas_core::txn::{TopicPartition, TxnState};
use kaas_server::broker::Broker;

mod support;
use support::broker;

fn lso_and_end(b: &Broker) -> (i64, i64) {
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let s = p.state();
    (s.last_stable_offset(), s.log.log_end_offset())
}

fn produce(b: &Broker, pid: i64, epoch: i16, seq: i32) {
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let mut batch = build_batch(0, 1, Some((pid, epoch, seq)), 0x10, &[(None, Some(b"v"))]);
    let headers = validate_all(&batch).unwrap();
    b.append(&p, &mut batch, &headers, Some("tx")).unwrap();
}

#[tokio::test]
async fn a_failed_marker_leaves_prepare_and_is_retried_until_it_lands() {
    // This binary has this one test and nothing has read the failpoints yet: they
    // are read once, on first use.
    std::env::set_var("KAAS_FAILPOINTS", "marker-append=error*4");
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let (pid, epoch) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
    let tp = TopicPartition {
        topic: "t".into(),
        partition: 0,
    };
    b.txn
        .add(&b, "tx", pid, epoch, std::slice::from_ref(&tp), &[])
        .await
        .unwrap();
    produce(&b, pid, epoch, 0);

    // Three failures: EndTxn answers CONCURRENT_TRANSACTIONS, the entry stays Prepare.
    for _ in 0..3 {
        let err = b.txn.end_txn(&b, "tx", pid, epoch, true).await.unwrap_err();
        assert_eq!(err.code(), 51, "{err}");
        assert_eq!(b.txn.store().get("tx").unwrap().unwrap().state, TxnState::PrepareCommit);
        assert_eq!(lso_and_end(&b), (0, 1), "no marker: the transaction still pins the LSO");
    }
    // The reaper's retry fails once more (the fourth injected failure), then lands it.
    b.txn.reap(&b, 0).await;
    assert_eq!(b.txn.store().get("tx").unwrap().unwrap().state, TxnState::PrepareCommit);
    b.txn.reap(&b, 0).await;
    assert_eq!(
        b.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
    assert_eq!(lso_and_end(&b), (2, 2), "exactly one COMMIT marker");
    // The client's retry after completion is answered idempotently and writes nothing.
    b.txn.end_txn(&b, "tx", pid, epoch, true).await.unwrap();
    assert_eq!(lso_and_end(&b), (2, 2));

    // Healed: the next transaction completes at once.
    b.txn
        .add(&b, "tx", pid, epoch, std::slice::from_ref(&tp), &[])
        .await
        .unwrap();
    produce(&b, pid, epoch, 1);
    b.txn.end_txn(&b, "tx", pid, epoch, false).await.unwrap();
    assert_eq!(lso_and_end(&b), (4, 4), "the ABORT marker landed");
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(p.state().aborted.len(), 1);
}
