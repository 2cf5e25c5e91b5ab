use super::*;

fn coordinator() -> (tempfile::TempDir, GroupCoordinator) {
    coordinator_with(&[])
}

fn coordinator_with(flags: &[&str]) -> (tempfile::TempDir, GroupCoordinator) {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "kaas-server",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--group-initial-rebalance-delay-ms",
        "0",
    ];
    let config = <crate::config::Config as clap::Parser>::parse_from(args.iter().chain(flags));
    let c = GroupCoordinator::new(Volume::new(dir.path()), &config);
    (dir, c)
}

#[test]
fn a_member_past_group_max_size_is_refused_and_one_may_join_once_another_left() {
    let (_d, c) = coordinator_with(&["--group-max-size", "2"]);
    let now = Instant::now();
    let (a, _ra) = handshake(&c, now);
    // The second is asked for its id (pending), and counted from then on.
    let second = now_response(c.join(join_req("", 9), now));
    assert_eq!(second.error_code, ResponseError::MemberIdRequired.code());
    let third = now_response(c.join(join_req("", 9), now));
    assert_eq!(third.error_code, ResponseError::GroupMaxSizeReached.code());
    // The pending one comes back with its id: it is in, the group is full.
    let _rb = c.join(join_req(&second.member_id, 9), now);
    let fourth = now_response(c.join(join_req("", 9), now));
    assert_eq!(fourth.error_code, ResponseError::GroupMaxSizeReached.code());
    // A member already in rejoins as ever.
    assert!(matches!(c.join(join_req(&a, 9), now), Reply::Wait(_) | Reply::Now(_)));
    c.leave("g", &[(a, None)], now).unwrap();
    let fifth = now_response(c.join(join_req("", 9), now));
    assert_eq!(fifth.error_code, ResponseError::MemberIdRequired.code(), "room again");
}

#[test]
fn member_metadata_is_bounded_across_groups_and_given_back_when_members_leave() {
    // Each member of join_req keeps "range" + "meta": 9 bytes.
    let (_d, c) = coordinator_with(&["--group-member-metadata-max-bytes", "20"]);
    let now = Instant::now();
    let (a, _ra) = handshake(&c, now);
    let (b, _rb) = handshake(&c, now);
    assert_eq!(c.metadata.used.load(std::sync::atomic::Ordering::Acquire), 18);
    let first = now_response(c.join(join_req("", 9), now));
    assert_eq!(
        first.error_code,
        ResponseError::MemberIdRequired.code(),
        "nothing kept yet"
    );
    let third = now_response(c.join(join_req(&first.member_id, 9), now));
    assert_eq!(
        third.error_code,
        ResponseError::CoordinatorNotAvailable.code(),
        "no room: retriable"
    );
    // Rejoining with the same metadata holds no more than before.
    let _ = c.join(join_req(&a, 9), now);
    assert_eq!(c.metadata.used.load(std::sync::atomic::Ordering::Acquire), 18);
    c.leave("g", &[(b, None)], now).unwrap();
    assert_eq!(
        c.metadata.used.load(std::sync::atomic::Ordering::Acquire),
        9,
        "given back with the member"
    );
    let again = c.join(join_req(&first.member_id, 9), now);
    assert!(matches!(again, Reply::Wait(_)), "room again");
}

/// The assignments a leader's SyncGroup hands out are kept with the members until
/// the next rebalance: they count against `--group-member-metadata-max-bytes` like the
/// members' protocols. Before, they were not counted: one client leading groups of
/// its own parked an assignment of up to a request's size in each, for as long as it
/// heartbeated. A sync that does not fit is answered COORDINATOR_NOT_AVAILABLE
/// (retriable) and changes nothing.
#[test]
fn assignments_count_against_the_member_metadata_bound() {
    let (_d, c) = coordinator_with(&["--group-member-metadata-max-bytes", "1000"]);
    let now = Instant::now();
    let used = || c.metadata.used.load(std::sync::atomic::Ordering::Acquire);
    let (a, mut ra) = handshake(&c, now);
    let joined = ra.try_recv().unwrap();
    assert_eq!(used(), 9);
    let big = Bytes::from(vec![7u8; 2000]);
    let refused = now_response(sync(
        &c,
        joined.generation_id,
        &a,
        None,
        (None, None),
        vec![(a.clone(), big)],
        now,
    ));
    assert_eq!(refused.error_code, ResponseError::CoordinatorNotAvailable.code());
    assert_eq!(used(), 9, "nothing kept");
    assert_eq!(c.describe("g").unwrap().state, GroupState::CompletingRebalance);
    let fits = Bytes::from(vec![7u8; 500]);
    let mut synced = waited(sync(
        &c,
        joined.generation_id,
        &a,
        None,
        (None, None),
        vec![(a.clone(), fits)],
        now,
    ));
    let synced = synced.try_recv().unwrap();
    assert_eq!((synced.error_code, synced.assignment.len()), (0, 500));
    assert_eq!(used(), 509, "the assignment is counted");
    c.leave("g", &[(a, None)], now).unwrap();
    assert_eq!(used(), 0, "given back with the member");
}

/// A leader replacing its members' assignments: each new one is counted against the
/// bound with every old one as room, so new assignments that fit once the old ones
/// are given back are not refused for holding both (a review found them refused).
#[test]
fn new_assignments_replace_the_old_ones_within_the_bound() {
    let (_d, c) = coordinator_with(&["--group-member-metadata-max-bytes", "1000"]);
    let t0 = Instant::now();
    let used = || c.metadata.used.load(std::sync::atomic::Ordering::Acquire);
    let (leader, follower, inst, generation) = two_static_members_completing(&c, t0);
    let assign = |generation: i32, bytes: usize| {
        let a = Bytes::from(vec![7u8; bytes]);
        now_or_sent(sync(
            &c,
            generation,
            &leader,
            None,
            (None, None),
            vec![(leader.clone(), a.clone()), (follower.clone(), a)],
            t0,
        ))
    };
    assert_eq!(assign(generation, 400).error_code, 0);
    assert_eq!(used(), 18 + 800);
    // Both rejoin: a new generation, new assignments of 450 each (900 with the old
    // 800 given back; 1,700 if both were held).
    let _ = c.join(join_req(&leader, 9), t0);
    let _ = c.join(
        JoinRequest {
            instance_id: Some(inst),
            ..join_req(&follower, 9)
        },
        t0,
    );
    let generation = c.with_group("g", |g| g.generation).unwrap();
    assert_eq!(assign(generation, 450).error_code, 0);
    assert_eq!(used(), 18 + 900);
}

/// The answer a sync got: at once, or sent to its waiter at once.
fn now_or_sent<T>(r: Reply<T>) -> T {
    match r {
        Reply::Now(t) => t,
        Reply::Wait(mut rx) => rx.try_recv().expect("answered"),
    }
}

fn join_req(member: &str, version: i16) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        version,
    }
}

fn sync(
    c: &GroupCoordinator,
    generation: i32,
    member_id: &str,
    instance_id: Option<&str>,
    protocol: (Option<&str>, Option<&str>),
    assignments: Vec<(String, Bytes)>,
    now: Instant,
) -> Reply<SyncGroupResponse> {
    let req = SyncRequest {
        group_id: "g",
        generation,
        member_id,
        instance_id,
        protocol,
        assignments,
    };
    c.sync(req, now)
}

fn now_response<T>(r: Reply<T>) -> T {
    match r {
        Reply::Now(t) => t,
        Reply::Wait(_) => panic!("expected an immediate answer"),
    }
}

fn waited<T>(r: Reply<T>) -> oneshot::Receiver<T> {
    match r {
        Reply::Wait(rx) => rx,
        Reply::Now(_) => panic!("expected to wait"),
    }
}

/// Joins a fresh member through the MEMBER_ID_REQUIRED handshake.
fn handshake(c: &GroupCoordinator, now: Instant) -> (String, oneshot::Receiver<JoinGroupResponse>) {
    let first = now_response(c.join(join_req("", 9), now));
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let id = first.member_id.to_string();
    (id.clone(), waited(c.join(join_req(&id, 9), now)))
}

#[test]
fn a_new_member_must_come_back_with_the_member_id_it_was_given() {
    let (_d, c) = coordinator();
    let now = Instant::now();
    let (id, mut rx) = handshake(&c, now);
    let resp = rx.try_recv().expect("single member completes at once");
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.generation_id, 1);
    assert_eq!(resp.leader.as_str(), id);
    assert_eq!(resp.members.len(), 1);
}

#[test]
fn an_unknown_member_id_is_rejected() {
    let (_d, c) = coordinator();
    let resp = now_response(c.join(join_req("made-up", 9), Instant::now()));
    assert_eq!(resp.error_code, ResponseError::UnknownMemberId.code());
}

#[test]
fn old_clients_join_without_the_handshake() {
    let (_d, c) = coordinator();
    let mut rx = waited(c.join(join_req("", 3), Instant::now()));
    let resp = rx.try_recv().unwrap();
    assert_eq!(resp.error_code, 0);
    assert!(!resp.member_id.is_empty());
}

