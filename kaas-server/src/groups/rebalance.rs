//! The classic rebalance protocol as a state machine over one [`Group`]: admitting
//! a joining member (MEMBER_ID_REQUIRED, static members), preparing a rebalance,
//! completing the join (leader, protocol, generation) and answering the waiting
//! members. Pure functions of the group and `now`; the coordinator (mod.rs) holds
//! the locks and calls them.

use super::*;

/// The topics the members of a consumer-protocol group subscribe to, from their
/// JoinGroup metadata (ConsumerProtocolSubscription: version i16, then the topic
/// array, in every version); None when any member's metadata cannot be read.
pub(super) fn subscribed_topics(group: &Group) -> Option<HashSet<String>> {
    let protocol = group.protocol.as_deref()?;
    let mut topics = HashSet::new();
    for m in group.members.values() {
        let meta = m.metadata_for(protocol);
        topics.extend(parse_subscription_topics(&meta)?);
    }
    Some(topics)
}

pub(super) fn parse_subscription_topics(meta: &[u8]) -> Option<Vec<String>> {
    let mut at = 2usize; // version
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let s = meta.get(*at..at.checked_add(n)?)?;
        *at += n;
        Some(s)
    };
    let count = i32::from_be_bytes(take(&mut at, 4)?.try_into().ok()?);
    let mut out = Vec::with_capacity(usize::try_from(count).ok()?.min(meta.len() / 2));
    for _ in 0..count {
        let len = i16::from_be_bytes(take(&mut at, 2)?.try_into().ok()?);
        let name = take(&mut at, usize::try_from(len).ok()?)?;
        out.push(String::from_utf8(name.to_vec()).ok()?);
    }
    Some(out)
}

/// A joining member must name a protocol type and protocols, and share the type and at
/// least one protocol with every *other* member (it may be replacing its own entry).
/// Linear in the protocols of the request and of the group's members.
pub(super) fn protocols_fit(group: &Group, req: &JoinRequest) -> bool {
    if req.protocols.is_empty() || req.protocol_type.is_empty() {
        return false;
    }
    let mut others = group.members.values().filter(|m| m.id != req.member_id).peekable();
    if others.peek().is_none() {
        return true;
    }
    if group.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
        return false;
    }
    let mut common: HashSet<&str> = req.protocols.iter().map(|(p, _)| p.as_str()).collect();
    for m in others {
        let theirs: HashSet<&str> = m.protocols.iter().map(|(p, _)| p.as_str()).collect();
        common.retain(|p| theirs.contains(p));
        if common.is_empty() {
            return false;
        }
    }
    true
}

pub(super) fn check_member(group: &Group, member_id: &str, instance_id: Option<&str>) -> Result<(), ResponseError> {
    if let Some(inst) = instance_id {
        match group.static_members.get(inst) {
            Some(id) if id == member_id => return Ok(()),
            Some(_) => return Err(ResponseError::FencedInstanceId),
            None => {}
        }
    }
    if group.members.contains_key(member_id) {
        Ok(())
    } else {
        Err(ResponseError::UnknownMemberId)
    }
}

pub(super) fn new_member_id(prefix: &str) -> String {
    format!(
        "{}-{}",
        if prefix.is_empty() { "member" } else { prefix },
        uuid::Uuid::new_v4()
    )
}

