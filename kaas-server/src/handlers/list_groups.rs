//! ListGroups (key 16), with the v4 state filter and the v5 type filter (`classic`,
//! `consumer`: KIP-848 groups).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: ListGroupsRequest) -> ListGroupsResponse {
    // Kafka's rule: DESCRIBE on the cluster lists every group, else those the client
    // may DESCRIBE; asked quietly (Kafka's logIfDenied = false): a client without it
    // is refused nothing, and its listing must not use up the audit log's budget.
    let all = broker
        .authz
        .authorize_quietly(ctx, Operation::Describe, ResourceType::Cluster, crate::authz::CLUSTER);
    // Each broker lists the groups it coordinates (admin clients ask every broker);
    // one about to take its share would list an incomplete set.
    if broker.loading_its_share() {
        return ListGroupsResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::CoordinatorLoadInProgress.code());
    }
    let groups = broker
        .groups
        .list(&|id| broker.owns_group(id))
        .into_iter()
        .filter(|g| {
            all || broker
                .authz
                .authorize_quietly(ctx, Operation::Describe, ResourceType::Group, &g.id)
        })
        .filter(|g| req.states_filter.is_empty() || req.states_filter.iter().any(|s| s.eq_ignore_ascii_case(&g.state)))
        .filter(|g| {
            req.types_filter.is_empty() || req.types_filter.iter().any(|t| t.eq_ignore_ascii_case(g.group_type))
        })
        .map(|g| {
            let mut l = ListedGroup::default()
                .with_group_id(GroupId(sb(g.id)))
                .with_protocol_type(sb(g.protocol_type));
            if ctx.version >= 4 {
                l.group_state = sb(g.state);
            }
            if ctx.version >= 5 {
                l.group_type = sb(g.group_type);
            }
            l
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
