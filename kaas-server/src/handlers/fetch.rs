//! Fetch (key 1): whole stored batches from many partitions in one answer, honouring
//! `max_bytes` and `partition_max_bytes` (at least one batch overall, KIP-74), and
//! long-polling until `min_bytes` have arrived or `max_wait_ms` has passed. Fetch
//! sessions (KIP-227) are not kept: every answer has session id 0, which clients
//! take as "send full requests".

use super::{sb, RequestContext};
use crate::broker::{Broker, Partition};
use bytes::Bytes;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::log::LogError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest a Fetch waits for `min_bytes`, whatever it asks.
pub const MAX_WAIT_MS: u64 = 30_000;

pub const MIN: i16 = 4;
pub const MAX: i16 = 12;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: FetchRequest) -> FetchResponse {
    handle_counted(broker, ctx, req).await.0
}

/// [`handle`], and how many passes over its partitions it made.
async fn handle_counted(broker: &Arc<Broker>, ctx: &RequestContext, req: FetchRequest) -> (FetchResponse, usize) {
    // A long poll holds its request (and its share of the request memory budget):
    // capped, as clients ask for 500 ms and re-fetch anyway.
    let deadline = Instant::now() + Duration::from_millis((req.max_wait_ms.max(0) as u64).min(MAX_WAIT_MS));
    let mut appends = broker.subscribe_appends();
    let mut shutdown = ctx.shutdown.clone();
    // fetch.max.bytes caps what any request may ask for; a min_bytes no response can
    // reach waits only for what one response can carry.
    let max_bytes = (req.max_bytes.max(0) as usize).min(broker.config.fetch_max_bytes as usize);
    let min_bytes = (req.min_bytes.max(0) as usize).min(max_bytes);
    // READ on each topic, decided once for the whole long poll.
    let readable: Vec<bool> = req
        .topics
        .iter()
        .map(|t| {
            broker
                .authz
                .authorize(ctx, Operation::Read, ResourceType::Topic, &t.topic.0)
        })
        .collect();
    let mut passes = 0;
    let mut changes = reader_changes(broker, &req, &readable);
    loop {
        appends.borrow_and_update();
        passes += 1;
        let Gathered {
            mut responses,
            bytes,
            errors,
            unconfirmed,
            out_of_range,
        } = gather(broker, ctx.version, &req, &readable, max_bytes);
        // Records past a partition's confirmed end are not served yet: have them
        // flushed and confirmed, and look again once that is done.
        for p in unconfirmed {
            let broker = broker.clone();
            let flushed = p.clone();
            p.flush_for_readers(move || broker.wake_readers(Some(&flushed)));
        }
        let done = bytes >= min_bytes || errors || Instant::now() >= deadline || *shutdown.borrow();
        if done {
            // OFFSET_OUT_OF_RANGE sends a client to its auto.offset.reset: said only
            // while this broker still leads the partition, by its owner.json. A leader
            // paused with its clock and deposed meanwhile, not yet told by its volume
            // sync, would otherwise judge an offset its successor already wrote to
            // from its own, shorter log
            // (`a_deposed_leader_sends_a_fetch_past_its_end_to_the_new_leader`).
            for (ti, pi, p) in out_of_range {
                if let Err(e) = p.confirm_led().await {
                    tracing::debug!(topic = %p.topic, partition = p.index, error = %e, "a fetch past the log end of a partition this broker may no longer lead");
                    responses[ti].partitions[pi].error_code = e.code();
                }
            }
            return (FetchResponse::default().with_responses(responses), passes);
        }
        // Every append, marker and flush on this broker wakes every long poll: looked
        // at again only when one of this request's partitions (or the topics)
        // changed. A pass locks each partition and works out its last stable offset;
        // repeated for every append anywhere, idle consumers' polls kept the cores
        // busy (`a_long_poll_looks_again_only_when_its_partitions_change`). The
        // wake-up is marked seen before the counts are read, and every change is
        // counted before its wake-up: none is missed.
        loop {
            tokio::select! {
                _ = appends.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = shutdown.changed() => {}
            }
            appends.borrow_and_update();
            let now = reader_changes(broker, &req, &readable);
            if now != changes || Instant::now() >= deadline || *shutdown.borrow() {
                changes = now;
                break;
            }
        }
    }
}

