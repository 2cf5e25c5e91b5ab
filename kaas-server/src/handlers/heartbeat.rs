//! Heartbeat (key 12): keeps a member's session alive, tells it when to rejoin.

use super::RequestContext;
use crate::broker::Broker;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use std::sync::Arc;
use std::time::Instant;

pub const MIN: i16 = 0;
pub const MAX: i16 = 4;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: HeartbeatRequest) -> HeartbeatResponse {
    if !broker.may_read_group(ctx, &req.group_id.0) {
        return HeartbeatResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code());
    }
    if !broker.owns_group(&req.group_id.0) {
        // While this broker waits to take the group, Apache's answer during a load:
        // none (the member keeps its session; Java treats LOAD_IN_PROGRESS here
        // as a coordinator to look up again).
        let code = match broker.group_refusal(&req.group_id.0) {
            kafka_protocol::error::ResponseError::CoordinatorLoadInProgress => 0,
            other => other.code(),
        };
        return HeartbeatResponse::default().with_error_code(code);
    }
    let result = broker.groups.heartbeat(
        &req.group_id.0,
        req.generation_id,
        &req.member_id,
        req.group_instance_id.as_deref(),
        Instant::now(),
    );
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}
