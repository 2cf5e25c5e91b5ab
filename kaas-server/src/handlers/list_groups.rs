//! ListGroups (key 16), with the v4 state filter.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 4;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: ListGroupsRequest) -> ListGroupsResponse {
    // Kafka's rule: DESCRIBE on the cluster lists every group, else those the client
    // may DESCRIBE.
    let all = broker
        .authz
        .authorize(ctx, Operation::Describe, ResourceType::Cluster, crate::authz::CLUSTER);
    let groups = broker
        .groups
        .list()
        .into_iter()
        // Each broker lists the groups it coordinates (admin clients ask every broker).
        .filter(|(id, _, _)| broker.owns_group(id))
        .filter(|(id, _, _)| {
            all || broker
                .authz
                .authorize_quietly(ctx, Operation::Describe, ResourceType::Group, id)
        })
        .filter(|(_, state, _)| {
            req.states_filter.is_empty() || req.states_filter.iter().any(|s| s.eq_ignore_ascii_case(state.as_str()))
        })
        .map(|(id, state, ptype)| {
            let mut g = ListedGroup::default()
                .with_group_id(GroupId(sb(id)))
                .with_protocol_type(sb(ptype));
            if ctx.version >= 4 {
                g.group_state = sb(state.as_str());
            }
            g
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
