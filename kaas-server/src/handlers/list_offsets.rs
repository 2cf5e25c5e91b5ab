//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3) and by timestamp.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use std::collections::HashMap;
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 7;

/// How long ListOffsets' latest waits for the flush that confirms the log end.
const LATEST_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse {
    let isolation_level = req.isolation_level;
    // A broker whose own lease is stale may be deposed: it tells no offsets of its
    // partitions, as Fetch reads none (judged once per request).
    let lease_fresh = broker.lease_fresh();
    // LATEST is the high watermark: the confirmed end (`Partition::confirmed_end`).
    // What was appended with acks=0/1 is flushed and confirmed first, so it counts at
    // once; a partition whose flush or check fails answers that failure.
    // Keyed by (topic, partition) position in the request.
    let mut unconfirmed: HashMap<(usize, usize), i16> = HashMap::new();
    // Authorized once per topic (a denial is logged once, not once per pass); the
    // topic is looked up again for the answer, after the waits (a partition let go,
    // a topic deleted meanwhile, answers so).
    let describable: Vec<bool> = req
        .topics
        .iter()
        .map(|t| {
            broker
                .authz
                .authorize(ctx, Operation::Describe, ResourceType::Topic, &t.name.0)
        })
        .collect();
    let topic_of = |name: &str, describable: bool| {
        if describable {
            broker.topic(name).map_err(|e| e.code())
        } else {
            Err(ResponseError::TopicAuthorizationFailed.code())
        }
    };
    for (ti, (t, describable)) in req.topics.iter().zip(&describable).enumerate() {
        let Ok(topic) = topic_of(&t.name.0, *describable) else {
            continue;
        };
        for (pi, lp) in t.partitions.iter().enumerate().filter(|(_, lp)| lp.timestamp == LATEST) {
            let Some(Ok(p)) = topic.partition(lp.partition_index) else {
                continue;
            };
            let end = p.log_end_offset();
            if end > p.confirmed_end() {
                // Bounded, as a Produce's wait is: a stalled disk answers an error.
                match tokio::time::timeout(LATEST_FLUSH_WAIT, p.wait_durable(end)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "ListOffsets: the log end is not confirmed durable");
                        unconfirmed.insert((ti, pi), e.code());
                    }
                    Err(_) => {
                        tracing::warn!(topic = %p.topic, partition = p.index, "ListOffsets: the flush of the log end did not finish in time");
                        unconfirmed.insert((ti, pi), ResponseError::RequestTimedOut.code());
                    }
                }
            }
        }
    }
    let mut topics = Vec::with_capacity(req.topics.len());
    for (ti, (t, describable)) in req.topics.into_iter().zip(describable).enumerate() {
        let topic = topic_of(&t.name.0, describable);
        let partitions = t
            .partitions
            .iter()
            .enumerate()
            .map(|(pi, lp)| {
                let mut r = ListOffsetsPartitionResponse::default()
                    .with_partition_index(lp.partition_index)
                    .with_timestamp(-1)
                    .with_offset(-1);
                let p = super::served_partition(&topic, lp.partition_index, lease_fresh);
                let p = p.and_then(|p| match unconfirmed.get(&(ti, pi)) {
                    Some(code) => Err(*code),
                    None => Ok(p),
                });
                match p {
                    Err(code) => r.error_code = code,
                    Ok(p) => {
                        if ctx.version >= 4 {
                            r.leader_epoch = p.leader_epoch;
                        }
                        let mut state = p.state();
                        let (hw, lso) = p.read_bounds(&state);
                        let log = &mut state.log;
                        match lp.timestamp {
                            LATEST if isolation_level == 1 => r.offset = lso,
                            LATEST => r.offset = hw,
                            EARLIEST => r.offset = log.log_start_offset(),
                            ts => {
                                // Both may read a segment's headers.
                                let found = crate::blocking::off_worker(|| {
                                    if ts == MAX_TIMESTAMP {
                                        log.max_timestamp_offset()
                                    } else {
                                        log.offset_for_timestamp(ts)
                                    }
                                });
                                // Only what the asking reader may read, as Kafka's
                                // `lastFetchableOffset`: below the last stable offset
                                // for read_committed, else below the high watermark.
                                let readable = if isolation_level == 1 { lso } else { hw };
                                match found {
                                    Ok(Some((offset, ts))) if offset < readable => {
                                        r.offset = offset;
                                        r.timestamp = ts;
                                    }
                                    Ok(_) => {}
                                    Err(e) => {
                                        tracing::error!(topic = %p.topic, partition = p.index, error = %e, "timestamp lookup failed");
                                        r.error_code = ResponseError::KafkaStorageError.code();
                                    }
                                }
                            }
                        }
                    }
                }
                r
            })
            .collect();
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    ListOffsetsResponse::default().with_topics(topics)
}