#[test]
fn a_second_member_triggers_a_rebalance_that_waits_for_the_first_to_rejoin() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (a, mut rx_a) = handshake(&c, t0);
    let gen1 = rx_a.try_recv().unwrap();
    assert!(matches!(
        sync(
            &c,
            gen1.generation_id,
            &a,
            None,
            (None, None),
            vec![(a.clone(), Bytes::from_static(b"all"))],
            t0
        ),
        Reply::Wait(_)
    ));
    assert_eq!(c.heartbeat("g", 1, &a, None, t0), Ok(()));

    let (b, mut rx_b) = handshake(&c, t0);
    assert!(rx_b.try_recv().is_err(), "b waits for a to rejoin");
    assert_eq!(
        c.heartbeat("g", 1, &a, None, t0),
        Err(ResponseError::RebalanceInProgress)
    );
    let mut rx_a2 = waited(c.join(join_req(&a, 9), t0));
    let ja = rx_a2.try_recv().unwrap();
    let jb = rx_b.try_recv().unwrap();
    assert_eq!(ja.generation_id, 2);
    assert_eq!(jb.generation_id, 2);
    // The first member stays leader and alone sees the member list.
    assert_eq!(ja.leader.as_str(), a);
    assert_eq!(ja.members.len(), 2);
    assert!(jb.members.is_empty());

    let mut sync_b = waited(sync(&c, 2, &b, None, (None, None), vec![], t0));
    let mut sync_a = waited(sync(
        &c,
        2,
        &a,
        None,
        (Some("consumer"), Some("range")),
        vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ],
        t0,
    ));
    assert_eq!(sync_a.try_recv().unwrap().assignment, Bytes::from_static(b"A"));
    assert_eq!(sync_b.try_recv().unwrap().assignment, Bytes::from_static(b"B"));
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
    assert_eq!(c.heartbeat("g", 1, &a, None, t0), Err(ResponseError::IllegalGeneration));
}

#[test]
fn a_silent_member_is_expired_and_the_rest_rebalance() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (a, mut rx_a) = handshake(&c, t0);
    rx_a.try_recv().unwrap();
    let (b, mut rx_b) = handshake(&c, t0);
    let _ = waited(c.join(join_req(&a, 9), t0)).try_recv().unwrap();
    rx_b.try_recv().unwrap();
    let _ = sync(&c, 2, &a, None, (None, None), vec![], t0);
    // b keeps heartbeating, a goes silent past its 10 s session.
    let t1 = t0 + Duration::from_secs(8);
    assert_eq!(c.heartbeat("g", 2, &b, None, t1), Ok(()));
    c.tick(t0 + Duration::from_secs(11));
    let view = c.describe("g").unwrap();
    assert_eq!(view.members.len(), 1);
    assert_eq!(view.state, GroupState::PreparingRebalance);
    assert_eq!(
        c.heartbeat("g", 2, &b, None, t1),
        Err(ResponseError::RebalanceInProgress)
    );
    let mut rx = waited(c.join(join_req(&b, 9), t1));
    let resp = rx.try_recv().unwrap();
    assert_eq!(resp.generation_id, 3);
    assert_eq!(resp.leader.as_str(), b);
}

#[test]
fn a_rebalance_completes_without_members_that_miss_the_deadline() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (a, mut rx_a) = handshake(&c, t0);
    rx_a.try_recv().unwrap();
    let (_b, mut rx_b) = handshake(&c, t0);
    // a keeps its session alive but never rejoins.
    for s in [9, 18, 27] {
        let t = t0 + Duration::from_secs(s);
        assert_eq!(
            c.heartbeat("g", 1, &a, None, t),
            Err(ResponseError::RebalanceInProgress)
        );
        c.tick(t);
    }
    c.tick(t0 + Duration::from_secs(29));
    assert!(rx_b.try_recv().is_err());
    c.tick(t0 + Duration::from_secs(31));
    let resp = rx_b.try_recv().unwrap();
    assert_eq!(resp.members.len(), 1, "only b remains, and leads");
    assert!(c.describe("g").unwrap().members.iter().all(|m| m.id != a));
}

#[test]
fn leaving_empties_the_group_and_an_empty_group_can_be_deleted() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (a, mut rx_a) = handshake(&c, t0);
    rx_a.try_recv().unwrap();
    assert_eq!(c.delete("g"), Err(ResponseError::NonEmptyGroup));
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();
    assert_eq!(c.leave("g", &[(a.clone(), None)], t0).unwrap(), vec![None]);
    // Nothing left in memory; the committed offsets keep it listed (as Empty).
    assert!(c.describe("g").is_none());
    assert!(c
        .list(&|_| true)
        .iter()
        .any(|l| l.id == "g" && l.state == "Empty" && l.group_type == "classic"));
    assert_eq!(c.leave("g", &[(a, None)], t0), Err(ResponseError::UnknownMemberId));
    assert_eq!(c.delete("g"), Ok(()));
    assert_eq!(c.delete("g"), Err(ResponseError::GroupIdNotFound));
}

#[test]
fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let mut req = join_req("", 9);
    req.instance_id = Some("pod-1".into());
    let mut rx = waited(c.join(req, t0));
    let first = rx.try_recv().unwrap();
    let old_id = first.member_id.to_string();
    let mut leader_req = join_req("", 9);
    leader_req.instance_id = Some("pod-0".into());
    // A second static member joins; pod-1 rejoins; pod-0 leads? Whoever is first leads.
    let _ = c.join(leader_req, t0);
    let _ = c.join(
        JoinRequest {
            instance_id: Some("pod-1".into()),
            ..join_req(&old_id, 9)
        },
        t0,
    );
    let view = c.describe("g").unwrap();
    assert_eq!(view.state, GroupState::CompletingRebalance);
    let leader = c.with_group("g", |g| g.leader.clone()).flatten().unwrap();
    let follower = view.members.iter().find(|m| m.id != leader).unwrap().id.clone();
    let follower_inst = view
        .members
        .iter()
        .find(|m| m.id == follower)
        .unwrap()
        .instance_id
        .clone()
        .unwrap();
    let _ = sync(
        &c,
        2,
        &leader,
        None,
        (None, None),
        vec![(follower.clone(), Bytes::from_static(b"F"))],
        t0,
    );
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);

    // The follower restarts: unknown member id, same instance id.
    let mut again = join_req("", 9);
    again.instance_id = Some(follower_inst.clone());
    let resp = now_response(c.join(again, t0));
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.generation_id, 2, "no new generation");
    assert_ne!(resp.member_id.as_str(), follower);
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
    let sync = now_response(sync(
        &c,
        2,
        &resp.member_id,
        Some(&follower_inst),
        (None, None),
        vec![],
        t0,
    ));
    assert_eq!(sync.assignment, Bytes::from_static(b"F"));
    // The old incarnation is fenced.
    assert_eq!(
        c.heartbeat("g", 2, &follower, Some(&follower_inst), t0),
        Err(ResponseError::FencedInstanceId)
    );
}

/// Two static members, pod-0 and pod-1, joined: the group waits for the leader's
/// SyncGroup (CompletingRebalance). Returns (leader id, follower id, follower
/// instance, generation).
fn two_static_members_completing(c: &GroupCoordinator, t0: Instant) -> (String, String, String, i32) {
    two_static_members_completing_with(c, t0, &join_req("", 9).protocols)
}

/// [`two_static_members_completing`], both members offering `protocols`.
fn two_static_members_completing_with(
    c: &GroupCoordinator,
    t0: Instant,
    protocols: &[(String, Bytes)],
) -> (String, String, String, i32) {
    let req = |member: &str, pod: &str| JoinRequest {
        instance_id: Some(pod.into()),
        protocols: protocols.to_vec(),
        ..join_req(member, 9)
    };
    let first = waited(c.join(req("", "pod-1"), t0)).try_recv().unwrap();
    let _ = c.join(req("", "pod-0"), t0);
    let _ = c.join(req(first.member_id.as_str(), "pod-1"), t0);
    let view = c.describe("g").unwrap();
    assert_eq!(view.state, GroupState::CompletingRebalance);
    let leader = c.with_group("g", |g| g.leader.clone()).flatten().unwrap();
    let follower = view.members.iter().find(|m| m.id != leader).unwrap();
    let generation = c.with_group("g", |g| g.generation).unwrap();
    (
        leader,
        follower.id.clone(),
        follower.instance_id.clone().unwrap(),
        generation,
    )
}

/// The leader's SyncGroup giving the follower the assignment "F".
fn leader_assigns(
    c: &GroupCoordinator,
    generation: i32,
    leader: &str,
    follower: String,
    t0: Instant,
) -> Reply<SyncGroupResponse> {
    sync(
        c,
        generation,
        leader,
        None,
        (None, None),
        vec![(follower, Bytes::from_static(b"F"))],
        t0,
    )
}

/// A static member restarting while the group waits for the leader's SyncGroup takes
/// a new member id the leader's assignment does not name: without a new rebalance it
/// was answered an empty assignment and the group went Stable, its partitions owned
/// by nobody (Apache rebalances here: "the new member id would not get any assignment").
#[test]
fn a_static_member_restarting_before_the_leaders_sync_causes_a_rebalance() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (leader, follower, inst, generation) = two_static_members_completing(&c, t0);
    let mut again = join_req("", 9);
    again.instance_id = Some(inst.clone());
    let rejoin = c.join(again, t0);
    let synced = leader_assigns(&c, generation, &leader, follower, t0);
    let group = c.describe("g").unwrap();
    assert_eq!(
        group.state,
        GroupState::PreparingRebalance,
        "the restarted member's new id has no assignment: a rebalance must give it one"
    );
    assert_eq!(
        now_response(synced).error_code,
        ResponseError::RebalanceInProgress.code()
    );
    drop(rejoin);
}

