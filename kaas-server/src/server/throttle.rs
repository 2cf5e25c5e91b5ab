//! Throttling a client over its quota (KIP-219; docs/quotas.md): the throttle time
//! goes into the response's `throttle_time_ms`, and the connection waits it out.
//! Clients that know KIP-219 (a request version from Kafka 2.0 on) get the response
//! at once and then their connection is muted (nothing more is read from it) for the
//! throttle time, so they back off too; older versions get the response only after
//! the throttle time, which is all they understand.

use kafka_protocol::messages::{ApiKey, ResponseKind};
use std::future::Future;
use std::time::{Duration, Instant};

/// APIs no quota applies to: the SASL exchange and ApiVersions (before and during a
/// login, answered without the handlers), and the brokers' own WriteTxnMarkers
/// (Kafka exempts cluster actions).
pub fn exempt(api: ApiKey) -> bool {
    matches!(
        api,
        ApiKey::SaslHandshake | ApiKey::SaslAuthenticate | ApiKey::ApiVersions | ApiKey::WriteTxnMarkers
    )
}

/// Whether a client throttles itself by this version's `throttle_time_ms` (Kafka's
/// `shouldClientThrottle`): the first version of each API released with Kafka 2.0,
/// and every version of the APIs that came later.
pub fn client_throttles(api: ApiKey, version: i16) -> bool {
    let since = match api {
        ApiKey::Produce => 6,
        ApiKey::Fetch => 8,
        ApiKey::ListOffsets | ApiKey::JoinGroup | ApiKey::CreateTopics => 3,
        ApiKey::Metadata => 6,
        ApiKey::OffsetCommit | ApiKey::OffsetFetch => 4,
        ApiKey::FindCoordinator
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::SyncGroup
        | ApiKey::DescribeGroups
        | ApiKey::ListGroups
        | ApiKey::ApiVersions
        | ApiKey::DeleteTopics
        | ApiKey::DescribeConfigs => 2,
        ApiKey::DeleteRecords
        | ApiKey::InitProducerId
        | ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::EndTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::DescribeAcls
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls
        | ApiKey::AlterConfigs
        | ApiKey::CreatePartitions
        | ApiKey::DeleteGroups => 1,
        _ => 0,
    };
    version >= since
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
        // Each API this broker answers: the throttle time is set on every one that
        // is not exempt (and on ApiVersions, which has the field).
        for &(api, _, _) in crate::handlers::APIS {
            let mut response = default_response(api);
            set_throttle_time(&mut response, 1234);
            let debug = format!("{response:?}");
            assert_eq!(
                debug.contains("throttle_time_ms: 1234"),
                !exempt(api) || api == ApiKey::ApiVersions,
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
            Metadata => MetadataResponse, OffsetCommit => OffsetCommitResponse, OffsetFetch => OffsetFetchResponse,
            FindCoordinator => FindCoordinatorResponse, JoinGroup => JoinGroupResponse, Heartbeat => HeartbeatResponse,
            LeaveGroup => LeaveGroupResponse, SyncGroup => SyncGroupResponse, DescribeGroups => DescribeGroupsResponse,
            ListGroups => ListGroupsResponse, ApiVersions => ApiVersionsResponse, CreateTopics => CreateTopicsResponse,
            DeleteTopics => DeleteTopicsResponse, DescribeConfigs => DescribeConfigsResponse,
            AlterConfigs => AlterConfigsResponse, IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
            CreatePartitions => CreatePartitionsResponse, DeleteGroups => DeleteGroupsResponse,
            DeleteRecords => DeleteRecordsResponse, DescribeAcls => DescribeAclsResponse, CreateAcls => CreateAclsResponse,
            DeleteAcls => DeleteAclsResponse, OffsetDelete => OffsetDeleteResponse, DescribeCluster => DescribeClusterResponse,
            InitProducerId => InitProducerIdResponse, AddPartitionsToTxn => AddPartitionsToTxnResponse,
            AddOffsetsToTxn => AddOffsetsToTxnResponse, EndTxn => EndTxnResponse, TxnOffsetCommit => TxnOffsetCommitResponse,
            WriteTxnMarkers => WriteTxnMarkersResponse, DescribeProducers => DescribeProducersResponse,
            DescribeTransactions => DescribeTransactionsResponse, ListTransactions => ListTransactionsResponse,
            SaslHandshake => SaslHandshakeResponse, SaslAuthenticate => SaslAuthenticateResponse,
            DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
            AlterUserScramCredentials => AlterUserScramCredentialsResponse,
            DescribeClientQuotas => DescribeClientQuotasResponse, AlterClientQuotas => AlterClientQuotasResponse,
        )
    }

    #[test]
    fn kip_219_versions_are_kafkas() {
        assert!(!client_throttles(ApiKey::Produce, 5));
        assert!(client_throttles(ApiKey::Produce, 6));
        assert!(!client_throttles(ApiKey::Fetch, 7));
        assert!(client_throttles(ApiKey::Fetch, 8));
        assert!(client_throttles(ApiKey::DescribeClientQuotas, 0));
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
