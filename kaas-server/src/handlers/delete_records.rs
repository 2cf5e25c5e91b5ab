//! DeleteRecords (key 21): moves a partition's log start offset up (the records below
//! it are never served again; whole segments below it are deleted). The new start is
//! durable (`log-start.json`, fsynced) before the answer.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::Operation;
use kaas_core::log::LogError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 2;

/// "Up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        // Kafka's check: DELETE on the topic.
        let topic = broker.topic_as(ctx, Operation::Delete, &t.name.0);
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for dp in &t.partitions {
            let mut r = DeleteRecordsPartitionResult::default()
                .with_partition_index(dp.partition_index)
                .with_low_watermark(-1);
            match delete(broker, &topic, dp.partition_index, dp.offset).await {
                Ok(low) => r.low_watermark = low,
                Err((code, low)) => {
                    r.error_code = code;
                    r.low_watermark = low;
                }
            }
            partitions.push(r);
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Moves one partition's log start to `requested` (-1: the high watermark). Returns
/// the new log start, or an error code with the log start as it is.
async fn delete(
    broker: &Broker,
    topic: &Result<Arc<crate::broker::Topic>, i16>,
    index: i32,
    requested: i64,
) -> Result<i64, (i16, i64)> {
    let t = topic.as_ref().map_err(|code| (*code, -1))?;
    let p = match t.partition(index) {
        None => return Err((ResponseError::UnknownTopicOrPartition.code(), -1)),
        Some(Err(o)) => return Err((o.code(), -1)),
        Some(Ok(p)) => p.clone(),
    };
    // As Apache: records of a topic that is only compacted are not deleted by offset.
    if !t.log_config.cleanup_delete {
        return Err((ResponseError::PolicyViolation.code(), p.state().log.log_start_offset()));
    }
    let (offset, start, in_range) = {
        let state = p.state();
        let end = state.log.log_end_offset();
        let start = state.log.log_start_offset();
        let offset = if requested == HIGH_WATERMARK { end } else { requested };
        (offset, start, (0..=end).contains(&offset))
    };
    // OFFSET_OUT_OF_RANGE, judged from this broker's log end, only while owner.json
    // says it leads: a deposed leader's log may be shorter than its successor's (as
    // for a fetch: `a_deposed_leader_sends_a_fetch_past_its_end_to_the_new_leader`).
    if !in_range {
        return Err(match p.confirm_led().await {
            Ok(()) => (ResponseError::OffsetOutOfRange.code(), start),
            Err(e) => (e.code(), start),
        });
    }
    // Everything below the new start is durable first: a crash must never leave a
    // recorded start above what the log still holds (those offsets would be written
    // again, and hidden).
    if let Err(e) = p.wait_durable(offset).await {
        tracing::error!(topic = %p.topic, partition = p.index, error = %e, "DeleteRecords: cannot make the log durable");
        return Err((e.code(), start));
    }
    // A broker whose lease went stale, or whose partition was taken over (a frozen
    // clock), may have lost the partition already: it must not move the start in the
    // new leader's files. Checked again under the partition's gate with the write
    // (`Partition::while_led`), so a freeze between the two changes nothing.
    if let Err(e) = p.confirm_led().await {
        return Err((e.code(), start));
    }
    let moved = {
        let state = if broker.lease_fresh() { p.writable() } else { None };
        let Some(mut state) = state else {
            return Err((ResponseError::NotLeaderOrFollower.code(), start));
        };
        match crate::blocking::off_worker(|| p.while_led(|| state.delete_records(offset))) {
            Err(e) => return Err((e.code(), state.log.log_start_offset())),
            Ok(Ok(deleted)) => (state.log.log_start_offset(), deleted.len()),
            Ok(Err(LogError::OutOfRange { .. })) => {
                return Err((ResponseError::OffsetOutOfRange.code(), state.log.log_start_offset()))
            }
            Ok(Err(e)) => {
                tracing::error!(topic = %p.topic, partition = p.index, offset, error = %e, "DeleteRecords failed");
                // The start may have moved before a segment could be deleted.
                return Err((ResponseError::KafkaStorageError.code(), state.log.log_start_offset()));
            }
        }
    };
    let (low, segments_deleted) = moved;
    // Answered only if this broker still led the partition after the write.
    if let Err(e) = p.confirm_led().await {
        return Err((e.code(), low));
    }
    tracing::info!(topic = %p.topic, partition = p.index, log_start_offset = low, segments_deleted,
        "DeleteRecords moved the log start");
    Ok(low)
}