/// A static member restarting with protocols that change the one the group would
/// select (KIP-429's upgrade: both offered `range` then `cooperative-sticky`; one comes
/// back with `cooperative-sticky` alone) rebalances, as Apache's: answered the current
/// generation, it would be told `range`, which it no longer offers. One coming back
/// with the same protocols and other metadata (a Java member's generation and owned
/// partitions, Streams' user data: different at every restart) keeps its assignment
/// without a rebalance (KIP-345).
#[test]
fn a_static_member_restarting_with_other_protocols_causes_a_rebalance() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let both: Vec<(String, Bytes)> = vec![
        ("range".into(), Bytes::from_static(b"meta")),
        ("cooperative-sticky".into(), Bytes::from_static(b"meta")),
    ];
    let (leader, follower, inst, generation) = two_static_members_completing_with(&c, t0, &both);
    let _ = leader_assigns(&c, generation, &leader, follower, t0);
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
    // Other metadata, same protocols: the current generation, its assignment kept.
    let mut again = join_req("", 9);
    again.instance_id = Some(inst.clone());
    again.protocols = both
        .iter()
        .map(|(n, _)| (n.clone(), Bytes::from_static(b"generation 2")))
        .collect();
    let resp = now_response(c.join(again, t0));
    assert_eq!((resp.error_code, resp.generation_id), (0, generation));
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
    // cooperative-sticky alone: the group's protocol must change.
    let mut again = join_req("", 9);
    again.instance_id = Some(inst);
    again.protocols = vec![("cooperative-sticky".into(), Bytes::from_static(b"meta"))];
    let _ = c.join(again, t0);
    assert_eq!(c.describe("g").unwrap().state, GroupState::PreparingRebalance);
}

#[test]
fn session_timeouts_outside_the_broker_limits_are_rejected() {
    let (_d, c) = coordinator();
    let mut req = join_req("", 9);
    req.session_timeout_ms = 10;
    assert_eq!(
        now_response(c.join(req, Instant::now())).error_code,
        ResponseError::InvalidSessionTimeout.code()
    );
}

#[test]
fn a_member_with_no_common_protocol_is_inconsistent() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (_a, mut rx) = handshake(&c, t0);
    rx.try_recv().unwrap();
    let mut req = join_req("", 9);
    req.protocols = vec![("roundrobin".into(), Bytes::new())];
    assert_eq!(
        now_response(c.join(req, t0)).error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
}

#[test]
fn refused_and_abandoned_joins_leave_no_group_in_memory() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    for i in 0..100 {
        let mut req = join_req("", 9);
        req.group_id = format!("refused-{i}");
        req.protocols.clear();
        let r = now_response(c.join(req, t0));
        assert_eq!(r.error_code, ResponseError::InconsistentGroupProtocol.code());
        let mut req = join_req("no-such-member", 9);
        req.group_id = format!("unknown-{i}");
        assert_eq!(
            now_response(c.join(req, t0)).error_code,
            ResponseError::UnknownMemberId.code()
        );
    }
    assert_eq!(c.in_memory(), 0);
    // A handshake never completed holds a pending id until its session timeout.
    let mut req = join_req("", 9);
    req.group_id = "abandoned".into();
    assert_eq!(
        now_response(c.join(req, t0)).error_code,
        ResponseError::MemberIdRequired.code()
    );
    assert_eq!(c.in_memory(), 1);
    c.tick(t0 + Duration::from_secs(11));
    assert_eq!(c.in_memory(), 0);
    // A group whose last member left is evicted too; its generation restarts.
    let (id, mut rx) = handshake(&c, t0);
    assert_eq!(rx.try_recv().unwrap().generation_id, 1);
    c.leave("g", &[(id, None)], t0).unwrap();
    assert_eq!(c.in_memory(), 0);
}

#[test]
fn protocol_matching_is_linear_in_the_protocols() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let many: Vec<(String, Bytes)> = (0..200_000).map(|i| (format!("p{i}"), Bytes::new())).collect();
    let fresh = |protocols: Vec<(String, Bytes)>| {
        let mut req = join_req("", 1);
        req.protocols = protocols;
        waited(c.join(req, t0))
    };
    let first = fresh(many.clone()).try_recv().unwrap();
    // Two more members, one listing the same 200,000 protocols in reverse: every
    // protocol is common, and the vote (what each lists first) is 2 to 1 for p0.
    let mut b = fresh(many.clone());
    let mut r = fresh(many.iter().rev().cloned().collect());
    let mut req = join_req(&first.member_id, 1);
    req.protocols = many;
    let mut a = waited(c.join(req, t0));
    for rx in [&mut a, &mut b, &mut r] {
        assert_eq!(rx.try_recv().unwrap().protocol_name.as_deref(), Some("p0"));
    }
}

/// During CompletingRebalance (the leader's SyncGroup still to come), a commit is
/// judged by its member and generation first, as Apache's: a stale generation gets
/// ILLEGAL_GENERATION (abortable for a transactional producer), not
/// REBALANCE_IN_PROGRESS, which Java's producer takes for a fatal error on
/// TxnOffsetCommit; and a transactional commit from the current generation proceeds.
#[test]
fn a_commit_during_completing_rebalance_is_judged_by_member_and_generation_first() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let (leader, follower, _, generation) = two_static_members_completing(&c, t0);
    assert_eq!(c.describe("g").unwrap().state, GroupState::CompletingRebalance);
    for transactional in [false, true] {
        assert_eq!(
            c.check_commit("g", generation - 1, &follower, None, transactional),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            c.check_commit("g", generation, "nobody", None, transactional),
            Err(ResponseError::UnknownMemberId)
        );
    }
    assert_eq!(
        c.check_commit("g", generation, &leader, None, false),
        Err(ResponseError::RebalanceInProgress)
    );
    assert_eq!(c.check_commit("g", generation, &leader, None, true), Ok(()));
}

/// A transaction's offset hook for a group with nothing on the volume (AddOffsetsToTxn
/// names any string; nothing was staged for it) takes no lock and makes no entry:
/// before, each such group left a `.lock` file and an offsets-cache entry behind for
/// good. A group with staged offsets still has them committed.
#[test]
fn finishing_a_transaction_for_a_group_with_nothing_staged_leaves_no_trace() {
    let (dir, c) = coordinator();
    let groups_dir = Volume::new(dir.path()).cluster_dir().join("groups");
    let files = || std::fs::read_dir(&groups_dir).map(|d| d.count()).unwrap_or(0);
    for i in 0..10 {
        c.finish_pending(&format!("nothing-{i}"), 7, 0, true, &|| Ok(()))
            .unwrap();
    }
    assert_eq!((files(), c.offsets.lock().unwrap().len()), (0, 0));
    c.stage_offsets("g", 7, 0, "tx", &[("t".into(), 0, 42, -1, None)], &|| Ok(()), &|_| {
        Ok(())
    })
    .unwrap()
    .unwrap();
    c.finish_pending("g", 7, 0, true, &|| Ok(())).unwrap();
    assert_eq!(c.fetch_offsets("g").unwrap().get("t", 0).unwrap().offset, 42);
}

#[test]
fn committed_offsets_are_on_the_volume() {
    let (dir, c) = coordinator();
    assert_eq!(c.check_commit("g", -1, "", None, false), Ok(()));
    c.commit_offsets("g", &[("t".into(), 0, 42, -1, None)]).unwrap();
    let reloaded = GroupOffsets::load(&Volume::new(dir.path()), "g").unwrap();
    assert_eq!(reloaded.get("t", 0).unwrap().offset, 42);
    assert_eq!(c.list(&|_| true).len(), 1);
}

#[test]
fn an_offsets_file_changed_behind_the_coordinator_is_reloaded() {
    let (dir, c) = coordinator();
    let volume = Volume::new(dir.path());
    c.stage_offsets("g", 7, 0, "tx", &[("t".into(), 0, 42, -1, None)], &|| Ok(()), &|_| {
        Ok(())
    })
    .unwrap()
    .unwrap();
    assert!(c.fetch_offsets("g").unwrap().has_pending("t", 0));
    // An operator tool discards the staged offsets directly on the volume.
    let mut on_disk = GroupOffsets::load(&volume, "g").unwrap();
    assert!(on_disk.discard_pending(7, 0));
    on_disk.save(&volume).unwrap();
    assert!(!c.fetch_offsets("g").unwrap().has_pending("t", 0));
    // ...and a later commit by the broker does not resurrect them.
    c.commit_offsets("g", &[("t".into(), 1, 5, -1, None)]).unwrap();
    assert!(GroupOffsets::load(&volume, "g").unwrap().pending.is_empty());
}

/// A new static member refused for want of metadata room leaves no mapping of its
/// instance id behind (one to a member that does not exist made the next join of that
/// instance, and a SyncGroup under it, panic).
#[test]
fn a_static_member_refused_for_room_leaves_no_mapping_behind() {
    let (_d, c) = coordinator_with(&["--group-member-metadata-max-bytes", "20"]);
    let now = Instant::now();
    let (_a, _ra) = handshake(&c, now);
    let (b, _rb) = handshake(&c, now);
    let stat = || {
        let mut r = join_req("", 9);
        r.instance_id = Some("i-1".into());
        r
    };
    let refused = now_response(c.join(stat(), now));
    assert_eq!(refused.error_code, ResponseError::CoordinatorNotAvailable.code());
    // Again: no panic, the same answer; and room again once the other member left.
    let again = now_response(c.join(stat(), now));
    assert_eq!(again.error_code, ResponseError::CoordinatorNotAvailable.code());
    // The group stays (one member left), so a mapping left behind would be found.
    c.leave("g", &[(b, None)], now).unwrap();
    assert!(matches!(c.join(stat(), now), Reply::Wait(_)));
}

mod consumer_groups {
    //! KIP-848 consumer groups in the coordinator: the volume record, fail-over,
    //! the classic/consumer clash rules and the member-epoch checks of offsets.
    use super::*;
    use crate::groups::consumer::tests::beat;
    use crate::groups::consumer::{Heartbeat, TopicsView};

    fn topics() -> TopicsView {
        TopicsView::new([("orders".to_string(), uuid::Uuid::from_u128(7), 4)])
    }

