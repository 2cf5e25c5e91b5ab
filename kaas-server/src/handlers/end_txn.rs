//! EndTxn (key 26): commit or abort through PrepareCommit/PrepareAbort, the offset
//! hook, the markers, and Complete*; answered once PrepareCommit/PrepareAbort is
//! durable (the outcome decided), as Kafka answers, with the rest finished right after
//! by a task of its own, under the same hold of the transaction's slot
//! (`TransactionCoordinator::end_txn_answering`). A marker that fails leaves the
//! entry prepared: retried there, then by the reaper; the producer's next
//! AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS (retriable) until it lands.

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
    // The decision and the finish run in a task of their own, which goes on finishing
    // after the decision is handed back here (and if this request is dropped).
    let (decided, decision) = tokio::sync::oneshot::channel();
    let task = broker.clone();
    let tid = req.transactional_id.0.to_string();
    let asked = (req.producer_id.0, req.producer_epoch, req.committed);
    tokio::spawn(async move {
        task.txn
            .end_txn_answering(&task, &tid, asked, |r| {
                let _ = decided.send(r);
            })
            .await
    });
    let code = match decision.await.unwrap_or_else(|_| {
        Err(CoordError::Volume(kaas_core::error::VolumeError::io(
            broker.volume.cluster_dir(),
            std::io::Error::other("the EndTxn task ended without a decision"),
        )))
    }) {
        Ok(()) => 0,
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
