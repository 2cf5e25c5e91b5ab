//! AddPartitionsToTxn (key 24), the client versions (v0-3): one transaction per request.

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::txn::TopicPartition;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 3;
const FENCED_SINCE: i16 = 2;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    // Kafka's checks: WRITE on the transactional id (every partition refused
    // otherwise), WRITE on each topic. Partitions refused, or of unknown topics, fail
    // the request; the others are not attempted.
    let tid = &req.v3_and_below_transactional_id;
    let txn_refused = !broker.may_write_txn(ctx, tid);
    let mut wanted = Vec::new();
    let mut unknown = std::collections::HashMap::new();
    for t in &req.v3_and_below_topics {
        let writable = broker
            .authz
            .authorize(ctx, Operation::Write, ResourceType::Topic, &t.name.0);
        for &p in &t.partitions {
            let tp = TopicPartition {
                topic: t.name.0.to_string(),
                partition: p,
            };
            // The partition must exist; whoever leads it (even nobody, for the moment
            // of a hand-over) does not matter to the coordinator.
            if !writable {
                unknown.insert(tp, ResponseError::TopicAuthorizationFailed.code());
            } else if broker.topic(&tp.topic).is_ok_and(|t| t.partition(p).is_some()) {
                wanted.push(tp);
            } else {
                unknown.insert(tp, ResponseError::UnknownTopicOrPartition.code());
            }
        }
    }
    let result: Result<(), i16> = if txn_refused {
        Err(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if !unknown.is_empty() {
        Err(ResponseError::UnknownTopicOrPartition.code())
    } else {
        broker
            .txn
            .add(
                broker,
                tid,
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
                &wanted,
                &[],
            )
            .await
            .map_err(|e| e.code())
    };
    let code_for = |tp: &TopicPartition| match &result {
        Ok(()) => 0,
        Err(_) if txn_refused => ResponseError::TransactionalIdAuthorizationFailed.code(),
        Err(_) if let Some(code) = unknown.get(tp) => *code,
        Err(_) if !unknown.is_empty() => ResponseError::OperationNotAttempted.code(),
        Err(code) => client_error_code(*code, ctx.version, FENCED_SINCE),
    };
    let results = req
        .v3_and_below_topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            let tp = TopicPartition {
                                topic: t.name.0.to_string(),
                                partition: p,
                            };
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code_for(&tp))
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}
