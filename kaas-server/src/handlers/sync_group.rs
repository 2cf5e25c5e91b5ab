//! SyncGroup (key 14): the leader hands in assignments; everyone gets theirs.

use super::RequestContext;
use crate::broker::Broker;
use crate::groups::{Reply, SyncRequest};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use std::sync::Arc;
use std::time::Instant;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: SyncGroupRequest) -> SyncGroupResponse {
    let assignments = req
        .assignments
        .iter()
        // Copied out: a slice would keep the whole request frame alive until the next
        // rebalance.
        .map(|a| (a.member_id.to_string(), bytes::Bytes::copy_from_slice(&a.assignment)))
        .collect();
    let group_id = req.group_id.0.to_string();
    let sync = SyncRequest {
        group_id: &req.group_id.0,
        generation: req.generation_id,
        member_id: &req.member_id,
        instance_id: req.group_instance_id.as_deref(),
        protocol: (req.protocol_type.as_deref(), req.protocol_name.as_deref()),
        assignments,
    };
    if !broker.may_read_group(ctx, &req.group_id.0) {
        return SyncGroupResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if !broker.owns_group(&req.group_id.0) {
        // While this broker waits to take the group, Apache's answer during a load:
        // REBALANCE_IN_PROGRESS (older clients do not expect LOAD_IN_PROGRESS here;
        // Java's SyncGroup handler fails on it), and the member joins again.
        let code = match broker.group_refusal(&req.group_id.0) {
            ResponseError::CoordinatorLoadInProgress => ResponseError::RebalanceInProgress,
            other => other,
        };
        return SyncGroupResponse::default().with_error_code(code.code());
    }
    let reply = broker.groups.sync(sync, Instant::now());
    // Nothing of the request is needed while waiting for the leader (server.rs gave
    // its memory budget back on that promise).
    drop(req);
    let mut resp = match reply {
        Reply::Now(r) => r,
        Reply::Wait(rx) => {
            let mut shutdown = ctx.shutdown.clone();
            tokio::select! {
                r = rx => r.unwrap_or_else(|_| SyncGroupResponse::default().with_error_code(ResponseError::RebalanceInProgress.code())),
                _ = shutdown.changed() => SyncGroupResponse::default().with_error_code(ResponseError::CoordinatorNotAvailable.code()),
            }
        }
    };
    // The generation this sync made stable, to the group's file before the leader
    // (or a follower that asks while it is written) is answered: a coordinator taking
    // the group over goes on with it ([`crate::groups`]' `classic_record`).
    // A failed write is retried by the pass; the followers already have the
    // generation, so the leader is answered too (a take-over before the retry costs
    // them a rejoin, ILLEGAL_GENERATION).
    if resp.error_code == 0 {
        broker.groups.persist_record_now(&group_id, &|g| broker.owns_group(g));
    }
    if ctx.version < 5 {
        resp.protocol_type = None;
        resp.protocol_name = None;
    }
    resp
}
