//! OffsetFetch (key 9): committed offsets of one group (v0-7) or several (v8+).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 9;

/// The code for an OffsetFetch the volume failed: COORDINATOR_LOAD_IN_PROGRESS where a
/// member's other requests answer COORDINATOR_NOT_AVAILABLE. Java's classic consumer
/// retries an OffsetFetch only on COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR —
/// anything else is "Unexpected error in fetch offset response", raised from `poll()`
/// (COORDINATOR_NOT_AVAILABLE was added in Kafka 3.9, KAFKA-17279) — and every client
/// retries COORDINATOR_LOAD_IN_PROGRESS at the same coordinator.
fn retried_here(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::CoordinatorNotAvailable => ResponseError::CoordinatorLoadInProgress,
        e => e,
    }
}

/// One partition's answer.
struct Row {
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: Option<String>,
    error: i16,
}

impl Row {
    /// A partition answered with no offset, and `error` (0: none committed).
    fn failed(partition: i32, error: i16) -> Row {
        Row {
            partition,
            offset: -1,
            leader_epoch: -1,
            metadata: Some(String::new()),
            error,
        }
    }
}

/// (topic, rows) for one group, or the group's error.
type Fetched = Result<Vec<(String, Vec<Row>)>, i16>;

/// UNSTABLE_OFFSET_COMMIT: a transaction has staged an offset for the partition.
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

