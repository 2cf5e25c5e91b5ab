//! OffsetForLeaderEpoch (key 23): where a leader epoch's records end. Consumers ask
//! it after a partition's leader changed without a rebalance (KIP-320: kafka-python
//! 3, librdkafka, Java) to check their position was not truncated away.
//!
//! kaas keeps one copy of each partition, on the shared volume: a leader change never
//! makes logs diverge, and no epoch's records are replaced by another's. So the end of
//! any epoch up to the current one is answered as the log's end now: a position at or
//! below it is valid, and one past it (records lost with a torn tail at recovery)
//! is reported as truncated, as Kafka's would. An epoch newer than the partition's
//! is unknown here (-1, -1), as in Kafka. A request naming a current leader epoch
//! other than the partition's is FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH
//! (newer). Authorized as Kafka does: CLUSTER_ACTION on the cluster, else DESCRIBE on
//! each topic (TOPIC_AUTHORIZATION_FAILED).

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use std::sync::Arc;

pub const MIN: i16 = 2;
pub const MAX: i16 = 4;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // As Apache: CLUSTER_ACTION on the cluster (a replica), else DESCRIBE on each topic.
    let cluster_action = broker.authz.authorize_quietly(
        ctx,
        Operation::ClusterAction,
        ResourceType::Cluster,
        crate::authz::CLUSTER,
    );
    // A broker whose own lease is stale may be deposed: it tells nothing of its
    // partitions, as Fetch and ListOffsets (judged once per request).
    let lease_fresh = broker.lease_fresh();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = if !cluster_action
                && !broker
                    .authz
                    .authorize(ctx, Operation::Describe, ResourceType::Topic, &t.topic.0)
            {
                Err(ResponseError::TopicAuthorizationFailed.code())
            } else {
                broker.topic(&t.topic.0).map_err(|e| e.code())
            };
            let partitions = t
                .partitions
                .iter()
                .map(|asked| {
                    let mut r = EpochEndOffset::default()
                        .with_partition(asked.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let p = super::served_partition(&topic, asked.partition, lease_fresh);
                    match p {
                        Err(code) => r.error_code = code,
                        Ok(p) => match epoch_end(p.leader_epoch, asked.current_leader_epoch, asked.leader_epoch) {
                            Err(e) => r.error_code = e.code(),
                            Ok(None) => {}
                            Ok(Some(epoch)) => {
                                r.leader_epoch = epoch;
                                r.end_offset = p.log_end_offset();
                            }
                        },
                    }
                    r
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// The epoch whose end is answered for `asked` on a partition at leader epoch `ours`
/// (None: newer than ours, unknown here), or the error for a request that names a
/// current leader epoch other than ours (-1: it names none).
fn epoch_end(ours: i32, current: i32, asked: i32) -> Result<Option<i32>, ResponseError> {
    if current >= 0 && current < ours {
        return Err(ResponseError::FencedLeaderEpoch);
    }
    if current > ours {
        return Err(ResponseError::UnknownLeaderEpoch);
    }
    // No epoch asked (-1), or one newer than ours: unknown here.
    Ok((0..=ours).contains(&asked).then_some(asked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_up_to_the_partitions_ends_at_the_log_end_and_a_stale_or_future_current_epoch_is_refused() {
        assert_eq!(epoch_end(3, 3, 1), Ok(Some(1)));
        assert_eq!(epoch_end(3, -1, 3), Ok(Some(3)));
        assert_eq!(epoch_end(3, 3, 4), Ok(None), "newer than ours: unknown");
        assert_eq!(epoch_end(3, 3, -1), Ok(None), "none asked");
        assert_eq!(epoch_end(3, 2, 1), Err(ResponseError::FencedLeaderEpoch));
        assert_eq!(epoch_end(3, 4, 1), Err(ResponseError::UnknownLeaderEpoch));
    }
}
