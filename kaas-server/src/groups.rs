//! The classic consumer-group coordinator: JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup with generations, the MEMBER_ID_REQUIRED handshake (JoinGroup v4+),
//! static membership (group.instance.id), session and rebalance timeouts, and
//! committed offsets persisted through kaas-core's group offsets file.
//!
//! Membership is in memory (a restarted broker's members simply rejoin, as after an
//! Apache coordinator failover); offsets are on the volume. All membership logic takes
//! `now` as an argument so it is tested without sleeping; waiting requests hold a
//! oneshot receiver and are answered when the group moves on.

use bytes::Bytes;
use kaas_core::fsutil::{file_stamp, FileStamp};
use kaas_core::offsets::{list_groups, CommittedOffset, GroupOffsets};
use kaas_core::{now_ms, Volume, VolumeError};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use crate::config::Config;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names Apache's tools print.
    pub fn as_str(&self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    join_waiter: Option<(i16, oneshot::Sender<JoinGroupResponse>)>,
    sync_waiter: Option<oneshot::Sender<SyncGroupResponse>>,
    last_seen: Instant,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
    fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with when they expire.
    pending: HashMap<String, Instant>,
    static_members: HashMap<String, String>,
    join_deadline: Option<Instant>,
    initial_delay_until: Option<Instant>,
    /// Taken out of the coordinator's map (evicted, deleted, or no longer owned): whoever
    /// still holds it looks the group up again.
    removed: bool,
}

impl Group {
    fn new(id: &str) -> Self {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            static_members: HashMap::new(),
            join_deadline: None,
            initial_delay_until: None,
            removed: false,
        }
    }

    /// Nothing in memory worth keeping: no members, no member ids handed out and not
    /// yet used. Its committed offsets are on the volume; a later join starts afresh.
    fn vacant(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty() && matches!(self.state, GroupState::Empty | GroupState::Dead)
    }
}

/// A JoinGroup request as the coordinator needs it.
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    pub version: i16,
}

/// A SyncGroup request as the coordinator needs it.
pub struct SyncRequest<'a> {
    pub group_id: &'a str,
    pub generation: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    /// (protocol type, protocol name) as the member names them (v5+), to check.
    pub protocol: (Option<&'a str>, Option<&'a str>),
    /// The leader's assignments: (member id, assignment).
    pub assignments: Vec<(String, Bytes)>,
}

pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

#[derive(Clone, Copy)]
struct Settings {
    initial_delay: Duration,
    min_session_ms: i32,
    max_session_ms: i32,
}

pub struct GroupCoordinator {
    volume: Volume,
    settings: Settings,
    /// Each group under its own lock: work on one group (a JoinGroup with many
    /// protocols) never holds up another. The map's lock is held only to look up,
    /// insert or remove an entry, never while a group's lock is awaited; the one
    /// nesting is group, then map (eviction).
    groups: Mutex<HashMap<String, Arc<Mutex<Group>>>>,
    offsets: Mutex<HashMap<String, Arc<Mutex<CachedOffsets>>>>,
}

type GroupGuard<'a> = std::sync::MutexGuard<'a, Group>;

fn lock_group(g: &Arc<Mutex<Group>>) -> GroupGuard<'_> {
    g.lock().unwrap_or_else(|p| p.into_inner())
}

/// A group's offsets as last read or written, with the stamp of the file then: a
/// changed stamp (kaasctl edited the file) means reload before use.
struct CachedOffsets {
    offsets: GroupOffsets,
    stamp: Option<FileStamp>,
}

fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

fn join_error(code: ResponseError, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code.code())
        .with_generation_id(-1)
        .with_member_id(sb(member_id))
}

fn sync_error(code: ResponseError) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(code.code())
}