/// Kafka's checks: DESCRIBE on the group; DESCRIBE on each topic (a topic asked for
/// by name says TOPIC_AUTHORIZATION_FAILED, one from "all the group's" is left out).
fn fetch(
    broker: &Broker,
    ctx: &RequestContext,
    group: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
    member: Option<(&str, i32)>,
) -> Fetched {
    if !broker
        .authz
        .authorize(ctx, Operation::Describe, ResourceType::Group, group)
    {
        return Err(ResponseError::GroupAuthorizationFailed.code());
    }
    if !broker.owns_group(group) {
        return Err(broker.group_refusal(group).code());
    }
    // v9, a member of a consumer group (KIP-848): Apache's check that it is in the
    // group at its epoch; epoch -1 is an admin tool, always answered.
    if let Some((member_id, epoch)) = member.filter(|(_, e)| *e != -1) {
        if let Some(Err(e)) = broker.groups.check_consumer_member(group, member_id, epoch, false) {
            return Err(retried_here(e).code());
        }
    }
    // A failure of the volume is retried; a file refused for what it holds is
    // KAFKA_STORAGE_ERROR, as for JoinGroup and OffsetCommit.
    let offsets = broker.groups.fetch_offsets(group).map_err(|e| {
        tracing::error!(group, error = %e, "cannot read committed offsets");
        retried_here(crate::groups::member_error(&e)).code()
    })?;
    let describable = |topic: &str| {
        broker
            .authz
            .authorize(ctx, Operation::Describe, ResourceType::Topic, topic)
    };
    let wanted = wanted.unwrap_or_else(|| {
        offsets
            .offsets
            .iter()
            .filter(|(t, _)| describable(t))
            .map(|(t, ps)| (t.clone(), ps.keys().copied().collect()))
            .collect()
    });
    Ok(wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let allowed = describable(&topic);
            let rows = partitions
                .into_iter()
                .map(|p| {
                    if !allowed {
                        return Row::failed(p, ResponseError::TopicAuthorizationFailed.code());
                    }
                    let error = if require_stable && offsets.has_pending(&topic, p) {
                        UNSTABLE_OFFSET_COMMIT
                    } else {
                        0
                    };
                    match offsets.get(&topic, p) {
                        Some(c) => Row {
                            partition: p,
                            offset: c.offset,
                            leader_epoch: c.leader_epoch,
                            metadata: c.metadata.clone(),
                            error,
                        },
                        None => Row::failed(p, error),
                    }
                })
                .collect();
            (topic, rows)
        })
        .collect())
}

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse {
    if ctx.version >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let wanted = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let mut out = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                let member = (ctx.version >= 9).then(|| (g.member_id.as_deref().unwrap_or(""), g.member_epoch));
                match fetch(broker, ctx, &g.group_id.0, wanted, req.require_stable, member) {
                    Err(code) => out.error_code = code,
                    Ok(rows) => {
                        out.topics = rows
                            .into_iter()
                            .map(|(t, ps)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(sb(t)))
                                    .with_partitions(
                                        ps.into_iter()
                                            .map(|r| {
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(r.partition)
                                                    .with_committed_offset(r.offset)
                                                    .with_committed_leader_epoch(r.leader_epoch)
                                                    .with_metadata(r.metadata.map(sb))
                                                    .with_error_code(r.error)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect()
                    }
                }
                out
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let mut resp = OffsetFetchResponse::default();
    let fetched = fetch(
        broker,
        ctx,
        &req.group_id.0,
        wanted.clone(),
        ctx.version >= 7 && req.require_stable,
        None,
    );
    // v0-1 have no group error: each partition asked for carries it (as Kafka answers),
    // so a refused client does not take "no offset" for an answer.
    let fetched = match (fetched, wanted) {
        (Err(code), Some(wanted)) if ctx.version < 2 => Ok(wanted
            .into_iter()
            .map(|(t, ps)| (t, ps.into_iter().map(|p| Row::failed(p, code)).collect()))
            .collect()),
        (fetched, _) => fetched,
    };
    match fetched {
        Err(code) => {
            if ctx.version >= 2 {
                resp.error_code = code;
            }
        }
        Ok(rows) => {
            resp.topics = rows
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|row| {
                                    let mut r = OffsetFetchResponsePartition::default()
                                        .with_partition_index(row.partition)
                                        .with_committed_offset(row.offset)
                                        .with_metadata(row.metadata.map(sb))
                                        .with_error_code(row.error);
                                    if ctx.version >= 5 {
                                        r.committed_leader_epoch = row.leader_epoch;
                                    }
                                    r
                                })
                                .collect(),
                        )
                })
                .collect();
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker, ctx};
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
    use kafka_protocol::messages::{ApiKey, GroupId};

    async fn fetched(b: &Arc<Broker>) -> i16 {
        let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_epoch(-1)]);
        handle(b, &ctx(ApiKey::OffsetFetch, 8), req).await.groups[0].error_code
    }

    /// A consumer group member's OffsetFetch (v9, its epoch checked against the group's
    /// file first).
    async fn fetched_by_member(b: &Arc<Broker>) -> i16 {
        let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(Some(sb("m")))
            .with_member_epoch(3)]);
        handle(b, &ctx(ApiKey::OffsetFetch, 9), req).await.groups[0].error_code
    }

    /// A group file refused for what it holds (not JSON) is answered
    /// KAFKA_STORAGE_ERROR, as JoinGroup and OffsetCommit answer it (it was
    /// COORDINATOR_NOT_AVAILABLE here alone: a client retried for as long as its
    /// timeout, told the coordinator was away); a failure of the volume (the groups
    /// folder is a file: ENOTDIR) is COORDINATOR_LOAD_IN_PROGRESS, which every client
    /// retries (it was COORDINATOR_NOT_AVAILABLE, fatal to Java's classic consumer
    /// before Kafka 3.9 in an OffsetFetch).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fetch_of_a_refused_group_file_is_a_storage_error_and_of_a_failing_volume_retriable() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let path = kaas_core::offsets::offsets_file(&b.volume, "g");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{ not json").unwrap();
        assert_eq!(fetched(&b).await, ResponseError::KafkaStorageError.code());
        let groups = b.volume.groups_dir();
        std::fs::remove_dir_all(&groups).unwrap();
        std::fs::write(&groups, b"").unwrap();
        assert_eq!(fetched(&b).await, ResponseError::CoordinatorLoadInProgress.code());
        assert_eq!(
            fetched_by_member(&b).await,
            ResponseError::CoordinatorLoadInProgress.code()
        );
    }
}
