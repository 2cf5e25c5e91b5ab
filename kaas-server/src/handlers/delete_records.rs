//! DeleteRecords (key 21): moves a partition's log start offset up (the records below
//! it are never served again; whole segments below it are deleted). The new start is
//! durable (`log-start.json`, fsynced) before the answer.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::log::LogError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 2;

/// "Up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(broker: &Arc<Broker>, _ctx: &RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let topic = broker.topic(&t.name.0);
        let partitions = t
            .partitions
            .iter()
            .map(|dp| {
                let mut r = DeleteRecordsPartitionResult::default()
                    .with_partition_index(dp.partition_index)
                    .with_low_watermark(-1);
                let p = match &topic {
                    Err(e) => Err(e.code()),
                    Ok(t) => match t.partition(dp.partition_index) {
                        None => Err(ResponseError::UnknownTopicOrPartition.code()),
                        Some(Err(o)) => Err(o.code()),
                        Some(Ok(p)) => Ok(p.clone()),
                    },
                };
                let p = match p {
                    Ok(p) => p,
                    Err(code) => {
                        r.error_code = code;
                        return r;
                    }
                };
                // A broker whose lease went stale may have lost the partition already.
                let state = if broker.lease_fresh() { p.writable() } else { None };
                let Some(mut state) = state else {
                    r.error_code = ResponseError::NotLeaderOrFollower.code();
                    return r;
                };
                let end = state.log.log_end_offset();
                let offset = if dp.offset == HIGH_WATERMARK { end } else { dp.offset };
                if !(0..=end).contains(&offset) {
                    r.error_code = ResponseError::OffsetOutOfRange.code();
                    r.low_watermark = state.log.log_start_offset();
                    return r;
                }
                match crate::blocking::off_worker(|| state.delete_records(offset)) {
                    Ok(deleted) => {
                        r.low_watermark = state.log.log_start_offset();
                        tracing::info!(topic = %p.topic, partition = p.index, log_start_offset = r.low_watermark,
                            segments_deleted = deleted.len(), "DeleteRecords moved the log start");
                    }
                    Err(LogError::OutOfRange { .. }) => r.error_code = ResponseError::OffsetOutOfRange.code(),
                    Err(e) => {
                        tracing::error!(topic = %p.topic, partition = p.index, offset, error = %e, "DeleteRecords failed");
                        // The start may have moved before a segment could be deleted.
                        r.low_watermark = state.log.log_start_offset();
                        r.error_code = ResponseError::KafkaStorageError.code();
                    }
                }
                r
            })
            .collect();
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}
