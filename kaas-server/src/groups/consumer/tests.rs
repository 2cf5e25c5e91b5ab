//! The consumer-group state machine: hand-picked cases, and a property test of the
//! reconciliation against a model of the clients (what each member consumes).

use super::*;
use proptest::prelude::*;

const SESSION: i64 = 45_000;

fn settings() -> Settings {
    Settings::default()
}

fn tid(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn topics(list: &[(&str, u128, i32)]) -> TopicsView {
    TopicsView::new(list.iter().map(|(n, id, p)| (n.to_string(), tid(*id), *p)))
}

pub(crate) fn join(id: &str, names: &[&str]) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_names: Some(names.iter().map(|s| s.to_string()).collect()),
        owned: Some(Assignment::new()),
        ..Heartbeat::default()
    }
}

pub(crate) fn beat(id: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        owned: Some(owned.clone()),
        ..Heartbeat::default()
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

fn no_id() -> String {
    unreachable!("the tests name their members")
}

/// One client: what it consumes, and the assignment it was sent but has not applied.
#[derive(Default, Clone)]
struct Client {
    epoch: i32,
    owned: Assignment,
    unapplied: Option<Assignment>,
    /// What its last heartbeat reported owning, when that heartbeat was answered (the
    /// Java consumer's sent fields): it may then leave `owned` out (null) while it owns
    /// the same. A lost answer forgets it, and the next heartbeat is full.
    reported: Option<Assignment>,
    /// What it joins again subscribed to, should the group have removed it.
    subscription: Vec<String>,
}

/// Members `ids` joining subscribed to `orders` (`with` adjusts each join), as clients.
fn joined(
    g: &mut ConsumerGroup,
    t: &TopicsView,
    ids: &[&str],
    with: impl Fn(&mut Heartbeat),
) -> BTreeMap<String, Client> {
    ids.iter()
        .map(|id| {
            let mut hb = join(id, &["orders"]);
            with(&mut hb);
            let r = g.heartbeat(hb, t, &settings(), 0, no_id).unwrap();
            let client = Client {
                epoch: r.member_epoch,
                owned: Assignment::new(),
                unapplied: r.assignment,
                reported: Some(Assignment::new()),
                subscription: Vec::new(),
            };
            (id.to_string(), client)
        })
        .collect()
}

/// One heartbeat of a client that has applied what it was sent, as the clients do
/// it: fenced (its answers lost one after another), it gives everything up and joins
/// again with the subscription the group has for it.
fn client_beat(g: &mut ConsumerGroup, id: &str, c: &mut Client, t: &TopicsView, now: i64) {
    if let Some(a) = c.unapplied.take() {
        c.owned = a;
    }
    match g.heartbeat(beat(id, c.epoch, &c.owned), t, &settings(), now, no_id) {
        Ok(r) => {
            c.epoch = r.member_epoch;
            c.reported = Some(c.owned.clone());
            if r.assignment.is_some() {
                c.unapplied = r.assignment;
            }
        }
        Err(e)
            if matches!(
                e.error,
                ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId
            ) =>
        {
            let names: Vec<String> = match g.members.get(id) {
                Some(m) => m.subscribed_names.iter().cloned().collect(),
                None => c.subscription.clone(),
            };
            c.owned = Assignment::new();
            let mut hb = join(id, &[]);
            hb.subscribed_names = Some(names);
            let r = g.heartbeat(hb, t, &settings(), now, no_id).expect("joining again");
            c.epoch = r.member_epoch;
            c.unapplied = r.assignment;
            c.reported = Some(Assignment::new());
        }
        Err(e) => panic!("heartbeat of {id} refused: {e:?}"),
    }
}

/// Heartbeats every client until the group is stable (each applying what it was sent
/// before its next heartbeat), at most `rounds` rounds.
fn settle(g: &mut ConsumerGroup, clients: &mut BTreeMap<String, Client>, t: &TopicsView, now: i64, rounds: usize) {
    for _ in 0..rounds {
        for (id, c) in clients.iter_mut() {
            client_beat(g, id, c, t, now);
        }
        if g.state() == "Stable" && clients.values().all(|c| c.unapplied.is_none()) {
            break;
        }
    }
    for c in clients.values_mut() {
        if let Some(a) = c.unapplied.take() {
            c.owned = a;
        }
    }
}

#[test]
fn two_members_share_a_topic_and_a_third_gets_partitions_only_once_they_are_revoked() {
    let t = topics(&[("orders", 1, 6)]);
    let mut g = ConsumerGroup::new("g");
    let mut clients = joined(&mut g, &t, &["a", "b"], |_| {});
    settle(&mut g, &mut clients, &t, 1, 10);
    assert_eq!(g.state(), "Stable");
    assert_eq!(count(&clients["a"].owned) + count(&clients["b"].owned), 6);
    assert_eq!(count(&clients["a"].owned), 3);
    // c joins: a and b must give partitions up before c gets them.
    let r = g.heartbeat(join("c", &["orders"]), &t, &settings(), 2, no_id).unwrap();
    assert_eq!(
        r.assignment,
        Some(Assignment::new()),
        "nothing is free yet: {:?}",
        g.target
    );
    assert_eq!(g.members["c"].state, MemberState::UnreleasedPartitions);
    let a = &clients["a"];
    let r = g
        .heartbeat(beat("a", a.epoch, &a.owned), &t, &settings(), 3, no_id)
        .unwrap();
    assert_eq!(r.member_epoch, a.epoch, "a keeps its epoch until it has revoked");
    assert_eq!(count(r.assignment.as_ref().unwrap()), 2, "a is told to keep two");
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    // c asks again before a acknowledged: still nothing of a's.
    let r = g
        .heartbeat(
            beat("c", g.members["c"].epoch, &Assignment::new()),
            &t,
            &settings(),
            4,
            no_id,
        )
        .unwrap();
    assert!(r.assignment.is_none_or(|a| count(&a) == 0));
    clients.insert(
        "c".into(),
        Client {
            epoch: g.members["c"].epoch,
            ..Client::default()
        },
    );
    clients.get_mut("a").unwrap().unapplied = Some(g.members["a"].assigned.clone());
    settle(&mut g, &mut clients, &t, 5, 10);
    assert_eq!(g.state(), "Stable");
    for c in clients.values() {
        assert_eq!(count(&c.owned), 2);
    }
}

#[test]
fn a_stale_or_unknown_member_is_fenced_and_a_leaver_frees_its_partitions() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = ConsumerGroup::new("g");
    let r = g.heartbeat(join("a", &["orders"]), &t, &settings(), 0, no_id).unwrap();
    assert_eq!(r.member_epoch, 1);
    let owned = r.assignment.unwrap();
    assert_eq!(count(&owned), 4);
    let e = g
        .heartbeat(beat("a", 7, &owned), &t, &settings(), 1, no_id)
        .unwrap_err();
    assert_eq!(e.error, ResponseError::FencedMemberEpoch);
    let e = g
        .heartbeat(beat("zz", 1, &owned), &t, &settings(), 1, no_id)
        .unwrap_err();
    assert_eq!(e.error, ResponseError::UnknownMemberId);
    let r = g.heartbeat(beat("a", -1, &owned), &t, &settings(), 2, no_id).unwrap();
    assert_eq!(r.member_epoch, -1);
    assert!(g.owner_of(tid(1), 0).is_none());
    assert_eq!(g.state(), "Empty");
}