/// Adds or updates the joining member. Some(response) when the request is answered at
/// once; None when it waits for the rebalance (its sender is stored on the member).
pub(super) fn admit(
    group: &mut Group,
    req: JoinRequest,
    tx: oneshot::Sender<JoinGroupResponse>,
    now: Instant,
    settings: Settings,
    metadata: &Arc<MetadataPool>,
) -> Option<JoinGroupResponse> {
    // group.max.size: a member the group does not have yet (nor has asked to rejoin
    // with its new id) is refused once the group is full, as Kafka's coordinator does.
    let joining_new = if req.member_id.is_empty() {
        !req.instance_id
            .as_ref()
            .is_some_and(|i| group.static_members.contains_key(i))
    } else {
        !group.members.contains_key(&req.member_id)
    };
    if joining_new {
        let others =
            group.members.len() + group.pending.len() - usize::from(group.pending.contains_key(&req.member_id));
        if others >= settings.max_size {
            info!(group = %group.id, max = settings.max_size, "join refused: group.max.size reached");
            return Some(join_error(ResponseError::GroupMaxSizeReached, &req.member_id));
        }
    }
    // The member's protocols are kept as long as it stays: charged before they are
    // stored (and before anything changes), refused (retriably) when the broker's
    // room for them is used up. A rejoining member's current charge counts as room.
    let charge_for = |group: &Group, member: &str| {
        let replacing = group.members.get(member).map_or(0, |m| m.metadata_charge.bytes);
        metadata.charge(&group.id, &req.protocols, replacing)
    };
    let mut charge: Option<MetadataCharge> = None;
    let mut charged = false;
    let mut member_id = req.member_id.clone();
    let mut fresh = false;
    // A static member restarted and the group must rebalance for it: its protocols
    // changed, it led, or the leader's assignment, still to come, names its old id.
    let mut restarted_static = false;
    if member_id.is_empty() {
        if let Some(inst) = &req.instance_id {
            if let Some(old) = group.static_members.get(inst).cloned() {
                let Some(static_charge) = charge_for(group, &old) else {
                    return Some(join_error(ResponseError::CoordinatorNotAvailable, ""));
                };
                charged = true;
                // A static member restarted: it takes over its old identity under a new
                // id; the old id is fenced. Without a protocol change, a follower gets
                // the current generation back and keeps its assignment (no rebalance).
                let new_id = new_member_id(inst);
                let mut m = group.members.remove(&old).expect("static mapping points at a member");
                if let Some((_, w)) = m.join_waiter.take() {
                    let _ = w.send(join_error(ResponseError::FencedInstanceId, &old));
                }
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(sync_error(ResponseError::FencedInstanceId));
                }
                m.id = new_id.clone();
                m.last_seen = now;
                m.session_timeout = Duration::from_millis(req.session_timeout_ms as u64);
                m.rebalance_timeout = rebalance_timeout_of(&req);
                m.protocols = req.protocols.clone();
                m.metadata_charge = static_charge;
                let was_leader = group.leader.as_deref() == Some(old.as_str());
                if was_leader {
                    group.leader = Some(new_id.clone());
                }
                group.members.insert(new_id.clone(), m);
                group.static_members.insert(inst.clone(), new_id.clone());
                info!(group = %group.id, instance = %inst, member = %new_id, "static member rejoined");
                // As Apache's `updateStaticMemberAndRebalance`: in a Stable group, a
                // rebalance only if the protocol the next generation would select is
                // not the group's (its metadata changes at every restart of a Java or
                // Streams member: generation, owned partitions, user data).
                let unchanged = select_protocol(group) == group.protocol;
                if group.state == GroupState::Stable && unchanged && !was_leader {
                    return Some(current_generation_response(group, &new_id, req.version));
                }
                // Otherwise a rebalance, as Apache's: with the group's protocol to change
                // (answered the current generation, the member could be told a
                // protocol it no longer offers); before the leader's SyncGroup
                // (CompletingRebalance) its assignment names the old id, and the new
                // one would get none, its partitions owned by nobody
                // (`a_static_member_restarting_before_the_leaders_sync_causes_a_rebalance`).
                restarted_static = true;
                member_id = new_id;
            } else {
                // Charged before the instance is mapped: a refusal leaves no mapping
                // to a member that does not exist.
                let Some(c) = charge_for(group, "") else {
                    return Some(join_error(ResponseError::CoordinatorNotAvailable, ""));
                };
                charge = Some(c);
                charged = true;
                member_id = new_member_id(inst);
                group.static_members.insert(inst.clone(), member_id.clone());
            }
        } else {
            member_id = new_member_id(&req.client_id);
            fresh = true;
            if req.version >= 4 {
                group.pending.insert(
                    member_id.clone(),
                    now + Duration::from_millis(req.session_timeout_ms as u64),
                );
                return Some(join_error(ResponseError::MemberIdRequired, &member_id));
            }
        }
    } else if let Some(inst) = &req.instance_id {
        if group.static_members.get(inst).is_some_and(|id| *id != member_id) {
            return Some(join_error(ResponseError::FencedInstanceId, &member_id));
        }
    }

    if !charged {
        match charge_for(group, &member_id) {
            Some(c) => charge = Some(c),
            None => return Some(join_error(ResponseError::CoordinatorNotAvailable, &member_id)),
        }
    }
    let known = group.members.contains_key(&member_id);
    let pending = group.pending.remove(&member_id).is_some();
    let is_static_new = req
        .instance_id
        .as_ref()
        .is_some_and(|i| group.static_members.get(i) == Some(&member_id))
        && !known;
    if !known && !pending && !is_static_new && !fresh {
        return Some(join_error(ResponseError::UnknownMemberId, &member_id));
    }
    if group.members.is_empty() {
        group.protocol_type = Some(req.protocol_type.clone());
    }
    let session_timeout = Duration::from_millis(req.session_timeout_ms as u64);
    let rebalance_timeout = rebalance_timeout_of(&req);
    let changed = match group.members.get_mut(&member_id) {
        Some(m) => {
            let changed = !m.same_protocols(&req.protocols);
            m.protocols = req.protocols.clone();
            if let Some(charge) = charge.take() {
                m.metadata_charge = charge;
            }
            m.session_timeout = session_timeout;
            m.rebalance_timeout = rebalance_timeout;
            m.last_seen = now;
            changed
        }
        None => {
            group.members.insert(
                member_id.clone(),
                Member {
                    id: member_id.clone(),
                    instance_id: req.instance_id.clone(),
                    client_id: req.client_id.clone(),
                    client_host: req.client_host.clone(),
                    session_timeout,
                    rebalance_timeout,
                    protocols: req.protocols.clone(),
                    metadata_charge: charge.take().unwrap_or_else(MetadataCharge::none),
                    assignment: Bytes::new(),
                    assignment_charge: MetadataCharge::none(),
                    join_waiter: None,
                    sync_waiter: None,
                    last_seen: now,
                },
            );
            true
        }
    };
    let is_leader = group.leader.as_deref() == Some(member_id.as_str());
    let changed = changed || restarted_static;
    match group.state {
        GroupState::Stable if known && !changed && !is_leader => {
            return Some(current_generation_response(group, &member_id, req.version));
        }
        GroupState::CompletingRebalance if known && !changed => {
            return Some(current_generation_response(group, &member_id, req.version));
        }
        GroupState::PreparingRebalance => {}
        _ => prepare_rebalance(group, now, settings),
    }
    let m = group.members.get_mut(&member_id).expect("just inserted");
    if let Some((_, old)) = m.join_waiter.replace((req.version, tx)) {
        drop(old);
    }
    let deadline = now + rebalance_timeout;
    if group.join_deadline.is_none_or(|d| d < deadline) {
        group.join_deadline = Some(deadline);
    }
    None
}

