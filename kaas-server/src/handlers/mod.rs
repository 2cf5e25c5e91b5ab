//! One module per Kafka API. Each declares the version range it implements (`MIN`,
//! `MAX`) next to its code; the table below is the single source of both dispatch and
//! the ApiVersions answer, so advertised versions cannot drift from the handlers.

use crate::broker::Broker;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

/// What a handler knows about the request besides its body.
pub struct RequestContext {
    pub api: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: String,
    pub peer: SocketAddr,
    /// The listener the request came in on: Metadata and FindCoordinator answer with
    /// the brokers' addresses on it.
    pub listener: Arc<str>,
    /// Who sent it, as Kafka writes principals: `User:ANONYMOUS` on PLAINTEXT,
    /// `User:<name>` after SASL, `User:<certificate subject>` with mTLS.
    pub principal: Arc<str>,
    /// Flips to true when the broker shuts down; long waits end early on it.
    pub shutdown: watch::Receiver<bool>,
}

impl crate::authz::Requester for RequestContext {
    fn principal(&self) -> &str {
        &self.principal
    }
    fn peer(&self) -> SocketAddr {
        self.peer
    }
    fn api(&self) -> ApiKey {
        self.api
    }
}

/// Whether an answer says it changed what every broker reads at its volume sync —
/// topics, partitions, topic and broker configs, ACLs, client quotas — for at least
/// one of what it was asked: then the peers are told to sync now (a cluster notice,
/// docs/cluster.md#cluster-notices), so a topic created through one broker is known
/// to the others, and a revoked ACL enforced by them, in milliseconds rather than at
/// their next sync (a second). A refused request (no permission, a bad name) tells
/// nobody, so a client cannot make the peers sync by asking what it may not do; nor
/// does a request that only validates ([`validate_only`]), answered as if done.
fn changed_what_peers_sync(response: &ResponseKind) -> bool {
    match response {
        ResponseKind::CreateTopics(r) => r.topics.iter().any(|t| t.error_code == 0),
        ResponseKind::DeleteTopics(r) => r.responses.iter().any(|t| t.error_code == 0),
        ResponseKind::CreatePartitions(r) => r.results.iter().any(|t| t.error_code == 0),
        ResponseKind::AlterConfigs(r) => r.responses.iter().any(|c| c.error_code == 0),
        ResponseKind::IncrementalAlterConfigs(r) => r.responses.iter().any(|c| c.error_code == 0),
        ResponseKind::CreateAcls(r) => r.results.iter().any(|a| a.error_code == 0),
        ResponseKind::DeleteAcls(r) => r
            .filter_results
            .iter()
            .any(|f| f.error_code == 0 && !f.matching_acls.is_empty()),
        ResponseKind::AlterClientQuotas(r) => r.entries.iter().any(|e| e.error_code == 0),
        _ => false,
    }
}

/// Whether an admin request asks only to validate, changing nothing.
fn validate_only(request: &RequestKind) -> bool {
    match request {
        RequestKind::CreateTopics(r) => r.validate_only,
        RequestKind::CreatePartitions(r) => r.validate_only,
        RequestKind::AlterConfigs(r) => r.validate_only,
        RequestKind::IncrementalAlterConfigs(r) => r.validate_only,
        RequestKind::AlterClientQuotas(r) => r.validate_only,
        _ => false,
    }
}

macro_rules! api_table {
    ($($variant:ident => $module:ident),* $(,)?) => {
        /// Every API this broker answers, with its version range.
        pub const APIS: &[(ApiKey, i16, i16)] = &[$((ApiKey::$variant, $module::MIN, $module::MAX)),*];

        pub async fn dispatch(broker: &Arc<Broker>, ctx: &RequestContext, request: RequestKind) -> ResponseKind {
            let validate_only = validate_only(&request);
            let response = match request {
                $(RequestKind::$variant(r) => ResponseKind::$variant($module::handle(broker, ctx, r).await),)*
                other => unreachable!("{other:?} passed the version gate without a handler"),
            };
            if !validate_only && changed_what_peers_sync(&response) {
                broker.txn.announce_change(broker);
            }
            response
        }
    };
}