#[test]
fn a_member_silent_past_its_session_is_removed_and_its_partitions_reassigned() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = ConsumerGroup::new("g");
    let mut clients = joined(&mut g, &t, &["a", "b"], |_| {});
    settle(&mut g, &mut clients, &t, 1, 10);
    // b is killed: a keeps heartbeating.
    clients.remove("b");
    let mut now = 1;
    while g.members.contains_key("b") {
        now += 5_000;
        settle(&mut g, &mut clients, &t, now, 1);
        g.expire(&t, now);
        assert!(now < SESSION + 10_000, "b never expired");
    }
    assert!(now >= SESSION, "not before its session timeout");
    settle(&mut g, &mut clients, &t, now, 10);
    assert_eq!(count(&clients["a"].owned), 4);
}

#[test]
fn a_regex_subscription_picks_up_a_topic_created_later() {
    let mut g = ConsumerGroup::new("g");
    let mut hb = join("a", &[]);
    hb.subscribed_names = None;
    hb.subscribed_regex = Some("events-.*".into());
    let t = topics(&[("events-1", 1, 2), ("other", 2, 2)]);
    let r = g.heartbeat(hb, &t, &settings(), 0, no_id).unwrap();
    assert_eq!(r.assignment.unwrap().keys().collect::<Vec<_>>(), vec![&tid(1)]);
    let t = topics(&[("events-1", 1, 2), ("other", 2, 2), ("events-2", 3, 3)]);
    let owned = g.members["a"].assigned.clone();
    let r = g.heartbeat(beat("a", 1, &owned), &t, &settings(), 1, no_id).unwrap();
    assert_eq!(r.member_epoch, 2, "a new matching topic bumps the group epoch");
    assert_eq!(count(&r.assignment.unwrap()), 5);
    let mut bad = join("b", &[]);
    bad.subscribed_regex = Some("(".into());
    assert_eq!(
        g.heartbeat(bad, &t, &settings(), 1, no_id).unwrap_err().error,
        ResponseError::InvalidRegularExpression
    );
}

