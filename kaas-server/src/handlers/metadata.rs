//! Metadata (key 3): every live broker (from the leases), topics, and each
//! partition's leader — this broker for the partitions whose `owner.lock` it holds,
//! the live broker `owner.json` names for those another process holds;
//! auto-creation follows `--auto-create-topics`.

use super::{sb, RequestContext};
use crate::broker::{Broker, Topic, TopicError};
use crate::listeners::Endpoints;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

pub const MIN: i16 = 0;
pub const MAX: i16 = 12;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: MetadataRequest) -> MetadataResponse {
    let me = BrokerId(broker.config.broker_id);
    // Each broker's address on the listener this request came in on; a broker
    // without that listener is left out (and its partitions say LISTENER_NOT_FOUND).
    let live = broker.live_brokers();
    let brokers = broker
        .listed_brokers()
        .iter()
        .filter_map(|(id, endpoints)| {
            let (host, port) = endpoints.on(&ctx.listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(*id))
                    .with_host(sb(host))
                    .with_port(port as i32),
            )
        })
        .collect();
    let auto_create = ctx.version < 4 || req.allow_auto_topic_creation;
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && ctx.version == 0,
    };
    // Kafka's checks: DESCRIBE on each topic (all topics: those the client may
    // describe; a topic asked for by name or id: TOPIC_AUTHORIZATION_FAILED), CREATE
    // to auto-create one.
    let describable = |name: &str| {
        broker
            .authz
            .authorize(ctx, Operation::Describe, ResourceType::Topic, name)
    };
    // Listing every topic filters quietly: a topic left out was not asked for.
    let listable = |name: &str| {
        broker
            .authz
            .authorize_quietly(ctx, Operation::Describe, ResourceType::Topic, name)
    };
    let ops = |name: &str| {
        if req.include_topic_authorized_operations {
            broker.authz.authorized_operations(ctx, ResourceType::Topic, name)
        } else {
            i32::MIN
        }
    };
    let mut topics = Vec::new();
    if all {
        // Off the async workers: a partition led elsewhere may need its owner.json.
        crate::blocking::off_worker(|| {
            for t in broker.topics().iter().filter(|t| listable(&t.meta.name)) {
                topics.push(describe(broker, ctx, &live, t, ops(&t.meta.name)));
            }
        });
        for (name, b) in broker.broken_topics().into_iter().filter(|(name, _)| listable(name)) {
            tracing::debug!(topic = %name, error = %b.error, "metadata for unreadable topic");
            topics.push(error_topic(
                Some(name),
                Uuid::nil(),
                ResponseError::KafkaStorageError.code(),
            ));
        }
    } else {
        // Each topic once, however often it is named (Apache makes a set of them): an
        // answer per repeat made a small request build an answer of millions of
        // partitions (`a_topic_named_many_times_is_answered_once`).
        let mut seen: std::collections::HashSet<(Option<&str>, Uuid)> = std::collections::HashSet::new();
        for requested in req.topics.iter().flatten() {
            let key = match &requested.name {
                Some(name) => (Some(name.0.as_str()), Uuid::nil()),
                None => (None, requested.topic_id),
            };
            if !seen.insert(key) {
                continue;
            }
            // A name no topic can have is INVALID_TOPIC_EXCEPTION, as Apache's
            // `Topic.validate` answers it, not a topic to wait for — whether or not
            // the client allowed auto-creation.
            let invalid = |name: &str, e: TopicError| match e {
                TopicError::Unknown(_) if !kaas_core::layout::valid_topic_name(name) => {
                    TopicError::InvalidName(name.to_string())
                }
                e => e,
            };
            let result = match &requested.name {
                Some(name) if !describable(name) => Err(None),
                Some(name) if auto_create => broker
                    .topic_or_create_for(ctx, name)
                    .await
                    .map_err(|e| Some(invalid(name, e))),
                Some(name) => broker.topic(name).map_err(|e| Some(invalid(name, e))),
                None => match broker.topic_by_id(&requested.topic_id) {
                    Some(t) if !describable(&t.meta.name) => Err(None),
                    Some(t) => Ok(t),
                    None => Err(Some(TopicError::Unknown(requested.topic_id.to_string()))),
                },
            };
            let code = match (&result, &requested.name) {
                (Ok(_), _) => 0,
                (Err(None), _) => ResponseError::TopicAuthorizationFailed.code(),
                (Err(Some(TopicError::Unknown(_))), None) => ResponseError::UnknownTopicId.code(),
                (Err(Some(e)), _) => e.code(),
            };
            topics.push(match result {
                Ok(t) => crate::blocking::off_worker(|| describe(broker, ctx, &live, &t, ops(&t.meta.name))),
                Err(_) => error_topic(
                    requested.name.as_ref().map(|n| n.0.to_string()),
                    if ctx.version >= 10 {
                        requested.topic_id
                    } else {
                        Uuid::nil()
                    },
                    code,
                ),
            });
        }
    }
    let mut resp = MetadataResponse::default()
        .with_brokers(brokers)
        .with_controller_id(me)
        .with_topics(topics);
    if ctx.version >= 2 {
        resp.cluster_id = Some(sb(broker.cluster_id.clone()));
    }
    if (8..=10).contains(&ctx.version) {
        resp.cluster_authorized_operations = broker
            .authz
            .cluster_authorized_operations(ctx, req.include_cluster_authorized_operations);
    }
    resp
}

fn error_topic(name: Option<String>, id: Uuid, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name.map(|n| TopicName(sb(n))))
        .with_topic_id(id)
        .with_error_code(code)
}

fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    live: &BTreeMap<i32, Endpoints>,
    t: &Topic,
    authorized_operations: i32,
) -> MetadataResponseTopic {
    let version = ctx.version;
    let me = BrokerId(broker.config.broker_id);
    let partitions = t
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let base = MetadataResponsePartition::default().with_partition_index(i as i32);
            let led_elsewhere = match p {
                Err(o) if o.elsewhere => broker.partition_leadership_for_clients(&t.meta.name, i as i32),
                _ => None,
            };
            match (p, led_elsewhere) {
                (Err(_), Some((leader, _))) if live.get(&leader).is_some_and(|e| e.on(&ctx.listener).is_none()) => {
                    // Kafka's answer when the leader has no listener of this name (v6+;
                    // older clients know only LEADER_NOT_AVAILABLE).
                    base.with_error_code(if version >= 6 {
                        ResponseError::ListenerNotFound.code()
                    } else {
                        ResponseError::LeaderNotAvailable.code()
                    })
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1)
                }
                (Ok(p), _) => base
                    .with_leader_id(me)
                    .with_leader_epoch(if version >= 7 { p.leader_epoch } else { -1 })
                    .with_replica_nodes(vec![me])
                    .with_isr_nodes(vec![me]),
                (Err(_), Some((leader, epoch))) => base
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(if version >= 7 { epoch } else { -1 })
                    .with_replica_nodes(vec![BrokerId(leader)])
                    .with_isr_nodes(vec![BrokerId(leader)]),
                (Err(o), None) if o.elsewhere => base
                    // Held by a process whose lease is not live (yet, or any more):
                    // clients retry while it starts or its partitions move.
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1),
                (Err(_), None) => base
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1)
                    .with_offline_replicas(if version >= 5 { vec![me] } else { vec![] }),
            }
        })
        .collect();
    let mut topic = MetadataResponseTopic::default()
        .with_name(Some(TopicName(sb(t.meta.name.clone()))))
        .with_partitions(partitions);
    if version >= 10 {
        topic.topic_id = t.meta.topic_id;
    }
    if version >= 8 {
        topic.topic_authorized_operations = authorized_operations;
    }
    topic
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker, broker_with, ctx};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{ApiKey, TopicName};
    use std::collections::BTreeMap;

    fn asking(names: &[&str]) -> MetadataRequest {
        MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(Some(
                names
                    .iter()
                    .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(super::super::sb(*n)))))
                    .collect(),
            ))
    }

    /// A topic named many times in one request is answered once, as Apache (which
    /// makes a set of the names). Before, each repeat was answered in full: a request
    /// of 30 KB naming a topic of 1,000 partitions 10,000 times built an answer of
    /// ten million partitions.
    #[tokio::test]
    async fn a_topic_named_many_times_is_answered_once() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 3, BTreeMap::new()).await.unwrap();
        let r = handle(&b, &ctx(ApiKey::Metadata, 9), asking(&["t", "t", "nope", "t", "nope"])).await;
        let answered: Vec<(String, i16, usize)> = r
            .topics
            .iter()
            .map(|t| (t.name.as_ref().unwrap().to_string(), t.error_code, t.partitions.len()))
            .collect();
        assert_eq!(answered, [("t".to_string(), 0, 3), ("nope".to_string(), 3, 0)]);
    }

    /// An invalid topic name is INVALID_TOPIC_EXCEPTION, as Apache answers it, not
    /// UNKNOWN_TOPIC_OR_PARTITION (which clients wait on and retry) when nothing is to
    /// be created.
    #[tokio::test]
    async fn an_invalid_topic_name_is_answered_invalid_topic_exception() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker_with(dir.path(), &["--auto-create-topics", "false"]);
        let r = handle(&b, &ctx(ApiKey::Metadata, 9), asking(&["bad name!", ".."])).await;
        let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, [ResponseError::InvalidTopicException.code(); 2]);
        // Also when the client allows auto-creation (Java's producer always does) and
        // the broker does not: UNKNOWN_TOPIC_OR_PARTITION had Java's send() block for
        // max.block.ms and librdkafka wait out its propagation time.
        let r = handle(
            &b,
            &ctx(ApiKey::Metadata, 9),
            asking(&["bad name!", ".."]).with_allow_auto_topic_creation(true),
        )
        .await;
        let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, [ResponseError::InvalidTopicException.code(); 2]);
    }

    /// A broker that stepped down (its lease stale: a volume stall) left itself out
    /// of the brokers it listed; alone, it answered no broker and every topic, and
    /// librdkafka then forgot every broker and bootstrapped again (a transactional
    /// call under way never returned). It lists itself (the partitions it let go at
    /// the step-down say LEADER_NOT_AVAILABLE).
    #[tokio::test]
    async fn a_broker_that_stepped_down_still_lists_itself() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker_with(dir.path(), &[]);
        b.create_topic("t", 1, Default::default()).await.unwrap();
        b.renewed_at(std::time::Instant::now() - std::time::Duration::from_secs(6));
        b.set_live_brokers(Default::default());
        let r = handle(&b, &ctx(ApiKey::Metadata, 9), asking(&["t"])).await;
        let ids: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
        assert_eq!(ids, [b.config.broker_id]);
        assert_eq!(r.controller_id.0, b.config.broker_id);
        // Every leader named is a broker listed.
        for p in &r.topics[0].partitions {
            assert!(p.leader_id.0 == -1 || ids.contains(&p.leader_id.0), "{p:?}");
        }
    }
}
