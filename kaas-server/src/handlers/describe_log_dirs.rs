//! DescribeLogDirs (key 35): the size of each partition's log, as `kafka-log-dirs.sh
//! --describe` and the admin UIs that show topic sizes ask for it. A broker has one
//! log directory here, the shared volume (`--data-dir`), and reports the partitions
//! it leads — each partition has one copy, held by its leader — so the answers of all
//! brokers added up count each partition once (but for one changing hands at that
//! moment). `total_bytes` and `usable_bytes` (v4) are the volume's, as `statvfs`
//! tells them (-1 when it cannot).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 4;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // Kafka's check: DESCRIBE on the cluster; refused, no directory at all.
    if !broker
        .authz
        .authorize(ctx, Operation::Describe, ResourceType::Cluster, crate::authz::CLUSTER)
    {
        return DescribeLogDirsResponse::default().with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    // None: every partition (the request's null topics).
    let asked: Option<BTreeSet<(String, i32)>> = req.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
            .collect()
    });
    // Off the runtime's workers: each partition's state is locked in turn, and a
    // roll or a retirement holds that lock through an fsync; then the volume's statvfs.
    let root = broker.volume.root();
    let (by_topic, total, usable) = crate::blocking::off_worker(|| {
        let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
        // A partition let go (retired) is no longer this broker's to count.
        for p in broker.partitions().into_iter().filter(|p| !p.is_retired()) {
            if asked.as_ref().is_some_and(|a| !a.contains(&(p.topic.clone(), p.index))) {
                continue;
            }
            let size = p.state().log.size_bytes();
            by_topic.entry(p.topic.clone()).or_default().push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.index)
                    .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            );
        }
        let (total, usable) = match rustix::fs::statvfs(root) {
            Ok(s) => {
                let unit = s.f_frsize.max(1);
                let bytes = |blocks: u64| i64::try_from(blocks.saturating_mul(unit)).unwrap_or(i64::MAX);
                (bytes(s.f_blocks), bytes(s.f_bavail))
            }
            Err(e) => {
                tracing::warn!(path = %root.display(), error = %e, "cannot tell the volume's size for DescribeLogDirs");
                (-1, -1)
            }
        };
        (by_topic, total, usable)
    });
    let topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(TopicName(sb(name)))
                .with_partitions(partitions)
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(vec![DescribeLogDirsResult::default()
        // Absolute, as Kafka names its log directories (`--data-dir` may be relative).
        .with_log_dir(sb(std::path::absolute(root)
            .unwrap_or_else(|_| root.to_path_buf())
            .display()
            .to_string()))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker_with, ctx};
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    use kafka_protocol::messages::ApiKey;

    fn sizes(resp: &DescribeLogDirsResponse) -> Vec<(String, i32, i64)> {
        resp.results
            .iter()
            .flat_map(|r| {
                r.topics.iter().flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.partition_size))
                })
            })
            .collect()
    }

    /// Every partition led here with its log's size, or only those asked for (a
    /// partition that is not here is left out, as Kafka leaves out one it does not
    /// host); the one directory is the volume, with its size.
    #[tokio::test]
    async fn each_partition_led_here_is_described_with_its_log_size() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker_with(dir.path(), &[]);
        b.create_topic("a", 2, Default::default()).await.unwrap();
        b.create_topic("b", 1, Default::default()).await.unwrap();
        let a0 = b.topic("a").unwrap().partition(0).unwrap().clone().unwrap();
        let mut batch = kaas_core::batch::build_batch(0, 1, None, 0, &[(None, Some(&b"hello"[..]))]);
        let headers = kaas_core::batch::validate_all(&batch).unwrap();
        b.append(&a0, &mut batch, &headers, None).unwrap();
        let written = a0.state().log.size_bytes() as i64;
        assert!(written > 0);

        let all = handle(
            &b,
            &ctx(ApiKey::DescribeLogDirs, 4),
            DescribeLogDirsRequest::default().with_topics(None),
        )
        .await;
        assert_eq!(all.error_code, 0);
        assert_eq!(all.results.len(), 1, "one directory: the volume");
        assert_eq!(
            all.results[0].log_dir.to_string(),
            b.volume.root().display().to_string()
        );
        assert!(all.results[0].total_bytes > 0 && all.results[0].usable_bytes >= 0);
        assert_eq!(
            sizes(&all),
            vec![("a".into(), 0, written), ("a".into(), 1, 0), ("b".into(), 0, 0)]
        );

        let asked = DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(TopicName(sb("a")))
                .with_partitions(vec![0, 7]),
            DescribableLogDirTopic::default()
                .with_topic(TopicName(sb("nope")))
                .with_partitions(vec![0]),
        ]));
        assert_eq!(
            sizes(&handle(&b, &ctx(ApiKey::DescribeLogDirs, 4), asked).await),
            vec![("a".into(), 0, written)]
        );
        // An empty list asks for nothing (null is everything): the directory alone.
        let none = handle(
            &b,
            &ctx(ApiKey::DescribeLogDirs, 4),
            DescribeLogDirsRequest::default().with_topics(Some(vec![])),
        )
        .await;
        assert_eq!(none.results.len(), 1);
        assert!(sizes(&none).is_empty());
    }
}