#[test]
fn range_gives_consecutive_partitions_per_topic_and_unknown_assignors_are_refused() {
    let t = topics(&[("a", 1, 5), ("b", 2, 5)]);
    let mut g = ConsumerGroup::new("g");
    for id in ["m1", "m2"] {
        let mut hb = join(id, &["a", "b"]);
        hb.server_assignor = Some("range".into());
        g.heartbeat(hb, &t, &settings(), 0, no_id).unwrap();
    }
    assert_eq!(g.target["m1"][&tid(1)], BTreeSet::from([0, 1, 2]));
    assert_eq!(g.target["m1"][&tid(2)], BTreeSet::from([0, 1, 2]));
    assert_eq!(g.target["m2"][&tid(2)], BTreeSet::from([3, 4]));
    let mut hb = join("m3", &["a"]);
    hb.server_assignor = Some("sticky".into());
    assert_eq!(
        g.heartbeat(hb, &t, &settings(), 0, no_id).unwrap_err().error,
        ResponseError::UnsupportedAssignor
    );
}

#[test]
fn a_static_member_rejoining_takes_its_partitions_back_without_a_rebalance() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = ConsumerGroup::new("g");
    let mut clients = joined(&mut g, &t, &["a", "b"], |hb| {
        hb.instance_id = Some(format!("instance-{}", hb.member_id))
    });
    settle(&mut g, &mut clients, &t, 1, 10);
    let (epoch, before) = (g.epoch, clients["a"].owned.clone());
    // a restarts: leaves for a while (epoch -2), comes back as a2 with its instance id.
    g.heartbeat(beat("a", -2, &before), &t, &settings(), 2, no_id).unwrap();
    let mut hb = join("a2", &["orders"]);
    hb.instance_id = Some("instance-a".into());
    let r = g.heartbeat(hb, &t, &settings(), 3, no_id).unwrap();
    assert_eq!(r.assignment, Some(before));
    assert_eq!(g.epoch, epoch, "no rebalance");
    // A second process with b's instance id while b runs is refused.
    let mut hb = join("b2", &["orders"]);
    hb.instance_id = Some("instance-b".into());
    assert_eq!(
        g.heartbeat(hb, &t, &settings(), 3, no_id).unwrap_err().error,
        ResponseError::UnreleasedInstanceId
    );
}

#[test]
fn the_group_size_is_bounded_and_a_version_0_member_gets_an_id() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = ConsumerGroup::new("g");
    let limited = Settings {
        max_size: 1,
        ..Settings::default()
    };
    let r = g
        .heartbeat(join("", &["orders"]), &t, &limited, 0, || "made-up".into())
        .unwrap();
    assert_eq!(r.member_id, "made-up");
    assert_eq!(
        g.heartbeat(join("x", &["orders"]), &t, &limited, 0, no_id)
            .unwrap_err()
            .error,
        ResponseError::GroupMaxSizeReached
    );
}

/// What a history does: one step of one of four clients.
#[derive(Debug, Clone)]
enum Op {
    /// Joins (if not in the group) subscribed to these topics.
    Join(usize, Vec<usize>),
    /// Heartbeats, having applied what it was sent (or not yet: a slow revocation);
    /// its answer may be lost (the client keeps its epoch and what it had); it may
    /// leave out what it owns (null) when that is what its last answered heartbeat
    /// reported, as the Java consumer does.
    Beat(usize, bool, bool, bool),
    /// Changes its subscription at its next heartbeat.
    Subscribe(usize, Vec<usize>),
    /// Leaves (epoch -1), having stopped consuming.
    Leave(usize),
    /// Dies: stops consuming and heartbeating; the group expires it.
    Kill(usize),
    /// A topic grows by one partition.
    Grow(usize),
    /// The coordinator moves: the group is rebuilt from its volume record.
    Failover,
    /// Applies what it was last sent, between heartbeats (a client reconciles on its
    /// own, and consumes at once): perhaps an assignment whose answer is long past.
    Apply(usize),
    /// Stalls in a revocation: it keeps heartbeating but never gives up what it was
    /// told to, past its rebalance timeout, while the others go on. The group removes
    /// it (Apache fences it); it finds out at its next heartbeat and joins again, and
    /// until then it consumes what it had, with its commits refused.
    Stall(usize),
}

