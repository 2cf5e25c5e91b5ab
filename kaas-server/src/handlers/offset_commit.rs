//! OffsetCommit (key 8): checks the member and generation, then writes the group's
//! offsets file on the volume before answering.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use std::sync::Arc;

pub const MIN: i16 = 2;
pub const MAX: i16 = 8;

/// Apache's offset.metadata.max.bytes default.
const MAX_METADATA: usize = 4096;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = req.group_id.0.to_string();
    // Kafka's checks: READ on the group (every partition refused otherwise), READ on
    // each topic.
    let gate = if !broker
        .authz
        .authorize(ctx, Operation::Read, ResourceType::Group, &group)
    {
        Err(ResponseError::GroupAuthorizationFailed)
    } else if broker.owns_group(&group) {
        broker.groups.check_commit(
            &group,
            req.generation_id_or_member_epoch,
            &req.member_id,
            req.group_instance_id.as_deref(),
        )
    } else {
        Err(ResponseError::NotCoordinator)
    };
    let mut entries = Vec::new();
    let mut codes: Vec<Vec<i16>> = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let readable = gate.is_ok()
            && broker
                .authz
                .authorize(ctx, Operation::Read, ResourceType::Topic, &t.name.0);
        let known = broker.topic(&t.name.0).ok();
        let mut tc = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let code = if let Err(e) = gate {
                e.code()
            } else if !readable {
                ResponseError::TopicAuthorizationFailed.code()
            } else if known.as_ref().is_none_or(|k| k.partition(p.partition_index).is_none()) {
                ResponseError::UnknownTopicOrPartition.code()
            } else if p.committed_metadata.as_ref().is_some_and(|m| m.len() > MAX_METADATA) {
                ResponseError::OffsetMetadataTooLarge.code()
            } else {
                entries.push((
                    t.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.as_ref().map(|m| m.to_string()),
                ));
                0
            };
            tc.push(code);
        }
        codes.push(tc);
    }
    let write_error = if entries.is_empty() {
        None
    } else {
        // The write ends in an fsync: keep it off the runtime's worker threads.
        let (b, g) = (broker.clone(), group.clone());
        let written = tokio::task::spawn_blocking(move || b.groups.commit_offsets(&g, &entries))
            .await
            .unwrap_or_else(|e| {
                Err(kaas_core::VolumeError::io(
                    kaas_core::offsets::offsets_file(&broker.volume, &group),
                    std::io::Error::other(e),
                ))
            });
        written.err().map(|e| {
            tracing::error!(group = %group, error = %e, "offset commit failed");
            ResponseError::KafkaStorageError.code()
        })
    };
    let topics = req
        .topics
        .iter()
        .zip(codes)
        .map(|(t, tc)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(tc)
                        .map(|(p, code)| {
                            let code = if code == 0 { write_error.unwrap_or(0) } else { code };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