api_table! {
    Produce => produce,
    Fetch => fetch,
    ListOffsets => list_offsets,
    OffsetForLeaderEpoch => offset_for_leader_epoch,
    Metadata => metadata,
    OffsetCommit => offset_commit,
    OffsetFetch => offset_fetch,
    FindCoordinator => find_coordinator,
    JoinGroup => join_group,
    Heartbeat => heartbeat,
    LeaveGroup => leave_group,
    SyncGroup => sync_group,
    DescribeGroups => describe_groups,
    ListGroups => list_groups,
    ApiVersions => api_versions,
    CreateTopics => create_topics,
    DeleteTopics => delete_topics,
    DescribeConfigs => describe_configs,
    AlterConfigs => alter_configs,
    IncrementalAlterConfigs => incremental_alter_configs,
    CreatePartitions => create_partitions,
    DeleteGroups => delete_groups,
    DeleteRecords => delete_records,
    DescribeAcls => describe_acls,
    CreateAcls => create_acls,
    DeleteAcls => delete_acls,
    OffsetDelete => offset_delete,
    DescribeCluster => describe_cluster,
    InitProducerId => init_producer_id,
    AddPartitionsToTxn => add_partitions_to_txn,
    AddOffsetsToTxn => add_offsets_to_txn,
    EndTxn => end_txn,
    TxnOffsetCommit => txn_offset_commit,
    WriteTxnMarkers => write_txn_markers,
    DescribeLogDirs => describe_log_dirs,
    DescribeProducers => describe_producers,
    DescribeTransactions => describe_transactions,
    ListTransactions => list_transactions,
    SaslHandshake => sasl_handshake,
    SaslAuthenticate => sasl_authenticate,
    DescribeClientQuotas => describe_client_quotas,
    AlterClientQuotas => alter_client_quotas,
    DescribeUserScramCredentials => describe_user_scram_credentials,
    AlterUserScramCredentials => alter_user_scram_credentials,
    ConsumerGroupHeartbeat => consumer_group_heartbeat,
    ConsumerGroupDescribe => consumer_group_describe,
}

/// The version range this broker implements for `api`, if any.
pub fn supported(api: ApiKey) -> Option<(i16, i16)> {
    APIS.iter().find(|(k, _, _)| *k == api).map(|&(_, min, max)| (min, max))
}

/// PRODUCER_FENCED (90) is answered as INVALID_PRODUCER_EPOCH (47) to request
/// versions older than `fenced_since`, which predate it (KIP-588).
pub fn client_error_code(code: i16, version: i16, fenced_since: i16) -> i16 {
    if code == 90 && version < fenced_since {
        47
    } else {
        code
    }
}

/// Journals changes an admin API made (`kaasctl audit`), one record per target
/// (`user alice`, `acl ALLOW …`), with the principal, address and listener that asked.
/// The change stands whatever happens here: a record that cannot be written is logged.
pub fn journal(broker: &Broker, ctx: &RequestContext, api: &str, targets: impl IntoIterator<Item = String>) {
    let command = vec![
        api.to_string(),
        format!("principal={}", ctx.principal),
        format!("peer={}", ctx.peer),
        format!("listener={}", ctx.listener),
    ];
    let actor = kaas_core::txn::Actor::Broker {
        id: broker.config.broker_id,
    };
    for target in targets {
        let recorded = crate::blocking::off_worker(|| {
            kaas_core::admin::record_audit(
                &broker.volume,
                &actor,
                &command,
                &target,
                None,
                None,
                kaas_core::now_ms(),
            )
        });
        if let Err(e) = recorded {
            tracing::error!(error = %e, target, api, "changed, but the audit record could not be written");
        }
    }
}

/// The partition `index` of `topic` (or the topic's error code) as the read APIs —
/// Fetch, ListOffsets, OffsetForLeaderEpoch — serve it: UNKNOWN_TOPIC_OR_PARTITION
/// past its partitions, the partition's own code when it is offline here or led
/// elsewhere, and NOT_LEADER_OR_FOLLOWER while this broker's lease is stale (it may
/// be deposed: it tells nothing of its partitions).
#[inline]
pub fn served_partition(
    topic: &Result<Arc<crate::registry::Topic>, i16>,
    index: i32,
    lease_fresh: bool,
) -> Result<Arc<crate::registry::Partition>, i16> {
    match topic {
        Err(code) => Err(*code),
        Ok(t) => match t.partition(index) {
            None => Err(kafka_protocol::error::ResponseError::UnknownTopicOrPartition.code()),
            Some(Err(o)) => Err(o.code()),
            Some(Ok(_)) if !lease_fresh => Err(kafka_protocol::error::ResponseError::NotLeaderOrFollower.code()),
            Some(Ok(p)) => Ok(p.clone()),
        },
    }
}