impl GroupCoordinator {
    pub fn new(volume: Volume, config: &Config) -> Self {
        GroupCoordinator {
            volume,
            settings: Settings {
                initial_delay: Duration::from_millis(config.group_initial_rebalance_delay_ms),
                min_session_ms: config.group_min_session_timeout_ms,
                max_session_ms: config.group_max_session_timeout_ms,
            },
            groups: Mutex::new(HashMap::new()),
            offsets: Mutex::new(HashMap::new()),
        }
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<Group>>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The group, if it is in memory.
    fn group(&self, id: &str) -> Option<Arc<Mutex<Group>>> {
        self.groups().get(id).cloned()
    }

    /// Runs `f` on the group under its lock; None when it is not in memory.
    fn with_group<R>(&self, id: &str, f: impl FnOnce(&mut Group) -> R) -> Option<R> {
        let g = self.group(id)?;
        let mut guard = lock_group(&g);
        if guard.removed {
            return None;
        }
        Some(f(&mut guard))
    }

    /// Takes a vacant group out of memory; the caller holds its lock.
    fn evict(&self, handle: &Arc<Mutex<Group>>, group: &mut Group) {
        group.removed = true;
        let mut groups = self.groups();
        if groups.get(&group.id).is_some_and(|g| Arc::ptr_eq(g, handle)) {
            groups.remove(&group.id);
        }
    }

    /// Forgets the in-memory state (members, generation) of every group `owns` no
    /// longer claims for this broker: its new coordinator rebuilds it as members
    /// rejoin, and if ownership comes back later, no stale generation reappears.
    /// Committed offsets live on the volume and are untouched.
    pub fn forget_unowned(&self, owns: impl Fn(&str) -> bool) -> usize {
        let gone: Vec<Arc<Mutex<Group>>> = {
            let mut groups = self.groups();
            let ids: Vec<String> = groups.keys().filter(|id| !owns(id)).cloned().collect();
            ids.iter().filter_map(|id| groups.remove(id)).collect()
        };
        for g in &gone {
            lock_group(g).removed = true;
        }
        gone.len()
    }

    /// How many groups are in memory (members, pending ids or a rebalance).
    pub fn in_memory(&self) -> usize {
        self.groups().len()
    }

    pub fn join(&self, req: JoinRequest, now: Instant) -> Reply<JoinGroupResponse> {
        if req.group_id.is_empty() {
            return Reply::Now(join_error(ResponseError::InvalidGroupId, &req.member_id));
        }
        if req.session_timeout_ms < self.settings.min_session_ms
            || req.session_timeout_ms > self.settings.max_session_ms
        {
            return Reply::Now(join_error(ResponseError::InvalidSessionTimeout, &req.member_id));
        }
        let mut req = req;
        loop {
            let handle = self
                .groups()
                .entry(req.group_id.clone())
                .or_insert_with(|| Arc::new(Mutex::new(Group::new(&req.group_id))))
                .clone();
            match self.join_in(&handle, req, now) {
                Ok(reply) => return reply,
                // Evicted between the lookup and the lock: look it up again.
                Err(back) => req = *back,
            }
        }
    }

    /// JoinGroup on one group under its lock; Err(req) when the group was evicted.
    fn join_in(
        &self,
        handle: &Arc<Mutex<Group>>,
        req: JoinRequest,
        now: Instant,
    ) -> Result<Reply<JoinGroupResponse>, Box<JoinRequest>> {
        let mut group = lock_group(handle);
        if group.removed {
            return Err(Box::new(req));
        }
        if group.state == GroupState::Dead {
            *group = Group::new(&req.group_id);
        }
        let reply = if !protocols_fit(&group, &req) {
            Reply::Now(join_error(ResponseError::InconsistentGroupProtocol, &req.member_id))
        } else {
            let (tx, rx) = oneshot::channel();
            match admit(&mut group, req, tx, now, self.settings) {
                Some(immediate) => Reply::Now(immediate),
                None => {
                    maybe_complete_join(&mut group, now);
                    Reply::Wait(rx)
                }
            }
        };
        // A refused join must not leave a group behind.
        if group.vacant() {
            self.evict(handle, &mut group);
        }
        Ok(reply)
    }

    pub fn sync(&self, req: SyncRequest<'_>, now: Instant) -> Reply<SyncGroupResponse> {
        let SyncRequest {
            group_id,
            generation,
            member_id,
            instance_id,
            protocol,
            assignments,
        } = req;
        let handle = self.group(group_id);
        let mut guard = handle.as_ref().map(lock_group);
        let Some(group) = guard.as_deref_mut().filter(|g| !g.removed) else {
            return Reply::Now(sync_error(ResponseError::UnknownMemberId));
        };
        if let Err(code) = check_member(group, member_id, instance_id) {
            return Reply::Now(sync_error(code));
        }
        if generation != group.generation {
            return Reply::Now(sync_error(ResponseError::IllegalGeneration));
        }
        let (ptype, pname) = protocol;
        if ptype.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
            || pname.is_some_and(|n| Some(n) != group.protocol.as_deref())
        {
            return Reply::Now(sync_error(ResponseError::InconsistentGroupProtocol));
        }
        let ok = |g: &Group, assignment: Bytes| {
            SyncGroupResponse::default()
                .with_protocol_type(g.protocol_type.clone().map(sb))
                .with_protocol_name(g.protocol.clone().map(sb))
                .with_assignment(assignment)
        };
        match group.state {
            GroupState::Empty | GroupState::Dead => Reply::Now(sync_error(ResponseError::UnknownMemberId)),
            GroupState::PreparingRebalance => Reply::Now(sync_error(ResponseError::RebalanceInProgress)),
            GroupState::Stable => {
                let member = group.members.get_mut(member_id).expect("checked");
                member.last_seen = now;
                let a = member.assignment.clone();
                Reply::Now(ok(group, a))
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                {
                    let member = group.members.get_mut(member_id).expect("checked");
                    member.last_seen = now;
                    member.sync_waiter = Some(tx);
                }
                if group.leader.as_deref() == Some(member_id) {
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in group.members.values_mut() {
                        m.assignment = given.remove(&m.id).unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    info!(group = %group.id, generation = group.generation, members = group.members.len(), "group stable");
                    let (pt, pn) = (group.protocol_type.clone(), group.protocol.clone());
                    for m in group.members.values_mut() {
                        if let Some(w) = m.sync_waiter.take() {
                            let _ = w.send(
                                SyncGroupResponse::default()
                                    .with_protocol_type(pt.clone().map(sb))
                                    .with_protocol_name(pn.clone().map(sb))
                                    .with_assignment(m.assignment.clone()),
                            );
                        }
                    }
                }
                Reply::Wait(rx)
            }
        }
    }

    /// Ok(()) keeps the member alive; REBALANCE_IN_PROGRESS tells it to rejoin.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
    ) -> Result<(), ResponseError> {
        self.with_group(group_id, |group| {
            check_member(group, member_id, instance_id)?;
            if generation != group.generation {
                return Err(ResponseError::IllegalGeneration);
            }
            if let Some(m) = group.members.get_mut(member_id) {
                m.last_seen = now;
            }
            match group.state {
                GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
                GroupState::Empty | GroupState::Dead => Err(ResponseError::UnknownMemberId),
                GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
            }
        })
        .unwrap_or(Err(ResponseError::UnknownMemberId))
    }

    /// Removes members; each (member id, instance id) gets its own result.
    pub fn leave(
        &self,
        group_id: &str,
        leaving: &[(String, Option<String>)],
        now: Instant,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let handle = self.group(group_id).ok_or(ResponseError::UnknownMemberId)?;
        let mut guard = lock_group(&handle);
        if guard.removed {
            return Err(ResponseError::UnknownMemberId);
        }
        let group = &mut *guard;
        let mut results = Vec::with_capacity(leaving.len());
        let mut removed = false;
        for (member_id, instance_id) in leaving {
            let id = match instance_id {
                Some(inst) => match group.static_members.get(inst) {
                    Some(id) if member_id.is_empty() || id == member_id => Some(id.clone()),
                    Some(_) => {
                        results.push(Some(ResponseError::FencedInstanceId));
                        continue;
                    }
                    None => None,
                },
                None => group.members.contains_key(member_id).then(|| member_id.clone()),
            };
            match id {
                Some(id) => {
                    info!(group = %group.id, member = %id, "member left");
                    remove_member(group, &id);
                    removed = true;
                    results.push(None);
                }
                None => {
                    if group.pending.remove(member_id).is_some() {
                        results.push(None);
                    } else {
                        results.push(Some(ResponseError::UnknownMemberId));
                    }
                }
            }
        }
        if removed {
            on_membership_loss(group, now);
        }
        if group.vacant() {
            self.evict(&handle, group);
        }
        Ok(results)
    }

    /// Periodic work: expire sessions and pending members, finish rebalances whose
    /// deadline passed.
    /// Groups left with nothing in memory are evicted (their offsets stay on the
    /// volume), so ids clients try once and abandon do not accumulate.
    pub fn tick(&self, now: Instant) {
        let handles: Vec<Arc<Mutex<Group>>> = self.groups().values().cloned().collect();
        for handle in handles {
            let mut guard = lock_group(&handle);
            if guard.removed {
                continue;
            }
            let group = &mut *guard;
            group.pending.retain(|_, expires| *expires > now);
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| m.join_waiter.is_none() && now.duration_since(m.last_seen) > m.session_timeout)
                .map(|m| m.id.clone())
                .collect();
            for id in &expired {
                info!(group = %group.id, member = %id, "member session expired");
                remove_member(group, id);
            }
            if !expired.is_empty() {
                on_membership_loss(group, now);
            }
            maybe_complete_join(group, now);
            if group.vacant() {
                self.evict(&handle, group);
            }
        }
    }

