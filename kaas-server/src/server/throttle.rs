//! Throttling a client over its quota (KIP-219; docs/quotas.md): the throttle time
//! goes into the response's `throttle_time_ms`, the response is sent at once, and the
//! connection is muted (nothing more is read from it) for the throttle time, as
//! Kafka's brokers do for every request version. Clients that know KIP-219 (the Java
//! client) also wait before they send more; librdkafka does not, and is held by the
//! mute.

use crate::broker::Broker;
use crate::handlers::RequestContext;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use std::future::Future;
use std::time::{Duration, Instant};

/// Requests no quota applies to: the SASL exchange and ApiVersions (before and
/// during a login, answered without the handlers), and WriteTxnMarkers from a
/// principal with CLUSTER_ACTION on the cluster (a broker; Kafka exempts cluster
/// actions once authorized).
pub fn exempt(broker: &Broker, ctx: &RequestContext) -> bool {
    match ctx.api {
        ApiKey::SaslHandshake | ApiKey::SaslAuthenticate | ApiKey::ApiVersions => true,
        ApiKey::WriteTxnMarkers => broker.authz.authorize_quietly(
            ctx,
            kaas_core::acl::Operation::ClusterAction,
            kaas_core::acl::ResourceType::Cluster,
            crate::authz::CLUSTER,
        ),
        _ => false,
    }
}

/// Puts `ms` into the response's `throttle_time_ms` (the larger of it and what the
/// handler put there). A version without the field does not encode it.
pub fn set_throttle_time(response: &mut ResponseKind, ms: i32) {
    macro_rules! throttled {
        ($($variant:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$variant(r) => r.throttle_time_ms = r.throttle_time_ms.max(ms),)*
                // No throttle field: SASL and WriteTxnMarkers, which are exempt.
                _ => {}
            }
        };
    }
    throttled!(
        Produce,
        Fetch,
        ListOffsets,
        OffsetForLeaderEpoch,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        CreatePartitions,
        DeleteGroups,
        DeleteRecords,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        OffsetDelete,
        DescribeCluster,
        DescribeLogDirs,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeClientQuotas,
        AlterClientQuotas,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
    );
}

/// Runs `fut`, adding up the time spent in its polls: the time the request kept a
/// thread busy (what `request_percentage` limits), not its waits for the disk, a
/// lock or a long poll.
pub async fn timed<F: Future>(fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut busy = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let start = Instant::now();
        let polled = fut.as_mut().poll(cx);
        busy += start.elapsed();
        polled
    })
    .await;
    (out, busy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_with_a_throttle_field_gets_the_throttle_time() {
        // Each API this broker answers: the throttle time is set on every response
        // with the field.
        for &(api, _, _) in crate::handlers::APIS {
            let mut response = default_response(api);
            set_throttle_time(&mut response, 1234);
            let debug = format!("{response:?}");
            let without_field = matches!(
                api,
                ApiKey::SaslHandshake | ApiKey::SaslAuthenticate | ApiKey::WriteTxnMarkers
            );
            assert_eq!(
                debug.contains("throttle_time_ms: 1234"),
                !without_field,
                "{api:?}: {debug}"
            );
        }
    }

    fn default_response(api: ApiKey) -> ResponseKind {
        use kafka_protocol::messages::*;
        macro_rules! defaults {
            ($($variant:ident => $t:ty),* $(,)?) => {
                match api {
                    $(ApiKey::$variant => ResponseKind::$variant(<$t>::default()),)*
                    other => panic!("no default response for {other:?}"),
                }
            };
        }
        defaults!(
            Produce => ProduceResponse, Fetch => FetchResponse, ListOffsets => ListOffsetsResponse,
            OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
            Metadata => MetadataResponse, OffsetCommit => OffsetCommitResponse, OffsetFetch => OffsetFetchResponse,
            FindCoordinator => FindCoordinatorResponse, JoinGroup => JoinGroupResponse, Heartbeat => HeartbeatResponse,
            LeaveGroup => LeaveGroupResponse, SyncGroup => SyncGroupResponse, DescribeGroups => DescribeGroupsResponse,
            ListGroups => ListGroupsResponse, ApiVersions => ApiVersionsResponse, CreateTopics => CreateTopicsResponse,
            DeleteTopics => DeleteTopicsResponse, DescribeConfigs => DescribeConfigsResponse,
            AlterConfigs => AlterConfigsResponse, IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
            CreatePartitions => CreatePartitionsResponse, DeleteGroups => DeleteGroupsResponse,
            DeleteRecords => DeleteRecordsResponse, DescribeAcls => DescribeAclsResponse, CreateAcls => CreateAclsResponse,
            DeleteAcls => DeleteAclsResponse, OffsetDelete => OffsetDeleteResponse, DescribeCluster => DescribeClusterResponse,
            DescribeLogDirs => DescribeLogDirsResponse,
            InitProducerId => InitProducerIdResponse, AddPartitionsToTxn => AddPartitionsToTxnResponse,
            AddOffsetsToTxn => AddOffsetsToTxnResponse, EndTxn => EndTxnResponse, TxnOffsetCommit => TxnOffsetCommitResponse,
            WriteTxnMarkers => WriteTxnMarkersResponse, DescribeProducers => DescribeProducersResponse,
            DescribeTransactions => DescribeTransactionsResponse, ListTransactions => ListTransactionsResponse,
            SaslHandshake => SaslHandshakeResponse, SaslAuthenticate => SaslAuthenticateResponse,
            DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
            AlterUserScramCredentials => AlterUserScramCredentialsResponse,
            DescribeClientQuotas => DescribeClientQuotasResponse, AlterClientQuotas => AlterClientQuotasResponse,
            ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
        )
    }

    #[tokio::test]
    async fn timed_counts_the_polls_not_the_waits() {
        let (_, busy) = timed(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            std::thread::sleep(Duration::from_millis(50));
        })
        .await;
        assert!(
            busy >= Duration::from_millis(50) && busy < Duration::from_millis(150),
            "{busy:?}"
        );
    }
}