/// Shorthand for building protocol strings.
pub fn sb(s: impl Into<String>) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.into())
}

#[cfg(test)]
mod authorization_tests;
#[cfg(test)]
mod classic_group_tests;

#[cfg(test)]
pub(crate) mod test_support {
    //! An in-process broker on a temporary volume, for handler tests.
    use super::RequestContext;
    use crate::broker::Broker;
    use kafka_protocol::messages::ApiKey;
    use std::sync::Arc;

    pub fn broker(dir: &std::path::Path) -> Arc<Broker> {
        broker_with(dir, &[])
    }

    /// Broker `id` on the volume of a broker opened by [`broker`] (another process
    /// sharing it, as in a cluster).
    pub fn second_broker(dir: &std::path::Path, id: &str) -> Arc<Broker> {
        let config = <crate::config::Config as clap::Parser>::parse_from([
            "kaas-server",
            "--data-dir",
            dir.to_str().expect("utf-8 temp dir"),
            "--broker-id",
            id,
        ]);
        Broker::open(config, crate::listeners::Endpoints::plaintext("127.0.0.1", 9093)).expect("broker opens")
    }

    /// A runtime with the 2 workers of this project's 2-core machine, for tests that
    /// show blocking work never stalls them all.
    pub fn two_worker_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// Whether `rt` runs a task spawned now within 2 s (its workers are not all
    /// stalled), judged from this thread.
    pub fn runs_a_new_task(rt: &tokio::runtime::Runtime) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move { tx.send(()).expect("the test waits") });
        rx.recv_timeout(std::time::Duration::from_secs(2)).is_ok()
    }

    /// [`broker`] with more command-line flags.
    pub fn broker_with(dir: &std::path::Path, flags: &[&str]) -> Arc<Broker> {
        let args = [
            "kaas-server",
            "--data-dir",
            dir.to_str().expect("utf-8 temp dir"),
            "--group-initial-rebalance-delay-ms",
            "0",
        ];
        let config = <crate::config::Config as clap::Parser>::parse_from(args.iter().chain(flags));
        Broker::open(config, crate::listeners::Endpoints::plaintext("127.0.0.1", 9092)).expect("broker opens")
    }

    /// Broker `by` takes partition `index` of `topic` over behind `b`'s back, as
    /// `open_partition` does: it steals `owner.lock`, records its leadership at the
    /// next leader epoch in `owner.json` and leaves the last leader its deposed notice.
    /// Returns the lock (held until dropped) and what it recorded.
    pub fn taken_over(
        b: &Broker,
        topic: &str,
        index: i32,
        by: i32,
    ) -> (kaas_core::topic::OwnerLock, kaas_core::topic::PartitionOwner) {
        use kaas_core::topic::PartitionOwner;
        let stolen = PartitionOwner::acquire(&b.volume, topic, index, Some(&|_: Option<&PartitionOwner>| true))
            .expect("owner.lock stolen");
        let path = PartitionOwner::path(&b.volume, topic, index);
        let mut owner = PartitionOwner::read(&path).expect("owner.json");
        let last = owner.clone();
        owner.broker = by;
        owner.leader_epoch += 1;
        owner.write(&path).expect("owner.json written");
        kaas_core::topic::tell_deposed(&b.volume, last.broker, &owner, topic, index);
        (stolen, owner)
    }

    /// A lease of broker `id` (incarnation `incarnation`, heartbeat `heartbeat_ms`),
    /// as a peer would write it, for tests that play the peer.
    pub fn peer_lease(id: i32, incarnation: &str, heartbeat_ms: i64) -> kaas_core::broker::BrokerLease {
        kaas_core::broker::BrokerLease {
            version: kaas_core::broker::LEASE_FORMAT_VERSION,
            broker_id: id,
            host: "127.0.0.1".into(),
            port: 1,
            incarnation: incarnation.into(),
            started_ms: 0,
            heartbeat_ms,
            stopped_ms: None,
            stepped_down_ms: None,
            opening_ms: None,
            joining_ms: None,
            listeners: Default::default(),
            authorizer: None,
            renewal: 0,
            routes: None,
        }
    }

    pub fn ctx(api: ApiKey, version: i16) -> RequestContext {
        RequestContext {
            api,
            version,
            correlation_id: 1,
            client_id: "test".into(),
            peer: "127.0.0.1:1".parse().expect("addr"),
            listener: "PLAINTEXT".into(),
            principal: "User:ANONYMOUS".into(),
            shutdown: never_shut_down(),
        }
    }

    /// A shutdown signal that never fires. A receiver whose sender is gone reports a
    /// change at once, every time: a long poll in a test then looped on its reads
    /// until its deadline instead of waiting, and a missing wake-up went unseen.
    fn never_shut_down() -> tokio::sync::watch::Receiver<bool> {
        static SENDER: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> = std::sync::OnceLock::new();
        SENDER.get_or_init(|| tokio::sync::watch::channel(false).0).subscribe()
    }
}

