//! DescribeTransactions (key 65, KIP-664): the coordinator's entry of each id.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 0;

const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|tid| {
            let out = TransactionState::default()
                .with_transactional_id(tid.clone())
                .with_transaction_start_time_ms(-1)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            // Kafka's checks: DESCRIBE on the transactional id; its topics only as far as
            // the client may DESCRIBE them.
            if !broker
                .authz
                .authorize(ctx, Operation::Describe, ResourceType::TransactionalId, &tid)
            {
                return out.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            let slot = kaas_core::txn::slot_for(&tid);
            if !broker.owns_txn_slot(slot) {
                // About to take it (FindCoordinator names this broker): retried in place.
                let loading = broker.takes_soon(&kaas_core::ownership::txn_slot_key(slot));
                return out.with_error_code(if loading { 14 } else { 16 });
            }
            match broker.txn.entry(&tid) {
                Ok(Some(e)) => {
                    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    for tp in e
                        .partitions
                        .iter()
                        .filter(|tp| {
                            broker
                                .authz
                                .authorize_quietly(ctx, Operation::Describe, ResourceType::Topic, &tp.topic)
                        })
                    {
                        topics.entry(&tp.topic).or_default().push(tp.partition);
                    }
                    out.with_transaction_state(sb(e.state.as_str()))
                        .with_transaction_timeout_ms(e.timeout_ms)
                        .with_transaction_start_time_ms(e.txn_start_ms)
                        .with_producer_id(ProducerId(e.producer_id))
                        .with_producer_epoch(e.producer_epoch)
                        .with_topics(
                            topics
                                .into_iter()
                                .map(|(t, ps)| TopicData::default().with_topic(TopicName(sb(t))).with_partitions(ps))
                                .collect(),
                        )
                }
                Ok(None) => out.with_error_code(TRANSACTIONAL_ID_NOT_FOUND),
                Err(e) => {
                    tracing::error!(transactional_id = %tid.0.as_str(), error = %e, "DescribeTransactions: slot unreadable");
                    out.with_error_code(15)
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