/// The change counts of the partitions `req` reads (and of the topics), summed with
/// the partitions' addresses: a different sum means something a pass would see may
/// have changed.
fn reader_changes(broker: &Broker, req: &FetchRequest, readable: &[bool]) -> u64 {
    let mut sum = broker.topic_changes();
    for (ft, _) in req.topics.iter().zip(readable).filter(|(_, r)| **r) {
        let Ok(topic) = broker.topic(&ft.topic.0) else {
            continue;
        };
        for fp in &ft.partitions {
            if let Some(Ok(p)) = topic.partition(fp.partition) {
                // The partition's address too: one opened again (another object, its
                // count from 0), or gone, changes the sum.
                sum = sum
                    .wrapping_add(p.reader_changes())
                    .wrapping_add(Arc::as_ptr(p) as usize as u64);
            }
        }
    }
    sum
}

/// The offset after the last whole batch in `data`.
fn batch_end(data: &[u8]) -> Option<i64> {
    kaas_core::batch::HeaderIter::new(data)
        .last()
        .map(|(_, h)| h.next_offset())
}

/// What one pass over the requested partitions found ([`gather`]).
struct Gathered {
    responses: Vec<FetchableTopicResponse>,
    /// Record bytes in `responses`.
    bytes: usize,
    /// Whether any partition answers an error.
    errors: bool,
    /// The partitions holding records past their confirmed end.
    unconfirmed: Vec<Arc<Partition>>,
    /// The partitions answered OFFSET_OUT_OF_RANGE, by their place in `responses`.
    out_of_range: Vec<(usize, usize, Arc<Partition>)>,
}

