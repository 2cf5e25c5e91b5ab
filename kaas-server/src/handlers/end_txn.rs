//! EndTxn (key 26): commit or abort through PrepareCommit/PrepareAbort, the offset
//! hook, the markers, and Complete*; answered once PrepareCommit/PrepareAbort is
//! durable (the outcome decided), as Kafka answers, with the rest finished right after
//! (`TransactionCoordinator::finish_in_background`). A marker that fails leaves the
//! entry prepared: retried there, then by the reaper; the producer's next
//! AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS (retriable) until it lands.

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use crate::txn_coordinator::{CoordError, Ended};
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 3;
const FENCED_SINCE: i16 = 2;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: EndTxnRequest) -> EndTxnResponse {
    // Kafka's check: WRITE on the transactional id.
    if !broker.may_write_txn(ctx, &req.transactional_id) {
        return EndTxnResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let code = match broker
        .txn
        .end_txn_prepare(
            broker,
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
        )
        .await
    {
        Ok(Ended::Done) => 0,
        // The outcome is durable: answered now, finished after (as Kafka does); the
        // producer's next AddPartitionsToTxn waits for it.
        Ok(Ended::Prepared { entry, prepared_at }) => {
            let broker = broker.clone();
            tokio::spawn(async move { broker.txn.finish_in_background(&broker, entry, prepared_at).await });
            0
        }
        Err(e) => {
            match &e {
                CoordError::Marker(_) | CoordError::Volume(_) => {
                    tracing::warn!(transactional_id = %req.transactional_id.0.as_str(), error = %e, "EndTxn not decided; the client retries")
                }
                _ => tracing::debug!(transactional_id = %req.transactional_id.0.as_str(), error = %e, "EndTxn refused"),
            }
            client_error_code(e.code(), ctx.version, FENCED_SINCE)
        }
    };
    EndTxnResponse::default().with_error_code(code)
}