const TOPICS: usize = 3;

fn op() -> impl Strategy<Value = Op> {
    let subs = proptest::collection::vec(0..TOPICS, 1..=TOPICS);
    prop_oneof![
        2 => (0..4usize, subs.clone()).prop_map(|(c, s)| Op::Join(c, s)),
        8 => (0..4usize, proptest::bool::weighted(0.7), proptest::bool::weighted(0.15), proptest::bool::weighted(0.4))
            .prop_map(|(c, a, lost, omit)| Op::Beat(c, a, lost, omit)),
        1 => (0..4usize, subs).prop_map(|(c, s)| Op::Subscribe(c, s)),
        1 => (0..4usize).prop_map(Op::Leave),
        1 => (0..4usize).prop_map(Op::Kill),
        1 => (0..TOPICS).prop_map(Op::Grow),
        1 => Just(Op::Failover),
        2 => (0..4usize).prop_map(Op::Apply),
        1 => (0..4usize).prop_map(Op::Stall),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// For any history of joins, leaves, heartbeats (with revocations applied at once
    /// or late, answers lost, members fenced and joining again, what a member owns
    /// left out when unchanged), members stalled in a revocation past their rebalance
    /// timeout (removed, and joining again once they hear so), assignments applied
    /// between heartbeats (perhaps long after they were sent: such a client's commits
    /// must then be refused), subscription changes, deaths, topics growing and coordinator
    /// fail-overs (the group rebuilt from its record): no partition is ever
    /// consumed by two clients, nor owned by two members in the group's books; and
    /// once every live client heartbeats a few times, every subscribed partition is
    /// assigned to exactly one member, subscribed to its topic, at the group epoch.
    #[test]
    fn no_partition_is_ever_owned_twice_and_every_subscribed_one_is_eventually_assigned(ops in proptest::collection::vec(op(), 1..60)) {
        let mut sizes = [3i32, 2, 4];
        let view = |sizes: &[i32; 3]| topics(&[("t0", 1, sizes[0]), ("t1", 2, sizes[1]), ("t2", 3, sizes[2])]);
        let mut t = view(&sizes);
        let mut g = ConsumerGroup::new("g");
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        let mut subs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut next_subs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut now = 0i64;
        let names = |s: &[usize]| s.iter().map(|i| format!("t{i}")).collect::<Vec<_>>();
        // Clients that applied an assignment on their own since their last answered
        // heartbeat: what they consume may be out of date (Apache's consumers too),
        // but then their offset commits must be refused.
        let mut stale: BTreeSet<String> = BTreeSet::new();
        for op in ops {
            now += 100;
            match op {
                Op::Join(c, s) => {
                    let id = format!("m{c}");
                    if !clients.contains_key(&id) {
                        let mut hb = join(&id, &[]);
                        hb.subscribed_names = Some(names(&s));
                        let r = g.heartbeat(hb, &t, &settings(), now, no_id).unwrap();
                        clients.insert(id.clone(), Client { epoch: r.member_epoch, owned: Assignment::new(), unapplied: r.assignment, reported: Some(Assignment::new()), subscription: Vec::new() });
                        subs.insert(id, names(&s));
                    }
                }
                Op::Beat(c, applied, lost, omit) => {
                    let id = format!("m{c}");
                    if let Some(client) = clients.get_mut(&id) {
                        if applied {
                            if let Some(a) = client.unapplied.take() {
                                client.owned = a;
                            }
                        }
                        let mut hb = beat(&id, client.epoch, &client.owned);
                        if omit && client.reported.as_ref() == Some(&client.owned) {
                            hb.owned = None;
                        }
                        if let Some(s) = next_subs.remove(&id) {
                            hb.subscribed_names = Some(s.clone());
                            subs.insert(id.clone(), s);
                        }
                        match g.heartbeat(hb, &t, &settings(), now, no_id) {
                            Ok(_) if lost => client.reported = None,
                            Ok(r) => {
                                stale.remove(&id);
                                client.epoch = r.member_epoch;
                                client.reported = Some(client.owned.clone());
                                if r.assignment.is_some() {
                                    client.unapplied = r.assignment;
                                }
                            }
                            // Fenced (answers lost one after another, or removed past
                            // its rebalance timeout): as the clients do, it gives
                            // everything up and joins again.
                            Err(e) if matches!(e.error, ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId) => {
                                stale.remove(&id);
                                client.owned = Assignment::new();
                                client.unapplied = None;
                                let mut hb = join(&id, &[]);
                                hb.subscribed_names = Some(subs[&id].clone());
                                let r = g.heartbeat(hb, &t, &settings(), now, no_id).unwrap();
                                client.epoch = r.member_epoch;
                                client.unapplied = r.assignment;
                                client.reported = Some(Assignment::new());
                            }
                            Err(e) => prop_assert!(false, "heartbeat of {id} refused: {e:?}"),
                        }
                    }
                }
                Op::Subscribe(c, s) => {
                    next_subs.insert(format!("m{c}"), names(&s));
                }
                Op::Leave(c) => {
                    let id = format!("m{c}");
                    if let Some(client) = clients.remove(&id) {
                        match g.heartbeat(beat(&id, -1, &client.owned), &t, &settings(), now, no_id) {
                            Ok(_) => {}
                            // Removed past its rebalance timeout, before it heard so.
                            Err(e) if e.error == ResponseError::UnknownMemberId && !g.members.contains_key(&id) => {}
                            Err(e) => prop_assert!(false, "{id} could not leave: {e:?}"),
                        }
                        subs.remove(&id);
                        stale.remove(&id);
                    }
                }
                Op::Kill(c) => {
                    let id = format!("m{c}");
                    if clients.remove(&id).is_some() {
                        subs.remove(&id);
                        stale.remove(&id);
                        // Everyone else keeps heartbeating while the group waits out its
                        // session.
                        let until = now + SESSION;
                        while g.members.contains_key(&id) {
                            now += 5_000;
                            for (cid, client) in clients.iter_mut() {
                                // A live client gives up what it is told to.
                                client_beat(&mut g, cid, client, &t, now);
                                stale.remove(cid);
                            }
                            g.expire(&t, now);
                            prop_assert!(now <= until + 5_000, "{id} never expired");
                        }
                    }
                }
                Op::Grow(i) => {
                    sizes[i] += 1;
                    t = view(&sizes);
                }
                Op::Apply(c) => {
                    let id = format!("m{c}");
                    if let Some(client) = clients.get_mut(&id) {
                        if let Some(a) = client.unapplied.take() {
                            client.owned = a;
                            stale.insert(id);
                        }
                    }
                }
                Op::Stall(c) => {
                    let id = format!("m{c}");
                    // Only a client consuming a partition it was told to give up can
                    // hold on to it (one that does not, frees it at its next report).
                    let revoking = g.members.get(&id).zip(clients.get(&id))
                        .is_some_and(|(m, c)| !is_empty(&both(&c.owned, &m.pending_revocation)));
                    if let Some(mut stuck) = revoking.then(|| clients.remove(&id)).flatten() {
                        let deadline = g.members[&id].rebalance_deadline_ms.expect("a member revoking has a deadline");
                        prop_assert!(deadline <= now + 30_000, "deadline {deadline} past its rebalance timeout from {now}");
                        while g.members.contains_key(&id) {
                            now += 5_000;
                            // It heartbeats (its session goes on), still reporting
                            // what it was told to give up.
                            let hb = beat(&id, stuck.epoch, &stuck.owned);
                            if let Ok(r) = g.heartbeat(hb, &t, &settings(), now, no_id) {
                                stuck.epoch = r.member_epoch;
                                stuck.reported = Some(stuck.owned.clone());
                            }
                            for (cid, client) in clients.iter_mut() {
                                client_beat(&mut g, cid, client, &t, now);
                                stale.remove(cid);
                            }
                            g.expire(&t, now);
                            prop_assert!(now <= deadline + 5_000, "{id} outlived its rebalance timeout");
                        }
                        prop_assert!(now < SESSION + deadline, "removed by its session, not its rebalance timeout");
                        // It still consumes what it had until its next heartbeat says
                        // it is out of the group: its commits are refused meanwhile.
                        stuck.unapplied = None;
                        stuck.subscription = subs[&id].clone();
                        stale.insert(id.clone());
                        clients.insert(id, stuck);
                    }
                }
                Op::Failover => {
                    let record = g.to_record();
                    g = ConsumerGroup::from_record("g", &record, &settings(), now).unwrap();
                    prop_assert_eq!(g.to_record(), record);
                }
            }
            // Nobody consumes a partition another client consumes (a partition a client
            // was told to give up, it gives up before it reports, so `owned` is what
            // it consumes) — unless one of them applied an old assignment on its own:
            // then that one's offset commits are refused (its epoch is not the
            // member's), so the two never both commit. A client whose commits would be
            // accepted never consumes a partition the books give another.
            let record = g.to_record();
            let commits = |id: &str, c: &Client| crate::groups::consumer_groups::member_check(&record, id, c.epoch, false).is_ok();
            let mut consumed: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
            for (id, c) in &clients {
                for (topic, ps) in &c.owned {
                    for p in ps {
                        if let Some(other) = consumed.insert((*topic, *p), id) {
                            let both_fresh = !stale.contains(id) && !stale.contains(other);
                            let both_commit = commits(id, c) && commits(other, &clients[other]);
                            prop_assert!(!both_fresh && !both_commit, "{topic}-{p} consumed by {other} and {id} (stale: {stale:?})");
                        }
                    }
                }
            }
            // The group's books: one owner per partition, and the owners map agrees.
            let mut owned: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
            for m in g.members.values() {
                for a in [&m.assigned, &m.pending_revocation] {
                    for (topic, ps) in a {
                        for p in ps {
                            if let Some(other) = owned.insert((*topic, *p), &m.id) {
                                prop_assert!(false, "{topic}-{p} owned by {other} and {}", m.id);
                            }
                            prop_assert_eq!(g.owner_of(*topic, *p), Some(m.id.as_str()));
                        }
                    }
                }
            }
            // A member's own report never claims a partition the books give another.
            for (id, c) in clients.iter().filter(|(id, c)| !stale.contains(*id) || commits(id, c)) {
                for (topic, ps) in &c.owned {
                    for p in ps {
                        prop_assert!(g.owner_of(*topic, *p).is_none_or(|o| o == id), "{id} consumes {topic}-{p}, the books give it to {:?}", g.owner_of(*topic, *p));
                    }
                }
            }
        }
        // Quiet: every live client heartbeats, applying what it is sent.
        for (id, s) in next_subs {
            if let Some(client) = clients.get_mut(&id) {
                let mut hb = beat(&id, client.epoch, &client.owned);
                hb.subscribed_names = Some(s.clone());
                let r = match g.heartbeat(hb, &t, &settings(), now, no_id) {
                    Err(e) if matches!(e.error, ResponseError::FencedMemberEpoch | ResponseError::UnknownMemberId) => {
                        client.owned = Assignment::new();
                        let mut hb = join(&id, &[]);
                        hb.subscribed_names = Some(s.clone());
                        g.heartbeat(hb, &t, &settings(), now, no_id).unwrap()
                    }
                    other => other.unwrap(),
                };
                client.epoch = r.member_epoch;
                if r.assignment.is_some() {
                    client.unapplied = r.assignment;
                }
                subs.insert(id, s);
            }
        }
        settle(&mut g, &mut clients, &t, now + 1, 12);
        prop_assert!(g.state() == "Stable" || g.members.is_empty(), "state {}", g.state());
        let mut expected: BTreeSet<(Uuid, i32)> = BTreeSet::new();
        for s in subs.values() {
            for name in s {
                let id = t.id(name).unwrap();
                expected.extend((0..t.partitions(id)).map(|p| (id, p)));
            }
        }
        let mut assigned: BTreeSet<(Uuid, i32)> = BTreeSet::new();
        for (id, c) in &clients {
            let mine: BTreeSet<Uuid> = subs[id].iter().map(|n| t.id(n).unwrap()).collect();
            prop_assert_eq!(c.epoch, g.epoch);
            for (topic, ps) in &c.owned {
                prop_assert!(mine.contains(topic), "{id} consumes a topic it does not subscribe to");
                for p in ps {
                    prop_assert!(assigned.insert((*topic, *p)));
                }
            }
        }
        prop_assert_eq!(assigned, expected);
    }
}

#[test]
fn a_static_member_that_left_comes_back_only_by_joining_and_an_old_incarnation_cannot_leave_for_it() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = ConsumerGroup::new("g");
    let mut hb = join("a", &["orders"]);
    hb.instance_id = Some("i-1".into());
    let r = g.heartbeat(hb, &t, &settings(), 0, no_id).unwrap();
    let owned = r.assignment.unwrap();
    // A leave for the instance from another member id: FENCED_INSTANCE_ID.
    let mut stale = beat("zombie", -2, &owned);
    stale.instance_id = Some("i-1".into());
    assert_eq!(
        g.heartbeat(stale, &t, &settings(), 1, no_id).unwrap_err().error,
        ResponseError::FencedInstanceId
    );
    let mut leave = beat("a", -2, &owned);
    leave.instance_id = Some("i-1".into());
    assert_eq!(g.heartbeat(leave, &t, &settings(), 2, no_id).unwrap().member_epoch, -2);
    // Its partitions wait for it; a heartbeat at the epoch it had is fenced.
    assert_eq!(g.owner_of(tid(1), 0), Some("a"));
    assert_eq!(
        g.heartbeat(beat("a", r.member_epoch, &owned), &t, &settings(), 3, no_id)
            .unwrap_err()
            .error,
        ResponseError::FencedMemberEpoch
    );
    // Joining again, it takes them back without a rebalance.
    let epoch = g.epoch;
    let mut back = join("a2", &["orders"]);
    back.instance_id = Some("i-1".into());
    let r = g.heartbeat(back, &t, &settings(), 4, no_id).unwrap();
    assert_eq!(r.assignment, Some(owned));
    assert_eq!(g.epoch, epoch);
}

