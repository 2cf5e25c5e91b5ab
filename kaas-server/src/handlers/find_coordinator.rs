//! FindCoordinator (key 10): the live broker that owns the key by rendezvous hashing
//! — over the group id for groups (key type 0), over the transactional id's slot for
//! transactions (key type 1) — with its advertised address from its lease. v4+ answers
//! a batch of keys.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 4;

/// (node id, host, port) of the coordinator of `key` on the listener the request came
/// in on, or an error code.
/// Kafka's check: DESCRIBE on the group or the transactional id.
fn locate(broker: &Broker, ctx: &RequestContext, key_type: i8, key: &str) -> Result<(i32, String, u16), i16> {
    let owner_key = match key_type {
        0 if !broker
            .authz
            .authorize(ctx, Operation::Describe, ResourceType::Group, key) =>
        {
            return Err(ResponseError::GroupAuthorizationFailed.code())
        }
        1 if !broker
            .authz
            .authorize(ctx, Operation::Describe, ResourceType::TransactionalId, key) =>
        {
            return Err(ResponseError::TransactionalIdAuthorizationFailed.code())
        }
        0 => kaas_core::ownership::group_key(key),
        1 => kaas_core::ownership::txn_slot_key(kaas_core::txn::slot_for(key)),
        _ => return Err(ResponseError::InvalidRequest.code()),
    };
    let listener = &ctx.listener;
    let live = broker.live_brokers();
    broker
        .routed_owner_of(&owner_key)
        .and_then(|id| live.get(&id)?.on(listener).map(|(h, p)| (id, h.to_string(), p)))
        .ok_or(ResponseError::CoordinatorNotAvailable.code())
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    if ctx.version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let c = Coordinator::default().with_key(key.clone());
                match locate(broker, ctx, req.key_type, &key) {
                    Ok((id, host, port)) => c.with_node_id(BrokerId(id)).with_host(sb(host)).with_port(port as i32),
                    Err(code) => c.with_error_code(code).with_node_id(BrokerId(-1)).with_port(-1),
                }
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        match locate(broker, ctx, req.key_type, &req.key) {
            Ok((id, host, port)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(id))
                .with_host(sb(host))
                .with_port(port as i32),
            Err(code) => FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        }
    }
}
