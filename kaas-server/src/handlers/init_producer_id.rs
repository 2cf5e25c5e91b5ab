//! InitProducerId (key 22). Idempotent (non-transactional) producers get a fresh
//! producer id at epoch 0 from the volume's block allocator; a claimed (id, epoch) is
//! validated for shape only and otherwise ignored, as Apache does.

use super::RequestContext;
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;

pub async fn handle(
    broker: &Arc<Broker>,
    _ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let fail = |code: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    // Exactly one of the two claimed fields set is malformed (KIP-360).
    if (req.producer_id.0 == -1) != (req.producer_epoch == -1) {
        return fail(ResponseError::InvalidRequest);
    }
    if req.transactional_id.is_some() {
        // Transactions arrive with the transaction coordinator (issue 3); until then a
        // transactional producer is told plainly that this broker cannot serve it.
        return fail(ResponseError::TransactionalIdAuthorizationFailed);
    }
    match broker.next_producer_id() {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot allocate a producer id");
            fail(ResponseError::CoordinatorNotAvailable)
        }
    }
}
