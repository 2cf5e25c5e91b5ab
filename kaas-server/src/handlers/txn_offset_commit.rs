//! TxnOffsetCommit (key 28): stages a transaction's consumer offsets under
//! (group, producer id); they become visible only when EndTxn commits (KIP-447).

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use crate::txn_coordinator::CoordError;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 3;
const FENCED_SINCE: i16 = 3;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let group = req.group_id.0.to_string();
    // Kafka's checks, in Kafka's order: WRITE on the transactional id and READ on the
    // group (every partition refused otherwise); then READ on each topic (the
    // partitions of a topic refused say so, the others are staged) — not asked, nor
    // a denial logged, when the whole request is refused.
    let refused = if !broker.may_write_txn(ctx, &req.transactional_id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if !broker.may_read_group(ctx, &group) {
        Some(ResponseError::GroupAuthorizationFailed.code())
    } else {
        None
    };
    let readable: Vec<bool> = req
        .topics
        .iter()
        .map(|t| {
            refused.is_none()
                && broker
                    .authz
                    .authorize(ctx, Operation::Read, ResourceType::Topic, &t.name.0)
        })
        .collect();
    let mut result = if let Some(code) = refused {
        Err(code)
    } else {
        broker
            .txn
            .verify_ongoing(
                broker,
                &req.transactional_id,
                req.producer_id.0,
                req.producer_epoch,
                &group,
            )
            .map_err(|e| client_error_code(e.code(), ctx.version, FENCED_SINCE))
    };
    // KIP-447: with a generation, the member must belong to the group's current one
    // (in a KIP-848 consumer group, the generation is the member epoch). Checked
    // here, and again under the group's lock as the offsets are staged: the request
    // may wait for its transaction's slot meanwhile, and a member removed then must
    // stage nothing (`a_member_removed_while_its_commit_waited_for_the_slot_stages_nothing`).
    let checks_member = ctx.version >= 3 && req.generation_id >= 0;
    let member_again = |offsets: &kaas_core::offsets::GroupOffsets| -> Result<(), ResponseError> {
        if !checks_member {
            return Ok(());
        }
        match &offsets.consumer {
            Some(consumer) => {
                crate::groups::member_check(consumer, &req.member_id, req.generation_id, false).map_err(|e| match e {
                    ResponseError::StaleMemberEpoch => ResponseError::IllegalGeneration,
                    e => e,
                })
            }
            None => broker.groups.check_commit(
                &group,
                req.generation_id,
                &req.member_id,
                req.group_instance_id.as_deref(),
                true,
            ),
        }
    };
    if result.is_ok() && checks_member {
        let checked = broker
            .groups
            .check_consumer_member(&group, &req.member_id, req.generation_id, false)
            .unwrap_or_else(|| {
                broker.groups.check_commit(
                    &group,
                    req.generation_id,
                    &req.member_id,
                    req.group_instance_id.as_deref(),
                    true,
                )
            });
        if let Err(e) = checked {
            // A consumer-group member's stale epoch is ILLEGAL_GENERATION here, as
            // Apache's `validateTransactionalOffsetCommit` answers it: Java's producer
            // aborts on that, and takes STALE_MEMBER_EPOCH for a fatal error.
            result = Err(match e {
                ResponseError::StaleMemberEpoch => ResponseError::IllegalGeneration.code(),
                e => e.code(),
            });
        }
    }
    // Each partition as OffsetCommit judges it (Apache's checks for both): of a topic
    // or partition this broker does not know, UNKNOWN_TOPIC_OR_PARTITION; metadata
    // past `offset.metadata.max.bytes`, OFFSET_METADATA_TOO_LARGE. The others are
    // staged. Before, both were staged, and metadata of any size went into the
    // group's file, rewritten whole at every commit.
    let codes: Vec<Vec<Option<i16>>> = req
        .topics
        .iter()
        .map(|t| {
            let known = broker.topic(&t.name.0).ok();
            t.partitions
                .iter()
                .map(|p| {
                    super::offset_commit::offset_refused(
                        known.as_ref(),
                        |k| k.partition(p.partition_index).is_some(),
                        p.committed_metadata.as_deref(),
                    )
                    .map(|e| e.code())
                })
                .collect()
        })
        .collect();
    if result.is_ok() {
        let entries: Vec<_> = req
            .topics
            .iter()
            .zip(&readable)
            .zip(&codes)
            .filter(|((_, &readable), _)| readable)
            .flat_map(|((t, _), codes)| {
                t.partitions
                    .iter()
                    .zip(codes)
                    .filter(|(_, c)| c.is_none())
                    .map(|(p, _)| {
                        (
                            t.name.0.to_string(),
                            p.partition_index,
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.committed_metadata.as_ref().map(|m| m.to_string()),
                        )
                    })
            })
            .collect();
        if let Err(e) = broker
            .txn
            .stage_offsets(
                broker,
                &req.transactional_id,
                req.producer_id.0,
                req.producer_epoch,
                &group,
                &entries,
                &member_again,
            )
            .await
        {
            result = Err(match e {
                CoordError::Volume(e) => {
                    tracing::error!(group = %group, transactional_id = %req.transactional_id.as_str(), producer_id = req.producer_id.0, epoch = req.producer_epoch, error = %e, "staging transactional offsets failed");
                    // Retriable for the producer: its TxnOffsetCommit handler (Java's,
                    // kafka-python's) takes KAFKA_STORAGE_ERROR for a fatal error;
                    // Apache answers a storage error here as a coordinator one.
                    match crate::groups::offsets_error(&e) {
                        ResponseError::KafkaStorageError => ResponseError::CoordinatorNotAvailable.code(),
                        other => other.code(),
                    }
                }
                e => client_error_code(e.code(), ctx.version, FENCED_SINCE),
            });
        }
    }
    let code = result.err().unwrap_or(0);
    let topics = req
        .topics
        .iter()
        .zip(readable)
        .zip(codes)
        .map(|((t, readable), codes)| {
            let topic_code = if readable || refused.is_some() {
                None
            } else {
                Some(ResponseError::TopicAuthorizationFailed.code())
            };
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(codes)
                        .map(|(p, own)| {
                            // A refusal of the whole request, then the topic's, then
                            // the partition's own, else the staging's outcome.
                            let code = refused.or(topic_code).or(own).unwrap_or(code);
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker, ctx};
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{ApiKey, GroupId, ProducerId, TopicName, TransactionalId};
    use std::collections::BTreeMap;

    /// A broker with topic `orders`, transaction `tx` open with group `g` added, and
    /// member `a` joined to `g` (KIP-848); and a TxnOffsetCommit of `tx` by `a` at a
    /// given member epoch.
    async fn member_a_in_a_transaction(
        dir: &std::path::Path,
    ) -> (
        std::sync::Arc<crate::broker::Broker>,
        crate::groups::consumer::HeartbeatReply,
        impl Fn(i32) -> TxnOffsetCommitRequest,
    ) {
        let b = broker(dir);
        b.create_topic("orders", 2, BTreeMap::new()).await.unwrap();
        let (pid, epoch) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
        b.txn.add(&b, "tx", pid, epoch, &[], &["g".to_string()]).await.unwrap();
        let topics = crate::handlers::consumer_group_heartbeat::topics_view(&b);
        let joined = b
            .groups
            .consumer_heartbeat("g", crate::groups::consumer::tests::join("a", &["orders"]), &topics, 0)
            .unwrap();
        let request = move |generation: i32| {
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(super::super::sb("tx")))
                .with_group_id(GroupId(super::super::sb("g")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(generation)
                .with_member_id(super::super::sb("a"))
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(super::super::sb("orders")))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(5)])])
        };
        (b, joined, request)
    }

    /// A KIP-848 member whose epoch is not its current one is ILLEGAL_GENERATION on
    /// TxnOffsetCommit, as Apache's `validateTransactionalOffsetCommit` answers it
    /// (abortable: the producer aborts and goes on). Before, STALE_MEMBER_EPOCH, which
    /// Java's producer takes for an unexpected, fatal error on TxnOffsetCommit.
    #[tokio::test]
    async fn a_consumer_group_members_stale_epoch_is_illegal_generation() {
        let dir = tempfile::tempdir().unwrap();
        let (b, joined, request) = member_a_in_a_transaction(dir.path()).await;
        let code = |r: TxnOffsetCommitResponse| r.topics[0].partitions[0].error_code;
        let c = ctx(ApiKey::TxnOffsetCommit, 3);
        for stale in [joined.member_epoch - 1, joined.member_epoch + 1] {
            assert_eq!(
                code(handle(&b, &c, request(stale)).await),
                ResponseError::IllegalGeneration.code()
            );
        }
        assert_eq!(code(handle(&b, &c, request(joined.member_epoch)).await), 0);
    }

    /// The member was checked before the request waited for its transaction's slot
    /// (held by an EndTxn writing markers, say) and never again: a member removed
    /// meanwhile (past its rebalance timeout, its partitions given to another, who
    /// read no pending offsets and started from the last commit) still had its
    /// offsets staged and committed with its output — the same records processed
    /// twice. As Apache's `validateTransactionalOffsetCommit`, which runs with the
    /// write, the member is checked again under the group's lock with the staging.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_removed_while_its_commit_waited_for_the_slot_stages_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (b, joined, request) = member_a_in_a_transaction(dir.path()).await;
        let request = request(joined.member_epoch);
        // The slot held by another process (an EndTxn elsewhere, kaasctl): the
        // commit waits for it.
        let held = kaas_core::txn_store::TxnStateStore::new(b.volume.clone())
            .lock_slot(kaas_core::txn::slot_for("tx"))
            .unwrap();
        let commit = tokio::spawn({
            let b = b.clone();
            async move { handle(&b, &ctx(ApiKey::TxnOffsetCommit, 3), request).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!commit.is_finished(), "the commit waits for the slot");
        // The member leaves (or is removed) meanwhile.
        let mut leave = crate::groups::consumer::tests::beat("a", -1, &Default::default());
        leave.owned = None;
        let topics = crate::handlers::consumer_group_heartbeat::topics_view(&b);
        b.groups.consumer_heartbeat("g", leave, &topics, 0).unwrap();
        drop(held);
        let answer = commit.await.unwrap();
        let code = answer.topics[0].partitions[0].error_code;
        assert!(
            code == ResponseError::UnknownMemberId.code() || code == ResponseError::IllegalGeneration.code(),
            "answered {code}"
        );
        let offsets = kaas_core::offsets::GroupOffsets::load(&b.volume, "g").unwrap();
        assert!(offsets.pending.is_empty(), "staged: {:?}", offsets.pending);
    }
}