pub(super) fn prepare_rebalance(group: &mut Group, now: Instant, settings: Settings) {
    if group.state == GroupState::CompletingRebalance {
        for m in group.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(sync_error(ResponseError::RebalanceInProgress));
            }
        }
    }
    let was_empty = group.state == GroupState::Empty;
    group.state = GroupState::PreparingRebalance;
    group.join_deadline = Some(now + group_rebalance_timeout(group));
    group.initial_delay_until = if was_empty && !settings.initial_delay.is_zero() {
        Some(now + settings.initial_delay)
    } else {
        None
    };
    debug!(group = %group.id, "preparing rebalance");
}

/// The group's rebalance timeout: the longest of its members' (Apache's
/// `rebalanceTimeoutMs`).
fn group_rebalance_timeout(group: &Group) -> Duration {
    group
        .members
        .values()
        .map(|m| m.rebalance_timeout)
        .max()
        .unwrap_or_default()
}

pub(super) fn remove_member(group: &mut Group, id: &str) {
    if let Some(m) = group.members.remove(id) {
        // Offsets retention counts from the last time the group had members.
        group.members_left_ms = Some(kaas_core::now_ms());
        if let Some(inst) = &m.instance_id {
            if group.static_members.get(inst).map(String::as_str) == Some(id) {
                group.static_members.remove(inst);
            }
        }
    }
    if group.leader.as_deref() == Some(id) {
        group.leader = None;
    }
}

pub(super) fn on_membership_loss(group: &mut Group, now: Instant) {
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            let settings = Settings {
                initial_delay: Duration::ZERO,
                min_session_ms: 0,
                max_session_ms: 0,
                max_size: usize::MAX,
            };
            prepare_rebalance(group, now, settings);
            maybe_complete_join(group, now);
        }
        GroupState::PreparingRebalance => maybe_complete_join(group, now),
        GroupState::Empty | GroupState::Dead => {}
    }
}

pub(super) fn maybe_complete_join(group: &mut Group, now: Instant) {
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    let delayed = group.initial_delay_until.is_some_and(|t| now < t);
    let all_joined = group.members.values().all(|m| m.join_waiter.is_some()) && group.pending.is_empty();
    let overdue = group.join_deadline.is_some_and(|d| now >= d);
    if (all_joined && !delayed) || overdue {
        complete_join(group, now);
    }
}

/// How long a rebalance waits for the member to rejoin: its rebalance timeout, as
/// Apache; JoinGroup v0 has none, and its session timeout stands in. (The larger of
/// the two, as before, let a Java static member with a long `session.timeout.ms`
/// hold every other member in JoinGroup until its session ended.)
fn rebalance_timeout_of(req: &JoinRequest) -> Duration {
    let ms = if req.version == 0 || req.rebalance_timeout_ms < 0 {
        req.session_timeout_ms
    } else {
        req.rebalance_timeout_ms
    };
    Duration::from_millis(ms.max(0) as u64)
}

