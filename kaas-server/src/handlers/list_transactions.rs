//! ListTransactions (key 66, KIP-664): transactions of the slots this broker
//! coordinates, filtered by state, producer id and (v1) minimum duration.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::txn::TxnState;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let unknown: Vec<_> = req
        .state_filters
        .iter()
        .filter(|s| !TxnState::ALL.iter().any(|k| k.as_str() == s.as_str()))
        .cloned()
        .collect();
    let now = kaas_core::now_ms();
    let mut states = Vec::new();
    let mut error_code = 0;
    if broker.loading_its_share() {
        // About to take its share of the slots: listing now would leave it out.
        return ListTransactionsResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::CoordinatorLoadInProgress.code());
    }
    for slot in 0..kaas_core::txn_store::SLOTS {
        if !broker.owns_txn_slot(slot) {
            continue;
        }
        let listed = broker.txn.visit(slot, |st| {
            st.entries()
                .values()
                .filter(|entry| {
                    (req.state_filters.is_empty()
                        || req.state_filters.iter().any(|s| s.as_str() == entry.state.as_str()))
                        && (req.producer_id_filters.is_empty()
                            || req.producer_id_filters.iter().any(|p| p.0 == entry.producer_id))
                        && !(ctx.version >= 1
                            && req.duration_filter >= 0
                            && (entry.txn_start_ms < 0 || now - entry.txn_start_ms < req.duration_filter))
                        // Kafka's rule: only the ids the client may DESCRIBE.
                        && broker.authz.authorize_quietly(
                            ctx,
                            Operation::Describe,
                            ResourceType::TransactionalId,
                            &entry.transactional_id,
                        )
                })
                .map(|entry| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(sb(entry.transactional_id.clone())))
                        .with_producer_id(ProducerId(entry.producer_id))
                        .with_transaction_state(sb(entry.state.as_str()))
                })
                .collect::<Vec<_>>()
        });
        match listed {
            Ok(listed) => states.extend(listed),
            Err(e) => {
                tracing::error!(slot, error = %e, "ListTransactions: slot unreadable");
                error_code = 15; // COORDINATOR_NOT_AVAILABLE: the answer would be incomplete
            }
        }
    }
    ListTransactionsResponse::default()
        .with_error_code(error_code)
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}
