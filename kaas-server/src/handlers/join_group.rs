//! JoinGroup (key 11): see `groups.rs` for the rebalance protocol.

use super::RequestContext;
use crate::broker::Broker;
use crate::groups::{JoinRequest, Reply};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use std::sync::Arc;
use std::time::Instant;

pub const MIN: i16 = 0;
pub const MAX: i16 = 9;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: JoinGroupRequest) -> JoinGroupResponse {
    let member_id = req.member_id.to_string();
    // A static member joining without its id: a restart, which takes over the
    // instance's old identity under a new id.
    let static_rejoin = member_id.is_empty() && req.group_instance_id.is_some();
    let join = JoinRequest {
        group_id: req.group_id.0.to_string(),
        member_id: member_id.clone(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            // Copied out: a slice would keep the whole request frame alive for as
            // long as the member stays.
            .map(|p| (p.name.to_string(), bytes::Bytes::copy_from_slice(&p.metadata)))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Apache uses the session timeout.
        rebalance_timeout_ms: if ctx.version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
        version: ctx.version,
    };
    // Everything needed is copied out: the request (and the frame under it) is not
    // kept alive while the join waits for the rebalance.
    drop(req);
    if !broker.may_read_group(ctx, &join.group_id) {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
            .with_generation_id(-1)
            .with_protocol_name((ctx.version < 7).then(Default::default));
    }
    if !broker.owns_group(&join.group_id) {
        return JoinGroupResponse::default()
            .with_error_code(broker.group_refusal(&join.group_id).code())
            .with_generation_id(-1)
            .with_protocol_name((ctx.version < 7).then(Default::default));
    }
    // A KIP-848 consumer group of this id with members: not a classic group to
    // join (Apache: INCONSISTENT_GROUP_PROTOCOL); an empty one is converted.
    let group_id = join.group_id.clone();
    let joined = broker
        .groups
        .admit_classic(&group_id, || broker.groups.join(join, Instant::now()));
    // A static member that rejoined a stable group under a new id: the group's record
    // names it before it is told (a coordinator taking over from the old record
    // would fence it, FENCED_INSTANCE_ID, fatal to a Java consumer).
    // Not told without it: COORDINATOR_NOT_AVAILABLE, and the member rejoins (as
    // Apache fails the join when it cannot store the group).
    // Nor told when the write did not land for it: the group moved away meanwhile
    // (its new coordinator loads the old id), or changed again here. (Other joins
    // answered at once — a known member rejoining a stable group unchanged — change
    // nothing the file says: only a write that waits is finished here.)
    if let Ok(Reply::Now(r)) = &joined {
        let recorded = || {
            broker.groups.persist_record_now(&group_id, &|g| broker.owns_group(g))
                && (!static_rejoin || broker.groups.records_member(&group_id, &r.member_id))
        };
        if r.error_code == 0 && !recorded() {
            let code = if broker.owns_group(&group_id) {
                ResponseError::CoordinatorNotAvailable
            } else {
                ResponseError::NotCoordinator
            };
            return JoinGroupResponse::default()
                .with_error_code(code.code())
                .with_generation_id(-1)
                .with_member_id(super::sb(member_id.clone()))
                .with_protocol_name((ctx.version < 7).then(Default::default));
        }
    }
    let joined = match joined {
        Ok(reply) => reply,
        Err(code) => {
            return JoinGroupResponse::default()
                .with_error_code(code.code())
                .with_generation_id(-1)
                .with_member_id(super::sb(member_id.clone()))
                .with_protocol_name((ctx.version < 7).then(Default::default))
        }
    };
    let mut resp = match joined {
        Reply::Now(r) => r,
        Reply::Wait(rx) => {
            let mut shutdown = ctx.shutdown.clone();
            tokio::select! {
                r = rx => r.unwrap_or_else(|_| {
                    // The member was removed while waiting (expired or replaced).
                    JoinGroupResponse::default()
                        .with_error_code(ResponseError::UnknownMemberId.code())
                        .with_generation_id(-1)
                }),
                _ = shutdown.changed() => JoinGroupResponse::default()
                    .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                    .with_generation_id(-1),
            }
        }
    };
    if ctx.version < 7 {
        resp.protocol_type = None;
    }
    if ctx.version < 5 {
        for m in &mut resp.members {
            m.group_instance_id = None;
        }
    }
    if resp.protocol_name.is_none() && ctx.version < 7 {
        resp.protocol_name = Some(Default::default());
    }
    resp
}
