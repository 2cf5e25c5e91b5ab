//! CreatePartitions (key 37): grows a topic's partition count.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 3;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut r = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        // Kafka's check: ALTER on the topic.
        let outcome = match broker.topic(&name) {
            _ if !broker
                .authz
                .authorize(ctx, Operation::Alter, ResourceType::Topic, &name) =>
            {
                Err((
                    ResponseError::TopicAuthorizationFailed.code(),
                    format!("{} may not add partitions to topic {name}", ctx.principal),
                ))
            }
            Err(e) => Err((e.code(), e.to_string())),
            Ok(topic) if t.count <= topic.meta.partitions => Err((
                ResponseError::InvalidPartitions.code(),
                format!(
                    "topic {name} has {} partitions; the new count {} must be larger",
                    topic.meta.partitions, t.count
                ),
            )),
            Ok(_) if t.assignments.is_some() => Err((
                ResponseError::InvalidReplicaAssignment.code(),
                "manual replica assignment is not supported".into(),
            )),
            Ok(topic) if req.validate_only => broker
                .validate_partitions(&topic, t.count)
                .map_err(|e| (e.code(), e.to_string())),
            Ok(_) => broker
                .create_partitions(&name, t.count)
                .await
                .map_err(|e| (e.code(), e.to_string())),
        };
        if let Err((code, msg)) = outcome {
            r.error_code = code;
            r.error_message = Some(sb(msg));
        }
        results.push(r);
    }
    CreatePartitionsResponse::default().with_results(results)
}
