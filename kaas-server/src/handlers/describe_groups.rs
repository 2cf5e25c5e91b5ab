//! DescribeGroups (key 15): state, protocol and members of each group.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 5;

/// `version` (i16) then the message: how the consumer protocol frames its data.
fn framed(version: i16, msg: &impl kafka_protocol::protocol::Encodable) -> bytes::Bytes {
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    // Encoding into memory fails only on a field too long for its length prefix,
    // which topic names and partition lists are not.
    if let Err(e) = msg.encode(&mut buf, version) {
        tracing::error!(error = %e, "cannot encode a consumer protocol message");
        return bytes::Bytes::new();
    }
    buf.freeze()
}

fn subscription(topics: &std::collections::BTreeSet<String>) -> bytes::Bytes {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    framed(
        0,
        &ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| sb(t.clone())).collect()),
    )
}

fn assignment(broker: &Broker, a: &crate::groups::consumer::Assignment) -> bytes::Bytes {
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::messages::{ConsumerProtocolAssignment, TopicName};
    let partitions = a
        .iter()
        .filter_map(|(id, ps)| {
            let t = broker.cluster.topic_by_id(id)?;
            Some(
                TopicPartition::default()
                    .with_topic(TopicName(sb(t.meta.name.clone())))
                    .with_partitions(ps.iter().copied().collect()),
            )
        })
        .collect();
    framed(
        0,
        &ConsumerProtocolAssignment::default().with_assigned_partitions(partitions),
    )
}

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse {
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
                g.error_code = broker.group_refusal(&gid.0).code();
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
                None => match broker.groups.describe_consumer(&gid.0) {
                    // A KIP-848 consumer group: shown as a group of the consumer
                    // protocol, each member's subscription and assignment encoded
                    // as a classic consumer's would be, so tools that decode them
                    // (kafka-python's admin client) read them.
                    // Shown only to a caller that may DESCRIBE every topic its members
                    // subscribe to or hold (as ConsumerGroupDescribe, Apache's
                    // KAFKA-18813): TOPIC_AUTHORIZATION_FAILED and no members otherwise.
                    Ok(Some(view))
                        if view.members.iter().any(|v| {
                            let held = v
                                .member
                                .assigned
                                .keys()
                                .filter_map(|id| broker.cluster.topic_by_id(id).map(|t| t.meta.name.clone()));
                            v.member.subscribed_names.iter().cloned().chain(held).any(|name| {
                                !broker
                                    .authz
                                    .authorize_quietly(ctx, Operation::Describe, ResourceType::Topic, &name)
                            })
                        }) =>
                    {
                        g.error_code = kafka_protocol::error::ResponseError::TopicAuthorizationFailed.code();
                    }
                    Ok(Some(view)) => {
                        g.group_state = sb(view.state);
                        g.protocol_type = sb("consumer");
                        g.protocol_data = sb(view.assignor);
                        g.members = view
                            .members
                            .into_iter()
                            .map(|v| {
                                let m = v.member;
                                let mut d = DescribedGroupMember::default()
                                    .with_member_id(sb(m.id.clone()))
                                    .with_client_id(sb(m.client_id.clone()))
                                    .with_client_host(sb(m.client_host.clone()))
                                    .with_member_metadata(subscription(&m.subscribed_names))
                                    .with_member_assignment(assignment(broker, &m.assigned));
                                if ctx.version >= 4 {
                                    d.group_instance_id = m.instance_id.map(sb);
                                }
                                d
                            })
                            .collect();
                    }
                    Ok(None) if kaas_core::offsets::offsets_file(&broker.volume, &gid.0).exists() => {
                        g.group_state = sb("Empty");
                        g.protocol_type = sb("consumer");
                    }
                    Ok(None) => g.group_state = sb("Dead"),
                    Err(e) => {
                        tracing::error!(group = %gid.0.as_str(), error = %e, "cannot read the group's offsets file");
                        g.error_code = crate::groups::offsets_error(&e).code();
                    }
                },
            }
            g
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