#[test]
fn an_invalid_expression_cannot_hide_inside_the_anchoring_group() {
    assert!(compile_regex("a)|(b").is_err());
    assert!(compile_regex("orders-.*").unwrap().is_match("orders-1"));
    assert!(
        !compile_regex("orders").unwrap().is_match("orders-1"),
        "the whole name must match"
    );
}

#[test]
fn a_member_holding_partitions_to_revoke_past_its_rebalance_timeout_is_removed_though_it_heartbeats() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = ConsumerGroup::new("g");
    let mut a = join("a", &["orders"]);
    a.rebalance_timeout_ms = 10_000;
    let owned = g.heartbeat(a, &t, &settings(), 0, no_id).unwrap().assignment.unwrap();
    g.heartbeat(join("b", &["orders"]), &t, &settings(), 1, no_id).unwrap();
    // a is asked to give two partitions up, and keeps reporting all four.
    let r = g.heartbeat(beat("a", 1, &owned), &t, &settings(), 2, no_id).unwrap();
    assert_eq!(count(r.assignment.as_ref().unwrap()), 2);
    for now in [5_000, 9_000] {
        g.heartbeat(beat("a", 1, &owned), &t, &settings(), now, no_id).unwrap();
        assert!(g.expire(&t, now).is_empty(), "within its rebalance timeout");
    }
    assert_eq!(g.expire(&t, 12_001), vec!["a".to_string()]);
    assert!(g.owner_of(tid(1), 0).is_none() || g.owner_of(tid(1), 0) == Some("b"));
}