    fn join(id: &str) -> Heartbeat {
        crate::groups::consumer::tests::join(id, &["orders"])
    }

    #[test]
    fn a_member_keeps_its_epoch_and_partitions_when_another_coordinator_takes_the_group_over() {
        let (dir, c) = coordinator();
        let r = c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        assert_eq!(r.member_epoch, 1);
        let owned = r.assignment.unwrap();
        assert_eq!(owned.values().map(|p| p.len()).sum::<usize>(), 4);
        // The record is on the volume, in the group's offsets file.
        let record = GroupOffsets::load(&Volume::new(dir.path()), "g")
            .unwrap()
            .consumer
            .unwrap();
        assert_eq!(record.members["a"].epoch, 1);
        assert_eq!(record.members["a"].assigned, owned);
        // A second coordinator on the same volume (the group moved): the member's next
        // heartbeat at its epoch is accepted, nothing moves, the assignment is resent.
        let other = other_coordinator(dir.path(), &[]);
        let r = other
            .consumer_heartbeat("g", beat("a", 1, &owned), &topics(), 10)
            .unwrap();
        assert_eq!(r.member_epoch, 1);
        assert_eq!(r.assignment, Some(owned.clone()));
        // An unknown member is told so.
        let e = other
            .consumer_heartbeat("g", beat("zz", 1, &owned), &topics(), 10)
            .unwrap_err();
        assert_eq!(e.code(), ResponseError::UnknownMemberId);
    }

    /// A heartbeat or a leave for a group that has no record (here or on the volume),
    /// and a join it must refuse (an invalid regular expression, an unknown assignor),
    /// are refused as before but leave nothing: before, each took the group's file
    /// lock first, so a client naming random group ids left a `.lock` file on the
    /// volume and an entry in the offsets cache for each, without end.
    #[test]
    fn refused_heartbeats_for_groups_without_a_record_leave_no_trace() {
        let (dir, c) = coordinator();
        let groups_dir = Volume::new(dir.path()).cluster_dir().join("groups");
        let files = || std::fs::read_dir(&groups_dir).map(|d| d.count()).unwrap_or(0);
        let cached = || c.offsets.lock().unwrap().len();
        let (files_before, cached_before) = (files(), cached());
        let owned = BTreeMap::new();
        for i in 0..20 {
            let g = format!("random-{i}");
            let e = c
                .consumer_heartbeat(&g, beat("m", 1, &owned), &topics(), 0)
                .unwrap_err();
            assert_eq!(e.code(), ResponseError::UnknownMemberId);
            let e = c
                .consumer_heartbeat(&g, beat("m", -1, &owned), &topics(), 0)
                .unwrap_err();
            assert_eq!(e.code(), ResponseError::UnknownMemberId);
            let mut bad = join("m");
            bad.subscribed_regex = Some("(unclosed".into());
            let e = c.consumer_heartbeat(&g, bad, &topics(), 0).unwrap_err();
            assert_eq!(e.code(), ResponseError::InvalidRegularExpression);
            let mut bad = join("m");
            bad.server_assignor = Some("nope".into());
            let e = c.consumer_heartbeat(&g, bad, &topics(), 0).unwrap_err();
            assert_eq!(e.code(), ResponseError::UnsupportedAssignor);
        }
        assert_eq!((files(), cached()), (files_before, cached_before));
        // A join that is admitted still makes the group.
        assert_eq!(
            c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap().member_epoch,
            1
        );
        assert!(files() > files_before);
    }

    #[test]
    fn offsets_of_a_consumer_group_are_checked_against_the_member_epoch() {
        let (_d, c) = coordinator();
        let r = c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        let epoch = r.member_epoch;
        assert_eq!(c.check_consumer_member("g", "a", epoch, false), Some(Ok(())));
        assert_eq!(
            c.check_consumer_member("g", "a", epoch - 1, false),
            Some(Err(ResponseError::StaleMemberEpoch))
        );
        // Above the member's epoch too (a zombie, or a split brain): Apache's
        // STALE_MEMBER_EPOCH for any mismatch. Java's commit manager takes
        // FENCED_MEMBER_EPOCH on a commit for an unexpected, fatal error.
        assert_eq!(
            c.check_consumer_member("g", "a", epoch + 1, false),
            Some(Err(ResponseError::StaleMemberEpoch))
        );
        assert_eq!(
            c.check_consumer_member("g", "zz", epoch, false),
            Some(Err(ResponseError::UnknownMemberId))
        );
        // A consumer-protocol member must commit with OffsetCommit v9 or later.
        assert_eq!(
            c.check_consumer_member("g", "a", epoch, true),
            Some(Err(ResponseError::UnsupportedVersion))
        );
        // An admin tool (epoch -1) only while the group is empty.
        assert_eq!(
            c.check_consumer_member("g", "", -1, false),
            Some(Err(ResponseError::UnknownMemberId))
        );
        // Not a consumer group: the classic checks apply.
        assert_eq!(c.check_consumer_member("other", "a", 1, false), None);
        let owned = r.assignment.unwrap();
        c.consumer_heartbeat("g", beat("a", -1, &owned), &topics(), 1).unwrap();
        assert_eq!(c.check_consumer_member("g", "", -1, false), Some(Ok(())));
    }

    #[test]
    fn a_classic_member_is_refused_while_the_consumer_group_has_members_and_an_empty_one_is_converted() {
        let (dir, c) = coordinator();
        let r = c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        assert_eq!(
            c.admit_classic("g", || ()),
            Err(ResponseError::InconsistentGroupProtocol)
        );
        c.commit_offsets("g", &[("orders".into(), 0, 5, -1, None)]).unwrap();
        c.consumer_heartbeat("g", beat("a", -1, &r.assignment.unwrap()), &topics(), 1)
            .unwrap();
        assert_eq!(c.admit_classic("g", || ()), Ok(()));
        let after = GroupOffsets::load(&Volume::new(dir.path()), "g").unwrap();
        assert!(after.consumer.is_none(), "the empty consumer group was converted");
        assert_eq!(after.get("orders", 0).unwrap().offset, 5, "its committed offsets stay");
        // And the other way: a classic group with members refuses a consumer member.
        let t0 = Instant::now();
        let (_m, mut rx) = handshake(&c, t0);
        rx.try_recv().unwrap();
        let e = c.consumer_heartbeat("g", join("b"), &topics(), 2).unwrap_err();
        assert_eq!(e.code(), ResponseError::GroupIdNotFound);
    }

    #[test]
    fn members_expire_only_in_groups_this_broker_coordinates() {
        let (_d, c) = coordinator_with(&["--group-consumer-session-timeout-ms", "1000"]);
        c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        c.expire_consumer_members(&topics, &|_| false, 5_000);
        assert!(
            c.describe_consumer("g").unwrap().unwrap().members.len() == 1,
            "not ours: left alone"
        );
        c.expire_consumer_members(&topics, &|_| true, 500);
        assert_eq!(
            c.describe_consumer("g").unwrap().unwrap().members.len(),
            1,
            "its session has not ended"
        );
        c.expire_consumer_members(&topics, &|_| true, 5_000);
        let view = c.describe_consumer("g").unwrap().unwrap();
        assert!(view.members.is_empty());
        assert_eq!(view.state, "Empty");
    }

    /// A live-set change that leaves a consumer group on this broker keeps its
    /// members' session deadlines. Before, every change rebuilt every cached group
    /// from its record with fresh sessions: with changes more often than the session
    /// timeout (a broker's lease flapping, a rolling restart), a dead member was never
    /// removed and its partitions were never consumed. A group that came to this
    /// broker with the change still gets fresh sessions (its members heartbeated to
    /// another coordinator until then).
    #[test]
    fn a_live_set_change_that_leaves_a_group_here_keeps_its_members_deadlines() {
        let (_d, c) = coordinator_with(&["--group-consumer-session-timeout-ms", "1000"]);
        // Times well before the wall clock: a rebuild from the record (which starts
        // sessions at the wall clock) then puts deadlines far past them.
        let base = kaas_core::now_ms() - 100_000;
        let a = c.consumer_heartbeat("g", join("a"), &topics(), base).unwrap();
        let (mut a_epoch, mut a_owned) = (a.member_epoch, a.assignment.unwrap_or_default());
        c.consumer_heartbeat("g", join("b"), &topics(), base).unwrap();
        // Only a heartbeats; the live set changes every 600 ms, the group staying here.
        for step in 1..=4 {
            let now = base + step * 600;
            c.forget_unowned(|_| true);
            let r = c
                .consumer_heartbeat("g", beat("a", a_epoch, &a_owned), &topics(), now)
                .unwrap();
            a_epoch = r.member_epoch;
            if let Some(assigned) = r.assignment {
                a_owned = assigned;
            }
            c.expire_consumer_members(&topics, &|_| true, now);
        }
        let members: Vec<String> = c
            .describe_consumer("g")
            .unwrap()
            .unwrap()
            .members
            .iter()
            .map(|m| m.member.id.clone())
            .collect();
        assert_eq!(
            members,
            ["a"],
            "b's session ended 1 s after its join, the group never left this broker"
        );
        // The group goes to another broker and comes back: a full session from then
        // (a heartbeated to the other coordinator meanwhile), though a's deadline
        // here has passed.
        let later = base + 10_000;
        c.forget_unowned(|_| false);
        c.forget_unowned(|_| true);
        c.expire_consumer_members(&topics, &|_| true, later);
        assert_eq!(c.describe_consumer("g").unwrap().unwrap().members.len(), 1);
    }

