//! WriteTxnMarkers (key 27), the inter-broker request: a transaction's coordinator
//! telling a partition's leader that COMMIT/ABORT markers are queued for it on the
//! volume (docs/cluster.md#markers-across-brokers). The leader applies its queue
//! entries for that producer and epoch at once and answers when their markers are
//! durable; it never writes a marker no coordinator queued, so a late, repeated or
//! forged notice finds nothing to do. A marker without partitions is a fence notice:
//! the fence watcher reads the fence logs at once. Kafka's check: CLUSTER_ACTION on
//! the cluster.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::txn::TopicPartition;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 1;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = broker.authz.authorize(
        ctx,
        Operation::ClusterAction,
        ResourceType::Cluster,
        crate::authz::CLUSTER,
    );
    if allowed {
        kaas_core::failpoint::hit(kaas_core::failpoint::MARKERS_NOTIFIED);
    }
    let mut markers = Vec::with_capacity(req.markers.len());
    for marker in req.markers {
        if marker.topics.is_empty() {
            // A fence notice (docs/cluster.md#fences-across-brokers): the fence logs
            // changed; the fence watcher reads them now. Nothing is written here.
            if allowed {
                broker.fence_doorbell.notify_one();
            }
            markers.push(WritableTxnMarkerResult::default().with_producer_id(marker.producer_id));
            continue;
        }
        let asked: Vec<TopicPartition> = marker
            .topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes.iter().map(|&partition| TopicPartition {
                    topic: t.name.0.to_string(),
                    partition,
                })
            })
            .collect();
        let codes: Vec<(TopicPartition, i16)> = if allowed {
            broker
                .txn
                .apply_notified(
                    broker,
                    marker.producer_id.0,
                    marker.producer_epoch,
                    marker.transaction_result,
                    &asked,
                )
                .await
        } else {
            let denied = ResponseError::ClusterAuthorizationFailed.code();
            asked.into_iter().map(|tp| (tp, denied)).collect()
        };
        let mut by_topic: BTreeMap<String, Vec<WritableTxnMarkerPartitionResult>> = BTreeMap::new();
        for (tp, code) in codes {
            by_topic.entry(tp.topic).or_default().push(
                WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(tp.partition)
                    .with_error_code(code),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(name, partitions)| {
                            WritableTxnMarkerTopicResult::default()
                                .with_name(TopicName(super::sb(name)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                ),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}
