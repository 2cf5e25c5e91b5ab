//! InitProducerId (key 22). Without a transactional id: a fresh producer id at epoch 0
//! from the volume's block allocator (a claimed identity is checked for shape, then
//! ignored, as Apache does). With one: the KIP-360 rules of the transaction coordinator
//! (`txn_coordinator.rs`, `kaas_core::txn::init_producer_id`).

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;
/// Versions below this predate PRODUCER_FENCED (KIP-588) and get INVALID_PRODUCER_EPOCH.
const FENCED_SINCE: i16 = 4;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let fail = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(client_error_code(code, ctx.version, FENCED_SINCE))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    // Exactly one of the two claimed fields set is malformed (KIP-360).
    if (req.producer_id.0 == -1) != (req.producer_epoch == -1) {
        return fail(ResponseError::InvalidRequest.code());
    }
    match &req.transactional_id {
        // Apache: null is an idempotent producer, the empty string a malformed request.
        Some(tid) if tid.is_empty() => fail(ResponseError::InvalidRequest.code()),
        // Kafka's checks: WRITE on the transactional id — without it nobody can bump
        // (and so fence) another principal's producer; IDEMPOTENT_WRITE on the
        // cluster, or WRITE on some topic, for an idempotent producer.
        Some(tid) if !broker.may_write_txn(ctx, tid) => fail(ResponseError::TransactionalIdAuthorizationFailed.code()),
        // The cluster's IDEMPOTENT_WRITE asked quietly: a producer allowed by its topic
        // WRITE logged a denial at every start, using up the audit budget real denials
        // need (Kafka's logIfDenied = false). Refused by both, it is logged once.
        None if !broker.authz.authorize_quietly(
            ctx,
            Operation::IdempotentWrite,
            ResourceType::Cluster,
            crate::authz::CLUSTER,
        ) && !broker.authz.authorize_any(ctx, Operation::Write, ResourceType::Topic) =>
        {
            let _logged = broker.authz.authorize(
                ctx,
                Operation::IdempotentWrite,
                ResourceType::Cluster,
                crate::authz::CLUSTER,
            );
            fail(ResponseError::ClusterAuthorizationFailed.code())
        }
        Some(tid) => {
            match broker
                .txn
                .init_producer_id(
                    broker,
                    tid,
                    req.transaction_timeout_ms,
                    (req.producer_id.0, req.producer_epoch),
                )
                .await
            {
                Ok((pid, epoch)) => InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch),
                Err(e) => {
                    tracing::debug!(transactional_id = %tid.as_str(), error = %e, "InitProducerId refused");
                    fail(e.code())
                }
            }
        }
        // A new block is claimed on the volume under its lock (up to
        // `ALLOCATOR_LOCK_WAIT`): never on the runtime's workers.
        _ => match crate::blocking::off_worker(|| broker.next_producer_id()) {
            Ok(id) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(e) => {
                tracing::error!(error = %e, "cannot allocate a producer id");
                fail(ResponseError::CoordinatorNotAvailable.code())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    //! The seed's handler tests (init_producer_id.rs in the KIP-360 page).
    use super::*;
    use crate::handlers::test_support::{broker, ctx};
    use kaas_core::fence_log::FenceLog;
    use kaas_core::txn::TxnState;
    use kafka_protocol::messages::{ApiKey, TransactionalId};
    use std::collections::BTreeMap;

    async fn init(b: &Arc<Broker>, version: i16, tid: Option<&str>, claim: (i64, i16)) -> InitProducerIdResponse {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(tid.map(|t| TransactionalId(super::super::sb(t))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(claim.0))
            .with_producer_epoch(claim.1);
        handle(b, &ctx(ApiKey::InitProducerId, version), req).await
    }

    fn ok(r: &InitProducerIdResponse) -> (i64, i16) {
        assert_eq!(r.error_code, 0, "{r:?}");
        (r.producer_id.0, r.producer_epoch)
    }

    /// The producer-id allocator's lock held elsewhere (a paused broker, a dead NFS
    /// client's lock that outlives it): InitProducerId claims a block under it. Before,
    /// it waited without end on the runtime's worker, holding a mutex the next
    /// InitProducerId waited on there too: two of them stalled both workers, and the
    /// broker answered nothing (its lease renewal not run either). Now the claim runs
    /// off the workers and gives up after `ALLOCATOR_LOCK_WAIT`, answered
    /// COORDINATOR_NOT_AVAILABLE (retriable); once the lock is free, ids are handed out.
    #[test]
    fn a_producer_id_allocator_lock_held_elsewhere_stalls_no_worker() {
        let rt = crate::handlers::test_support::two_worker_runtime();
        let dir = tempfile::tempdir().unwrap();
        let b = rt.block_on(async { broker(dir.path()) });
        let cluster_dir = b.volume.cluster_dir();
        kaas_core::fsutil::create_dir_durable(&cluster_dir).unwrap();
        let held = kaas_core::fsutil::lock_exclusive(&cluster_dir.join("producer_ids.lock")).unwrap();
        let started = std::time::Instant::now();
        let inits: Vec<_> = [None, Some("tx-a")]
            .into_iter()
            .map(|tid| {
                let b = b.clone();
                rt.spawn(async move { init(&b, 4, tid, (-1, -1)).await })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(300));
        if !crate::handlers::test_support::runs_a_new_task(&rt) {
            drop(held); // let the old code's waiters go, so the test ends
            panic!("the runtime's workers are stalled on the allocator's lock");
        }
        for h in inits {
            let r = rt.block_on(h).unwrap();
            assert_eq!(r.error_code, ResponseError::CoordinatorNotAvailable.code(), "{r:?}");
        }
        assert!(started.elapsed() >= kaas_core::producer_ids::ALLOCATOR_LOCK_WAIT);
        drop(held);
        let r = rt.block_on(init(&b, 4, None, (-1, -1)));
        assert_eq!(r.error_code, 0, "{r:?}");
    }

    /// A fence (each InitProducerId epoch bump, and each peer's) raises the producer's
    /// epoch only on the partitions that know the producer. Before, it made an entry for
    /// it in every partition the broker led: with thousands of partitions and
    /// thousands of restarts of transactional ids a day, gigabytes of producer entries
    /// (each in every partition's snapshot) until they expired a day later, shown by
    /// DescribeProducers on partitions the producer never wrote to. A partition that
    /// never saw the producer needs none: its transactional batches are verified with
    /// the coordinator before they are appended (the rule `apply_fence_logs` follows).
    #[tokio::test]
    async fn a_fence_takes_no_state_in_partitions_that_never_saw_the_producer() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 20, BTreeMap::new()).await.unwrap();
        let (pid, _) = ok(&init(&b, 4, Some("tx"), (-1, -1)).await);
        assert_eq!(ok(&init(&b, 4, Some("tx"), (-1, -1)).await), (pid, 1));
        let known: Vec<i32> = b
            .topic("t")
            .unwrap()
            .partitions
            .iter()
            .filter_map(|p| p.as_ref().ok())
            .filter(|p| p.state().producers.get(pid).is_some())
            .map(|p| p.index)
            .collect();
        assert!(known.is_empty(), "partitions holding the fenced producer: {known:?}");
    }

    #[tokio::test]
    async fn transactional_rejoin_bumps_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let (pid, e0) = ok(&init(&b, 4, Some("tx"), (-1, -1)).await);
        assert_eq!(e0, 0);
        assert_eq!(ok(&init(&b, 4, Some("tx"), (-1, -1)).await), (pid, 1));
        assert_eq!(ok(&init(&b, 4, Some("tx"), (-1, -1)).await), (pid, 2));
    }

    #[tokio::test]
    async fn rejoin_appends_to_fence_log_for_broadcast() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let (pid, _) = ok(&init(&b, 4, Some("tx"), (-1, -1)).await);
        let log = FenceLog::load(&b.volume, 0).unwrap();
        assert!(log.fences.is_empty(), "epoch 0 does not broadcast");
        init(&b, 4, Some("tx"), (-1, -1)).await;
        assert_eq!(FenceLog::load(&b.volume, 0).unwrap().fences[&pid].epoch, 1);
        init(&b, 4, Some("tx"), (-1, -1)).await;
        let log = FenceLog::load(&b.volume, 0).unwrap();
        assert_eq!(log.fences.len(), 1, "each bump overwrites the outbound entry");
        assert_eq!(log.fences[&pid].epoch, 2);
        assert_eq!(log.fences[&pid].transactional_id.as_deref(), Some("tx"));
    }

    #[tokio::test]
    async fn stale_claim_is_producer_fenced() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let (pid, _) = ok(&init(&b, 4, Some("tx"), (-1, -1)).await);
        init(&b, 4, Some("tx"), (-1, -1)).await;
        init(&b, 4, Some("tx"), (-1, -1)).await;
        assert_eq!(init(&b, 4, Some("tx"), (pid, 0)).await.error_code, 90);
        // Versions before KIP-588 get INVALID_PRODUCER_EPOCH instead.
        assert_eq!(init(&b, 3, Some("tx"), (pid, 0)).await.error_code, 47);
    }

    #[tokio::test]
    async fn current_claim_bumps_and_its_retry_is_stable() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let (pid, _) = ok(&init(&b, 4, Some("tx"), (-1, -1)).await);
        assert_eq!(ok(&init(&b, 4, Some("tx"), (pid, 0)).await), (pid, 1));
        assert_eq!(
            ok(&init(&b, 4, Some("tx"), (pid, 0)).await),
            (pid, 1),
            "a retry gets the same answer"
        );
        assert_eq!(ok(&init(&b, 4, Some("tx"), (pid, 1)).await), (pid, 2));
    }

    #[tokio::test]
    async fn half_set_claim_is_invalid_request() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        assert_eq!(init(&b, 4, Some("tx"), (5, -1)).await.error_code, 42);
        assert_eq!(init(&b, 4, None, (-1, 3)).await.error_code, 42);
    }

    #[tokio::test]
    async fn a_replaced_instance_claiming_its_old_epoch_is_fenced_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let (pid, _) = ok(&init(&b, 5, Some("tx"), (-1, -1)).await); // instance A
        assert_eq!(ok(&init(&b, 5, Some("tx"), (-1, -1)).await), (pid, 1)); // instance B
        for _ in 0..3 {
            assert_eq!(init(&b, 5, Some("tx"), (pid, 0)).await.error_code, 90);
        }
        let entry = b.txn.store().get("tx").unwrap().unwrap();
        assert_eq!(entry.producer_epoch, 1, "B keeps its epoch");
    }

    #[tokio::test]
    async fn an_empty_transactional_id_is_invalid_request() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let r = init(&b, 4, Some(""), (-1, -1)).await;
        assert_eq!((r.error_code, r.producer_id.0), (42, -1));
    }

    #[tokio::test]
    async fn idempotent_path_ignores_a_claim() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let first = ok(&init(&b, 4, None, (-1, -1)).await);
        let (pid, epoch) = ok(&init(&b, 4, None, (999, 5)).await);
        assert_eq!(epoch, 0);
        assert_ne!(pid, 999);
        assert_ne!(pid, first.0, "every idempotent producer gets a fresh id");
    }

    #[tokio::test]
    async fn rejoin_mid_ongoing_aborts_it_and_answers_concurrent() {
        use kaas_core::batch::{build_batch, validate_all};
        use kaas_core::txn::TopicPartition;
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let topic = b.create_topic("t", 1, Default::default()).await.unwrap();
        let (pid, _) = ok(&init(&b, 4, Some("tx"), (-1, -1)).await);
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        b.txn
            .add(&b, "tx", pid, 0, std::slice::from_ref(&tp), &[])
            .await
            .unwrap();
        let partition = topic.partition(0).unwrap().as_ref().unwrap().clone();
        let mut batch = build_batch(0, 1, Some((pid, 0, 0)), 0x10, &[(None, Some(b"in flight"))]);
        let headers = validate_all(&batch).unwrap();
        b.append(&partition, &mut batch, &headers, Some("tx")).unwrap();
        assert_eq!(partition.state().last_stable_offset(), 0);

        assert_eq!(
            init(&b, 4, Some("tx"), (-1, -1)).await.error_code,
            51,
            "CONCURRENT_TRANSACTIONS"
        );
        // The fence epoch 1 was broadcast, the ABORT marker is on the log, the entry completed.
        assert_eq!(FenceLog::load(&b.volume, 0).unwrap().fences[&pid].epoch, 1);
        {
            let state = partition.state();
            assert_eq!(state.log.log_end_offset(), 2);
            assert_eq!(state.aborted.len(), 1);
            assert_eq!(state.last_stable_offset(), 2);
        }
        let entry = b.txn.store().get("tx").unwrap().unwrap();
        assert_eq!((entry.state, entry.producer_epoch), (TxnState::CompleteAbort, 1));
        // The retry bumps onto a clean entry.
        assert_eq!(ok(&init(&b, 4, Some("tx"), (-1, -1)).await), (pid, 2));
    }
}
