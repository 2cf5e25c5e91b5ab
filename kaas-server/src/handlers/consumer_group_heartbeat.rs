//! ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group
//! (`group.protocol=consumer`) joins, heartbeats, reports the partitions it owns and
//! learns its assignment, or leaves. The rules are `groups::consumer`'s; this checks
//! the request as Apache does, authorizes it and converts topic names and ids.

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::groups::consumer::{Assignment, Describable, Heartbeat, TopicsView};
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment as WireAssignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

fn error(code: ResponseError, message: impl Into<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(sb(message)))
        .with_member_epoch(-1)
}

/// Every topic the cluster serves, as a consumer group's assignor sees them.
pub fn topics_view(broker: &Broker) -> TopicsView {
    TopicsView::new(
        broker
            .cluster
            .topics()
            .iter()
            .map(|t| (t.meta.name.clone(), t.meta.topic_id, t.partitions.len() as i32)),
    )
}

/// Apache's checks of the request's shape (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
fn invalid(req: &ConsumerGroupHeartbeatRequest, version: i16) -> Option<String> {
    if req.group_id.0.is_empty() {
        return Some("GroupId can't be empty.".into());
    }
    if req.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return Some("InstanceId can't be empty.".into());
    }
    if req.rack_id.as_ref().is_some_and(|r| r.is_empty()) {
        return Some("RackId can't be empty.".into());
    }
    let needs_id = version >= 1 || req.member_epoch != 0;
    if needs_id && req.member_id.is_empty() {
        return Some("MemberId can't be empty.".into());
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return Some("RebalanceTimeoutMs must be provided in first request.".into());
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return Some("TopicPartitions must be empty when (re-)joining.".into());
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return Some("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.".into());
            }
        }
        -2 if req.instance_id.is_none() => {
            return Some("InstanceId can't be null when leaving with MemberEpoch -2.".into());
        }
        e if e < -2 => return Some(format!("MemberEpoch {e} is invalid.")),
        _ => {}
    }
    None
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    if let Some(why) = invalid(&req, ctx.version) {
        return error(ResponseError::InvalidRequest, why);
    }
    let group = req.group_id.0.to_string();
    if !broker
        .authz
        .authorize(ctx, Operation::Read, ResourceType::Group, &group)
    {
        return error(
            ResponseError::GroupAuthorizationFailed,
            format!("READ on group {group:?} is not allowed"),
        );
    }
    // Apache: DESCRIBE on every topic subscribed to by name.
    if let Some(names) = &req.subscribed_topic_names {
        let denied: Vec<&str> = names
            .iter()
            .map(|n| n.0.as_str())
            .filter(|n| !broker.authz.authorize(ctx, Operation::Describe, ResourceType::Topic, n))
            .collect();
        if !denied.is_empty() {
            return error(
                ResponseError::TopicAuthorizationFailed,
                format!("DESCRIBE is not allowed on topics {denied:?}"),
            );
        }
    }
    if !broker.owns_group(&group) {
        return error(
            broker.group_refusal(&group),
            format!("this broker does not coordinate group {group:?}"),
        );
    }
    let owned = req.topic_partitions.as_ref().map(|tps| {
        let mut a = Assignment::new();
        for tp in tps {
            a.entry(tp.topic_id).or_default().extend(tp.partitions.iter().copied());
        }
        a.retain(|_, ps| !ps.is_empty());
        a
    });
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ns| ns.iter().map(|n| n.0.to_string()).collect()),
        subscribed_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        describable: None,
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
    };
    let topics = topics_view(broker);
    // A regular expression resolves only to topics this principal may DESCRIBE,
    // asked of the topics it matches alone.
    let describable = broker.authz.enabled().then(|| {
        let (broker, asker) = (broker.clone(), Asker::of(ctx));
        Describable(Arc::new(move |topic: &str| {
            broker
                .authz
                .authorize_quietly(&asker, Operation::Describe, ResourceType::Topic, topic)
        }))
    });
    let hb = Heartbeat { describable, ..hb };
    match broker
        .groups
        .consumer_heartbeat(&group, hb, &topics, kaas_core::now_ms())
    {
        Ok(reply) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(sb(reply.member_id)))
            .with_member_epoch(reply.member_epoch)
            .with_heartbeat_interval_ms(reply.heartbeat_interval_ms)
            .with_assignment(reply.assignment.map(|a| {
                WireAssignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(topic_id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(topic_id)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(e) => {
            if let crate::groups::ConsumerError::Volume(v) = &e {
                tracing::error!(group = %group, error = %v, "consumer group heartbeat failed on the volume");
            }
            error(e.code(), e.message())
        }
    }
}

/// Who sent a request, apart from the request (a decision asked after the handler).
struct Asker {
    principal: Arc<str>,
    peer: std::net::SocketAddr,
    api: kafka_protocol::messages::ApiKey,
}

impl Asker {
    fn of(ctx: &RequestContext) -> Asker {
        Asker {
            principal: ctx.principal.clone(),
            peer: ctx.peer,
            api: ctx.api,
        }
    }
}

impl crate::authz::Requester for Asker {
    fn principal(&self) -> &str {
        &self.principal
    }
    fn peer(&self) -> std::net::SocketAddr {
        self.peer
    }
    fn api(&self) -> kafka_protocol::messages::ApiKey {
        self.api
    }
}