    /// (state, protocol type, protocol, members as (id, instance, client, host, metadata, assignment))
    pub fn describe(&self, group_id: &str) -> Option<GroupView> {
        self.with_group(group_id, |g| GroupView {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: g.protocol.clone().unwrap_or_default(),
            members: g
                .members
                .values()
                .map(|m| MemberView {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: g.protocol.as_deref().map(|p| m.metadata_for(p)).unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// Every group known in memory or with offsets on the volume: (id, state, protocol type).
    pub fn list(&self) -> Vec<(String, GroupState, String)> {
        let mut out: BTreeMap<String, (GroupState, String)> = BTreeMap::new();
        match list_groups(&self.volume) {
            Ok(ids) => {
                for id in ids {
                    out.insert(id, (GroupState::Empty, "consumer".to_string()));
                }
            }
            Err(e) => warn!(error = %e, "cannot list group offset files"),
        }
        let handles: Vec<Arc<Mutex<Group>>> = self.groups().values().cloned().collect();
        for handle in handles {
            let g = lock_group(&handle);
            if g.state != GroupState::Dead && !g.removed {
                out.insert(
                    g.id.clone(),
                    (g.state, g.protocol_type.clone().unwrap_or_else(|| "consumer".into())),
                );
            }
        }
        out.into_iter().map(|(id, (s, t))| (id, s, t)).collect()
    }

    pub fn delete(&self, group_id: &str) -> Result<(), ResponseError> {
        let handle = self.group(group_id);
        let mut guard = handle.as_ref().map(lock_group);
        let live = guard.as_deref_mut().filter(|g| !g.removed);
        let in_memory = live.as_ref().is_some_and(|g| g.state != GroupState::Dead);
        if live.as_ref().is_some_and(|g| !g.members.is_empty()) {
            return Err(ResponseError::NonEmptyGroup);
        }
        let on_disk = kaas_core::offsets::offsets_file(&self.volume, group_id).exists();
        if !in_memory && !on_disk {
            return Err(ResponseError::GroupIdNotFound);
        }
        GroupOffsets::delete(&self.volume, group_id).map_err(|e| {
            warn!(group = group_id, error = %e, "cannot delete group offsets");
            ResponseError::KafkaStorageError
        })?;
        if let (Some(handle), Some(group)) = (&handle, guard.as_deref_mut()) {
            self.evict(handle, group);
        }
        self.offsets.lock().unwrap_or_else(|p| p.into_inner()).remove(group_id);
        info!(group = group_id, "deleted group");
        Ok(())
    }

    /// OffsetDelete: drops the committed offsets of `partitions` (topic, partition)
    /// from a group, except those of topics a member of the group is subscribed to
    /// (GROUP_SUBSCRIBED_TO_TOPIC for those, as Apache). A group with members that
    /// does not use the consumer protocol may not lose offsets at all
    /// (NON_EMPTY_GROUP). Returns each partition's error code (0: deleted, or had none).
    pub fn delete_offsets(&self, group_id: &str, partitions: &[(String, i32)]) -> Result<Vec<i16>, ResponseError> {
        let handle = self.group(group_id);
        let guard = handle.as_ref().map(lock_group);
        let live = guard.as_deref().filter(|g| !g.removed && g.state != GroupState::Dead);
        let subscribed: Option<HashSet<String>> = match live {
            Some(g) if !g.members.is_empty() => {
                if g.protocol_type.as_deref() != Some("consumer") {
                    return Err(ResponseError::NonEmptyGroup);
                }
                subscribed_topics(g)
            }
            _ => Some(HashSet::new()),
        };
        let on_disk = kaas_core::offsets::offsets_file(&self.volume, group_id).exists();
        if live.is_none() && !on_disk {
            return Err(ResponseError::GroupIdNotFound);
        }
        // Unreadable subscriptions: every topic counts as subscribed (nothing a live
        // member may need is deleted).
        let protected = |topic: &str| subscribed.as_ref().is_none_or(|s| s.contains(topic));
        let codes: Vec<i16> = partitions
            .iter()
            .map(|(t, _)| {
                if protected(t) {
                    ResponseError::GroupSubscribedToTopic.code()
                } else {
                    0
                }
            })
            .collect();
        if !on_disk {
            return Ok(codes);
        }
        self.with_offsets(group_id, |offsets| {
            let mut changed = false;
            for ((t, p), code) in partitions.iter().zip(&codes) {
                if *code == 0 {
                    changed |= offsets.remove(t, *p);
                }
            }
            ((), changed)
        })
        .map_err(|e| {
            warn!(group = group_id, error = %e, "cannot delete group offsets");
            ResponseError::KafkaStorageError
        })?;
        info!(
            group = group_id,
            partitions = codes.iter().filter(|c| **c == 0).count(),
            "deleted committed offsets"
        );
        Ok(codes)
    }

    /// Whether a commit from this (generation, member) may proceed.
    pub fn check_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        let handle = self.group(group_id);
        let guard = handle.as_ref().map(lock_group);
        let Some(group) = guard.as_deref().filter(|g| !g.removed) else {
            return if generation < 0 {
                Ok(())
            } else {
                Err(ResponseError::IllegalGeneration)
            };
        };
        if generation < 0 && group.members.is_empty() {
            return Ok(());
        }
        if group.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        check_member(group, member_id, instance_id)?;
        if generation != group.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// Runs `f` on a group's current offsets under the group's lock; when `f` reports
    /// a change, the file is rewritten durably before returning, and on a write error
    /// memory is left equal to the volume (the change did not happen).
    fn with_offsets<R>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut GroupOffsets) -> (R, bool),
    ) -> Result<R, VolumeError> {
        let entry = {
            let mut cache = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .entry(group_id.to_string())
                .or_insert_with(|| {
                    Arc::new(Mutex::new(CachedOffsets {
                        offsets: GroupOffsets::new(group_id),
                        stamp: None,
                    }))
                })
                .clone()
        };
        let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
        // The cross-process lock every writer of this file (other brokers, kaasctl)
        // holds: the stamp check and the write below are one read-modify-write.
        let _file_lock = GroupOffsets::lock(&self.volume, group_id)?;
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        let stamp = file_stamp(&path);
        if stamp.is_none() || stamp != cached.stamp {
            cached.offsets = GroupOffsets::load(&self.volume, group_id)?;
            cached.stamp = stamp;
        }
        let mut next = cached.offsets.clone();
        let (result, changed) = f(&mut next);
        if changed {
            next.save(&self.volume)?;
            cached.offsets = next;
            cached.stamp = file_stamp(&path);
        }
        Ok(result)
    }

    /// Writes committed offsets (topic, partition, offset, leader epoch, metadata) durably.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        entries: &[(String, i32, i64, i32, Option<String>)],
    ) -> Result<(), VolumeError> {
        let now = now_ms();
        self.with_offsets(group_id, |offsets| {
            for (topic, partition, offset, leader_epoch, metadata) in entries {
                offsets.set(
                    topic,
                    *partition,
                    CommittedOffset {
                        offset: *offset,
                        leader_epoch: *leader_epoch,
                        metadata: metadata.clone(),
                        commit_ms: now,
                    },
                );
            }
            ((), true)
        })?;
        debug!(group = group_id, partitions = entries.len(), "committed offsets");
        Ok(())
    }

    /// Stages offsets for a transactional producer (TxnOffsetCommit), durably.
    pub fn stage_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        transactional_id: &str,
        entries: &[(String, i32, i64, i32, Option<String>)],
    ) -> Result<(), VolumeError> {
        let now = now_ms();
        self.with_offsets(group_id, |offsets| {
            for (topic, partition, offset, leader_epoch, metadata) in entries {
                let committed = CommittedOffset {
                    offset: *offset,
                    leader_epoch: *leader_epoch,
                    metadata: metadata.clone(),
                    commit_ms: now,
                };
                offsets.stage(
                    producer_id,
                    producer_epoch,
                    transactional_id,
                    topic,
                    *partition,
                    committed,
                );
            }
            ((), true)
        })
    }

    /// The transaction's offset hook: commit (or discard) what (`producer_id`,
    /// `producer_epoch`) staged. Idempotent, so a recovered coordinator may run it again.
    pub fn finish_pending(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Result<(), VolumeError> {
        let changed = self.with_offsets(group_id, |offsets| {
            let changed = if commit {
                offsets.commit_pending(producer_id, producer_epoch)
            } else {
                offsets.discard_pending(producer_id, producer_epoch)
            };
            (changed, changed)
        })?;
        if changed {
            debug!(group = group_id, producer_id, commit, "staged offsets finished");
        }
        Ok(())
    }

    /// A group's committed offsets. A group this broker has not written is read
    /// without its lock (files are replaced atomically) and not cached, so fetches
    /// for ids nobody commits to leave neither lock files nor memory behind.
    pub fn fetch_offsets(&self, group_id: &str) -> Result<GroupOffsets, VolumeError> {
        let cached = self
            .offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(group_id);
        if cached {
            self.with_offsets(group_id, |offsets| (offsets.clone(), false))
        } else {
            GroupOffsets::load(&self.volume, group_id)
        }
    }

    /// Drops the offsets of a deleted topic from every group.
    pub fn forget_topic(&self, topic: &str) {
        let Ok(ids) = list_groups(&self.volume) else {
            return;
        };
        for id in ids {
            if let Err(e) = self.with_offsets(&id, |o| {
                let changed = o.remove_topic(topic);
                ((), changed)
            }) {
                warn!(group = %id, error = %e, "cannot drop offsets of deleted topic");
            }
        }
    }
}

/// The topics the members of a consumer-protocol group subscribe to, from their
/// JoinGroup metadata (ConsumerProtocolSubscription: version i16, then the topic
/// array, in every version); None when any member's metadata cannot be read.
fn subscribed_topics(group: &Group) -> Option<HashSet<String>> {
    let protocol = group.protocol.as_deref()?;
    let mut topics = HashSet::new();
    for m in group.members.values() {
        let meta = m.metadata_for(protocol);
        topics.extend(parse_subscription_topics(&meta)?);
    }
    Some(topics)
}

fn parse_subscription_topics(meta: &[u8]) -> Option<Vec<String>> {
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

pub struct GroupView {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberView>,
}

pub struct MemberView {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A joining member must name a protocol type and protocols, and share the type and at
/// least one protocol with every *other* member (it may be replacing its own entry).
/// Linear in the protocols of the request and of the group's members.
fn protocols_fit(group: &Group, req: &JoinRequest) -> bool {
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

fn check_member(group: &Group, member_id: &str, instance_id: Option<&str>) -> Result<(), ResponseError> {
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

fn new_member_id(prefix: &str) -> String {
    format!(
        "{}-{}",
        if prefix.is_empty() { "member" } else { prefix },
        uuid::Uuid::new_v4()
    )
}

/// Adds or updates the joining member. Some(response) when the request is answered at
/// once; None when it waits for the rebalance (its sender is stored on the member).
fn admit(
    group: &mut Group,
    req: JoinRequest,
    tx: oneshot::Sender<JoinGroupResponse>,
    now: Instant,
    settings: Settings,
) -> Option<JoinGroupResponse> {
    let mut member_id = req.member_id.clone();
    let mut fresh = false;
    if member_id.is_empty() {
        if let Some(inst) = &req.instance_id {
            if let Some(old) = group.static_members.get(inst).cloned() {
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
                let unchanged = m.same_protocols(&req.protocols);
                m.id = new_id.clone();
                m.last_seen = now;
                m.session_timeout = Duration::from_millis(req.session_timeout_ms as u64);
                m.rebalance_timeout =
                    Duration::from_millis(req.rebalance_timeout_ms.max(req.session_timeout_ms) as u64);
                m.protocols = req.protocols.clone();
                let was_leader = group.leader.as_deref() == Some(old.as_str());
                if was_leader {
                    group.leader = Some(new_id.clone());
                }
                group.members.insert(new_id.clone(), m);
                group.static_members.insert(inst.clone(), new_id.clone());
                info!(group = %group.id, instance = %inst, member = %new_id, "static member rejoined");
                if group.state == GroupState::Stable && unchanged && !was_leader {
                    return Some(current_generation_response(group, &new_id, req.version));
                }
                member_id = new_id;
            } else {
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
    let rebalance_timeout = Duration::from_millis(req.rebalance_timeout_ms.max(req.session_timeout_ms) as u64);
    let changed = match group.members.get_mut(&member_id) {
        Some(m) => {
            let changed = !m.same_protocols(&req.protocols);
            m.protocols = req.protocols.clone();
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
                    assignment: Bytes::new(),
                    join_waiter: None,
                    sync_waiter: None,
                    last_seen: now,
                },
            );
            true
        }
    };
    let is_leader = group.leader.as_deref() == Some(member_id.as_str());
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

fn prepare_rebalance(group: &mut Group, now: Instant, settings: Settings) {
    if group.state == GroupState::CompletingRebalance {
        for m in group.members.values_mut() {
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(sync_error(ResponseError::RebalanceInProgress));
            }
        }
    }
    let was_empty = group.state == GroupState::Empty;
    group.state = GroupState::PreparingRebalance;
    let max_rebalance = group
        .members
        .values()
        .map(|m| m.rebalance_timeout)
        .max()
        .unwrap_or_default();
    group.join_deadline = Some(now + max_rebalance);
    group.initial_delay_until = if was_empty && !settings.initial_delay.is_zero() {
        Some(now + settings.initial_delay)
    } else {
        None
    };
    debug!(group = %group.id, "preparing rebalance");
}

fn remove_member(group: &mut Group, id: &str) {
    if let Some(m) = group.members.remove(id) {
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

fn on_membership_loss(group: &mut Group, now: Instant) {
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            let settings = Settings {
                initial_delay: Duration::ZERO,
                min_session_ms: 0,
                max_session_ms: 0,
            };
            prepare_rebalance(group, now, settings);
            maybe_complete_join(group, now);
        }
        GroupState::PreparingRebalance => maybe_complete_join(group, now),
        GroupState::Empty | GroupState::Dead => {}
    }
}

fn maybe_complete_join(group: &mut Group, now: Instant) {
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

fn complete_join(group: &mut Group, now: Instant) {
    let absent: Vec<String> = group
        .members
        .values()
        .filter(|m| m.join_waiter.is_none())
        .map(|m| m.id.clone())
        .collect();
    for id in absent {
        info!(group = %group.id, member = %id, "member did not rejoin in time; removed");
        remove_member(group, &id);
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
    if group.leader.as_ref().is_none_or(|l| !group.members.contains_key(l)) {
        group.leader = group.members.keys().next().cloned();
    }
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
fn select_protocol(group: &Group) -> Option<String> {
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

fn current_generation_response(group: &Group, member_id: &str, version: i16) -> JoinGroupResponse {
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

#[cfg(test)]
mod tests;
