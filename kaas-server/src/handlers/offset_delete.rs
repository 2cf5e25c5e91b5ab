//! OffsetDelete (key 47, KIP-496): drops a group's committed offsets for partitions
//! its members are not subscribed to.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 0;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = req.group_id.0.as_str();
    // Kafka's checks: DELETE on the group, READ on each topic.
    if !broker
        .authz
        .authorize(ctx, Operation::Delete, ResourceType::Group, group)
    {
        return OffsetDeleteResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if !broker.owns_group(group) {
        return OffsetDeleteResponse::default().with_error_code(broker.group_refusal(group).code());
    }
    // Partitions of topics that do not exist are answered as such, as Apache does.
    let known: Vec<Result<(), i16>> = req
        .topics
        .iter()
        .flat_map(|t| {
            let topic = broker.topic_as(ctx, Operation::Read, &t.name.0);
            t.partitions.iter().map(move |p| match &topic {
                Err(code) => Err(*code),
                Ok(t) if t.partition(p.partition_index).is_none() => Err(ResponseError::UnknownTopicOrPartition.code()),
                Ok(_) => Ok(()),
            })
        })
        .collect();
    let wanted: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index)))
        .zip(&known)
        .filter_map(|(tp, known)| known.is_ok().then_some(tp))
        .collect();
    let codes = match crate::blocking::off_worker(|| broker.groups.delete_offsets(group, &wanted)) {
        Ok(codes) => codes,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    let mut codes = codes.into_iter();
    let mut known = known.into_iter();
    let mut code_of = || match known.next() {
        Some(Ok(())) => codes.next().unwrap_or_default(),
        Some(Err(code)) => code,
        None => ResponseError::UnknownTopicOrPartition.code(),
    };
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code_of())
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
