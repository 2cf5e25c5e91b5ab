//! DescribeGroups (key 15): state, protocol and members of each group.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let known: Vec<String> = broker.groups.list().into_iter().map(|(id, ..)| id).collect();
    let groups = req
        .groups
        .into_iter()
        .map(|gid| {
            let mut g = DescribedGroup::default().with_group_id(gid.clone());
            // Kafka's check: DESCRIBE on the group.
            if !broker
                .authz
                .authorize(ctx, Operation::Describe, ResourceType::Group, &gid.0)
            {
                g.error_code = kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code();
                return g;
            }
            if ctx.version >= 3 {
                g.authorized_operations = if req.include_authorized_operations {
                    broker.authz.authorized_operations(ctx, ResourceType::Group, &gid.0)
                } else {
                    i32::MIN
                };
            }
            if !broker.owns_group(&gid.0) {
                g.error_code = kafka_protocol::error::ResponseError::NotCoordinator.code();
                return g;
            }
            match broker.groups.describe(&gid.0) {
                Some(view) => {
                    g.group_state = sb(view.state.as_str());
                    g.protocol_type = sb(view.protocol_type);
                    g.protocol_data = sb(view.protocol);
                    g.members = view
                        .members
                        .into_iter()
                        .map(|m| {
                            let mut d = DescribedGroupMember::default()
                                .with_member_id(sb(m.id))
                                .with_client_id(sb(m.client_id))
                                .with_client_host(sb(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment);
                            if ctx.version >= 4 {
                                d.group_instance_id = m.instance_id.map(sb);
                            }
                            d
                        })
                        .collect();
                }
                None if known.iter().any(|k| k.as_str() == gid.0.as_str()) => {
                    g.group_state = sb("Empty");
                    g.protocol_type = sb("consumer");
                }
                None => g.group_state = sb("Dead"),
            }
            g
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
