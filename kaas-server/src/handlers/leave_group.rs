//! LeaveGroup (key 13): one member (v0-2) or a batch by member or instance id (v3+).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use std::sync::Arc;
use std::time::Instant;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse {
    let leaving: Vec<(String, Option<String>)> = if ctx.version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    if !broker.may_read_group(ctx, &req.group_id.0) {
        return LeaveGroupResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code());
    }
    if !broker.owns_group(&req.group_id.0) {
        return LeaveGroupResponse::default().with_error_code(broker.group_refusal(&req.group_id.0).code());
    }
    let left = broker.groups.leave(&req.group_id.0, &leaving, Instant::now());
    // The last member gone: the group's record cleared before the answer, so a
    // coordinator taking the group over within the pass's second does not load the
    // members back (a failure is retried by the pass).
    if left.is_ok() {
        broker
            .groups
            .persist_record_now(&req.group_id.0, &|g| broker.owns_group(g));
    }
    match left {
        Err(code) => LeaveGroupResponse::default().with_error_code(code.code()),
        Ok(results) if ctx.version >= 3 => LeaveGroupResponse::default().with_members(
            leaving
                .into_iter()
                .zip(results)
                .map(|((member, instance), err)| {
                    MemberResponse::default()
                        .with_member_id(sb(member))
                        .with_group_instance_id(instance.map(sb))
                        .with_error_code(err.map_or(0, |e| e.code()))
                })
                .collect(),
        ),
        Ok(results) => {
            LeaveGroupResponse::default().with_error_code(results.first().copied().flatten().map_or(0, |e| e.code()))
        }
    }
}