#[test]
fn a_regex_resolves_only_to_topics_the_members_principal_may_describe() {
    let t = topics(&[("events-1", 1, 2), ("events-secret", 2, 3)]);
    let mut g = ConsumerGroup::new("g");
    let mut hb = join("a", &[]);
    hb.subscribed_names = None;
    hb.subscribed_regex = Some("events-.*".into());
    hb.describable = Some(Describable::only(["events-1".to_string()]));
    let r = g.heartbeat(hb, &t, &settings(), 0, no_id).unwrap();
    let owned = r.assignment.unwrap();
    assert_eq!(
        owned.keys().collect::<Vec<_>>(),
        vec![&tid(1)],
        "events-secret is not its to see"
    );
    // An ACL granting DESCRIBE on it: the next heartbeat resolves the regex again.
    let mut hb = beat("a", r.member_epoch, &owned);
    hb.describable = Some(Describable::only(["events-1".to_string(), "events-secret".to_string()]));
    let r = g.heartbeat(hb, &t, &settings(), 1, no_id).unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&r.assignment.unwrap()), 5);
}

/// A member joining again with its own id (fenced, or retrying a join whose answer it
/// did not get) keeps its place: the same partitions at the same group epoch, none of
/// them handed to another member meanwhile. Before, it was taken out and joined
/// afresh: its partitions went to the other member by a new group epoch, and a late
/// copy of a join already answered took them from the client still consuming them.
#[test]
fn a_member_joining_again_keeps_its_partitions() {
    let t = topics(&[("orders", 1, 6)]);
    let mut g = ConsumerGroup::new("g");
    let mut clients = joined(&mut g, &t, &["a", "b"], |_| {});
    settle(&mut g, &mut clients, &t, 0, 10);
    let (a_owned, b_owned, epoch) = (clients["a"].owned.clone(), clients["b"].owned.clone(), g.epoch);
    assert_eq!(count(&a_owned) + count(&b_owned), 6);
    // a joins again twice (a retry answered first, then the late copy), reporting
    // nothing owned, as a fenced client does.
    for _ in 0..2 {
        let r = g
            .heartbeat(join("a", &["orders"]), &t, &settings(), 100, no_id)
            .unwrap();
        assert_eq!(r.assignment.as_ref(), Some(&a_owned), "a's own partitions, sent again");
        assert_eq!(g.epoch, epoch, "no new group epoch");
        let r = g
            .heartbeat(beat("b", clients["b"].epoch, &b_owned), &t, &settings(), 100, no_id)
            .unwrap();
        assert!(
            r.assignment.is_none_or(|a| a == b_owned),
            "b is given none of a's partitions"
        );
    }
}

