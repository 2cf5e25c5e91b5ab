//! AddOffsetsToTxn (key 25): records the consumer group whose offsets the transaction
//! will commit, so EndTxn's offset hook knows which staged offsets to finish.

use super::{client_error_code, RequestContext};
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 3;
const FENCED_SINCE: i16 = 2;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let group = req.group_id.0.to_string();
    // Kafka's checks: WRITE on the transactional id, READ on the group.
    if !broker.may_write_txn(ctx, &req.transactional_id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !broker.may_read_group(ctx, &group) {
        return AddOffsetsToTxnResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let code = match broker
        .txn
        .add(
            broker,
            &req.transactional_id,
            req.producer_id.0,
            req.producer_epoch,
            &[],
            std::slice::from_ref(&group),
        )
        .await
    {
        Ok(()) => 0,
        Err(e) => client_error_code(e.code(), ctx.version, FENCED_SINCE),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}
