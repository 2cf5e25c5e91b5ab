//! A classic group's record (docs/consumer-groups.md, "On the volume, and fail-over")
//! as the handlers order it against their answers: on the volume before the client is
//! told what the record says.

use super::test_support::{broker, ctx};
use super::{dispatch, sb};
use crate::broker::Broker;
use kaas_core::offsets::GroupOffsets;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use std::sync::Arc;

const VERSION: i16 = 5;

fn join(member: &str, instance: Option<&str>) -> RequestKind {
    RequestKind::JoinGroup(
        JoinGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(sb(member.to_string()))
            .with_group_instance_id(instance.map(|i| sb(i.to_string())))
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default()
                .with_name(sb("range"))
                .with_metadata(bytes::Bytes::from_static(b"meta"))]),
    )
}

async fn joined(b: &Arc<Broker>, member: &str, instance: Option<&str>) -> JoinGroupResponse {
    match dispatch(b, &ctx(ApiKey::JoinGroup, VERSION), join(member, instance)).await {
        ResponseKind::JoinGroup(r) => r,
        other => panic!("{other:?}"),
    }
}

/// One member, stable, its generation recorded (the leader's SyncGroup answer waits
/// for it). Returns its member id.
async fn stable_member(b: &Arc<Broker>, instance: Option<&str>) -> String {
    let mut id = String::new();
    let first = joined(b, "", instance).await;
    if first.error_code != 0 {
        // MEMBER_ID_REQUIRED (a dynamic member from version 4 on).
        id = first.member_id.to_string();
    }
    let j = if id.is_empty() {
        first
    } else {
        joined(b, &id, instance).await
    };
    assert_eq!(j.error_code, 0);
    let id = j.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id(j.generation_id)
        .with_member_id(sb(id.clone()))
        .with_group_instance_id(instance.map(|i| sb(i.to_string())))
        .with_assignments(vec![sync_group_request::SyncGroupRequestAssignment::default()
            .with_member_id(sb(id.clone()))
            .with_assignment(bytes::Bytes::from_static(b"A"))]);
    let ResponseKind::SyncGroup(s) = dispatch(b, &ctx(ApiKey::SyncGroup, VERSION), RequestKind::SyncGroup(sync)).await
    else {
        panic!("SyncGroup answered with another API")
    };
    assert_eq!(s.error_code, 0);
    assert_eq!(recorded(b), vec![id.clone()], "recorded before the leader's answer");
    id
}

/// The member ids the group's file records.
fn recorded(b: &Broker) -> Vec<String> {
    GroupOffsets::load(&b.volume, "g")
        .unwrap()
        .classic
        .map(|r| r.members.into_iter().map(|m| m.member_id).collect())
        .unwrap_or_default()
}

/// LeaveGroup clears the record of a group it empties before its answer: a broker
/// taking the group over right after must not load the member that left back in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leave_that_empties_the_group_clears_its_record_before_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let id = stable_member(&b, None).await;
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(sb(id))
        ]);
    let ResponseKind::LeaveGroup(r) = dispatch(&b, &ctx(ApiKey::LeaveGroup, 4), RequestKind::LeaveGroup(leave)).await
    else {
        panic!("LeaveGroup answered with another API")
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(recorded(&b), Vec::<String>::new(), "cleared when the answer went out");
}

