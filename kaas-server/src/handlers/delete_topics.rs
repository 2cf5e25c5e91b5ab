//! DeleteTopics (key 20): by name, or by topic id (v6+).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use std::sync::Arc;
use uuid::Uuid;

pub const MIN: i16 = 1;
pub const MAX: i16 = 6;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut wanted: Vec<(Option<String>, Uuid)> = req
        .topic_names
        .iter()
        .map(|n| (Some(n.0.to_string()), Uuid::nil()))
        .collect();
    wanted.extend(
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
    );
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, id) in wanted {
        let by_id = name.is_none();
        let name = name.or_else(|| broker.topic_by_id(&id).map(|t| t.meta.name.clone()));
        // Kafka's checks: a topic named by id to a client that may not DESCRIBE it is
        // refused without its name (the id itself is not secret); DELETE on the topic.
        let hidden = by_id
            && name
                .as_ref()
                .is_some_and(|n| !broker.authz.authorize(ctx, Operation::Describe, ResourceType::Topic, n));
        let mut r =
            DeletableTopicResult::default().with_name(name.clone().filter(|_| !hidden).map(|n| TopicName(sb(n))));
        if ctx.version >= 6 {
            r.topic_id = id;
        }
        match name {
            None => r.error_code = ResponseError::UnknownTopicId.code(),
            Some(_) if hidden => r.error_code = ResponseError::TopicAuthorizationFailed.code(),
            Some(name)
                if !broker
                    .authz
                    .authorize(ctx, Operation::Delete, ResourceType::Topic, &name) =>
            {
                r.error_code = ResponseError::TopicAuthorizationFailed.code();
                if ctx.version >= 5 {
                    r.error_message = Some(sb(format!("{} may not delete topic {name}", ctx.principal)));
                }
            }
            Some(name) => match broker.delete_topic(&name, by_id.then_some(id)).await {
                Ok(id) => {
                    tracing::info!(topic = %name, "deleted topic");
                    if ctx.version >= 6 {
                        r.topic_id = id;
                    }
                }
                Err(e) => {
                    r.error_code = e.code();
                    if ctx.version >= 5 {
                        r.error_message = Some(sb(e.to_string()));
                    }
                }
            },
        }
        responses.push(r);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
