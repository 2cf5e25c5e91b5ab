//! Produce (key 0). Batches are validated whole (header, CRC32C, size) before
//! anything is written, get their base offsets assigned in place and are stored as
//! received. acks=-1 (or --flush-policy always) answers only after a shared fsync.

use super::{sb, RequestContext};
use crate::broker::{AppendRejected, Broker, Partition};
use bytes::BytesMut;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::idempotence::SequenceError;
use kaas_core::log::LogError;
use kaas_core::partition::{AppendError, AppendOutcome};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use std::sync::Arc;
use tracing::{debug, warn};

pub const MIN: i16 = 3;
pub const MAX: i16 = 11;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: ProduceRequest) -> ProduceResponse {
    let acks_ok = matches!(req.acks, -1..=1);
    let stepdowns = broker.stepdown_count();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let mut to_sync: Vec<(Arc<Partition>, i64, usize, usize)> = Vec::new();
    // Kafka's checks: WRITE on the transactional id for a transactional request (its
    // every partition refused otherwise), WRITE on each topic.
    let txn_refused = req.transactional_id.as_ref().is_some_and(|id| {
        !broker
            .authz
            .authorize(ctx, Operation::Write, ResourceType::TransactionalId, id)
    });
    for topic_data in req.topic_data {
        let name = topic_data.name.0.to_string();
        let refused = if txn_refused {
            Some(ResponseError::TransactionalIdAuthorizationFailed.code())
        } else if !broker
            .authz
            .authorize(ctx, Operation::Write, ResourceType::Topic, &name)
        {
            Some(ResponseError::TopicAuthorizationFailed.code())
        } else if !acks_ok {
            Some(ResponseError::InvalidRequiredAcks.code())
        } else {
            None
        };
        let topic = match refused {
            None => Ok(broker.topic_or_create_for(ctx, &name).await),
            Some(code) => Err(code),
        };
        let mut partitions = Vec::with_capacity(topic_data.partition_data.len());
        for pd in topic_data.partition_data {
            let mut resp = PartitionProduceResponse::default()
                .with_index(pd.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            let outcome = match &topic {
                Err(code) => Err(*code),
                Ok(Err(e)) => Err(e.code()),
                Ok(Ok(t)) => match t.partition(pd.index) {
                    None => Err(ResponseError::UnknownTopicOrPartition.code()),
                    Some(Err(o)) => Err(o.code()),
                    Some(Ok(p)) => append(
                        broker,
                        ctx,
                        p,
                        &t.log_config,
                        req.transactional_id.as_deref().map(|s| s.as_str()),
                        pd.records.as_deref(),
                    ),
                },
            };
            match outcome {
                Ok((base, next, start)) => {
                    resp.base_offset = base;
                    if ctx.version >= 5 {
                        resp.log_start_offset = start;
                    }
                    if let Ok(Ok(t)) = &topic {
                        if let Some(Ok(p)) = t.partition(pd.index) {
                            if broker.must_fsync(req.acks) {
                                to_sync.push((p.clone(), next, responses.len(), partitions.len()));
                            }
                        }
                    }
                }
                Err(code) => resp.error_code = code,
            }
            partitions.push(resp);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(sb(name)))
                .with_partition_responses(partitions),
        );
    }
    // The request's timeout bounds the wait for durability (a stalled disk must not
    // hold the request, and its share of the request memory, forever): past it the
    // answer is REQUEST_TIMED_OUT, as Kafka's for acks not reached in time; the batch
    // stays appended, and an idempotent retry is answered as a duplicate.
    let ack_deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(req.timeout_ms.max(1000) as u64);
    // Every partition's wait at once (Apache's DelayedProduce waits for all of them
    // together): one after another, the answer took the sum of the partitions' fsyncs,
    // and the later ones timed out though each fsync alone was in time.
    let waits = to_sync.iter().map(|(partition, next, ti, pi)| async move {
        let code = match tokio::time::timeout_at(ack_deadline, partition.wait_durable(*next)).await {
            Ok(Ok(())) => return None,
            Ok(Err(e)) => {
                warn!(topic = %partition.topic, partition = partition.index, error = %e, code = e.code(), "append not confirmed durable here; not acknowledging it");
                e.code()
            }
            Err(_) => {
                warn!(topic = %partition.topic, partition = partition.index, timeout_ms = req.timeout_ms, "fsync not done within the request's timeout; answering REQUEST_TIMED_OUT");
                ResponseError::RequestTimedOut.code()
            }
        };
        Some((*ti, *pi, code))
    });
    for (ti, pi, code) in futures_util::future::join_all(waits).await.into_iter().flatten() {
        let r = &mut responses[ti].partition_responses[pi];
        r.error_code = code;
        r.base_offset = -1;
    }
    // A broker paused or cut off while this request was served may have lost its
    // partitions meanwhile, its writes landing where the new leader never reads (and,
    // on NFS, its fsync finishing only after the new leader recovered the log): what
    // it appended is not acknowledged. The client retries at the new leader.
    if !broker.still_fresh_since(stepdowns) {
        for t in responses.iter_mut() {
            for r in t.partition_responses.iter_mut().filter(|r| r.error_code == 0) {
                warn!(
                    topic = %t.name.0,
                    partition = r.index,
                    "the lease went stale while the request was served; not acknowledging the append"
                );
                r.error_code = ResponseError::NotLeaderOrFollower.code();
                r.base_offset = -1;
            }
        }
    }
    ProduceResponse::default().with_responses(responses)
}