    #[test]
    fn a_file_rewritten_by_someone_else_keeps_members_session_deadlines() {
        let (dir, c) = coordinator_with(&["--group-consumer-session-timeout-ms", "1000"]);
        c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        // kaasctl (or a transaction finishing on another broker) rewrites the file.
        GroupOffsets::update(&Volume::new(dir.path()), "g", |o| {
            o.set(
                "orders",
                1,
                kaas_core::offsets::CommittedOffset {
                    offset: 3,
                    leader_epoch: -1,
                    metadata: None,
                    commit_ms: 0,
                },
            );
            ((), true)
        })
        .unwrap();
        // The reload must not hand the member a new session: it still ends at 1 000.
        c.expire_consumer_members(&topics, &|_| true, 5_000);
        assert!(c.describe_consumer("g").unwrap().unwrap().members.is_empty());
        assert_eq!(
            GroupOffsets::load(&Volume::new(dir.path()), "g")
                .unwrap()
                .get("orders", 1)
                .unwrap()
                .offset,
            3
        );
    }

    #[test]
    fn a_non_empty_consumer_group_cannot_be_deleted() {
        let (_d, c) = coordinator();
        let r = c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        assert_eq!(c.delete("g"), Err(ResponseError::NonEmptyGroup));
        c.consumer_heartbeat("g", beat("a", -1, &r.assignment.unwrap()), &topics(), 1)
            .unwrap();
        assert_eq!(c.delete("g"), Ok(()));
    }

    #[test]
    fn a_group_cached_before_the_live_set_changed_is_reloaded_with_fresh_sessions_not_expired() {
        // Review finding: deadlines cached by a broker while the group was elsewhere
        // (or long ago) expired live members the moment the group came back.
        let (_d, c) = coordinator_with(&["--group-consumer-session-timeout-ms", "1000"]);
        c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        c.coordination_changed();
        c.expire_consumer_members(&topics, &|_| true, 5_000);
        assert_eq!(c.describe_consumer("g").unwrap().unwrap().members.len(), 1);
    }

    #[test]
    fn a_coordinator_taking_a_group_over_expires_members_that_never_heartbeat_to_it() {
        let (dir, c) = coordinator_with(&["--group-consumer-session-timeout-ms", "1000"]);
        c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        let other = other_coordinator(dir.path(), &["--group-consumer-session-timeout-ms", "1000"]);
        let now = kaas_core::now_ms();
        other.expire_consumer_members(&topics, &|_| true, now);
        let record = GroupOffsets::load(&Volume::new(dir.path()), "g")
            .unwrap()
            .consumer
            .unwrap();
        assert_eq!(record.members.len(), 1, "loaded with a full session from now");
        other.expire_consumer_members(&topics, &|_| true, now + 60_000);
        let record = GroupOffsets::load(&Volume::new(dir.path()), "g")
            .unwrap()
            .consumer
            .unwrap();
        assert!(record.members.is_empty(), "{record:?}");
    }

    #[test]
    fn an_expiry_pass_never_writes_a_consumer_group_into_a_group_that_is_none() {
        // Review finding: the locked re-read found no consumer group (deleted, or
        // converted to classic since an unlocked look) and an empty one was written.
        let (dir, c) = coordinator();
        c.commit_offsets("classic", &[("orders".into(), 0, 1, -1, None)])
            .unwrap();
        assert!(c
            .with_consumer_if("classic", false, || Ok(()), |_| Ok(()))
            .unwrap()
            .is_none());
        let after = GroupOffsets::load(&Volume::new(dir.path()), "classic").unwrap();
        assert!(after.consumer.is_none());
        assert_eq!(after.version, kaas_core::offsets::OFFSETS_FORMAT_VERSION);
    }

    #[test]
    fn a_commit_is_checked_again_as_it_is_written() {
        let (dir, c) = coordinator();
        let r = c.consumer_heartbeat("g", join("a"), &topics(), 0).unwrap();
        let entries = [("orders".to_string(), 0, 9, -1, None)];
        assert_eq!(
            c.commit_offsets_checked("g", &entries, Some(("a", r.member_epoch + 1, false)), &|| true)
                .unwrap(),
            Err(ResponseError::StaleMemberEpoch)
        );
        assert!(GroupOffsets::load(&Volume::new(dir.path()), "g")
            .unwrap()
            .get("orders", 0)
            .is_none());
        assert_eq!(
            c.commit_offsets_checked("g", &entries, Some(("a", r.member_epoch, false)), &|| true)
                .unwrap(),
            Ok(())
        );
        assert_eq!(
            GroupOffsets::load(&Volume::new(dir.path()), "g")
                .unwrap()
                .get("orders", 0)
                .unwrap()
                .offset,
            9
        );
    }
}

/// Second review of issue 29: the consumer groups' generation goes up before a
/// changed live set is published (it is the cluster's), so an expiry pass that sees
/// the new owner never trusts the old generation's session deadlines; an unchanged
/// live set leaves it alone (deadlines are kept).
#[test]
fn the_live_set_generation_is_the_clusters_and_goes_up_only_with_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let b = crate::handlers::test_support::broker(dir.path());
    let before = b.cluster.live_generation.load(std::sync::atomic::Ordering::SeqCst);
    let mut peers = BTreeMap::new();
    peers.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 9093));
    b.set_live_brokers(peers.clone());
    let after = b.cluster.live_generation.load(std::sync::atomic::Ordering::SeqCst);
    assert!(after > before);
    b.set_live_brokers(peers);
    assert_eq!(
        b.cluster.live_generation.load(std::sync::atomic::Ordering::SeqCst),
        after
    );
    // The coordinator reads the same counter.
    b.groups.coordination_changed();
    assert_eq!(
        b.cluster.live_generation.load(std::sync::atomic::Ordering::SeqCst),
        after + 1
    );
}

/// Commits offset 5 of `topic` partition 0 for `group`, then makes the file say it was
/// committed long ago (commit_ms 0) and, with `active`, when the group last had members.
fn committed_long_ago(c: &GroupCoordinator, v: &Volume, group: &str, topic: &str, active: Option<i64>) {
    c.commit_offsets(group, &[(topic.into(), 0, 5, -1, None)]).unwrap();
    GroupOffsets::update(v, group, |o| {
        o.offsets.get_mut(topic).unwrap().get_mut(&0).unwrap().commit_ms = 0;
        o.active_ms = active;
        ((), true)
    })
    .unwrap();
}

/// Another coordinator on the same volume (a restart, or the group moved), with `flags`.
fn other_coordinator(dir: &std::path::Path, flags: &[&str]) -> GroupCoordinator {
    let args = ["kaas-server", "--data-dir", dir.to_str().unwrap()];
    let config = <crate::config::Config as clap::Parser>::parse_from(args.iter().chain(flags));
    GroupCoordinator::new(Volume::new(dir), &config)
}

/// Offsets retention (KIP-211, `--offsets-retention-ms`): while a classic group has
/// members nothing expires, however old its commits; once the last member left, its
/// offsets go a retention after that (not after the commits), and its file with them.
/// A group never seen with members starts its clock at the first pass. Groups another
/// broker coordinates are not touched.
#[test]
fn committed_offsets_expire_a_retention_after_the_group_last_had_members() {
    let (dir, c) = coordinator_with(&["--offsets-retention-ms", "1000"]);
    let v = Volume::new(dir.path());
    let owned = |g: &str| g != "elsewhere";
    let t0 = Instant::now();
    let (a, mut rx_a) = handshake(&c, t0);
    rx_a.try_recv().unwrap();
    for g in ["g", "solo", "elsewhere"] {
        committed_long_ago(&c, &v, g, "t", None);
    }
    let first = kaas_core::now_ms();
    let pass = c.expire_offsets(&owned, first).unwrap();
    assert_eq!(pass, RetentionPass::default(), "a member, and a clock just started");
    assert_eq!(GroupOffsets::load(&v, "g").unwrap().active_ms, Some(first));
    assert_eq!(GroupOffsets::load(&v, "solo").unwrap().active_ms, Some(first));
    // The member leaves; the group leaves memory, its last member's time kept.
    std::thread::sleep(Duration::from_millis(30));
    c.leave("g", &[(a, None)], t0).unwrap();
    assert!(c.describe("g").is_none());
    let left = kaas_core::now_ms();
    assert!(left > first);
    let pass = c.expire_offsets(&owned, first + 999).unwrap();
    assert_eq!(pass, RetentionPass::default());
    // A retention after the first pass: solo goes, g (left later) stays.
    let pass = c.expire_offsets(&owned, first + 1_000).unwrap();
    assert_eq!((pass.offsets_expired, pass.groups_removed), (1, 1), "{pass:?}");
    assert!(GroupOffsets::load(&v, "g").unwrap().get("t", 0).is_some());
    let pass = c.expire_offsets(&owned, left + 1_000).unwrap();
    assert_eq!(
        (pass.offsets_expired, pass.groups_removed, pass.failed),
        (1, 1, 0),
        "{pass:?}"
    );
    for g in ["g", "solo"] {
        assert!(!kaas_core::offsets::offsets_file(&v, g).exists(), "{g}");
    }
    assert!(c.list(&owned).is_empty());
    assert_eq!(
        GroupOffsets::load(&v, "elsewhere").unwrap().get("t", 0).unwrap().offset,
        5,
        "not this broker's group"
    );
}

