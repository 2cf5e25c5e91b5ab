//! WriteTxnMarkers (key 27), the inter-broker request: a transaction's coordinator
//! telling a partition's leader that COMMIT/ABORT markers are queued for it on the
//! volume (docs/cluster.md#markers-across-brokers). The leader writes the markers at
//! once and answers when they are durable: from the notice itself where it names its
//! transaction and the partition knows that transaction open, else from its queue
//! entries under the coordinator's slot lock; so a late or repeated notice writes
//! nothing, and only a broker (CLUSTER_ACTION) can send one. An ABORT naming no
//! transaction, as Kafka's tools send it, ends only a hanging transaction
//! (docs/transactions.md, "Aborting from Kafka's tools"). A marker without partitions is a fence notice:
//! the fence watcher reads the fence logs at once; or, with producer -1, a cluster
//! notice: the leases are read and the volume synced at once. Kafka's check: CLUSTER_ACTION on
//! the cluster.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::txn::TopicPartition;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const MIN: i16 = 1;
pub const MAX: i16 = 1;

/// Markers one request may carry; the rest are answered INVALID_REQUEST (a
/// coordinator sends at most 256 per request).
const MAX_MARKERS: usize = 1_024;
/// How long one marker's entries may take here (a slot lock another process holds, a
/// slow fsync) before it is answered REQUEST_TIMED_OUT and left to the poll: less than
/// the coordinator's request timeout (10 s), so it hears back.
const APPLY_DEADLINE: Duration = Duration::from_secs(5);

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
    // Only for markers (a fence or cluster notice carries no partitions): a test's
    // leader that dies on its first notification dies on a transaction's.
    if allowed && req.markers.iter().any(|m| !m.topics.is_empty()) {
        kaas_core::failpoint::hit(kaas_core::failpoint::MARKERS_NOTIFIED);
    }
    // The markers are applied side by side within this request's task (join_all): one
    // waiting on a slot's lock or its fsync does not hold up the others, and no task
    // is spawned, no thread woken, per marker. Blocking file work of the rare paths (a
    // partition led elsewhere, a queue entry read) does hold the others up while it
    // runs. Every apply is a compare-and-set on the volume, so one cut off by its
    // deadline leaves nothing half-done that the poll cannot finish.
    let mut applying = Vec::new();
    let mut results: Vec<Option<WritableTxnMarkerResult>> = Vec::with_capacity(req.markers.len());
    for (i, marker) in req.markers.into_iter().enumerate() {
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
        if asked.is_empty() {
            // A cluster notice (producer -1: docs/cluster.md#cluster-notices): a
            // peer's lease or the topics changed; the lease task reads the leases
            // and the volume sync runs now. Else a fence notice
            // (docs/cluster.md#fences-across-brokers): the fence logs changed; the
            // fence watcher reads them now. Nothing is written here.
            if allowed {
                if marker.producer_id.0 == crate::txn_coordinator::CLUSTER_NOTICE_PRODUCER_ID {
                    crate::metrics::metrics().cluster_notice(crate::metrics::ClusterNoticeEvent::Received);
                    broker.lease_doorbell.notify_one();
                    broker.sync_doorbell.notify_one();
                } else {
                    broker.fence_doorbell.notify_one();
                }
            }
            results.push(Some(
                WritableTxnMarkerResult::default().with_producer_id(marker.producer_id),
            ));
            continue;
        }
        let refuse = |code: i16| Some(result(marker.producer_id, asked.iter().map(|tp| (tp.clone(), code))));
        if !allowed {
            results.push(refuse(ResponseError::ClusterAuthorizationFailed.code()));
            continue;
        }
        if i >= MAX_MARKERS {
            results.push(refuse(ResponseError::InvalidRequest.code()));
            continue;
        }
        results.push(None);
        let txn_seq = crate::txn_coordinator::txn_seq_in(&marker.unknown_tagged_fields);
        let broker = broker.clone();
        applying.push(async move {
            let applied = tokio::time::timeout(
                APPLY_DEADLINE,
                broker.txn.apply_notified(
                    &broker,
                    marker.producer_id.0,
                    marker.producer_epoch,
                    marker.transaction_result,
                    txn_seq,
                    &asked,
                ),
            )
            .await;
            let answer = match applied {
                Ok(answer) => answer,
                Err(_) => {
                    tracing::warn!(
                        producer_id = marker.producer_id.0,
                        epoch = marker.producer_epoch,
                        "applying notified markers took longer than {} s; left to the poll",
                        APPLY_DEADLINE.as_secs()
                    );
                    let timed_out = ResponseError::RequestTimedOut.code();
                    crate::txn_coordinator::NotifiedMarkers {
                        codes: asked.into_iter().map(|tp| (tp, timed_out)).collect(),
                        applied: false,
                    }
                }
            };
            let mut answered = result(marker.producer_id, answer.codes);
            // Every marker applied by the notice's number: the coordinator may remove
            // the queue entry (crate::txn_coordinator::TXN_SEQ_TAG).
            if let Some(seq) = txn_seq.filter(|_| answer.applied) {
                answered.unknown_tagged_fields.insert(
                    crate::txn_coordinator::TXN_SEQ_TAG,
                    crate::txn_coordinator::txn_seq_tag(seq),
                );
            }

            (i, answered)
        });
    }
    use futures_util::FutureExt;
    let applying = applying
        .into_iter()
        .map(|apply| std::panic::AssertUnwindSafe(apply).catch_unwind());
    for done in futures_util::future::join_all(applying).await {
        match done {
            Ok((i, r)) => results[i] = Some(r),
            Err(panic) => {
                let what = kaas_core::error::panic_message(panic.as_ref()).unwrap_or_default();
                tracing::error!(panic = %what, "applying notified markers panicked")
            }
        }
    }
    // A task that panicked leaves its marker unanswered: the coordinator counts the
    // mismatch as refused, and the poll applies the entry.
    let markers = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| WritableTxnMarkerResult::default().with_producer_id(ProducerId(-1))))
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// One marker's answer: its producer, and each partition's error code by topic.
fn result(producer_id: ProducerId, codes: impl IntoIterator<Item = (TopicPartition, i16)>) -> WritableTxnMarkerResult {
    let mut by_topic: BTreeMap<String, Vec<WritableTxnMarkerPartitionResult>> = BTreeMap::new();
    for (tp, code) in codes {
        by_topic.entry(tp.topic).or_default().push(
            WritableTxnMarkerPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_error_code(code),
        );
    }
    WritableTxnMarkerResult::default()
        .with_producer_id(producer_id)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(name, partitions)| {
                    WritableTxnMarkerTopicResult::default()
                        .with_name(TopicName(super::sb(name)))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker_with, ctx};
    use crate::handlers::{dispatch, sb};
    use crate::txn_coordinator::PeerNotice;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
    use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, RequestKind};

    /// Whether `doorbell` was rung (a permit waits).
    async fn rung(doorbell: &tokio::sync::Notify) -> bool {
        tokio::time::timeout(Duration::from_millis(20), doorbell.notified())
            .await
            .is_ok()
    }

    /// A marker without partitions, of `producer_id`: a fence notice, or with -1 a
    /// cluster notice.
    fn notice(producer_id: i64) -> WriteTxnMarkersRequest {
        WriteTxnMarkersRequest::default().with_markers(vec![
            WritableTxnMarker::default().with_producer_id(ProducerId(producer_id))
        ])
    }

    fn as_principal(api: ApiKey, version: i16, principal: &str) -> RequestContext {
        let mut c = ctx(api, version);
        c.principal = principal.into();
        c
    }

    /// A cluster notice rings the lease task's and the volume sync's doorbells, a
    /// fence notice the fence watcher's, each only its own; from a principal without
    /// CLUSTER_ACTION neither rings anything (docs/cluster.md#cluster-notices).
    #[tokio::test]
    async fn a_cluster_notice_rings_the_lease_and_sync_doorbells_and_only_from_a_broker() {
        let dir = tempfile::tempdir().expect("temp dir");
        let b = broker_with(dir.path(), &["--authorizer", "acls", "--super-users", "User:broker"]);
        let client = as_principal(ApiKey::WriteTxnMarkers, 1, "User:mallory");
        handle(&b, &client, notice(-1)).await;
        handle(&b, &client, notice(7)).await;
        for doorbell in [&b.lease_doorbell, &b.sync_doorbell, &b.fence_doorbell] {
            assert!(!rung(doorbell).await, "rung by a client");
        }
        let peer = as_principal(ApiKey::WriteTxnMarkers, 1, "User:broker");
        handle(&b, &peer, notice(-1)).await;
        assert!(rung(&b.lease_doorbell).await && rung(&b.sync_doorbell).await);
        assert!(!rung(&b.fence_doorbell).await, "a cluster notice is no fence notice");
        handle(&b, &peer, notice(7)).await;
        assert!(rung(&b.fence_doorbell).await);
        assert!(!rung(&b.lease_doorbell).await && !rung(&b.sync_doorbell).await);
    }

    /// An admin request that changed something tells each live peer (a cluster
    /// notice), as does a topic auto-created for a client; a refused one tells
    /// nobody, so a client cannot make the peers sync by asking what it may not do,
    /// nor does one that only validates; and a peer has one notice waiting for the
    /// links, however many changes come meanwhile.
    #[tokio::test]
    async fn an_admin_change_tells_each_live_peer_once_and_a_refused_one_nobody() {
        let dir = tempfile::tempdir().expect("temp dir");
        let b = broker_with(dir.path(), &["--authorizer", "acls", "--super-users", "User:admin"]);
        let (sender, mut notices) = tokio::sync::mpsc::channel(16);
        b.txn.notify_leaders_through(sender);
        let mut live = b.live_brokers();
        live.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 1));
        b.set_live_brokers(live);
        assert_eq!(
            create_as(&b, "User:mallory", "refused", false).await,
            ResponseError::TopicAuthorizationFailed.code()
        );
        assert!(notices.try_recv().is_err(), "a refused request tells nobody");
        assert_eq!(create_as(&b, "User:admin", "t1", false).await, 0);
        assert!(matches!(notices.try_recv(), Ok(PeerNotice::Cluster { to: 7 })));
        assert!(notices.try_recv().is_err(), "one peer, one notice");
        // Not taken by a link yet: the next change needs none of its own.
        assert_eq!(create_as(&b, "User:admin", "t2", false).await, 0);
        assert!(notices.try_recv().is_err(), "one notice waiting per peer");
        b.txn.cluster_notice_taken(7);
        assert_eq!(create_as(&b, "User:admin", "checked", true).await, 0);
        assert!(notices.try_recv().is_err(), "validate_only changes nothing");
        assert_eq!(create_as(&b, "User:admin", "t3", false).await, 0);
        assert!(matches!(notices.try_recv(), Ok(PeerNotice::Cluster { to: 7 })));
        // A topic auto-created for a client tells them too.
        b.txn.cluster_notice_taken(7);
        let client = as_principal(ApiKey::Metadata, 12, "User:admin");
        b.topic_or_create_for(&client, "auto").await.expect("auto-created");
        assert!(matches!(notices.try_recv(), Ok(PeerNotice::Cluster { to: 7 })));
    }

    /// A cluster notice the links' channel refuses (full) is counted lost, and its
    /// peer is not marked as having one waiting: the next change queues one again
    /// (docs/cluster.md#cluster-notices). Were the mark kept, that peer would never be
    /// told of a change again.
    #[tokio::test]
    async fn a_cluster_notice_the_channel_refuses_is_counted_lost_and_the_next_change_tells_the_peer() {
        let dir = tempfile::tempdir().expect("temp dir");
        let b = broker_with(dir.path(), &[]);
        let (sender, mut notices) = tokio::sync::mpsc::channel(1);
        b.txn.notify_leaders_through(sender.clone());
        let mut live = b.live_brokers();
        live.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 1));
        b.set_live_brokers(live);
        let lost = || {
            let text = crate::metrics::render(None::<fn() -> crate::metrics::BrokerGauges>).expect("metrics");
            text.lines()
                .find_map(|l| l.strip_prefix("kaas_cluster_notices_total{event=\"lost\"} "))
                .and_then(|v| v.parse::<f64>().ok())
                .expect("kaas_cluster_notices_total{event=\"lost\"}")
        };
        sender
            .try_send(PeerNotice::Fence {
                to: 7,
                producer_id: 1,
                epoch: 0,
            })
            .expect("room for one");
        let before = lost();
        b.txn.announce_change(&b);
        assert!(lost() > before, "the refused notice is counted lost");
        assert!(matches!(notices.try_recv(), Ok(PeerNotice::Fence { .. })));
        assert!(notices.try_recv().is_err(), "the cluster notice did not fit");
        b.txn.announce_change(&b);
        assert!(
            matches!(notices.try_recv(), Ok(PeerNotice::Cluster { to: 7 })),
            "the next change tells the peer"
        );
    }

    /// CreateTopics of one topic `name` as `principal`, through `dispatch`: its code.
    async fn create_as(b: &Arc<Broker>, principal: &str, name: &str, validate_only: bool) -> i16 {
        let request = CreateTopicsRequest::default()
            .with_validate_only(validate_only)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(sb(name)))
                .with_num_partitions(1)
                .with_replication_factor(1)]);
        let answer = dispatch(
            b,
            &as_principal(ApiKey::CreateTopics, 5, principal),
            RequestKind::CreateTopics(request),
        )
        .await;
        let kafka_protocol::messages::ResponseKind::CreateTopics(answer) = answer else {
            panic!("a CreateTopics answer")
        };
        answer.topics[0].error_code
    }
}
