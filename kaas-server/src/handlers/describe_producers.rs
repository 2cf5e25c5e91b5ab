//! DescribeProducers (key 61, KIP-664): the idempotent/transactional producers a
//! partition knows, with their open transaction's first offset.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 0;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            // Kafka's check: READ on the topic.
            let topic = broker.topic_as(ctx, Operation::Read, &t.name.0);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let r = PartitionResponse::default().with_partition_index(index);
                    let p = match &topic {
                        Err(code) => return r.with_error_code(*code),
                        Ok(t) => match t.partition(index) {
                            None => return r.with_error_code(ResponseError::UnknownTopicOrPartition.code()),
                            Some(Err(o)) => return r.with_error_code(o.code()),
                            Some(Ok(p)) => p.clone(),
                        },
                    };
                    let state = p.state();
                    r.with_active_producers(
                        state
                            .producers
                            .producers
                            .values()
                            .map(|e| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(e.producer_id))
                                    .with_producer_epoch(e.epoch as i32)
                                    .with_last_sequence(e.last_seq().unwrap_or(-1))
                                    .with_last_timestamp(e.last_timestamp)
                                    .with_coordinator_epoch(-1)
                                    .with_current_txn_start_offset(e.txn_first_offset.unwrap_or(-1))
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default().with_name(t.name).with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