/// A classic group's members live in its coordinator's memory alone: a broker that
/// has just begun coordinating (started, or the live set changed) expires nothing
/// until the longest session a member may have (or the retention, if shorter) has
/// passed, so the members of a group that came active after the previous
/// coordinator's last pass rejoin before the group is judged empty.
#[test]
fn a_coordinator_new_to_its_live_set_expires_nothing_until_a_session_has_passed() {
    let (dir, c) = coordinator_with(&[
        "--offsets-retention-ms",
        "1000",
        "--group-min-session-timeout-ms",
        "100",
        "--group-max-session-timeout-ms",
        "500",
    ]);
    let v = Volume::new(dir.path());
    let owned = |_: &str| true;
    // A group whose file says it was last active, and committed, long ago.
    let ancient = |g: &str| committed_long_ago(&c, &v, g, "t", Some(0));
    ancient("a");
    let t = kaas_core::now_ms();
    assert_eq!(c.expire_offsets(&owned, t).unwrap(), RetentionPass::default());
    assert_eq!(c.expire_offsets(&owned, t + 499).unwrap(), RetentionPass::default());
    assert_eq!(c.expire_offsets(&owned, t + 500).unwrap().groups_removed, 1);
    ancient("b");
    c.coordination_changed();
    assert_eq!(c.expire_offsets(&owned, t + 600).unwrap(), RetentionPass::default());
    assert_eq!(c.expire_offsets(&owned, t + 1_099).unwrap(), RetentionPass::default());
    assert_eq!(c.expire_offsets(&owned, t + 1_100).unwrap().groups_removed, 1);
    assert!(list_groups(&v).unwrap().is_empty());
}

/// A group deleted between a retention pass's listing and its turn (DeleteGroups,
/// kaasctl) is left deleted: the pass writes no file for it.
#[test]
fn a_retention_pass_does_not_bring_back_a_group_deleted_meanwhile() {
    let (dir, c) = coordinator_with(&["--offsets-retention-ms", "1000"]);
    let v = Volume::new(dir.path());
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();
    assert_eq!(c.delete("g"), Ok(()));
    assert_eq!(
        c.expire_group_offsets("g", 1000, kaas_core::now_ms()).unwrap(),
        (0, false)
    );
    assert!(!kaas_core::offsets::offsets_file(&v, "g").exists());
    assert!(list_groups(&v).unwrap().is_empty());
}

/// A KIP-848 consumer group's retention counts from when its last member left: every
/// write of its record with members before or after it records the time, with no pass
/// needed. A member that joins and leaves between two passes, in a group whose file
/// says it was last active long ago, keeps the group's offsets a retention from the
/// leave.
#[test]
fn a_consumer_groups_last_member_leaving_is_recorded_for_offsets_retention() {
    use crate::groups::consumer::tests::{beat, join};
    use crate::groups::consumer::TopicsView;
    let (dir, c) = coordinator_with(&["--offsets-retention-ms", "1000"]);
    let v = Volume::new(dir.path());
    let owned_here = |_: &str| true;
    let topics = TopicsView::new([("orders".to_string(), uuid::Uuid::from_u128(7), 4)]);
    committed_long_ago(&c, &v, "g", "orders", Some(0));
    // This coordinator's grace began long ago.
    let start = kaas_core::now_ms() - 60_000;
    assert_eq!(c.expire_offsets(&owned_here, start).unwrap(), RetentionPass::default());
    let r = c.consumer_heartbeat("g", join("a", &["orders"]), &topics, 0).unwrap();
    let owned = r.assignment.unwrap();
    c.consumer_heartbeat("g", beat("a", -1, &owned), &topics, 1).unwrap();
    let left = kaas_core::now_ms();
    let recorded = GroupOffsets::load(&v, "g").unwrap().active_ms.unwrap();
    assert!(recorded > 0 && recorded <= left, "{recorded}");
    assert_eq!(
        c.expire_offsets(&owned_here, recorded + 999).unwrap(),
        RetentionPass::default()
    );
    let pass = c.expire_offsets(&owned_here, recorded + 1_000).unwrap();
    assert_eq!((pass.offsets_expired, pass.groups_removed), (1, 1), "{pass:?}");
}

/// A classic group's last member leaving reaches its file within a second
/// (`persist_departures`), so a coordinator that restarts, or a group that moves, before
/// the next retention pass still counts from the leave.
#[test]
fn a_classic_groups_last_member_leaving_is_written_to_its_file() {
    let (dir, c) = coordinator_with(&["--offsets-retention-ms", "1000"]);
    let v = Volume::new(dir.path());
    let t0 = Instant::now();
    let (a, mut rx_a) = handshake(&c, t0);
    rx_a.try_recv().unwrap();
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();
    assert_eq!(GroupOffsets::load(&v, "g").unwrap().active_ms, None);
    let before = kaas_core::now_ms();
    c.leave("g", &[(a, None)], t0).unwrap();
    assert_eq!(c.persist_departures(kaas_core::now_ms()), 1);
    let recorded = GroupOffsets::load(&v, "g").unwrap().active_ms.unwrap();
    assert!(recorded >= before, "{recorded} < {before}");
    assert_eq!(c.persist_departures(kaas_core::now_ms()), 0, "written once");
    // Another coordinator (a restart, or the group moved) knows it from the file.
    let other = other_coordinator(dir.path(), &["--offsets-retention-ms", "1000"]);
    let owned = |_: &str| true;
    assert_eq!(
        other.expire_offsets(&owned, recorded - 5_000).unwrap(),
        RetentionPass::default()
    );
    assert_eq!(
        other.expire_offsets(&owned, recorded + 999).unwrap(),
        RetentionPass::default()
    );
    assert_eq!(
        other.expire_offsets(&owned, recorded + 1_000).unwrap().groups_removed,
        1
    );
}

/// A group that `owns` gives to this broker in the middle of a pass, under a live set
/// published after the pass began, is judged under the new set's grace (the cluster
/// bumps the generation before it publishes the set).
#[test]
fn a_group_that_moves_here_during_a_pass_is_judged_under_the_new_live_sets_grace() {
    let (dir, c) = coordinator_with(&["--offsets-retention-ms", "1000"]);
    let v = Volume::new(dir.path());
    for g in ["a", "b"] {
        committed_long_ago(&c, &v, g, "t", Some(0));
    }
    let t = kaas_core::now_ms();
    // The grace under the current live set began long ago.
    assert_eq!(
        c.expire_offsets(&|g| g == "a", t - 10_000).unwrap(),
        RetentionPass::default()
    );
    // "a" is this broker's before the change; "b" comes with it, and the generation
    // goes up as `owns` first says so.
    let moved = std::cell::Cell::new(false);
    let owns = |g: &str| {
        if g == "b" && !moved.get() {
            moved.set(true);
            c.coordination_changed();
        }
        true
    };
    let pass = c.expire_offsets(&owns, t).unwrap();
    assert_eq!((pass.groups_removed, pass.failed), (1, 0), "only a: {pass:?}");
    assert!(kaas_core::offsets::offsets_file(&v, "b").exists());
}

/// A departure whose write fails for the volume (here the group's lock held elsewhere
/// for the whole wait) is tried again after a pause, not every second; one refused for
/// the file itself (unreadable) is dropped once, logged, and left to the pass.
#[test]
fn a_departure_that_cannot_be_written_is_retried_after_a_pause_and_one_refused_by_its_file_is_dropped() {
    let (dir, c) = coordinator_with(&["--offsets-retention-ms", "1000"]);
    let v = Volume::new(dir.path());
    for g in ["busy", "broken"] {
        c.commit_offsets(g, &[("t".into(), 0, 5, -1, None)]).unwrap();
        c.departures.lock().unwrap().insert(
            g.to_string(),
            Departure {
                at_ms: 100,
                retry: None,
            },
        );
    }
    std::fs::write(kaas_core::offsets::offsets_file(&v, "broken"), b"{not json").unwrap();
    let held = GroupOffsets::lock(&v, "busy").unwrap();
    let t = 1_000_000;
    assert_eq!(c.persist_departures(t), 0);
    assert!(!c.departures.lock().unwrap().contains_key("broken"), "dropped");
    assert!(c.departures.lock().unwrap().contains_key("busy"), "kept for a retry");
    let quick = Instant::now();
    assert_eq!(c.persist_departures(t + 999), 0);
    assert!(
        quick.elapsed() < Duration::from_secs(2),
        "not tried again before its pause"
    );
    drop(held);
    assert_eq!(c.persist_departures(t + 1_000), 1);
    assert_eq!(GroupOffsets::load(&v, "busy").unwrap().active_ms, Some(100));
    assert!(c.departures.lock().unwrap().is_empty());
}

/// DeleteGroups waits for the group's file lock (held by another broker, kaasctl, or a
/// paused process) without holding the group's mutex: the coordinator's tick, which
/// runs on an async worker, and the group's heartbeats never wait behind that.
#[test]
fn a_delete_waiting_for_the_groups_file_lock_holds_up_neither_tick_nor_heartbeats() {
    let (dir, c) = coordinator();
    let v = Volume::new(dir.path());
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();
    // In memory without members: a member id handed out, not yet used.
    let pending = now_response(c.join(join_req("", 9), Instant::now()));
    assert_eq!(pending.error_code, ResponseError::MemberIdRequired.code());
    let held = GroupOffsets::lock(&v, "g").unwrap();
    std::thread::scope(|s| {
        let deleting = s.spawn(|| c.delete("g"));
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        c.tick(Instant::now());
        let took = started.elapsed();
        drop(held);
        let deleted = deleting.join().unwrap();
        assert!(took < Duration::from_secs(1), "tick waited {took:?} behind the delete");
        assert_eq!(deleted, Ok(()));
    });
    assert!(!kaas_core::offsets::offsets_file(&v, "g").exists());
}

