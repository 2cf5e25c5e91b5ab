//! InitProducerId (key 22). Without a transactional id: a fresh producer id at epoch 0
//! from the volume's block allocator (a claimed identity is checked for shape, then
//! ignored, as Apache does). With one: the KIP-360 rules of the transaction coordinator
//! (`txn_coordinator.rs`, `kaas_core::txn::init_producer_id`).

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;
/// Versions below this predate PRODUCER_FENCED (KIP-588) and get INVALID_PRODUCER_EPOCH.
const FENCED_SINCE: i16 = 4;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
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
        Some(tid) if !tid.is_empty() => {
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
        _ => match broker.next_producer_id() {
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
