//! ConsumerGroupDescribe (key 69): epochs, assignor and members (with their current
//! and target assignments) of KIP-848 consumer groups.

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::groups::consumer::Assignment;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

/// An assignment with topic names; topics deleted since (no name) are left out.
fn wire(broker: &Broker, a: &Assignment) -> WireAssignment {
    WireAssignment::default().with_topic_partitions(
        a.iter()
            .filter_map(|(id, ps)| {
                let topic = broker.cluster.topic_by_id(id)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_topic_name(TopicName(sb(topic.meta.name.clone())))
                        .with_partitions(ps.iter().copied().collect()),
                )
            })
            .collect(),
    )
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let groups = req
        .group_ids
        .into_iter()
        .map(|gid| {
            let mut g = DescribedGroup::default().with_group_id(gid.clone());
            let fail = |mut g: DescribedGroup, code: ResponseError, message: String| {
                g.error_code = code.code();
                g.error_message = Some(sb(message));
                g
            };
            // Apache's check: DESCRIBE on the group.
            if !broker
                .authz
                .authorize(ctx, Operation::Describe, ResourceType::Group, &gid.0)
            {
                return fail(
                    g,
                    ResponseError::GroupAuthorizationFailed,
                    format!("DESCRIBE on group {:?} is not allowed", gid.0.as_str()),
                );
            }
            g.authorized_operations = if req.include_authorized_operations {
                broker.authz.authorized_operations(ctx, ResourceType::Group, &gid.0)
            } else {
                i32::MIN
            };
            if !broker.owns_group(&gid.0) {
                return fail(
                    g,
                    broker.group_refusal(&gid.0),
                    format!("this broker does not coordinate group {:?}", gid.0.as_str()),
                );
            }
            match broker.groups.describe_consumer(&gid.0) {
                Err(e) => {
                    tracing::error!(group = %gid.0.as_str(), error = %e, "cannot read the consumer group");
                    fail(g, crate::groups::offsets_error(&e), e.to_string())
                }
                Ok(None) => fail(
                    g,
                    ResponseError::GroupIdNotFound,
                    format!("group {:?} is not a consumer group", gid.0.as_str()),
                ),
                Ok(Some(view)) => {
                    // Apache (KAFKA-18813): the members' assignments name topics, so a
                    // group holding one the caller may not DESCRIBE is answered
                    // TOPIC_AUTHORIZATION_FAILED without members, not a way around the
                    // topic ACLs Metadata keeps.
                    let hidden = view.members.iter().any(|v| {
                        v.member.assigned.keys().chain(v.target.keys()).any(|id| {
                            broker.cluster.topic_by_id(id).is_some_and(|t| {
                                !broker.authz.authorize_quietly(
                                    ctx,
                                    Operation::Describe,
                                    ResourceType::Topic,
                                    &t.meta.name,
                                )
                            })
                        })
                    });
                    if hidden {
                        return fail(
                            DescribedGroup::default()
                                .with_group_id(gid.clone())
                                .with_authorized_operations(i32::MIN),
                            ResponseError::TopicAuthorizationFailed,
                            "The group has described topic(s) that the client is not authorized to describe.".into(),
                        );
                    }
                    g.group_state = sb(view.state);
                    g.group_epoch = view.epoch;
                    g.assignment_epoch = view.assignment_epoch;
                    g.assignor_name = sb(view.assignor);
                    g.members = view
                        .members
                        .into_iter()
                        .map(|v| {
                            let m = v.member;
                            let mut names: Vec<TopicName> =
                                m.subscribed_names.iter().map(|n| TopicName(sb(n.clone()))).collect();
                            names.sort();
                            Member::default()
                                .with_member_id(sb(m.id.clone()))
                                .with_instance_id(m.instance_id.clone().map(sb))
                                .with_rack_id(m.rack_id.clone().map(sb))
                                .with_member_epoch(m.epoch)
                                .with_client_id(sb(m.client_id.clone()))
                                .with_client_host(sb(m.client_host.clone()))
                                .with_subscribed_topic_names(names)
                                .with_subscribed_topic_regex(m.subscribed_regex.clone().map(sb))
                                .with_assignment(wire(broker, &m.assigned))
                                .with_target_assignment(wire(broker, &v.target))
                                // v1: 1 is a member of the consumer protocol.
                                .with_member_type(1)
                        })
                        .collect();
                    g
                }
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
