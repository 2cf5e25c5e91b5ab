//! EndTxn (key 26): commit or abort through PrepareCommit/PrepareAbort, the offset
//! hook, the markers, and Complete*; answered once the markers are durable (or durably
//! queued for their leaders). A marker that fails is answered CONCURRENT_TRANSACTIONS
//! (retriable): the entry stays prepared and the retry finishes it.

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use crate::txn_coordinator::CoordError;
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
        .end_txn(
            broker,
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
        )
        .await
    {
        Ok(()) => 0,
        Err(e) => {
            match &e {
                // The outcome is decided but not yet in every log: surfaced, retried.
                CoordError::Marker(_) | CoordError::Volume(_) => {
                    tracing::warn!(transactional_id = %req.transactional_id.0.as_str(), error = %e, "EndTxn not finished; the transaction stays prepared and is retried")
                }
                _ => tracing::debug!(transactional_id = %req.transactional_id.0.as_str(), error = %e, "EndTxn refused"),
            }
            client_error_code(e.code(), ctx.version, FENCED_SINCE)
        }
    };
    EndTxnResponse::default().with_error_code(code)
}