/// One pass over the requested partitions, `max_bytes` of records at most.
fn gather(broker: &Broker, version: i16, req: &FetchRequest, readable: &[bool], max_bytes: usize) -> Gathered {
    // A broker whose own lease went stale may be deposed already (a peer may have
    // taken its partitions over and appended): it serves no reads, as it takes no
    // writes, until it renews. Judged once per pass (each long-poll look is one).
    let lease_fresh = broker.lease_fresh();
    let mut remaining = max_bytes;
    let mut total = 0usize;
    let mut any_error = false;
    let mut unconfirmed = Vec::new();
    let mut out_of_range = Vec::new();
    let mut responses = Vec::with_capacity(req.topics.len());
    for (ft, &readable) in req.topics.iter().zip(readable) {
        let name = ft.topic.0.to_string();
        let topic = if readable {
            broker.topic(&name).map_err(|e| e.code())
        } else {
            Err(ResponseError::TopicAuthorizationFailed.code())
        };
        let mut partitions = Vec::with_capacity(ft.partitions.len());
        // Counted once the partition locks are let go.
        let mut topic_bytes = 0u64;
        for fp in &ft.partitions {
            let mut pd = PartitionData::default()
                .with_partition_index(fp.partition)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_log_start_offset(-1)
                .with_records(Some(Bytes::new()));
            if version >= 11 {
                pd.preferred_read_replica = BrokerId(-1);
            }
            let partition = super::served_partition(&topic, fp.partition, lease_fresh);
            match partition {
                Err(code) => {
                    pd.error_code = code;
                    any_error = true;
                }
                Ok(p) => {
                    let state = p.state();
                    let log = &state.log;
                    if req.isolation_level == 1 {
                        pd.aborted_transactions = Some(Vec::new());
                    }
                    // The high watermark: durable and confirmed led here (issue 25
                    // item 3). A deposed or crashed leader's unacknowledged tail is
                    // never read.
                    let (hw, lso) = p.read_bounds(&state);
                    if log.log_end_offset() > hw && !p.is_retired() {
                        unconfirmed.push(p.clone());
                    }
                    let read_committed = req.isolation_level == 1;
                    pd.high_watermark = hw;
                    pd.last_stable_offset = lso;
                    pd.log_start_offset = log.log_start_offset();
                    let limit = (fp.partition_max_bytes.max(0) as usize).min(remaining);
                    let upto = if read_committed { lso } else { hw };
                    if limit > 0 || total == 0 {
                        match log.read(fp.fetch_offset, limit, upto, total == 0) {
                            Ok(data) => {
                                if read_committed {
                                    let end = batch_end(&data).unwrap_or(fp.fetch_offset);
                                    pd.aborted_transactions = Some(
                                        state
                                            .aborted_in_range(fp.fetch_offset, end)
                                            .into_iter()
                                            .map(|a| {
                                                AbortedTransaction::default()
                                                    .with_producer_id(ProducerId(a.producer_id))
                                                    .with_first_offset(a.first_offset)
                                            })
                                            .collect(),
                                    );
                                }
                                total += data.len();
                                remaining = remaining.saturating_sub(data.len());
                                topic_bytes += data.len() as u64;
                                pd.records = Some(data);
                            }
                            Err(LogError::OutOfRange { .. }) => {
                                pd.error_code = ResponseError::OffsetOutOfRange.code();
                                any_error = true;
                                out_of_range.push((responses.len(), partitions.len(), p.clone()));
                            }
                            Err(e) => {
                                tracing::error!(topic = %name, partition = fp.partition, error = %e, "fetch read failed");
                                pd.error_code = ResponseError::KafkaStorageError.code();
                                any_error = true;
                            }
                        }
                    }
                }
            }
            partitions.push(pd);
        }
        if topic_bytes > 0 {
            crate::metrics::metrics().topic(&name).bytes_out.inc_by(topic_bytes);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(TopicName(sb(name)))
                .with_partitions(partitions),
        );
    }
    Gathered {
        responses,
        bytes: total,
        errors: any_error,
        unconfirmed,
        out_of_range,
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{broker, ctx};
    use super::super::{dispatch, sb, RequestKind, ResponseKind};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};

    /// Issue 25 item 3 (in part): a broker whose lease is stale serves no reads and
    /// tells no offsets.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_broker_whose_lease_is_stale_serves_no_reads() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let request = RequestKind::Fetch(
            FetchRequest::default()
                .with_max_bytes(1000)
                .with_max_wait_ms(0)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(sb("t")))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1000)])]),
        );
        let code = |answer: ResponseKind| match answer {
            ResponseKind::Fetch(r) => r.responses[0].partitions[0].error_code,
            other => panic!("{other:?}"),
        };
        b.lease_renewed();
        assert_eq!(code(dispatch(&b, &ctx(ApiKey::Fetch, 12), request.clone()).await), 0);
        // Not renewed for more than half the session timeout (5 s).
        b.renewed_at(std::time::Instant::now() - std::time::Duration::from_secs(6));
        assert_eq!(
            code(dispatch(&b, &ctx(ApiKey::Fetch, 12), request.clone()).await),
            6,
            "NOT_LEADER_OR_FOLLOWER"
        );
        b.lease_renewed();
        assert_eq!(code(dispatch(&b, &ctx(ApiKey::Fetch, 12), request).await), 0);

        // Nor does it tell its partitions' offsets (high watermark, last stable offset).
        use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
        use kafka_protocol::messages::ListOffsetsRequest;
        let list = RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(
            vec![ListOffsetsTopic::default()
            .with_name(TopicName(sb("t")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])],
        ));
        let list_code = |answer: ResponseKind| match answer {
            ResponseKind::ListOffsets(r) => r.topics[0].partitions[0].error_code,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            list_code(dispatch(&b, &ctx(ApiKey::ListOffsets, 7), list.clone()).await),
            0
        );
        b.renewed_at(std::time::Instant::now() - std::time::Duration::from_secs(6));
        assert_eq!(
            list_code(dispatch(&b, &ctx(ApiKey::ListOffsets, 7), list).await),
            6,
            "NOT_LEADER_OR_FOLLOWER"
        );
    }

    /// A leader paused with its clock and deposed meanwhile (its volume sync has not
    /// told it yet) answered a fetch past its own log end OFFSET_OUT_OF_RANGE, an
    /// offset its successor may already have written: a client without leader epochs
    /// (kafka-python, kafkajs) then applied its auto.offset.reset. Found by a review
    /// (2026-12-06).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_sends_a_fetch_past_its_end_to_the_new_leader() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        let code = |answer: ResponseKind| match answer {
            ResponseKind::Fetch(r) => r.responses[0].partitions[0].error_code,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            code(dispatch(&b, &ctx(ApiKey::Fetch, 12), fetch_request(5, 0)).await),
            1,
            "OFFSET_OUT_OF_RANGE while it leads"
        );
        let (mut stolen, _owner) = super::super::test_support::taken_over(&b, "t", 0, 7);
        stolen.open_gate();
        assert!(b.lease_fresh(), "by its own clock nothing happened");
        assert_eq!(
            code(dispatch(&b, &ctx(ApiKey::Fetch, 12), fetch_request(5, 0)).await),
            6,
            "NOT_LEADER_OR_FOLLOWER: offset 5 may be the new leader's"
        );
    }

    fn fetch_request(offset: i64, max_wait_ms: i32) -> RequestKind {
        RequestKind::Fetch(
            FetchRequest::default()
                .with_max_bytes(100_000)
                .with_min_bytes(1)
                .with_max_wait_ms(max_wait_ms)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(sb("t")))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(100_000)])]),
        )
    }

    /// (high watermark, offsets of the batches read).
    fn read(answer: ResponseKind) -> (i64, Vec<i64>) {
        match answer {
            ResponseKind::Fetch(r) => {
                let p = &r.responses[0].partitions[0];
                assert_eq!(p.error_code, 0);
                let records = p.records.clone().unwrap_or_default();
                let bases = kaas_core::batch::HeaderIter::new(&records)
                    .map(|(_, h)| h.base_offset)
                    .collect();
                (p.high_watermark, bases)
            }
            other => panic!("{other:?}"),
        }
    }

    async fn produce(b: &std::sync::Arc<crate::broker::Broker>, acks: i16) -> i16 {
        produce_to(b, "t", acks).await
    }

    async fn produce_to(b: &std::sync::Arc<crate::broker::Broker>, topic: &str, acks: i16) -> i16 {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let batch = kaas_core::batch::build_batch(0, 1, None, 0, &[(None, Some(b"v"))]);
        let req = kafka_protocol::messages::ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(sb(topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(bytes::Bytes::from(batch)))])]);
        match dispatch(b, &ctx(ApiKey::Produce, 9), RequestKind::Produce(req)).await {
            ResponseKind::Produce(r) => r.responses[0].partition_responses[0].error_code,
            other => panic!("{other:?}"),
        }
    }

    /// Issue 25 item 3: reads stop at the confirmed end — durable, and confirmed led
    /// here through the volume. A leader whose partition was taken over while it was
    /// frozen never serves what it appended after (acknowledged to nobody: acks=1 is
    /// answered before the fsync).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_leader_serves_no_record_past_its_confirmed_end() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        assert_eq!(produce(&b, -1).await, 0);
        let _stolen = super::super::test_support::taken_over(&b, "t", 0, 7);
        assert_eq!(produce(&b, 1).await, 0, "acks=1 is answered at the append");
        let c = ctx(ApiKey::Fetch, 12);
        assert_eq!(read(dispatch(&b, &c, fetch_request(0, 300)).await), (1, vec![0]));
        assert_eq!(
            read(dispatch(&b, &c, fetch_request(1, 300)).await),
            (1, vec![]),
            "a reader at the end waits, and gets nothing past it"
        );
        // Nor does ListOffsets tell the unconfirmed end.
        use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
        let list = RequestKind::ListOffsets(kafka_protocol::messages::ListOffsetsRequest::default().with_topics(
            vec![ListOffsetsTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])],
        ));
        match dispatch(&b, &ctx(ApiKey::ListOffsets, 7), list).await {
            ResponseKind::ListOffsets(r) => {
                let p = &r.topics[0].partitions[0];
                assert!(p.error_code == 6 || p.offset == 1, "{p:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// Every append on the broker woke every long poll, which then locked each of its
    /// partitions again and worked out its last stable offset: idle consumers at the
    /// end of quiet partitions kept the cores busy while another topic took writes
    /// (one Fetch naming an idle partition many times multiplied it). A long poll
    /// looks again only when one of its partitions changed; it still wakes for its
    /// own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_poll_looks_again_only_when_its_partitions_change() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        b.create_topic("u", 1, Default::default()).await.unwrap();
        let poll = {
            let b = b.clone();
            tokio::spawn(async move {
                let c = ctx(ApiKey::Fetch, 12);
                let RequestKind::Fetch(req) = fetch_request(0, 3_000) else {
                    unreachable!()
                };
                super::handle_counted(&b, &c, req).await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        for _ in 0..200 {
            assert_eq!(produce_to(&b, "u", 1).await, 0);
        }
        // Its own partition's append wakes it: answered long before its 3 s.
        let asked = std::time::Instant::now();
        assert_eq!(produce_to(&b, "t", -1).await, 0);
        let (answer, passes) = poll.await.unwrap();
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(read(ResponseKind::Fetch(answer)), (1, vec![0]));
        assert!(
            passes <= 4,
            "{passes} passes over its partitions for 200 appends elsewhere"
        );
    }

    /// The other half: records produced with acks=1 are read as soon as one flush
    /// (started by the reader, shared with any acknowledgment) confirmed them, not at
    /// the next `--flush-interval-ms` (the test broker runs no background flusher).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_produced_with_acks_1_are_read_once_a_flush_confirmed_them() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, Default::default()).await.unwrap();
        assert_eq!(produce(&b, 1).await, 0);
        assert_eq!(produce(&b, 0).await, 0);
        let c = ctx(ApiKey::Fetch, 12);
        let asked = std::time::Instant::now();
        assert_eq!(read(dispatch(&b, &c, fetch_request(0, 10_000)).await), (2, vec![0, 1]));
        // Woken by the flush, not answered at its 10 s wait's end (a liveness bound,
        // far above a flush's time).
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(5),
            "the fetch waited {:?}: the flush did not wake it",
            asked.elapsed()
        );
    }
}