/// A static member leaving for a while (epoch -2) while it had partitions to give up
/// kept them pending and its rebalance deadline: the member waiting for them got
/// nothing until the static member came back or its session ended, and one away
/// past its rebalance timeout was removed outright (its other partitions moved too,
/// and it came back as a new member). As Apache's
/// `consumerGroupStaticMemberGroupLeave`: the client revoked everything before it
/// left, so what it had to give up is free at once, and no rebalance timeout runs on
/// a member that is away.
#[test]
fn a_static_member_leaving_for_a_while_frees_what_it_had_to_give_up() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = ConsumerGroup::new("g");
    let mut a = join("a", &["orders"]);
    a.instance_id = Some("i-1".into());
    a.rebalance_timeout_ms = 10_000;
    let owned = g.heartbeat(a, &t, &settings(), 0, no_id).unwrap().assignment.unwrap();
    assert_eq!(count(&owned), 2);
    let b = g.heartbeat(join("b", &["orders"]), &t, &settings(), 1, no_id).unwrap();
    // a is told to give one up...
    let mut beat_a = beat("a", 1, &owned);
    beat_a.instance_id = Some("i-1".into());
    let r = g.heartbeat(beat_a, &t, &settings(), 2, no_id).unwrap();
    assert_eq!(count(r.assignment.as_ref().unwrap()), 1);
    // ...and leaves for a restart instead, having revoked everything.
    let mut leave = beat("a", -2, &Assignment::new());
    leave.instance_id = Some("i-1".into());
    assert_eq!(g.heartbeat(leave, &t, &settings(), 3, no_id).unwrap().member_epoch, -2);
    let r = g
        .heartbeat(beat("b", b.member_epoch, &Assignment::new()), &t, &settings(), 4, no_id)
        .unwrap();
    let got = g.members["b"].assigned.clone();
    assert_eq!(count(&got), 1, "b gets the partition a gave up: {r:?}");
    assert!(
        g.expire(&t, 12_001).is_empty(),
        "no rebalance timeout runs on a member away"
    );
    assert!(g.members.contains_key("a"), "its other partition waits for it");
}