/// A DeleteGroups that waited for the group's file lock while its broker was deposed
/// (paused past half the session timeout; another broker coordinates the group now)
/// removed the file once the lock came: the successor's live group lost its offsets.
/// The handler's check runs under the lock, right before the removal.
#[test]
fn a_delete_whose_broker_was_deposed_while_it_waited_removes_nothing() {
    let (dir, c) = coordinator();
    let v = Volume::new(dir.path());
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();
    let ours = std::sync::atomic::AtomicBool::new(true);
    let held = GroupOffsets::lock(&v, "g").unwrap();
    std::thread::scope(|s| {
        let deleting = s.spawn(|| c.delete_guarded("g", &|| ours.load(std::sync::atomic::Ordering::SeqCst)));
        std::thread::sleep(Duration::from_millis(200));
        ours.store(false, std::sync::atomic::Ordering::SeqCst);
        drop(held);
        assert_eq!(deleting.join().unwrap(), Err(ResponseError::NotCoordinator));
    });
    assert_eq!(c.fetch_offsets("g").unwrap().get("t", 0).map(|o| o.offset), Some(5));
}

/// Every classic JoinGroup went through its group's offsets-cache entry, made if
/// missing and never dropped for a group with no record: each group id a consumer
/// joined (a `group.id` made up per run, MEMBER_ID_REQUIRED abandoned, a refused
/// join) stayed in memory until restart, and its next OffsetFetch, now through the
/// cache, left a `.lock` file on the volume. A join for a group with no record
/// leaves neither; a group with committed offsets keeps its entry.
#[test]
fn classic_joins_for_groups_without_a_record_leave_no_cache_entry_or_lock_file() {
    let (dir, c) = coordinator();
    let groups_dir = Volume::new(dir.path()).cluster_dir().join("groups");
    let files = || std::fs::read_dir(&groups_dir).map(|d| d.count()).unwrap_or(0);
    let t0 = Instant::now();
    for i in 0..20 {
        let mut req = join_req("", 9);
        req.group_id = format!("x-{i}");
        let gid = req.group_id.clone();
        let r = c.admit_classic(&gid, || c.join(req, t0)).unwrap();
        assert_eq!(now_response(r).error_code, ResponseError::MemberIdRequired.code());
        c.fetch_offsets(&gid).unwrap();
    }
    assert_eq!((files(), c.offsets.lock().unwrap().len()), (0, 0));
    c.commit_offsets("g", &[("t".into(), 0, 42, -1, None)]).unwrap();
    let r = c.admit_classic("g", || c.join(join_req("", 9), t0)).unwrap();
    assert_eq!(now_response(r).error_code, ResponseError::MemberIdRequired.code());
    assert_eq!(
        c.offsets.lock().unwrap().len(),
        1,
        "a group with offsets keeps its entry"
    );
    assert_eq!(c.fetch_offsets("g").unwrap().get("t", 0).unwrap().offset, 42);
}

/// A static member's join with a long session (120 s) and a 30 s rebalance timeout,
/// as Java static members are set up.
fn long_session_join(member: &str, pod: &str) -> JoinRequest {
    JoinRequest {
        instance_id: Some(pod.into()),
        session_timeout_ms: 120_000,
        rebalance_timeout_ms: 30_000,
        ..join_req(member, 9)
    }
}

/// Two such static members in a Stable group: [(leader, its pod), (follower, its pod)].
fn stable_long_session_pair(c: &GroupCoordinator, t0: Instant) -> [(String, String); 2] {
    let first = waited(c.join(long_session_join("", "pod-1"), t0)).try_recv().unwrap();
    let _ = c.join(long_session_join("", "pod-0"), t0);
    let _ = c.join(long_session_join(first.member_id.as_str(), "pod-1"), t0);
    let leader = c.with_group("g", |g| g.leader.clone()).flatten().unwrap();
    let view = c.describe("g").unwrap();
    let pod = |id: &str| {
        view.members
            .iter()
            .find(|m| m.id == id)
            .unwrap()
            .instance_id
            .clone()
            .unwrap()
    };
    let follower = view.members.iter().find(|m| m.id != leader).unwrap().id.clone();
    let generation = c.with_group("g", |g| g.generation).unwrap();
    let _ = leader_assigns(c, generation, &leader, follower.clone(), t0);
    assert_eq!(c.describe("g").unwrap().state, GroupState::Stable);
    [(leader.clone(), pod(&leader)), (follower.clone(), pod(&follower))]
}

/// A rebalance waited for the larger of each member's rebalance and session timeouts
/// (Apache: the rebalance timeout; the session timeout stands in only for JoinGroup
/// v0), and dropped every member that had not rejoined by then, static members too
/// (Apache keeps them, their partitions held for them until their session expires:
/// KIP-345). A Java static member with a long `session.timeout.ms` that was gone held
/// every other member in JoinGroup until its session ended, and one merely late lost
/// its place, costing a second rebalance when it came back.
#[test]
fn a_rebalance_ends_at_the_rebalance_timeout_and_keeps_static_members_that_did_not_rejoin() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let [(leader, leader_pod), (follower, _)] = stable_long_session_pair(&c, t0);
    // The leader's pod rejoins (a metadata change); the follower's is gone.
    let t1 = t0 + Duration::from_secs(1);
    let mut rx = waited(c.join(long_session_join(&leader, &leader_pod), t1));
    c.tick(t1 + Duration::from_secs(29));
    assert!(rx.try_recv().is_err(), "the rebalance timeout has not passed");
    c.tick(t1 + Duration::from_secs(31));
    let answer = rx
        .try_recv()
        .expect("answered at the rebalance timeout, not the session timeout");
    assert_eq!(answer.error_code, 0);
    let members: Vec<&str> = answer.members.iter().map(|m| m.member_id.as_str()).collect();
    assert!(
        members.contains(&follower.as_str()),
        "the static member is kept: {members:?}"
    );
    // Its session (counted again from the join's completion, as Apache) still ends it.
    c.tick(t1 + Duration::from_secs(31 + 121));
    assert!(
        c.describe("g")
            .is_none_or(|v| v.members.iter().all(|m| m.id != follower)),
        "removed once its session expired"
    );
}

/// [`a_rebalance_ends_at_the_rebalance_timeout_and_keeps_static_members_that_did_not_rejoin`]
/// when the absent static member is the leader: it stayed leader, the member that
/// rejoined was told to follow and waited in SyncGroup for an assignment nobody
/// would send, until the leader's session ended. As Apache, a member that rejoined
/// leads.
#[test]
fn an_absent_static_leader_hands_the_lead_to_a_member_that_rejoined() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    let [_, (follower, follower_pod)] = stable_long_session_pair(&c, t0);
    // The follower rejoins with other metadata (a rebalance); the leader's pod is gone.
    let t1 = t0 + Duration::from_secs(1);
    let mut again = long_session_join(&follower, &follower_pod);
    again.protocols = vec![("range".into(), Bytes::from_static(b"other"))];
    let mut rx = waited(c.join(again, t1));
    c.tick(t1 + Duration::from_secs(31));
    let answer = rx.try_recv().expect("answered at the rebalance timeout");
    assert_eq!(answer.leader.as_str(), follower, "the member that rejoined leads");
    assert_eq!(answer.members.len(), 2, "and assigns for both");
}

/// A rebalance nobody rejoined (a member that started it left; the static members
/// are gone): no generation is completed without a member to lead it; the join waits
/// for the static members' sessions, and the group is empty once they end.
#[test]
fn a_rebalance_nobody_rejoined_waits_for_the_static_members_sessions() {
    let (_d, c) = coordinator();
    let t0 = Instant::now();
    stable_long_session_pair(&c, t0);
    let generation = c.with_group("g", |g| g.generation).unwrap();
    // A dynamic member joins (a rebalance) and leaves again; nobody else rejoins.
    let t1 = t0 + Duration::from_secs(1);
    let id = now_response(c.join(join_req("", 9), t1)).member_id;
    let _ = c.join(join_req(&id, 9), t1);
    c.leave("g", &[(id.to_string(), None)], t1).unwrap();
    c.tick(t1 + Duration::from_secs(31));
    assert_eq!(
        c.with_group("g", |g| g.generation).unwrap(),
        generation,
        "no leaderless generation"
    );
    assert_eq!(c.describe("g").unwrap().state, GroupState::PreparingRebalance);
    c.tick(t0 + Duration::from_secs(122));
    assert!(
        c.describe("g").is_none_or(|v| v.members.is_empty()),
        "their sessions ended"
    );
}

/// One member `a` joined and synced with assignment "A": the group is stable at
/// generation 1 and its record written. Returns a's id.
fn stable_with_one_member(c: &GroupCoordinator, t0: Instant) -> String {
    let (a, mut ra) = handshake(c, t0);
    let joined = ra.try_recv().unwrap();
    let synced = now_or_sent(sync(
        c,
        joined.generation_id,
        &a,
        None,
        (None, None),
        vec![(a.clone(), Bytes::from_static(b"A"))],
        t0,
    ));
    assert_eq!(synced.error_code, 0);
    assert!(c.record_pending("g"), "a new stable generation waits to be written");
    c.persist_record_now("g", &|_| true);
    assert!(!c.record_pending("g"));
    a
}

