//! A coordinator writes the marker of a partition it leads and the queue entry for
//! another leader at the same time. When the local marker fails (the `marker-append`
//! failpoint) after the entry was written, the transaction stays in its Prepare state
//! (no `markers_queued`, no Complete*), the other leader may apply the entry at once,
//! and the retry writes the local marker, rewrites the entry and completes: every
//! partition gets exactly one marker. Its own test binary: the failpoint is
//! process-wide.

use kaas_core::batch::{build_batch, validate_all};
use kaas_core::marker_queue;
use kaas_core::now_ms;
use kaas_core::ownership::{owner, partition_key, txn_slot_key};
use kaas_core::txn::{self, slot_for, Actor, TopicPartition, TxnState};
use kaas_server::broker::{process_marker_queue, Broker};
use std::sync::Arc;

fn broker(dir: &std::path::Path, id: i32, port: u16) -> Arc<Broker> {
    let config = <kaas_server::config::Config as clap::Parser>::parse_from([
        "kaas-server",
        "--data-dir",
        dir.to_str().unwrap(),
        "--broker-id",
        &id.to_string(),
    ]);
    Broker::open(config, kaas_server::listeners::Endpoints::plaintext("127.0.0.1", port)).unwrap()
}

fn live(ids: &[i32]) -> std::collections::BTreeMap<i32, kaas_server::listeners::Endpoints> {
    ids.iter()
        .map(|i| (*i, kaas_server::listeners::Endpoints::plaintext("127.0.0.1", 9092)))
        .collect()
}

fn tp(topic: &str) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition: 0,
    }
}

/// (last stable offset, log end offset) of `topic`-0 at its leader `b`.
fn lso_and_end(b: &Broker, topic: &str) -> (i64, i64) {
    let p = b.topic(topic).unwrap().partition(0).unwrap().clone().unwrap();
    let s = p.state();
    (s.last_stable_offset(), s.log.log_end_offset())
}

fn produce(b: &Broker, topic: &str, pid: i64, epoch: i16) {
    let p = b.topic(topic).unwrap().partition(0).unwrap().clone().unwrap();
    let mut batch = build_batch(0, 1, Some((pid, epoch, 0)), 0x10, &[(None, Some(b"v"))]);
    let headers = validate_all(&batch).unwrap();
    b.append(&p, &mut batch, &headers, Some("tx")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_marker_failing_beside_a_written_queue_entry_leaves_prepare_and_the_retry_lands_each_marker_once() {
    // This binary has this one test and nothing has read the failpoints yet: they
    // are read once, on first use.
    std::env::set_var("KAAS_FAILPOINTS", "marker-append=error*1");
    let slot_key = txn_slot_key(slot_for("tx"));
    // A peer beside broker 0 that leaves both "tx"'s coordinator and t-0 with broker
    // 0, and a topic whose partition 0 the peer leads.
    let peer = (1..)
        .find(|id| owner(&partition_key("t", 0), &[0, *id]) == Some(0) && owner(&slot_key, &[0, *id]) == Some(0))
        .unwrap();
    let x = (0..)
        .map(|n| format!("x{n}"))
        .find(|x| owner(&partition_key(x, 0), &[0, peer]) == Some(peer))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b0 = broker(dir.path(), 0, 9092);
    let b1 = broker(dir.path(), peer, 9093);
    b0.set_live_brokers(live(&[0, peer]));
    b1.set_live_brokers(live(&[0, peer]));
    b0.create_topic("t", 1, Default::default()).await.unwrap();
    b1.create_topic(&x, 1, Default::default()).await.unwrap();
    for b in [&b0, &b1] {
        let b = b.clone();
        tokio::task::spawn_blocking(move || b.sync_with_volume()).await.unwrap();
    }
    assert_eq!(b0.partition_leader(&x, 0), Some(peer));
    assert_eq!(b0.partition_leader("t", 0), Some(0));

    let (pid, epoch) = b0.txn.init_producer_id(&b0, "tx", 60_000, (-1, -1)).await.unwrap();
    // AddPartitionsToTxn as the coordinator records it (the handler's ownership and
    // leadership checks are not what this test is about).
    let parts = [tp("t"), tp(&x)];
    b0.txn
        .store()
        .update(slot_for("tx"), now_ms(), |entries| {
            let e = txn::add_to_txn(
                &entries["tx"],
                pid,
                epoch,
                &parts,
                &[],
                now_ms(),
                &Actor::Broker { id: 0 },
            )
            .unwrap()
            .unwrap();
            entries.insert("tx".into(), e);
            ((), true)
        })
        .unwrap();
    produce(&b0, "t", pid, epoch);
    produce(&b1, &x, pid, epoch);

    // The local marker fails; the queue entry for the peer is written beside it.
    let err = b0.txn.end_txn(&b0, "tx", pid, epoch, true).await.unwrap_err();
    assert_eq!(err.code(), 51, "{err}");
    let entry = b0.txn.store().get("tx").unwrap().unwrap();
    assert_eq!(entry.state, TxnState::PrepareCommit);
    assert!(
        !entry.markers_queued,
        "markers_queued only once every marker and entry landed"
    );
    assert_eq!(lso_and_end(&b0, "t"), (0, 1), "no marker on t-0 yet");
    let pending = marker_queue::pending_files(&b0.volume, pid, epoch, entry.txn_seq).unwrap();
    assert_eq!(
        pending.len(),
        1,
        "the entry for the peer was written beside the failed marker"
    );

    // The peer applies it at once (its poll here; a notice does the same): x-0 is
    // committed, but nothing completes the transaction while t-0 lacks its marker.
    process_marker_queue(&b1).await;
    assert_eq!(lso_and_end(&b1, &x), (2, 2), "x-0: one record, one COMMIT marker");
    assert!(marker_queue::pending_files(&b0.volume, pid, epoch, entry.txn_seq)
        .unwrap()
        .is_empty());
    assert_eq!(
        b0.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::PrepareCommit
    );

    // The retry (the reaper's here) writes t-0's marker and queues x-0's again.
    b0.txn.reap(&b0, 0).await;
    assert_eq!(lso_and_end(&b0, "t"), (2, 2), "t-0: one record, one COMMIT marker");
    let entry = b0.txn.store().get("tx").unwrap().unwrap();
    assert_eq!(entry.state, TxnState::PrepareCommit);
    assert!(entry.markers_queued);
    // The peer finds the transaction already closed on x-0: no second marker, and
    // removing the last entry completes the transaction.
    process_marker_queue(&b1).await;
    assert_eq!(lso_and_end(&b1, &x), (2, 2), "still exactly one marker on x-0");
    assert_eq!(
        b0.txn.store().get("tx").unwrap().unwrap().state,
        TxnState::CompleteCommit
    );
}