/// Validates and appends one partition's records: (base offset, next offset, log start).
fn append(
    broker: &Broker,
    ctx: &RequestContext,
    partition: &Partition,
    log_config: &kaas_core::log::LogConfig,
    transactional_id: Option<&str>,
    records: Option<&[u8]>,
) -> Result<(i64, i64, i64), i16> {
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        warn!(peer = %ctx.peer, topic = %partition.topic, partition = partition.index, "produce request without records");
        return Err(ResponseError::CorruptMessage.code());
    };
    let headers = match kaas_core::log::validate_records(records, log_config.max_message_bytes) {
        Ok(h) => h,
        Err(e) => {
            warn!(peer = %ctx.peer, client = %ctx.client_id, topic = %partition.topic, partition = partition.index, error = %e, "rejected produce batch");
            return Err(match e {
                LogError::TooLarge { .. } => ResponseError::MessageTooLarge.code(),
                LogError::Batch(
                    kaas_core::batch::BatchError::InconsistentCount { .. }
                    | kaas_core::batch::BatchError::RecordsDoNotMatchCount { .. }
                    | kaas_core::batch::BatchError::SpanTooWide { .. }
                    | kaas_core::batch::BatchError::UnknownCodec { .. }
                    | kaas_core::batch::BatchError::MalformedRecord { .. },
                ) => ResponseError::InvalidRecord.code(),
                _ => ResponseError::CorruptMessage.code(),
            });
        }
    };
    if headers.iter().any(|h| h.is_control()) {
        warn!(peer = %ctx.peer, client = %ctx.client_id, topic = %partition.topic, partition = partition.index, "rejected a control batch from a client");
        return Err(ResponseError::InvalidRecord.code());
    }
    if log_config.compact {
        // As Apache: a compacted topic takes only records with a key.
        let mut at = 0;
        for h in &headers {
            let bytes = &records[at..at + h.total_len()];
            at += h.total_len();
            // Decompresses (up to 64 MiB): off the runtime's workers.
            match crate::blocking::off_worker(|| kaas_core::cleaner::all_records_keyed(bytes, h)) {
                Ok(true) => {}
                Ok(false) => {
                    warn!(peer = %ctx.peer, client = %ctx.client_id, topic = %partition.topic, partition = partition.index, "rejected records without a key for a compacted topic");
                    return Err(ResponseError::InvalidRecord.code());
                }
                Err(e) => {
                    warn!(peer = %ctx.peer, client = %ctx.client_id, topic = %partition.topic, partition = partition.index, error = %e, "rejected a batch whose records cannot be read");
                    return Err(ResponseError::CorruptMessage.code());
                }
            }
        }
    }
    // The one copy on the produce path: the request buffer is shared and immutable,
    // and the base offsets must be written into the bytes we store.
    let mut owned = BytesMut::from(records);
    match broker.append(partition, &mut owned, &headers, transactional_id) {
        Ok((AppendOutcome::Appended(info), log_start)) => {
            let counters = crate::metrics::metrics().topic(&partition.topic);
            counters.bytes_in.inc_by(owned.len() as u64);
            counters
                .records_in
                .inc_by(headers.iter().map(|h| h.record_count.max(0) as u64).sum());
            Ok((info.base_offset, info.next_offset, log_start))
        }
        Ok((
            AppendOutcome::Duplicate {
                base_offset,
                last_offset,
            },
            log_start,
        )) => {
            debug!(topic = %partition.topic, partition = partition.index, base_offset, "duplicate batch answered from the producer window");
            Ok((base_offset, last_offset + 1, log_start))
        }
        Err(AppendRejected::Txn(e)) => {
            debug!(peer = %ctx.peer, topic = %partition.topic, partition = partition.index, transactional_id = transactional_id.unwrap_or(""), error = %e, "transactional batch outside an ongoing transaction");
            Err(match e.code() {
                90 => ResponseError::InvalidProducerEpoch.code(),
                code => code,
            })
        }
        Err(AppendRejected::NotLeader) => {
            debug!(topic = %partition.topic, partition = partition.index, "produce refused: the partition was let go meanwhile");
            Err(ResponseError::NotLeaderOrFollower.code())
        }
        Err(AppendRejected::Unled(e)) => Err(e.code()),
        Err(AppendRejected::LeaseExpired) => {
            warn!(topic = %partition.topic, partition = partition.index, "produce refused: this broker's lease is not renewed");
            Err(ResponseError::NotLeaderOrFollower.code())
        }
        Err(AppendRejected::Append(AppendError::Sequence(e))) => {
            debug!(peer = %ctx.peer, topic = %partition.topic, partition = partition.index, error = %e, "rejected produce batch");
            Err(match e {
                SequenceError::StaleEpoch { .. } => ResponseError::InvalidProducerEpoch.code(),
                SequenceError::OutOfOrder { .. } => ResponseError::OutOfOrderSequenceNumber.code(),
                SequenceError::TransactionOpen { .. } => ResponseError::InvalidTxnState.code(),
                SequenceError::NoSequence { .. } => ResponseError::InvalidRecord.code(),
            })
        }
        Err(AppendRejected::Append(AppendError::DuplicateInMultiBatch)) => Err(ResponseError::InvalidRecord.code()),
        Err(AppendRejected::Append(AppendError::Log(e))) => {
            warn!(topic = %partition.topic, partition = partition.index, error = %e, "append failed");
            Err(ResponseError::KafkaStorageError.code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker, ctx, peer_lease, taken_over};
    use kaas_core::batch::build_batch;
    use kaas_core::topic::PartitionOwner;
    use kaas_core::txn::TopicPartition;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, TopicName, TransactionalId};

    fn request(tid: Option<&str>, batch: Vec<u8>) -> ProduceRequest {
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_transactional_id(tid.map(|t| TransactionalId(sb(t))))
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(sb("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(bytes::Bytes::from(batch)))])])
    }

    fn code(r: &ProduceResponse) -> i16 {
        r.responses[0].partition_responses[0].error_code
    }

    #[tokio::test]
    async fn a_transactional_batch_outside_an_ongoing_transaction_is_invalid_txn_state() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let (pid, epoch) = b.txn.init_producer_id(&b, "tx", 60_000, (-1, -1)).await.unwrap();
        let batch = || build_batch(0, 1, Some((pid, epoch, 0)), 0x10, &[(None, Some(b"v"))]);
        let c = ctx(ApiKey::Produce, 9);
        // Not added to the transaction yet: refused, nothing written.
        assert_eq!(code(&handle(&b, &c, request(Some("tx"), batch())).await), 48);
        assert_eq!(code(&handle(&b, &c, request(None, batch())).await), 48);
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        b.txn.add(&b, "tx", pid, epoch, &[tp], &[]).await.unwrap();
        assert_eq!(code(&handle(&b, &c, request(Some("tx"), batch())).await), 0);
        // A client may not write control batches.
        let marker = kaas_core::batch::build_control_batch(pid, epoch, true, 0, 1);
        assert_eq!(
            code(&handle(&b, &c, request(Some("tx"), marker)).await),
            ResponseError::InvalidRecord.code()
        );
    }

    /// Issue 25 item 1: an acks=all answer waits for a check through the volume, not
    /// only the fsync. A leader frozen with its clock (a paused VM) still thinks its
    /// lease fresh; another broker took the partition over meanwhile (stole
    /// `owner.lock`, recorded a new leader epoch). Its next append is not
    /// acknowledged, and its next volume sync stops serving the partition.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_whose_partition_was_taken_over_acknowledges_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let batch = || build_batch(0, 1, None, 0, &[(None, Some(b"v"))]);
        let c = ctx(ApiKey::Produce, 9);
        assert_eq!(code(&handle(&b, &c, request(None, batch())).await), 0);
        let me = b.config.broker_id;
        let epoch = b.partition_leadership("t", 0).unwrap().1;

        // Broker 7 takes the partition over, as `open_partition` does.
        let (stolen, mut owner) = taken_over(&b, "t", 0, 7);
        let path = PartitionOwner::path(&b.volume, "t", 0);

        assert!(b.lease_fresh(), "by its own clock nothing happened");
        assert_eq!(
            code(&handle(&b, &c, request(None, batch())).await),
            ResponseError::NotLeaderOrFollower.code(),
            "appended, fsynced, but no longer led here: not acknowledged"
        );
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", 0), None, "not led here; broker 7 has no lease");
        assert_eq!(
            code(&handle(&b, &c, request(None, batch())).await),
            ResponseError::NotLeaderOrFollower.code()
        );

        // Broker 7 lets it go: this broker takes it back at a new leader epoch, with
        // the acknowledged record.
        owner.released = true;
        owner.write(&path).unwrap();
        drop(stolen);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leadership("t", 0), Some((me, epoch + 2)));
        assert_eq!(code(&handle(&b, &c, request(None, batch())).await), 0);
    }

    /// Producer "tx" with a transaction open on t-0: one batch of `value` written there.
    async fn one_open_transaction(b: &Arc<Broker>, value: &[u8]) -> (TopicPartition, i64, i16) {
        let (pid, epoch) = b.txn.init_producer_id(b, "tx", 60_000, (-1, -1)).await.unwrap();
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        b.txn
            .add(b, "tx", pid, epoch, std::slice::from_ref(&tp), &[])
            .await
            .unwrap();
        let batch = build_batch(0, 1, Some((pid, epoch, 0)), 0x10, &[(None, Some(value))]);
        let c = ctx(ApiKey::Produce, 9);
        assert_eq!(code(&handle(b, &c, request(Some("tx"), batch)).await), 0);
        (tp, pid, epoch)
    }

    /// Topic t, one partition, with these topic configs.
    async fn create_t(b: &Broker, configs: &[(&str, &str)]) {
        let configs = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        b.create_topic("t", 1, configs).await.unwrap();
    }

    /// How many segment files partition t-0 has on the volume.
    fn log_segments(b: &Broker) -> usize {
        std::fs::read_dir(b.volume.partition_dir("t", 0))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".log"))
            .count()
    }

    /// A leader frozen with its clock and deposed meanwhile, whose next append needs
    /// a new segment, creates none: the segment would be created by path at its own
    /// log end, inside its successor's segment, and the next open of the partition
    /// would end the successor's segment there, cutting its acknowledged records.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_whose_append_would_roll_creates_no_segment() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let configs = [("segment.bytes".to_string(), "100".to_string())].into_iter().collect();
        b.create_topic("t", 1, configs).await.unwrap();
        let batch = || build_batch(0, 1, None, 0, &[(None, Some(&[7u8; 80][..]))]);
        let c = ctx(ApiKey::Produce, 9);
        assert_eq!(code(&handle(&b, &c, request(None, batch())).await), 0);
        assert_eq!(log_segments(&b), 1);

        // Broker 7 takes the partition over and opens the gate, as `open_partition` does.
        let (mut stolen, _owner) = taken_over(&b, "t", 0, 7);
        stolen.open_gate();
        assert!(b.lease_fresh(), "by its own clock nothing happened");
        assert_eq!(
            code(&handle(&b, &c, request(None, batch())).await),
            ResponseError::NotLeaderOrFollower.code(),
            "the append needs a roll, and the roll finds the partition taken over"
        );
        assert_eq!(log_segments(&b), 1, "no segment created by the deposed leader");
        assert_eq!(
            code(&handle(&b, &c, request(None, batch())).await),
            ResponseError::NotLeaderOrFollower.code(),
            "retired here"
        );
        assert_eq!(log_segments(&b), 1);
    }

    /// The same for a marker (a late notice or queue entry reaching a deposed leader
    /// that still believes it leads): no segment created, the marker not written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_writing_a_marker_that_would_roll_creates_no_segment() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let configs = [("segment.bytes".to_string(), "100".to_string())].into_iter().collect();
        b.create_topic("t", 1, configs).await.unwrap();
        let (tp, pid, epoch) = one_open_transaction(&b, &[7u8; 80]).await;
        assert_eq!(log_segments(&b), 1);

        let (mut stolen, _owner) = taken_over(&b, "t", 0, 7);
        stolen.open_gate();
        let written = b.write_marker(&tp, pid, epoch, true).await;
        assert!(written.is_err(), "deposed: no marker written here: {written:?}");
        assert_eq!(log_segments(&b), 1, "no segment created by the deposed leader");
    }

    /// The same for an ABORT marker that needs no roll: its `.txnindex` entry is
    /// written by path, into the index of the segment holding the marker by this
    /// broker's idea of the log. A successor that took over an empty active segment
    /// replaces its files at the same base, so a deposed leader's entry lands in the
    /// successor's own index, which the next open keeps (its limit is the successor's
    /// log end). Listed to read_committed consumers beside the successor's entry for
    /// the same abort (at another offset: only identical entries are merged at open),
    /// a second entry of the producer would make a consumer that takes one entry per
    /// aborted transaction (librdkafka, by reading) treat that producer's next
    /// transaction as aborted too. So the marker is written only while this broker
    /// leads the partition, as a roll is.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_writing_an_abort_marker_writes_no_txnindex_entry() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let (tp, pid, epoch) = one_open_transaction(&b, b"v").await;
        let pdir = b.volume.partition_dir("t", 0);
        assert!(kaas_core::log::txn_index::read_txn_indexes(&pdir).unwrap().is_empty());

        let (mut stolen, _owner) = taken_over(&b, "t", 0, 7);
        stolen.open_gate();
        assert!(b.lease_fresh(), "by its own clock nothing happened");
        let written = b.write_marker(&tp, pid, epoch, false).await;
        assert!(written.is_err(), "deposed: no marker written here: {written:?}");
        assert_eq!(
            kaas_core::log::txn_index::read_txn_indexes(&pdir).unwrap(),
            vec![],
            "no aborted-transaction entry written into the successor's files"
        );
    }

    /// CI's kin of the slot lock stall: a leader stopped (SIGSTOP, a frozen VM) after
    /// marking `owner.json` released and before its `owner.lock` went with the last
    /// reference kept its partition from everyone for the whole pause — a released
    /// leadership's lock was never taken over, however dead its broker. It is now,
    /// once that broker's lease is confirmed dead, at a new leader epoch and with
    /// every acknowledged record.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_stopped_between_its_release_and_its_unlock_is_taken_over_once_dead() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let batch = || build_batch(0, 1, None, 0, &[(None, Some(b"v"))]);
        let c = ctx(ApiKey::Produce, 9);
        assert_eq!(code(&handle(&b, &c, request(None, batch())).await), 0);
        let me = b.config.broker_id;
        let epoch = b.partition_leadership("t", 0).unwrap().1;
        // Broker 7 took it over, then let it go — and stopped before its unlock.
        let (mut stopped, mut owner) = taken_over(&b, "t", 0, 7);
        stopped.open_gate();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", 0), None);
        owner.released = true;
        owner.write(&PartitionOwner::path(&b.volume, "t", 0)).unwrap();
        let mut lease = peer_lease(7, "stopped", kaas_core::now_ms());
        lease.write(&b.volume).unwrap();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", 0), None, "broker 7 is not known dead yet");
        // Its lease says it is dead (stepped down: not renewed in time).
        lease.stepped_down_ms = Some(lease.heartbeat_ms);
        lease.write(&b.volume).unwrap();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leadership("t", 0), Some((me, epoch + 2)));
        assert_eq!(code(&handle(&b, &c, request(None, batch())).await), 0);
        let partition = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
        assert_eq!(
            partition.state().log.log_end_offset(),
            2,
            "the acknowledged record is kept"
        );
        drop(stopped);
    }

    /// ownership_sim seed 2376: a broker thawed from a freeze (a paused VM: no time
    /// passed by its clocks) kept the live set it had before, which lacked a broker
    /// that renewed all along; that broker's `owner.lock` had lapsed (NFS), and the
    /// thawed one took its partition while it still led it. A last owner that did
    /// not let go counts as gone only while its lease, read again, is the one the
    /// live set was built from.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stale_live_set_never_hands_over_the_partition_of_a_broker_that_renewed_since() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let epoch = b.partition_leadership("t", 0).unwrap().1;
        // Broker 7 leads it; its lock lapsed (freed, owner.json not released).
        let (lapsed, _) = taken_over(&b, "t", 0, 7);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", 0), None);
        drop(lapsed);
        let mut lease = peer_lease(7, "renewing", kaas_core::now_ms());
        let observe = |lease: &kaas_core::broker::BrokerLease| {
            let timeout = b.config.broker_session_timeout_ms;
            b.lease_tracker
                .lock()
                .unwrap()
                .observe([lease], kaas_core::now_ms(), std::time::Instant::now(), timeout);
        };
        // Seen once; this broker's live set (never refreshed here: as if frozen since)
        // does not have broker 7. Broker 7 renews meanwhile.
        lease.write(&b.volume).unwrap();
        observe(&lease);
        assert!(!b.live_brokers().contains_key(&7));
        lease.heartbeat_ms += 1_000;
        lease.write(&b.volume).unwrap();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(
            b.partition_leader("t", 0),
            None,
            "broker 7 renewed since the live set was built: not taken"
        );
        // The lease as last seen, and broker 7 not live: taken.
        observe(&lease);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leadership("t", 0), Some((me, epoch + 2)));
    }

    /// A broker restarted after a kill -9 opens the volume (its lease marked
    /// `opening_ms`) and has not reached this partition yet: its `owner.lock` is free,
    /// its `owner.json` still names it. Its peer, which counts it alive but not among
    /// the brokers that serve, takes nothing from it, tells clients of no leader (it
    /// answers nothing yet), and routes the partition's markers to it (a queue entry
    /// it applies once it serves). Counted neither alive nor serving — the live set
    /// alone — the free lock would have been taken.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_partition_of_a_broker_opening_the_volume_is_kept_for_it_and_routed_to_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let epoch = b.partition_leadership("t", 0).unwrap().1;
        // Broker 7 led it, died, and its new process is opening the volume.
        let (lock, _) = taken_over(&b, "t", 0, 7);
        tokio::task::block_in_place(|| b.sync_with_volume());
        drop(lock);
        let mut lease = peer_lease(7, "opening", kaas_core::now_ms());
        lease.opening_ms = Some(lease.heartbeat_ms);
        lease.write(&b.volume).unwrap();
        b.lease_tracker.lock().unwrap().observe(
            [&lease],
            kaas_core::now_ms(),
            std::time::Instant::now(),
            b.config.broker_session_timeout_ms,
        );
        let mut live = b.live_brokers();
        live.insert(7, crate::listeners::Endpoints::of_lease(&lease));
        b.set_live_and_opening(live, vec![7]);
        assert!(!b.live_brokers().contains_key(&7), "routed nothing");
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(
            b.partition_leader("t", 0),
            Some(7),
            "still broker 7's: its markers are queued for it"
        );
        assert_eq!(
            b.partition_leadership_for_clients("t", 0),
            None,
            "no leader for clients yet"
        );
        // The same view without the mark (broker 7 simply not live): the free lock is taken.
        b.set_live_brokers(b.live_brokers());
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leadership("t", 0), Some((me, epoch + 2)));
    }

    /// A dead broker's partition that the rendezvous would give to a peer still
    /// opening the volume was never tried by the brokers that serve: the volume sync
    /// counted the opening peer among the owners, and the opening peer takes nothing
    /// more once its open began (only what was free when it started) until it serves
    /// (minutes on big logs) — the partition had no leader all that time (found by a
    /// review of partition leadership). It is taken meanwhile by its
    /// owner over the serving brokers, and handed over once the peer serves.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_brokers_partition_is_led_meanwhile_while_its_next_owner_opens_the_volume() {
        use kaas_core::ownership::{owner, partition_key};
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 16, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let i = (0..16)
            .find(|i| owner(&partition_key("t", *i), &[me, 8]) == Some(8))
            .expect("a partition broker 8 would own");
        // Broker 7 leads it.
        let (lock, _) = taken_over(&b, "t", i, 7);
        let mut seven = peer_lease(7, "seven", kaas_core::now_ms());
        seven.write(&b.volume).unwrap();
        let observe = |leases: &[&kaas_core::broker::BrokerLease]| {
            b.lease_tracker.lock().unwrap().observe(
                leases.iter().copied(),
                kaas_core::now_ms(),
                std::time::Instant::now(),
                b.config.broker_session_timeout_ms,
            );
        };
        observe(&[&seven]);
        let mut live = b.live_brokers();
        live.insert(7, crate::listeners::Endpoints::of_lease(&seven));
        b.set_live_brokers(live);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", i), Some(7));
        // Broker 7 stops (its lock let go, its lease says so) while broker 8 opens the volume.
        drop(lock);
        seven.stopped_ms = Some(kaas_core::now_ms());
        seven.write(&b.volume).unwrap();
        let mut eight = peer_lease(8, "eight", kaas_core::now_ms());
        eight.opening_ms = Some(eight.heartbeat_ms);
        eight.write(&b.volume).unwrap();
        observe(&[&seven, &eight]);
        let mut live = b.live_brokers();
        live.remove(&7);
        live.insert(8, crate::listeners::Endpoints::of_lease(&eight));
        b.set_live_and_opening(live, vec![8]);
        for _ in 0..3 {
            tokio::task::block_in_place(|| b.sync_with_volume());
        }
        assert_eq!(
            b.partition_leader("t", i),
            Some(me),
            "led meanwhile by its owner over the brokers that serve"
        );
        // Broker 8 serves: the partition is handed over to it.
        let mut live = b.live_brokers();
        live.insert(8, crate::listeners::Endpoints::of_lease(&eight));
        b.set_live_and_opening(live, vec![]);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", i), None, "handed over");
    }

    /// A broker whose copy of a partition is broken (its `owner.json` unreadable when
    /// it picked the topic up) kept it broken though a later attempt found it led
    /// elsewhere: its Metadata said KAFKA_STORAGE_ERROR, no leader, for a partition
    /// another broker served, until a restart (found by a review of topic
    /// lifecycle).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_broken_partition_found_led_elsewhere_heals() {
        use kaas_core::topic::TopicMeta;
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let seven = peer_lease(7, "seven", kaas_core::now_ms());
        seven.write(&b.volume).unwrap();
        b.lease_tracker.lock().unwrap().observe(
            [&seven],
            kaas_core::now_ms(),
            std::time::Instant::now(),
            b.config.broker_session_timeout_ms,
        );
        let mut live = b.live_brokers();
        live.insert(7, crate::listeners::Endpoints::of_lease(&seven));
        b.set_live_brokers(live);
        let meta = TopicMeta::new("u", 1, Default::default(), kaas_core::now_ms());
        assert!(meta.create(&b.volume).unwrap());
        let path = PartitionOwner::path(&b.volume, "u", 0);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{ not json").unwrap();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert!(
            matches!(b.topic("u").unwrap().partition(0), Some(Err(o)) if !o.elsewhere),
            "broken here"
        );
        // Broker 7 leads it (its owner.json readable again, its lock held).
        let _held = PartitionOwner::lock(&b.volume, "u", 0).unwrap();
        PartitionOwner {
            version: 1,
            broker: 7,
            leader_epoch: 1,
            released: false,
            updated_ms: kaas_core::now_ms(),
            topic_id: Some(meta.topic_id),
        }
        .write(&path)
        .unwrap();
        for _ in 0..=crate::cluster::BROKEN_RETRY_ROUNDS {
            tokio::task::block_in_place(|| b.sync_with_volume());
        }
        assert_eq!(b.partition_leader("u", 0), Some(7), "its leader named again");
    }

    /// Issue 25 item 7: the volume sync tries only the partitions an attempt could
    /// take — those this broker is the rendezvous owner of, and those whose
    /// `owner.json` may still name a leadership of this broker id that did not let
    /// go — so an idle broker reads no other broker's `owner.json` each second (the
    /// old code tried every partition led elsewhere at every sync).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_volume_sync_leaves_alone_the_partitions_assigned_to_others() {
        use kaas_core::ownership::{owner, partition_key};
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 8, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let live = [me, 7];
        let theirs: Vec<i32> = (0..8)
            .filter(|i| owner(&partition_key("t", *i), &live) == Some(7))
            .collect();
        let mine: Vec<i32> = (0..8).filter(|i| !theirs.contains(i)).collect();
        assert!(!theirs.is_empty() && !mine.is_empty());
        // Broker 7 joins: this broker hands its partitions over (and tries each once
        // more, as it let them go).
        let mut peers = std::collections::BTreeMap::new();
        peers.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 9093));
        b.set_live_brokers(peers);
        tokio::task::block_in_place(|| b.sync_with_volume());
        for i in &theirs {
            assert_eq!(b.partition_leader("t", *i), None, "handed over");
        }
        let attempts = || b.take_over_attempts.load(std::sync::atomic::Ordering::Relaxed);
        let before = attempts();
        for _ in 0..3 {
            tokio::task::block_in_place(|| b.sync_with_volume());
        }
        assert_eq!(attempts(), before, "nothing tried: nothing could be taken");
        for i in &mine {
            assert_eq!(b.partition_leader("t", *i), Some(me));
        }
    }

    /// ...and a partition whose `owner.json` still names a leadership of this broker
    /// id that did not let go (it stepped down) is tried every round wherever it is
    /// assigned: the placement rule gives it back to this broker only (the broker it
    /// is assigned to waits for this live one), so skipping it would strand it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_partition_left_under_this_brokers_unreleased_leadership_is_taken_back_wherever_assigned() {
        use kaas_core::ownership::{owner, partition_key};
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 8, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let i = (0..8)
            .find(|i| owner(&partition_key("t", *i), &[me, 7]) == Some(7))
            .unwrap();
        let epoch = b.partition_leadership("t", i).unwrap().1;
        // This broker steps down (its lease went stale): it lets everything go
        // without writing, so owner.json still names its leadership.
        *b.lease_renewed_at.lock().unwrap() = std::time::Instant::now().checked_sub(std::time::Duration::from_secs(60));
        tokio::task::block_in_place(|| b.release_partitions("lease not renewed in time"));
        let left = PartitionOwner::read(&PartitionOwner::path(&b.volume, "t", i)).unwrap();
        assert!(left.broker == me && !left.released);
        // Back in service, with broker 7 live: the partition is assigned to broker 7,
        // which waits while owner.json names a live broker's leadership.
        *b.lease_renewed_at.lock().unwrap() = Some(std::time::Instant::now());
        let mut peers = std::collections::BTreeMap::new();
        peers.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 9093));
        b.set_live_brokers(peers);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leadership("t", i), Some((me, epoch + 1)), "taken back");
        // Then handed over to broker 7 properly, and no longer tried.
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", i), None);
        let released = PartitionOwner::read(&PartitionOwner::path(&b.volume, "t", i)).unwrap();
        assert!(released.released && released.broker == me);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert!(!b.must_revisit(b.topic("t").unwrap().meta.topic_id, i));
    }

    /// Review of item 7: an attempt records this broker's leadership in `owner.json`
    /// before it recovers the log. When the recovery fails, that leadership is let
    /// go again, so the broker the partition is assigned to may take it (no broker
    /// takes a live broker's leadership that did not let go); before, the partition
    /// stayed offline for as long as this broker lived once assigned elsewhere.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_take_over_whose_recovery_failed_lets_its_leadership_go_again() {
        use kaas_core::ownership::{owner, partition_key};
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 8, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let i = (0..8)
            .find(|i| owner(&partition_key("t", *i), &[me, 7]) == Some(7))
            .unwrap();
        // Broker 7 took the partition, then let it go; this broker (the only live
        // one) is its owner and takes it — but the recovery fails (an unreadable
        // snapshot).
        let (mut taken, mut owner) = taken_over(&b, "t", i, 7);
        taken.open_gate();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", i), None);
        owner.released = true;
        owner.write(&PartitionOwner::path(&b.volume, "t", i)).unwrap();
        let snapshot = b.volume.partition_dir("t", i).join("producer-state.snapshot");
        std::fs::write(&snapshot, b"not json").unwrap();
        drop(taken);
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", i), None, "the recovery failed");
        let left = PartitionOwner::read(&PartitionOwner::path(&b.volume, "t", i)).unwrap();
        assert_eq!(left.broker, me, "its leadership was recorded");
        assert!(left.released, "and let go again: {left:?}");
        assert!(!b.must_revisit(b.topic("t").unwrap().meta.topic_id, i));
        // Assigned to broker 7 now: this broker leaves it to broker 7.
        let mut peers = std::collections::BTreeMap::new();
        peers.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 9093));
        b.set_live_brokers(peers);
        std::fs::remove_file(&snapshot).unwrap();
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", i), None);
    }

    /// Issue 25 item 1, for answers that follow no append: "no marker to write here"
    /// (the producer state in memory knows nothing open) and DeleteRecords count only
    /// once `owner.json` confirms the leadership; a deposed leader moves no log start
    /// in its successor's files.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_neither_judges_markers_nor_deletes_records() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let c = ctx(ApiKey::Produce, 9);
        for _ in 0..3 {
            let batch = build_batch(0, 1, None, 0, &[(None, Some(b"v"))]);
            assert_eq!(code(&handle(&b, &c, request(None, batch)).await), 0);
        }
        let _stolen = taken_over(&b, "t", 0, 7);

        use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
        let delete_records = |offset: i64| {
            let req = kafka_protocol::messages::DeleteRecordsRequest::default().with_topics(vec![
                DeleteRecordsTopic::default()
                    .with_name(TopicName(sb("t")))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(offset)]),
            ]);
            let b = b.clone();
            async move {
                let answer = crate::handlers::dispatch(
                    &b,
                    &ctx(ApiKey::DeleteRecords, 2),
                    crate::handlers::RequestKind::DeleteRecords(req),
                )
                .await;
                match answer {
                    crate::handlers::ResponseKind::DeleteRecords(r) => r.topics[0].partitions[0].error_code,
                    other => panic!("{other:?}"),
                }
            }
        };
        // Past its own log end (3), perhaps not past its successor's: not
        // OFFSET_OUT_OF_RANGE, which Java's admin client does not retry (review
        // 2026-12-06).
        assert_eq!(delete_records(10).await, ResponseError::NotLeaderOrFollower.code());
        assert_eq!(delete_records(2).await, ResponseError::NotLeaderOrFollower.code());
        assert!(
            !b.volume.partition_dir("t", 0).join("log-start.json").exists(),
            "no log start moved in the new leader's files"
        );

        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        let judged = b.write_marker(&tp, 4242, 0, true).await;
        assert!(
            judged.is_err(),
            "nothing open here, by a memory that is stale: {judged:?}"
        );
    }

    /// Issue 25 item 1 (the gap rule 1 left): a change that removes files a successor
    /// reads — retention, DeleteRecords, a cleaner's swap — is made under the
    /// partition's `owner.gate` with the `owner.json` read, where every take-over
    /// records its leadership. Retention checked only the broker's own lease, which a
    /// frozen clock keeps fresh: a deposed leader deleted its successor's segments.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_deletes_nothing_and_nothing_is_deleted_while_the_gate_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        create_t(&b, &[("segment.bytes", "100"), ("retention.ms", "1")]).await;
        let c = ctx(ApiKey::Produce, 9);
        for _ in 0..4 {
            let batch = build_batch(0, 1, None, 0, &[(None, Some(b"an old record, long enough to roll"))]);
            assert_eq!(code(&handle(&b, &c, request(None, batch)).await), 0);
        }
        let pdir = b.volume.partition_dir("t", 0);
        let before = log_segments(&b);
        assert!(before >= 3, "{before} segments");
        let delete_records = || async {
            use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
            let req = kafka_protocol::messages::DeleteRecordsRequest::default().with_topics(vec![
                DeleteRecordsTopic::default()
                    .with_name(TopicName(sb("t")))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(2)]),
            ]);
            match crate::handlers::dispatch(
                &b,
                &ctx(ApiKey::DeleteRecords, 2),
                crate::handlers::RequestKind::DeleteRecords(req),
            )
            .await
            {
                crate::handlers::ResponseKind::DeleteRecords(r) => r.topics[0].partitions[0].error_code,
                other => panic!("{other:?}"),
            }
        };
        // Another process holds the gate (a taker recording its leadership).
        let gate = kaas_core::fsutil::try_lock_exclusive(&pdir.join("owner.gate"))
            .unwrap()
            .unwrap();
        tokio::task::block_in_place(|| b.enforce_retention());
        assert_eq!(log_segments(&b), before, "nothing deleted while the gate is taken");
        assert_eq!(delete_records().await, ResponseError::KafkaStorageError.code());
        assert!(!pdir.join("log-start.json").exists());
        drop(gate);
        // Taken over while this broker was frozen (its lease still fresh by its clock).
        let _stolen = taken_over(&b, "t", 0, 7);
        tokio::task::block_in_place(|| b.enforce_retention());
        assert_eq!(
            log_segments(&b),
            before,
            "a deposed leader deletes nothing in its successor's files"
        );
    }

    /// Records produced with acks=1 wait for the next flush before readers may read
    /// them (the high watermark, `confirmed_end`); a roll seals them in a segment
    /// first. Retention deleted such a segment (`retention.bytes` small, or old
    /// producer timestamps past `retention.ms`), which put the log start past the
    /// high watermark — ListOffsets answered earliest above latest, and a consumer at
    /// the latest offset got OFFSET_OUT_OF_RANGE again and again until the flush — and
    /// removed records no reader was ever given. As Apache, a segment goes only once
    /// the high watermark reached the next one's base.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retention_deletes_nothing_a_reader_has_not_been_allowed_to_read() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        create_t(&b, &[("segment.bytes", "100"), ("retention.bytes", "0")]).await;
        let c = ctx(ApiKey::Produce, 9);
        for _ in 0..6 {
            let batch = build_batch(0, 1, None, 0, &[(Some(b"k"), Some(b"a record long enough to roll"))]);
            assert_eq!(code(&handle(&b, &c, request(None, batch).with_acks(1)).await), 0);
        }
        let p = b.partitions().into_iter().find(|p| p.topic == "t").unwrap();
        let before = log_segments(&b);
        assert!(before >= 4, "{before} segments");
        let start = |p: &crate::registry::Partition| p.state().log.log_start_offset();
        assert!(p.confirmed_end() < p.log_end_offset(), "acks=1 waits for the flush");
        tokio::task::block_in_place(|| b.enforce_retention());
        assert!(
            start(&p) <= p.confirmed_end(),
            "log start {} past the high watermark {}",
            start(&p),
            p.confirmed_end()
        );
        // Once the flush made them readable, retention takes every sealed segment.
        p.wait_durable(p.log_end_offset()).await.unwrap();
        tokio::task::block_in_place(|| b.enforce_retention());
        assert_eq!(log_segments(&b), 1);
        assert!(start(&p) <= p.confirmed_end());
    }

    /// The partition gauges give the high watermark and last stable offset a consumer
    /// is given (Fetch, ListOffsets), not the log end: they said the log end, past
    /// what any consumer could read while acks=1 records waited for the flush.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_partition_gauges_give_the_high_watermark_readers_are_given() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let c = ctx(ApiKey::Produce, 9);
        let batch = build_batch(0, 1, None, 0, &[(Some(b"k"), Some(b"v")), (None, Some(b"w"))]);
        assert_eq!(code(&handle(&b, &c, request(None, batch).with_acks(1)).await), 0);
        let gauge = |b: &Broker| {
            let g = b.gauges();
            let p = g.partitions.iter().find(|p| p.topic == "t").unwrap();
            (p.high_watermark, p.last_stable_offset)
        };
        assert_eq!(gauge(&b), (0, 0), "acks=1 records are readable from the next flush");
        let p = b.partitions().into_iter().find(|p| p.topic == "t").unwrap();
        p.wait_durable(p.log_end_offset()).await.unwrap();
        assert_eq!(gauge(&b), (2, 2));
    }

    /// Retention and the log cleaner ran as separate tasks: a retention pass that
    /// deleted a front segment of a `compact,delete` partition while a cleaning pass
    /// read it dropped that pass (every pass rewrites from the log start), and once a
    /// pass took longer than the time between two deletions (a throttled cleaner, a
    /// short `segment.ms`) no pass ever installed. As Apache, where retention of a
    /// compacted log runs on the cleaner's thread, retention leaves a partition alone
    /// while it is being cleaned.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retention_waits_for_a_cleaning_pass_instead_of_dropping_it() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let configs = [
            ("segment.bytes", "100"),
            ("retention.ms", "1"),
            ("cleanup.policy", "compact,delete"),
        ];
        create_t(&b, &configs).await;
        let c = ctx(ApiKey::Produce, 9);
        for _ in 0..6 {
            let batch = build_batch(
                0,
                1,
                None,
                0,
                &[(Some(b"k"), Some(b"an old record, long enough to roll"))],
            );
            assert_eq!(code(&handle(&b, &c, request(None, batch)).await), 0);
        }
        let before = log_segments(&b);
        assert!(before >= 4, "{before} segments");
        let p = b.partitions().into_iter().find(|p| p.topic == "t").unwrap();
        let retention_ran = std::sync::atomic::AtomicBool::new(false);
        let installed = tokio::task::block_in_place(|| {
            b.clean_partition(&p, &|| {
                if !retention_ran.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    b.enforce_retention();
                }
                false
            })
        });
        assert!(retention_ran.load(std::sync::atomic::Ordering::SeqCst));
        assert!(installed, "the cleaning pass was dropped: retention ran under it");
        // And the cleaner runs what retention skipped as soon as its pass is done:
        // passes back to back would otherwise leave retention's ticks only the gaps
        // between them.
        assert!(
            log_segments(&b) < before,
            "retention ran with the pass's end, not at a later tick"
        );
    }

    /// Issue 25 item 1, with no write to find it out: the volume sync re-reads the
    /// `owner.json` of each partition led here, and stops serving one taken over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leader_taken_over_while_frozen_stops_serving_at_its_next_sync() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 2, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let (_stolen, owner) = taken_over(&b, "t", 0, 7);
        let path = PartitionOwner::path(&b.volume, "t", 0);
        assert_eq!(b.partition_leader("t", 0), Some(me), "nothing told it yet");
        tokio::task::block_in_place(|| b.sync_with_volume());
        assert_eq!(b.partition_leader("t", 0), None);
        assert_eq!(
            b.partition_leader("t", 1),
            Some(me),
            "the other partition is still led here"
        );
        assert_eq!(
            PartitionOwner::read(&path).unwrap(),
            owner,
            "the new leader's owner.json is left alone"
        );
    }

    /// Issue 25 item 7: an idle leader reads the `owner.json` of what it leads again
    /// only when its deposed notice changed (a taker leaves one after recording its
    /// leadership), or at the backstop — not every second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_leader_reads_its_owner_files_again_only_when_told_or_at_the_backstop() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 4, Default::default()).await.unwrap();
        let me = b.config.broker_id;
        let sync = || tokio::task::block_in_place(|| b.sync_with_volume());
        let rechecks = || b.leadership_rechecks.load(std::sync::atomic::Ordering::Relaxed);
        sync();
        let first = rechecks();
        for _ in 0..3 {
            sync();
        }
        assert_eq!(rechecks(), first, "nothing changed: no owner.json read again");
        // A taker that left no notice (it crashed first; its lock lapses later):
        // unnoticed until the backstop.
        let _stolen = PartitionOwner::acquire(&b.volume, "t", 0, Some(&|_: Option<&PartitionOwner>| true)).unwrap();
        let path = PartitionOwner::path(&b.volume, "t", 0);
        let mut owner = PartitionOwner::read(&path).unwrap();
        owner.broker = 7;
        owner.leader_epoch += 1;
        owner.write(&path).unwrap();
        sync();
        assert_eq!(b.partition_leader("t", 0), Some(me), "not told yet");
        b.deposed_watch.lock().unwrap().full_at =
            std::time::Instant::now().checked_sub(crate::cluster::LEADERSHIP_RECHECK);
        sync();
        assert_eq!(b.partition_leader("t", 0), None, "found at the backstop");
        // A taker that leaves the notice: found at the next sync.
        let (_stolen, _) = taken_over(&b, "t", 1, 7);
        sync();
        assert_eq!(b.partition_leader("t", 1), None, "told");
        assert_eq!(b.partition_leader("t", 2), Some(me));
        let notice = kaas_core::topic::DeposedNotice::read(&b.volume, me).unwrap();
        assert_eq!((notice.by, notice.topic.as_str(), notice.partition), (7, "t", 1));
        // An owner.json that cannot be read is read again at the next syncs, alone;
        // the others wait for a note or the backstop.
        std::fs::write(PartitionOwner::path(&b.volume, "t", 3), b"{ torn").unwrap();
        b.deposed_watch.lock().unwrap().full_at =
            std::time::Instant::now().checked_sub(crate::cluster::LEADERSHIP_RECHECK);
        sync();
        let after_full = rechecks();
        sync();
        sync();
        assert_eq!(rechecks(), after_full + 2, "only the unreadable one, once per sync");
        assert_eq!(b.partition_leader("t", 3), Some(me), "unknown: still served");
    }

    #[tokio::test]
    async fn a_corrupt_slot_file_refuses_its_ids_and_only_them() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let store = b.txn.store();
        let bad_slot = kaas_core::txn::slot_for("victim");
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.slot_path(bad_slot), b"{ torn").unwrap();
        let err = b
            .txn
            .init_producer_id(&b, "victim", 60_000, (-1, -1))
            .await
            .unwrap_err();
        assert_eq!(err.code(), 15, "COORDINATOR_NOT_AVAILABLE");
        assert!(err.to_string().contains(&format!("slot-{bad_slot}.json")), "{err}");
        let other = (0..100)
            .map(|i| format!("other-{i}"))
            .find(|t| kaas_core::txn::slot_for(t) != bad_slot)
            .unwrap();
        assert!(b.txn.init_producer_id(&b, &other, 60_000, (-1, -1)).await.is_ok());
        assert_eq!(
            std::fs::read(store.slot_path(bad_slot)).unwrap(),
            b"{ torn",
            "never overwritten"
        );
    }
}
