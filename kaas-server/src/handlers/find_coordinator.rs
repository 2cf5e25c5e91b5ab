//! FindCoordinator (key 10): with one broker, this broker coordinates every group and
//! transactional id. v4+ answers a batch of keys.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 4;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let me = BrokerId(broker.config.broker_id);
    let (host, port) = (sb(broker.advertised.0.clone()), broker.advertised.1 as i32);
    if ctx.version >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(me)
                    .with_host(host.clone())
                    .with_port(port)
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        FindCoordinatorResponse::default()
            .with_node_id(me)
            .with_host(host)
            .with_port(port)
    }
}