/// A static member restarting rejoins a stable group under a new member id and is
/// told it at once (a follower: a restarted leader makes the group rebalance, and
/// the new generation is recorded at its SyncGroup); by then the group's file names
/// the new id, not the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_followers_new_id_is_on_the_volume_when_it_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    // pod-1 alone (generation 1), then pod-0 joins and pod-1 rejoins: generation 2,
    // pod-1 leading.
    let first = joined(&b, "", Some("pod-1")).await;
    assert_eq!(first.error_code, 0);
    let second = tokio::spawn({
        let b = b.clone();
        async move { joined(&b, "", Some("pod-0")).await }
    });
    // pod-0's join is in (the group prepares a rebalance) before pod-1 rejoins.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while b.groups.describe("g").is_none_or(|g| g.members.len() < 2) {
        assert!(std::time::Instant::now() < deadline, "pod-0's join never came in");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let leader = joined(&b, first.member_id.as_str(), Some("pod-1")).await;
    let follower = second.await.unwrap();
    assert_eq!((leader.error_code, follower.error_code), (0, 0));
    assert_eq!(leader.generation_id, follower.generation_id);
    assert_eq!(leader.leader, leader.member_id);
    let assignment = |id: &str| {
        sync_group_request::SyncGroupRequestAssignment::default()
            .with_member_id(sb(id.to_string()))
            .with_assignment(bytes::Bytes::from_static(b"A"))
    };
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id(leader.generation_id)
        .with_member_id(leader.member_id.clone())
        .with_group_instance_id(Some(sb("pod-1")))
        .with_assignments(vec![assignment(&leader.member_id), assignment(&follower.member_id)]);
    let ResponseKind::SyncGroup(s) = dispatch(&b, &ctx(ApiKey::SyncGroup, VERSION), RequestKind::SyncGroup(sync)).await
    else {
        panic!("SyncGroup answered with another API")
    };
    assert_eq!(s.error_code, 0);
    let mut before = recorded(&b);
    before.sort();
    let mut expected = vec![leader.member_id.to_string(), follower.member_id.to_string()];
    expected.sort();
    assert_eq!(before, expected);

    let again = joined(&b, "", Some("pod-0")).await;
    assert_eq!(
        (again.error_code, again.generation_id),
        (0, leader.generation_id),
        "no rebalance"
    );
    assert_ne!(again.member_id, follower.member_id);
    let after = recorded(&b);
    assert!(after.contains(&again.member_id.to_string()), "{after:?}");
    assert!(!after.contains(&follower.member_id.to_string()), "{after:?}");
}

/// A JoinGroup at a broker whose volume fails the group file's read is answered
/// COORDINATOR_NOT_AVAILABLE (the member retries) and makes no group: before, it was
/// KAFKA_STORAGE_ERROR, which Java's consumer takes for a fatal error in a join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_the_volume_fails_is_answered_coordinator_not_available_and_makes_no_group() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let _ = stable_member(&b, None).await;
    let groups = b.volume.groups_dir();
    let aside = dir.path().join("groups-aside");
    // A second group, not in this broker's memory, whose file cannot be read now.
    std::fs::rename(&groups, &aside).unwrap();
    std::fs::write(&groups, b"").unwrap();
    let refused = match dispatch(
        &b,
        &ctx(ApiKey::JoinGroup, VERSION),
        match join("", None) {
            RequestKind::JoinGroup(r) => RequestKind::JoinGroup(r.with_group_id(GroupId(sb("other")))),
            other => other,
        },
    )
    .await
    {
        ResponseKind::JoinGroup(r) => r,
        other => panic!("{other:?}"),
    };
    std::fs::remove_file(&groups).unwrap();
    std::fs::rename(&aside, &groups).unwrap();
    assert_eq!(refused.error_code, ResponseError::CoordinatorNotAvailable.code());
    assert!(b.groups.describe("other").is_none(), "no group made");
}

/// A group file refused for what it holds (here: not JSON) is no failure of the
/// volume to retry past: JoinGroup answers KAFKA_STORAGE_ERROR, as OffsetCommit and
/// OffsetFetch for that group do, until an operator mends the file (`kaasctl groups`
/// names it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_for_a_group_whose_file_is_refused_is_answered_a_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    let path = kaas_core::offsets::offsets_file(&b.volume, "g");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"{ not json").unwrap();
    let refused = joined(&b, "", None).await;
    assert_eq!(refused.error_code, ResponseError::KafkaStorageError.code());
    assert!(b.groups.describe("g").is_none(), "no group made");
}
