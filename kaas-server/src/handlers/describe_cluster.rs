//! DescribeCluster (key 60): the live brokers with their addresses on the listener
//! the request came in on, the cluster id, and this broker as controller.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let me = BrokerId(broker.config.broker_id);
    let mut resp = DescribeClusterResponse::default()
        .with_cluster_id(sb(broker.cluster_id.clone()))
        .with_controller_id(me)
        .with_cluster_authorized_operations(
            broker
                .authz
                .cluster_authorized_operations(ctx, req.include_cluster_authorized_operations),
        )
        .with_brokers(
            broker
                .listed_brokers()
                .iter()
                .filter_map(|(id, endpoints)| {
                    let (host, port) = endpoints.on(&ctx.listener)?;
                    Some(
                        DescribeClusterBroker::default()
                            .with_broker_id(BrokerId(*id))
                            .with_host(sb(host))
                            .with_port(port as i32),
                    )
                })
                .collect(),
        );
    if ctx.version >= 1 {
        resp.endpoint_type = 1;
    }
    resp
}
