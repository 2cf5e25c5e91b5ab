//! CreateTopics (key 19). Replication factor -1 or 1 is accepted (the shared volume is
//! the replication); partition count -1 means `--default-partitions`.

use super::{sb, RequestContext};
use crate::broker::{Broker, TopicError};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const MIN: i16 = 2;
pub const MAX: i16 = 7;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut r = CreatableTopicResult::default().with_name(t.name.clone());
        if ctx.version >= 5 {
            r.num_partitions = -1;
            r.replication_factor = -1;
        }
        let partitions = if t.num_partitions == -1 {
            broker.config.default_partitions
        } else {
            t.num_partitions
        };
        let configs: BTreeMap<String, String> = t
            .configs
            .iter()
            .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())))
            .collect();
        // Kafka's check: CREATE on the cluster or on the topic.
        let outcome = if !broker.may_create_topic(ctx, &name) {
            Err((
                ResponseError::TopicAuthorizationFailed.code(),
                format!("{} may not create topic {name}", ctx.principal),
            ))
        } else if !t.assignments.is_empty() {
            Err((
                ResponseError::InvalidReplicaAssignment.code(),
                "manual replica assignment is not supported".to_string(),
            ))
        } else if !(t.replication_factor == -1 || t.replication_factor == 1) {
            Err((
                ResponseError::InvalidReplicationFactor.code(),
                format!("replication factor {} is not supported: one broker holds each partition and the shared volume is the replication", t.replication_factor),
            ))
        } else if req.validate_only {
            broker
                .validate_topic(&name, partitions, &configs)
                .map(|_| None)
                .map_err(|e| (e.code(), e.to_string()))
        } else {
            match broker.create_topic(&name, partitions, configs).await {
                Ok(topic) => Ok(Some(topic)),
                Err(e @ TopicError::AlreadyExists(_)) => Err((e.code(), e.to_string())),
                Err(e) => {
                    tracing::warn!(topic = %name, error = %e, "create topic failed");
                    Err((e.code(), e.to_string()))
                }
            }
        };
        match outcome {
            Ok(topic) => {
                if ctx.version >= 5 {
                    r.num_partitions = partitions;
                    r.replication_factor = 1;
                    r.configs = Some(Vec::new());
                }
                if ctx.version >= 7 {
                    if let Some(t) = topic {
                        r.topic_id = t.meta.topic_id;
                    }
                }
            }
            Err((code, msg)) => {
                r.error_code = code;
                r.error_message = Some(sb(msg));
            }
        }
        results.push(r);
    }
    CreateTopicsResponse::default().with_topics(results)
}