/// A classic group's members lived only in their coordinator's memory: a broker that
/// took the group over (a restart, a move with the live set) knew none of them until
/// they joined again, answered their heartbeats UNKNOWN_MEMBER_ID (a rebalance
/// for every failover) and deleted the group's offsets if asked to right then
/// (docs/limits.md said so). Now the group's stable generation is in its file: the
/// next coordinator goes on with it, refuses to delete it while its members may be
/// alive, and lets it go once their sessions passed without a word from them.
#[test]
fn a_coordinator_taking_a_classic_group_over_goes_on_with_its_members_and_refuses_to_delete_it() {
    let (dir, c) = coordinator();
    let t0 = Instant::now();
    let a = stable_with_one_member(&c, t0);
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();

    let next = other_coordinator(dir.path(), &[]);
    let t1 = Instant::now();
    assert!(next
        .list(&|_| true)
        .iter()
        .any(|l| l.id == "g" && l.state == "Stable" && l.group_type == "classic"));
    assert_eq!(next.delete("g"), Err(ResponseError::NonEmptyGroup));
    assert_eq!(
        next.delete_offsets("g", &[("t".into(), 0)]),
        Ok(vec![ResponseError::GroupSubscribedToTopic.code()]),
        "the loaded members' subscriptions protect their topics"
    );
    assert_eq!(next.heartbeat("g", 1, &a, None, t1), Ok(()), "no rebalance");
    assert_eq!(next.check_commit("g", 1, &a, None, false), Ok(()));
    let view = next.describe("g").unwrap();
    assert_eq!(view.state, GroupState::Stable);
    assert_eq!(view.members.len(), 1);
    assert_eq!(view.members[0].assignment, Bytes::from_static(b"A"));
    let again = now_response(sync(&next, 1, &a, None, (None, None), vec![], t1));
    assert_eq!(again.assignment, Bytes::from_static(b"A"));

    // Nothing from `a` for its session (10 s): expired, the group empty, its record
    // cleared; then it may go.
    next.tick(t1 + Duration::from_secs(11));
    assert!(next.record_pending("g"));
    assert_eq!(next.persist_records(&|_| true), 1);
    assert_eq!(GroupOffsets::load(&Volume::new(dir.path()), "g").unwrap().classic, None);
    let third = other_coordinator(dir.path(), &[]);
    assert!(third.describe("g").is_none(), "nothing left to load");
    assert_eq!(next.delete("g"), Ok(()));
}

/// Two static members, stable and recorded; then the follower restarts and rejoins
/// without its id, answered at once under a new one: (leader, the follower's old id,
/// its instance id, the generation, the rejoin's answer).
fn static_follower_rejoined(c: &GroupCoordinator, t0: Instant) -> (String, String, String, i32, JoinGroupResponse) {
    let (leader, follower, inst, generation) = two_static_members_completing(c, t0);
    let _ = leader_assigns(c, generation, &leader, follower.clone(), t0);
    c.persist_records(&|_| true);
    let mut again = join_req("", 9);
    again.instance_id = Some(inst.clone());
    let resp = now_response(c.join(again, t0));
    (leader, follower, inst, generation, resp)
}

/// A static member that restarts rejoins a stable group under a new member id, told
/// so at once: the record names the new id before the answer, so a coordinator
/// taking over does not fence it (FENCED_INSTANCE_ID is fatal to a Java consumer).
#[test]
fn a_static_members_new_id_is_recorded_before_it_is_told() {
    let (dir, c) = coordinator();
    let t0 = Instant::now();
    let (_, follower, inst, generation, resp) = static_follower_rejoined(&c, t0);
    assert_eq!((resp.error_code, resp.generation_id), (0, generation));
    assert!(c.record_pending("g"), "the new id waits to be written");
    c.persist_record_now("g", &|_| true);
    assert!(
        c.records_member("g", &resp.member_id),
        "what JoinGroup checks before it answers"
    );
    let next = other_coordinator(dir.path(), &[]);
    assert_eq!(
        next.heartbeat("g", generation, &resp.member_id, Some(&inst), t0),
        Ok(())
    );
    assert_eq!(
        next.heartbeat("g", generation, &follower, Some(&inst), t0),
        Err(ResponseError::FencedInstanceId)
    );
}

/// A static member's rejoin whose record did not land for it is not confirmed: the
/// group moved away between the rejoin and the write, which dropped the write's mark.
/// Before, the write found nothing marked and said it was done, JoinGroup told the
/// member its new id, and the next coordinator, loading the record of the old id,
/// fenced it (FENCED_INSTANCE_ID, fatal to Java's consumer). JoinGroup now answers
/// only when `records_member` holds (else NOT_COORDINATOR, and the member rejoins at
/// the group's new coordinator).
#[test]
fn a_static_rejoin_whose_group_moved_before_its_record_was_written_is_not_confirmed() {
    let (dir, c) = coordinator();
    let t0 = Instant::now();
    let (_, _, inst, generation, resp) = static_follower_rejoined(&c, t0);
    assert_eq!(resp.error_code, 0);
    c.forget_unowned(|_| false);
    assert!(c.persist_record_now("g", &|_| false), "nothing marked is left to write");
    assert!(
        !c.records_member("g", &resp.member_id),
        "the file still names the old id"
    );
    let next = other_coordinator(dir.path(), &[]);
    assert_eq!(
        next.heartbeat("g", generation, &resp.member_id, Some(&inst), t0),
        Err(ResponseError::FencedInstanceId),
        "what the member would have met, told its new id"
    );
}

/// The same when a rebalance starts between the rejoin and the write: the write,
/// finding the group rebalancing, writes nothing, and the file still names the old
/// id. Before, `records_member` took a rebalancing group's file as standing for it
/// (a second review): the member was told an id no record names.
#[test]
fn a_static_rejoin_whose_group_began_a_rebalance_before_its_record_was_written_is_not_confirmed() {
    let (_dir, c) = coordinator();
    let t0 = Instant::now();
    let (leader, _, _, _, resp) = static_follower_rejoined(&c, t0);
    assert_eq!(resp.error_code, 0);
    // A third member joins: the group prepares a rebalance.
    let _ = handshake(&c, t0);
    assert_eq!(c.describe("g").unwrap().state, GroupState::PreparingRebalance);
    assert!(
        c.persist_record_now("g", &|_| true),
        "a rebalancing group writes nothing"
    );
    assert!(!c.records_member("g", &resp.member_id));
    assert!(c.records_member("g", &leader), "the leader's id is on the volume");
}

/// A JoinGroup at a coordinator that cannot read the group's file now (the volume
/// failed the read) is answered COORDINATOR_NOT_AVAILABLE and makes no group. Before,
/// it made a fresh empty group, which hid the record's members from every request
/// after it (their heartbeats UNKNOWN_MEMBER_ID) and let DeleteGroups delete their
/// offsets once it was in memory.
#[test]
fn a_join_that_cannot_read_the_groups_record_makes_no_group_in_its_place() {
    let (dir, c) = coordinator();
    let t0 = Instant::now();
    let a = stable_with_one_member(&c, t0);
    c.commit_offsets("g", &[("t".into(), 0, 5, -1, None)]).unwrap();

    let next = other_coordinator(dir.path(), &[]);
    // The groups directory unreadable as one (ENOTDIR for the file in it).
    let groups = Volume::new(dir.path()).groups_dir();
    let aside = dir.path().join("groups-aside");
    std::fs::rename(&groups, &aside).unwrap();
    std::fs::write(&groups, b"").unwrap();
    let refused = now_response(next.join(join_req("", 9), t0));
    assert_eq!(refused.error_code, ResponseError::CoordinatorNotAvailable.code());
    assert_eq!(next.in_memory(), 0, "no group made in the record's place");
    std::fs::remove_file(&groups).unwrap();
    std::fs::rename(&aside, &groups).unwrap();

    assert_eq!(
        next.heartbeat("g", 1, &a, None, t0),
        Ok(()),
        "the recorded member goes on"
    );
    assert_eq!(next.delete("g"), Err(ResponseError::NonEmptyGroup));
}

/// A group whose last member just left is not brought back from its file's record,
/// which still names that member until the pass writes it: memory is the group then.
/// And a group that moved away is not written by its old coordinator.
#[test]
fn a_record_not_yet_cleared_does_not_bring_a_left_member_back() {
    let (dir, c) = coordinator();
    let t0 = Instant::now();
    let a = stable_with_one_member(&c, t0);
    c.leave("g", &[(a.clone(), None)], t0).unwrap();
    assert!(c.describe("g").is_none());
    assert_eq!(c.heartbeat("g", 1, &a, None, t0), Err(ResponseError::UnknownMemberId));
    assert_eq!(c.delete("g"), Ok(()));

    // Moved away before the pass: the new coordinator's to write.
    let (dir2, c2) = coordinator();
    let b = stable_with_one_member(&c2, t0);
    c2.leave("g", &[(b, None)], t0).unwrap();
    assert_eq!(c2.persist_records(&|_| false), 0);
    assert!(GroupOffsets::load(&Volume::new(dir2.path()), "g")
        .unwrap()
        .has_classic_members());
    drop(dir);
}

/// A record write that waited for the group's file lock while the group moved to
/// another broker (which wrote its own record) and back: before, the write went on
/// — the group not in this broker's memory read as "empty" — and cleared the record
/// of the members the other coordinator had. Now a write whose mark the move dropped
/// writes nothing.
#[test]
fn a_write_that_waited_while_the_group_moved_away_and_back_clears_nothing() {
    let (dir, c) = coordinator();
    let t0 = Instant::now();
    let a = stable_with_one_member(&c, t0);
    c.leave("g", &[(a, None)], t0).unwrap();
    assert!(c.record_pending("g"));
    // The other coordinator's generation, with its member.
    let volume = Volume::new(dir.path());
    GroupOffsets::update(&volume, "g", |o| {
        let mut record = o.classic.clone().unwrap();
        record.generation = 2;
        record.members[0].member_id = "b".into();
        record.leader = "b".into();
        o.classic = Some(record);
        ((), true)
    })
    .unwrap();
    let held = offsets::lock_group_file(&volume, "g").unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| c.persist_records(&|_| true));
        // The write is waiting for the file lock; the group moves away and back.
        std::thread::sleep(Duration::from_millis(300));
        c.forget_unowned(|_| false);
        drop(held);
        assert_eq!(writer.join().unwrap(), 0, "nothing written");
    });
    let record = GroupOffsets::load(&volume, "g").unwrap().classic.unwrap();
    assert_eq!((record.generation, record.members[0].member_id.as_str()), (2, "b"));
}