/// Whether the principal may DESCRIBE a topic is asked only of the topics a member's
/// regular expression matches, never of every topic at every heartbeat (a review of
/// authorization: topics × ACLs decisions per heartbeat of every member).
#[test]
fn describe_rights_are_asked_only_of_the_topics_a_regex_matches() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let names: Vec<(String, u128, i32)> = (0..200).map(|i| (format!("t{i}"), i + 1, 1)).collect();
    let refs: Vec<(&str, u128, i32)> = names.iter().map(|(n, id, p)| (n.as_str(), *id, *p)).collect();
    let t = topics(&refs);
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let counting = || {
        let asked = asked.clone();
        Some(Describable(std::sync::Arc::new(move |_: &str| {
            asked.fetch_add(1, Ordering::Relaxed);
            true
        })))
    };
    let mut g = ConsumerGroup::new("g");
    let mut hb = join("a", &["t0"]);
    hb.describable = counting();
    let r = g.heartbeat(hb, &t, &settings(), 0, no_id).unwrap();
    assert_eq!(asked.load(Ordering::Relaxed), 0, "no regex: nothing to ask");
    let mut hb = join("b", &[]);
    hb.subscribed_names = None;
    hb.subscribed_regex = Some("t1[0-9]".into());
    hb.describable = counting();
    g.heartbeat(hb, &t, &settings(), 1, no_id).unwrap();
    assert_eq!(
        asked.load(Ordering::Relaxed),
        10,
        "only the ten topics t10..t19 the regex matches"
    );
    let mut hb = beat("a", r.member_epoch, &r.assignment.unwrap());
    hb.describable = counting();
    g.heartbeat(hb, &t, &settings(), 2, no_id).unwrap();
    assert_eq!(
        asked.load(Ordering::Relaxed),
        10,
        "a member without a regex asks nothing"
    );
}