#[cfg(test)]
mod compatibility_page {
    /// docs/compatibility.md lists exactly the APIs this broker answers, each with the
    /// version range ApiVersions advertises.
    #[test]
    fn the_compatibility_page_lists_every_api_with_its_versions() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/compatibility.md"))
            .expect("docs/compatibility.md");
        // API rows: `| Name (key) | versions | notes |`.
        let is_api_row = |l: &&str| {
            l.strip_prefix("| ")
                .and_then(|l| l.split_once(") | "))
                .and_then(|(name, _)| name.rsplit_once(" ("))
                .is_some_and(|(_, key)| key.parse::<i16>().is_ok())
        };
        let rows: Vec<&str> = page.lines().filter(is_api_row).collect();
        for &(api, min, max) in super::APIS {
            let versions = if min == max {
                min.to_string()
            } else {
                format!("{min}–{max}")
            };
            let row = format!("| {api:?} ({}) | {versions} |", api as i16);
            assert!(
                rows.iter().any(|r| r.starts_with(&row)),
                "docs/compatibility.md has no row starting {row:?}"
            );
        }
        assert_eq!(
            rows.len(),
            super::APIS.len(),
            "a row for an API the broker does not answer"
        );
    }
}

#[cfg(test)]
mod string_limits {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::InitProducerIdRequest;
    use kafka_protocol::protocol::Decodable;

    /// A flexible (compact) string of more than i16::MAX bytes is refused by the
    /// decoder, as Java's generated parsers refuse it ("had invalid length"): before,
    /// InitProducerId v2+ took a transactional id of up to `--max-request-bytes`, kept
    /// twice in its transaction slot for a week; a few such ids took the slot past the
    /// 256 MiB a state file may have, and every transactional id of that slot was
    /// COORDINATOR_NOT_AVAILABLE for good. The decoder also reserved the declared
    /// length before reading it.
    #[test]
    fn a_compact_string_longer_than_i16_max_is_refused() {
        let frame = |len: usize| {
            let mut b = BytesMut::new();
            // transactional_id: compact nullable string (varint length + 1).
            let mut n = (len + 1) as u32;
            while n >= 0x80 {
                b.put_u8((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            b.put_u8(n as u8);
            b.put_slice(&vec![b'x'; len]);
            b.put_i32(60_000); // transaction_timeout_ms
            b.put_i64(-1); // producer_id
            b.put_i16(-1); // producer_epoch
            b.put_u8(0); // tagged fields
            b.freeze()
        };
        let ok = InitProducerIdRequest::decode(&mut frame(i16::MAX as usize), 4).unwrap();
        assert_eq!(ok.transactional_id.unwrap().len(), i16::MAX as usize);
        assert!(InitProducerIdRequest::decode(&mut frame(i16::MAX as usize + 1), 4).is_err());
        assert!(InitProducerIdRequest::decode(&mut frame(1 << 20), 4).is_err());
    }
}