pub(super) fn complete_join(group: &mut Group, now: Instant) {
    // Dynamic members that did not rejoin are removed; static ones stay, their
    // assignment held for them until their session expires (KIP-345, Apache's
    // `completeClassicGroupJoin`).
    let absent: Vec<String> = group
        .members
        .values()
        .filter(|m| m.join_waiter.is_none() && m.instance_id.is_none())
        .map(|m| m.id.clone())
        .collect();
    for id in absent {
        info!(group = %group.id, member = %id, "member did not rejoin in time; removed");
        remove_member(group, &id);
    }
    // The leader must be a member that rejoined (Apache's `maybeElectNewJoinedLeader`):
    // an absent static leader would be sent no SyncGroup answer to give, and the group
    // would wait in CompletingRebalance until its session ended. With nobody rejoined
    // (absent static members only), the join waits another rebalance timeout, for
    // them to come back or their sessions to end.
    let rejoined = group
        .members
        .values()
        .find(|m| m.join_waiter.is_some())
        .map(|m| m.id.clone());
    if rejoined.is_none() && !group.members.is_empty() {
        group.join_deadline = Some(now + group_rebalance_timeout(group));
        info!(group = %group.id, "no member rejoined; the join waits another rebalance timeout");
        return;
    }
    if group
        .leader
        .as_ref()
        .is_none_or(|l| group.members.get(l).is_none_or(|m| m.join_waiter.is_none()))
    {
        group.leader = rejoined;
    }
    group.pending.clear();
    group.join_deadline = None;
    group.initial_delay_until = None;
    group.generation += 1;
    if group.members.is_empty() {
        group.state = GroupState::Empty;
        group.protocol = None;
        group.protocol_type = None;
        info!(group = %group.id, generation = group.generation, "group is empty");
        return;
    }
    group.protocol = select_protocol(group);
    group.state = GroupState::CompletingRebalance;
    info!(group = %group.id, generation = group.generation, members = group.members.len(), protocol = ?group.protocol, "rebalance: join complete");
    let ids: Vec<String> = group.members.keys().cloned().collect();
    for id in ids {
        let (version, waiter) = {
            let m = group.members.get_mut(&id).expect("listed");
            m.last_seen = now;
            match m.join_waiter.take() {
                Some(w) => w,
                None => continue,
            }
        };
        let _ = waiter.send(current_generation_response(group, &id, version));
    }
}

/// The protocol every member supports that most members list first (Apache's vote);
/// ties go to the one the first member lists first. Linear in all members' protocols.
pub(super) fn select_protocol(group: &Group) -> Option<String> {
    let first = group.members.values().next()?;
    let mut seen = HashSet::new();
    let mut candidates: Vec<&str> = first
        .protocols
        .iter()
        .map(|(p, _)| p.as_str())
        .filter(|p| seen.insert(*p))
        .collect();
    for m in group.members.values().skip(1) {
        let theirs: HashSet<&str> = m.protocols.iter().map(|(p, _)| p.as_str()).collect();
        candidates.retain(|p| theirs.contains(p));
    }
    let position: HashMap<&str, usize> = candidates.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let mut votes = vec![0usize; candidates.len()];
    for m in group.members.values() {
        if let Some(i) = m.protocols.iter().find_map(|(p, _)| position.get(p.as_str())) {
            votes[*i] += 1;
        }
    }
    (0..candidates.len())
        .max_by_key(|i| (votes[*i], std::cmp::Reverse(*i)))
        .map(|i| candidates[i].to_string())
}

pub(super) fn current_generation_response(group: &Group, member_id: &str, version: i16) -> JoinGroupResponse {
    let protocol = group.protocol.clone().unwrap_or_default();
    let leader = group.leader.clone().unwrap_or_default();
    let members = if leader == member_id {
        group
            .members
            .values()
            .map(|m| {
                let mut r = JoinGroupResponseMember::default()
                    .with_member_id(sb(m.id.clone()))
                    .with_metadata(m.metadata_for(&protocol));
                if version >= 5 {
                    r.group_instance_id = m.instance_id.clone().map(sb);
                }
                r
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut resp = JoinGroupResponse::default()
        .with_generation_id(group.generation)
        .with_protocol_name(Some(sb(protocol)))
        .with_leader(sb(leader))
        .with_member_id(sb(member_id))
        .with_members(members);
    if version >= 7 {
        resp.protocol_type = group.protocol_type.clone().map(sb);
    }
    resp
}
