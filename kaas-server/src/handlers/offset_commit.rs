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
pub const MAX: i16 = 9;

/// Apache's offset.metadata.max.bytes default.
const MAX_METADATA: usize = 4096;

/// What refuses one partition's offset, OffsetCommit's and TxnOffsetCommit's alike
/// (Apache's checks for both): a topic or partition this broker does not know,
/// metadata past `offset.metadata.max.bytes`.
pub(crate) fn offset_refused<T>(
    known: Option<&T>,
    has_partition: impl Fn(&T) -> bool,
    metadata: Option<&str>,
) -> Option<ResponseError> {
    if known.is_none_or(|k| !has_partition(k)) {
        Some(ResponseError::UnknownTopicOrPartition)
    } else if metadata.is_some_and(|m| m.len() > MAX_METADATA) {
        Some(ResponseError::OffsetMetadataTooLarge)
    } else {
        None
    }
}

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse {
    // The lease as the request found it: a step-down while it is served (a pause
    // past half the session timeout) means another broker may coordinate the group.
    let stepdowns = broker.stepdown_count();
    let group = req.group_id.0.to_string();
    // Kafka's checks: READ on the group (every partition refused otherwise), READ on
    // each topic.
    let gate = if !broker
        .authz
        .authorize(ctx, Operation::Read, ResourceType::Group, &group)
    {
        Err(ResponseError::GroupAuthorizationFailed)
    } else if broker.owns_group(&group) {
        // A consumer group (KIP-848) checks the member epoch; a classic group the
        // generation.
        broker
            .groups
            .check_consumer_member(
                &group,
                &req.member_id,
                req.generation_id_or_member_epoch,
                ctx.version < 9,
            )
            .unwrap_or_else(|| {
                broker.groups.check_commit(
                    &group,
                    req.generation_id_or_member_epoch,
                    &req.member_id,
                    req.group_instance_id.as_deref(),
                    false,
                )
            })
    } else {
        Err(broker.group_refusal(&group))
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
            } else if let Some(refused) = offset_refused(
                known.as_ref(),
                |k| k.partition(p.partition_index).is_some(),
                p.committed_metadata.as_deref(),
            ) {
                refused.code()
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
        // The write (the group lock's wait, an fsync) runs off the runtime's worker
        // threads inside `commit_offsets`.
        let member = (
            req.member_id.as_str(),
            req.generation_id_or_member_epoch,
            ctx.version < 9,
        );
        let still_ours = || broker.still_fresh_since(stepdowns) && broker.owns_group(&group);
        match broker
            .groups
            .commit_offsets_checked(&group, &entries, Some(member), &still_ours)
        {
            Ok(Ok(())) => None,
            Ok(Err(refused)) => Some(refused.code()),
            Err(e) => {
                tracing::error!(group = %group, error = %e, "offset commit failed");
                Some(crate::groups::member_error(&e).code())
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::sb;
    use crate::handlers::test_support::{broker, ctx};
    use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    use kafka_protocol::messages::{ApiKey, GroupId, TopicName};

    /// A commit of `offset` for t-0 in group g, outside any generation.
    fn commit_of(offset: i64) -> OffsetCommitRequest {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)])])
    }

    /// Issue 25, second review: a group lock held by a paused process for the whole
    /// wait was answered KAFKA_STORAGE_ERROR, which Java's consumer does not retry on
    /// a commit; it is COORDINATOR_LOAD_IN_PROGRESS, and the commit goes through once
    /// the lock is free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_that_found_the_group_lock_held_elsewhere_is_retriable() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let request = commit_of(7);
        let code = |r: &OffsetCommitResponse| r.topics[0].partitions[0].error_code;
        let held = kaas_core::offsets::GroupOffsets::lock(&b.volume, "g").unwrap();
        let c = ctx(ApiKey::OffsetCommit, 8);
        let answered = handle(&b, &c, request.clone()).await;
        assert_eq!(code(&answered), ResponseError::CoordinatorLoadInProgress.code());
        assert!(kaas_core::offsets::GroupOffsets::load(&b.volume, "g")
            .unwrap()
            .get("t", 0)
            .is_none());
        drop(held);
        assert_eq!(code(&handle(&b, &c, request).await), 0);
        assert_eq!(
            b.groups.fetch_offsets("g").unwrap().get("t", 0).map(|o| o.offset),
            Some(7)
        );
    }

    /// The codes of a commit of 7 made while `broken` breaks the volume under group g,
    /// and of a commit of 8 once `mended` mends it, and the offset then committed.
    async fn committed_while_broken(
        broken: impl FnOnce(&std::path::Path),
        mended: impl FnOnce(&std::path::Path),
    ) -> (i16, i16, Option<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let c = ctx(ApiKey::OffsetCommit, 8);
        let code = |r: &OffsetCommitResponse| r.topics[0].partitions[0].error_code;
        let file = kaas_core::offsets::offsets_file(&b.volume, "g");
        broken(&file);
        let refused = code(&handle(&b, &c, commit_of(7)).await);
        mended(&file);
        let next = code(&handle(&b, &c, commit_of(8)).await);
        (
            refused,
            next,
            b.groups.fetch_offsets("g").unwrap().get("t", 0).map(|o| o.offset),
        )
    }

    /// A commit whose group file the volume fails to read (here the groups folder is
    /// a file: ENOTDIR, as EIO or a stale handle would be) is answered
    /// COORDINATOR_NOT_AVAILABLE, which every client retries after finding the
    /// coordinator again. It was KAFKA_STORAGE_ERROR: Java's consumer raises that from
    /// a commit as "Unexpected error in commit", ending a Kafka Streams thread for a
    /// moment's disk fault. Nothing is written, and the next commit lands.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_the_volume_fails_is_retriable() {
        let groups = |file: &std::path::Path| file.parent().unwrap().to_path_buf();
        let answered = committed_while_broken(
            |file| {
                let _ = std::fs::remove_dir_all(groups(file));
                std::fs::write(groups(file), b"").unwrap();
            },
            |file| std::fs::remove_file(groups(file)).unwrap(),
        )
        .await;
        assert_eq!(answered, (ResponseError::CoordinatorNotAvailable.code(), 0, Some(8)));
    }

    /// The same when the read before the write succeeds and the write fails (here the
    /// group's lock file cannot be opened: a directory stands at its path).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_whose_write_the_volume_fails_is_retriable() {
        let answered = committed_while_broken(
            |file| std::fs::create_dir_all(file.with_extension("lock")).unwrap(),
            |file| std::fs::remove_dir(file.with_extension("lock")).unwrap(),
        )
        .await;
        assert_eq!(answered, (ResponseError::CoordinatorNotAvailable.code(), 0, Some(8)));
    }

    /// A group file refused for what it holds (not JSON here) is no failure to retry
    /// past: the commit is answered KAFKA_STORAGE_ERROR, as are JoinGroup and
    /// OffsetFetch for the group, until an operator mends the file; nothing is written
    /// over it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_to_a_group_whose_file_is_refused_is_a_storage_error() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let path = kaas_core::offsets::offsets_file(&b.volume, "g");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{ not json").unwrap();
        let answered = handle(&b, &ctx(ApiKey::OffsetCommit, 8), commit_of(7)).await;
        assert_eq!(
            answered.topics[0].partitions[0].error_code,
            ResponseError::KafkaStorageError.code()
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");
    }

    /// A commit that waited for the group's file lock while its broker stepped down
    /// (paused past half the session timeout: another broker may coordinate the group
    /// now, and may have written newer offsets) was written anyway once the lock came,
    /// over the successor's. Checked under the lock, right before the write.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_whose_broker_stepped_down_while_it_waited_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        b.groups.commit_offsets("g", &[("t".into(), 0, 200, -1, None)]).unwrap();
        let request = commit_of(100);
        let held = kaas_core::offsets::GroupOffsets::lock(&b.volume, "g").unwrap();
        let c = ctx(ApiKey::OffsetCommit, 8);
        let commit = {
            let b = b.clone();
            tokio::spawn(async move { handle(&b, &c, request).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        // The broker steps down (the lease task, after a pause) while the commit waits.
        b.stepping_down();
        drop(held);
        let answered = commit.await.unwrap();
        assert_eq!(
            answered.topics[0].partitions[0].error_code,
            ResponseError::NotCoordinator.code()
        );
        assert_eq!(
            kaas_core::offsets::GroupOffsets::load(&b.volume, "g")
                .unwrap()
                .get("t", 0)
                .map(|o| o.offset),
            Some(200),
            "the successor's offset stays"
        );
    }
}
