//! The classic consumer-group coordinator: JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup with generations, the MEMBER_ID_REQUIRED handshake (JoinGroup v4+),
//! static membership (group.instance.id), session and rebalance timeouts, and
//! committed offsets persisted through kaas-core's group offsets file.
//!
//! Membership is in memory, its last stable generation also in the group's file, from
//! which a broker taking the group over goes on with it (`classic_record`); offsets
//! are on the volume. All membership logic takes
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
use rebalance::*;

pub mod consumer;
mod consumer_groups;
pub use consumer_groups::{member_check, ConsumerError};
mod classic_record;
mod offsets;
pub use offsets::RetentionPass;
pub(crate) use offsets::{member_error, offsets_error};
mod rebalance;

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
    /// What `protocols` hold of `--group-member-metadata-max-bytes`.
    metadata_charge: MetadataCharge,
    pub assignment: Bytes,
    /// What `assignment` holds of the same bound.
    assignment_charge: MetadataCharge,
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
    /// When a member last left (offsets retention: [`GroupCoordinator::expire_offsets`]).
    members_left_ms: Option<i64>,
    /// What this broker last wrote to, or loaded from, the group's file of its
    /// membership ([`classic_record`]).
    persisted: classic_record::RecordKey,
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
            members_left_ms: None,
            persisted: None,
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
    /// `group.max.size`.
    max_size: usize,
}

/// `--group-member-metadata-max-bytes`: the protocol names and metadata members keep,
/// all groups together.
pub(super) struct MetadataPool {
    limit: u64,
    used: std::sync::atomic::AtomicU64,
    last_warned_ms: std::sync::atomic::AtomicI64,
}

/// What one member's protocols hold of the [`MetadataPool`]; given back when dropped
/// (with the member, or when its protocols are replaced).
pub(super) struct MetadataCharge {
    pool: Option<Arc<MetadataPool>>,
    bytes: u64,
}

impl MetadataPool {
    fn new(limit: u64) -> Arc<Self> {
        Arc::new(MetadataPool {
            limit,
            used: std::sync::atomic::AtomicU64::new(0),
            last_warned_ms: std::sync::atomic::AtomicI64::new(0),
        })
    }

    /// A charge for `protocols`, or None when the pool has no room (logged at most
    /// once a second). `replacing`: what the charge about to be given back for them
    /// holds (a member rejoining), counted as room.
    pub(super) fn charge(
        self: &Arc<Self>,
        group: &str,
        protocols: &[(String, Bytes)],
        replacing: u64,
    ) -> Option<MetadataCharge> {
        let bytes: u64 = protocols.iter().map(|(n, m)| (n.len() + m.len()) as u64).sum();
        self.charge_bytes(group, bytes, replacing)
    }

    /// [`Self::charge`] of `bytes` (a member's assignment).
    pub(super) fn charge_bytes(self: &Arc<Self>, group: &str, bytes: u64, replacing: u64) -> Option<MetadataCharge> {
        use std::sync::atomic::Ordering;
        let took = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used.saturating_sub(replacing) + bytes <= self.limit).then_some(used + bytes)
            })
            .is_ok();
        if took {
            return Some(MetadataCharge {
                pool: Some(self.clone()),
                bytes,
            });
        }
        let now = kaas_core::now_ms();
        let last = self.last_warned_ms.load(Ordering::Relaxed);
        if now - last >= 1000
            && self
                .last_warned_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            warn!(group, bytes, limit = self.limit, "a member's join or assignment does not fit --group-member-metadata-max-bytes; answered COORDINATOR_NOT_AVAILABLE until members leave");
        }
        None
    }
}

impl MetadataCharge {
    /// A charge of nothing (a member whose metadata was charged elsewhere).
    pub(super) fn none() -> MetadataCharge {
        MetadataCharge { pool: None, bytes: 0 }
    }
}

impl Drop for MetadataCharge {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.used.fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

pub struct GroupCoordinator {
    volume: Volume,
    settings: Settings,
    consumer_settings: consumer::Settings,
    metadata: Arc<MetadataPool>,
    /// Each group under its own lock: work on one group (a JoinGroup with many
    /// protocols) never holds up another. The map's lock is held only to look up,
    /// insert or remove an entry, never while a group's lock is awaited; the one
    /// nesting is group, then map (eviction).
    groups: Mutex<HashMap<String, Arc<Mutex<Group>>>>,
    offsets: Mutex<HashMap<String, Arc<Mutex<CachedOffsets>>>>,
    /// Goes up whenever the live set changed (groups may have moved): an in-memory
    /// consumer group built under another generation is rebuilt from the volume with
    /// fresh sessions before use, never trusted for who is overdue. Shared with the
    /// cluster, which bumps it before it publishes a changed live set
    /// ([`Self::with_live_generation`]).
    coordination_generation: Arc<std::sync::atomic::AtomicU64>,
    /// The generation whose owned consumer groups were last loaded from the volume
    /// (so members of a group taken over expire even if none of them heartbeats).
    scanned_generation: std::sync::atomic::AtomicU64,
    /// The generation the last live-set change left (after its own bump): cache
    /// entries refreshed since were current under the live set before the next
    /// change ([`Self::keep_sessions_of_groups_still_here`]).
    settled_generation: std::sync::atomic::AtomicU64,
    /// Offsets retention: each classic group that emptied (recorded by `tick` and
    /// eviction), until `persist_departures` (or a pass) has written when its last
    /// member left to the group's file.
    departures: Mutex<HashMap<String, Departure>>,
    /// `--offsets-retention-ms`.
    offsets_retention_ms: i64,
    /// `--group-max-session-timeout-ms`: how long an offsets-retention pass waits,
    /// after this broker began coordinating under a live set, before it expires
    /// anything ([`Self::expire_offsets`]).
    max_session_ms: i64,
    /// (coordination generation, when a retention pass first saw it).
    retention_since: Mutex<(u64, i64)>,
    /// Classic groups whose membership record waits to be written to their file
    /// ([`classic_record`]), each with the mark's sequence number (a write clears
    /// only the mark it saw).
    classic_dirty: Mutex<HashMap<String, u64>>,
    classic_seq: std::sync::atomic::AtomicU64,
}

/// A classic group's last member leaving, not on the volume yet (offsets retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Departure {
    /// When the last member left.
    at_ms: i64,
    /// After a failed write: (the next try at, the pause before it).
    retry: Option<(i64, i64)>,
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
    /// The KIP-848 consumer group `offsets.consumer` records, with what the file does
    /// not hold (session deadlines, what each member was last told); rebuilt from
    /// the record whenever the file is reloaded, carrying those over.
    consumer: Option<consumer::ConsumerGroup>,
    /// The coordination generation `consumer` was built or last checked under.
    generation: u64,
    /// The generation under which this broker last did coordinator work on the
    /// consumer group (a heartbeat, an expiry pass, a load of the groups it
    /// coordinates); a transaction's staged offsets refresh the entry without it.
    coordinated: u64,
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
                max_size: config.group_max_size as usize,
            },
            consumer_settings: consumer::Settings {
                session_timeout_ms: config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
                max_size: config.group_consumer_max_size as usize,
            },
            metadata: MetadataPool::new(config.group_member_metadata_max_bytes),
            groups: Mutex::new(HashMap::new()),
            offsets: Mutex::new(HashMap::new()),
            coordination_generation: Arc::new(std::sync::atomic::AtomicU64::new(1)),
            scanned_generation: std::sync::atomic::AtomicU64::new(0),
            settled_generation: std::sync::atomic::AtomicU64::new(0),
            departures: Mutex::new(HashMap::new()),
            offsets_retention_ms: config.offsets_retention_ms,
            max_session_ms: i64::from(config.group_max_session_timeout_ms),
            retention_since: Mutex::new((0, 0)),
            classic_dirty: Mutex::new(HashMap::new()),
            classic_seq: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Shares the cluster's live-set generation, which goes up before a changed
    /// live set is published (so no expiry pass sees the new owner with the old
    /// generation's deadlines).
    pub fn with_live_generation(mut self, generation: Arc<std::sync::atomic::AtomicU64>) -> Self {
        self.coordination_generation = generation;
        self
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<Group>>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The group, if it is in memory.
    fn group(&self, id: &str) -> Option<Arc<Mutex<Group>>> {
        self.groups().get(id).cloned()
    }

    /// Runs `f` on the group under its lock; None when it is neither in memory nor
    /// recorded with members in its file ([`Self::group_or_load`]).
    fn with_group<R>(&self, id: &str, f: impl FnOnce(&mut Group) -> R) -> Option<R> {
        let g = self.group_or_load(id)?;
        let mut guard = lock_group(&g);
        if guard.removed {
            return None;
        }
        Some(f(&mut guard))
    }

    /// Takes a vacant group out of memory; the caller holds its lock. When its last
    /// member left is kept for offsets retention.
    fn evict(&self, handle: &Arc<Mutex<Group>>, group: &mut Group) {
        group.removed = true;
        self.note_emptied(group);
        self.note_record(group);
        let mut groups = self.groups();
        if groups.get(&group.id).is_some_and(|g| Arc::ptr_eq(g, handle)) {
            groups.remove(&group.id);
        }
    }

    /// A group whose last member left: when, for offsets retention (written to its
    /// file within a second by [`Self::persist_departures`]); the caller holds the
    /// group's lock.
    fn note_emptied(&self, group: &mut Group) {
        if !group.members.is_empty() {
            return;
        }
        if let Some(left) = group.members_left_ms.take() {
            let mut departures = self.departures.lock().unwrap_or_else(|p| p.into_inner());
            let d = departures.entry(group.id.clone()).or_insert(Departure {
                at_ms: left,
                retry: None,
            });
            d.at_ms = d.at_ms.max(left);
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
        // Their records are their new coordinator's to write now.
        self.classic_dirty
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, _| owns(id));
        for g in &gone {
            let mut g = lock_group(g);
            g.removed = true;
            // A last member that left since the last tick: still written to the file.
            self.note_emptied(&mut g);
        }
        self.keep_sessions_of_groups_still_here(&owns);
        self.coordination_changed();
        self.settled_generation
            .store(self.generation(), std::sync::atomic::Ordering::SeqCst);
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
            // Never made afresh while a record of it could not be loaded: an empty
            // group in memory would hide the recorded members.
            let handle = match self.load_group(&req.group_id) {
                Err(code) => return Reply::Now(join_error(code, &req.member_id)),
                Ok(Some(h)) => h,
                Ok(None) => self
                    .groups()
                    .entry(req.group_id.clone())
                    .or_insert_with(|| Arc::new(Mutex::new(Group::new(&req.group_id))))
                    .clone(),
            };
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
            match admit(&mut group, req, tx, now, self.settings, &self.metadata) {
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
        // A static member rejoining a stable group under a new id.
        self.note_record(&group);
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
        let handle = self.group_or_load(group_id);
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
                let leader = group.leader.as_deref() == Some(member_id);
                // The assignments are kept with the members until the next rebalance:
                // charged to `--group-member-metadata-max-bytes` before anything
                // changes; a leader's sync that does not fit is refused (retriable)
                // and the group waits on (`assignments_count_against_the_member_metadata_bound`).
                let mut given: HashMap<String, Bytes> = HashMap::new();
                let mut charges: HashMap<String, MetadataCharge> = HashMap::new();
                if leader {
                    given = assignments.into_iter().collect();
                    // Every member's old assignment is given back once the new ones
                    // are in: counted as room for each new one (the last new one is
                    // then checked against the group's final use), so replacing a
                    // large set of assignments is not refused for holding it twice.
                    let old: u64 = group.members.values().map(|m| m.assignment_charge.bytes).sum();
                    for m in group.members.values() {
                        let bytes = given.get(&m.id).map_or(0, |a| a.len() as u64);
                        match self.metadata.charge_bytes(&group.id, bytes, old) {
                            Some(c) => {
                                charges.insert(m.id.clone(), c);
                            }
                            None => return Reply::Now(sync_error(ResponseError::CoordinatorNotAvailable)),
                        }
                    }
                }
                let (tx, rx) = oneshot::channel();
                {
                    let member = group.members.get_mut(member_id).expect("checked");
                    member.last_seen = now;
                    member.sync_waiter = Some(tx);
                }
                if leader {
                    for m in group.members.values_mut() {
                        m.assignment = given.remove(&m.id).unwrap_or_default();
                        m.assignment_charge = charges.remove(&m.id).unwrap_or_else(MetadataCharge::none);
                    }
                    group.state = GroupState::Stable;
                    info!(group = %group.id, generation = group.generation, members = group.members.len(), "group stable");
                    self.note_record(group);
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
        let handle = self.group_or_load(group_id).ok_or(ResponseError::UnknownMemberId)?;
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
        self.note_record(group);
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
            self.note_emptied(group);
            if group.vacant() {
                self.evict(&handle, group);
            }
            self.note_record(group);
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

    /// Every group known in memory or with offsets on the volume that `wanted`
    /// accepts (ListGroups: those this broker coordinates), with its state, protocol
    /// type and group type (`classic`, or `consumer` for KIP-848 groups, whose
    /// members are in their offsets file). A file that cannot be read is listed as a
    /// classic Empty group, with a warning.
    pub fn list(&self, wanted: &dyn Fn(&str) -> bool) -> Vec<Listed> {
        let mut out: BTreeMap<String, Listed> = BTreeMap::new();
        match list_groups(&self.volume) {
            Ok(ids) => {
                for id in ids.into_iter().filter(|id| wanted(id)) {
                    let (consumer, classic) = match GroupOffsets::load(&self.volume, &id) {
                        Ok(o) => (o.consumer, o.classic.filter(|c| !c.members.is_empty())),
                        Err(e) => {
                            warn!(group = %id, error = %e, "cannot read the group's offsets file");
                            (None, None)
                        }
                    };
                    let listed = match (consumer, classic) {
                        (Some(c), _) => Listed {
                            id: id.clone(),
                            state: c.state().to_string(),
                            protocol_type: "consumer".into(),
                            group_type: "consumer",
                        },
                        // Recorded with members, not loaded here yet: its last stable
                        // generation (loaded at its next use, or by memory below).
                        (None, Some(r)) => Listed {
                            id: id.clone(),
                            state: GroupState::Stable.as_str().into(),
                            protocol_type: r.protocol_type,
                            group_type: "classic",
                        },
                        (None, None) => Listed {
                            id: id.clone(),
                            state: GroupState::Empty.as_str().into(),
                            protocol_type: "consumer".into(),
                            group_type: "classic",
                        },
                    };
                    out.insert(id, listed);
                }
            }
            Err(e) => warn!(error = %e, "cannot list group offset files"),
        }
        let handles: Vec<Arc<Mutex<Group>>> = self.groups().values().cloned().collect();
        for handle in handles {
            let g = lock_group(&handle);
            if g.state != GroupState::Dead && !g.removed && wanted(&g.id) {
                out.insert(
                    g.id.clone(),
                    Listed {
                        id: g.id.clone(),
                        state: g.state.as_str().into(),
                        protocol_type: g.protocol_type.clone().unwrap_or_else(|| "consumer".into()),
                        group_type: "classic",
                    },
                );
            }
        }
        out.into_values().collect()
    }

    /// DeleteGroups for one group: refused while it has members, checked under the
    /// group's mutex, which is held until its offsets file is gone. The group's file
    /// lock is taken first, with no mutex held: its wait (up to 5 s, a holder on
    /// another broker, kaasctl or a paused process) never holds up the group's
    /// heartbeats or the coordinator's tick, which runs on an async worker
    /// (`a_delete_waiting_for_the_groups_file_lock_holds_up_neither_tick_nor_heartbeats`).
    /// The whole of it runs off the async workers.
    pub fn delete(&self, group_id: &str) -> Result<(), ResponseError> {
        self.delete_guarded(group_id, &|| true)
    }

    /// [`Self::delete`], checking `still_ours` under the group's file lock before the
    /// file is removed (NOT_COORDINATOR otherwise): a broker paused while it waited for
    /// the lock, and deposed meanwhile, must not remove the file its successor writes.
    pub fn delete_guarded(&self, group_id: &str, still_ours: &(dyn Fn() -> bool + Sync)) -> Result<(), ResponseError> {
        crate::blocking::off_worker(|| self.delete_blocking(group_id, still_ours))
    }

    fn delete_blocking(&self, group_id: &str, still_ours: &(dyn Fn() -> bool + Sync)) -> Result<(), ResponseError> {
        let refused = |e: VolumeError| {
            // Counted as any failed write of the file (a lock held elsewhere is not).
            crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, &e);
            warn!(group = group_id, error = %e, "cannot delete group offsets");
            offsets::offsets_error(&e)
        };
        // Members in memory: refused at once, no lock waited for.
        if self.with_group(group_id, |g| !g.members.is_empty()).unwrap_or(false) {
            return Err(ResponseError::NonEmptyGroup);
        }
        // A group known neither on the volume nor here takes no lock (and leaves no
        // lock file); one that comes meanwhile came after this delete.
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        let known = path.exists() || self.group(group_id).is_some();
        let _file_lock = if known {
            Some(offsets::lock_group_file(&self.volume, group_id).map_err(refused)?)
        } else {
            None
        };
        if !still_ours() {
            return Err(ResponseError::NotCoordinator);
        }
        let handle = self.group(group_id);
        let mut guard = handle.as_ref().map(lock_group);
        let live = guard.as_deref_mut().filter(|g| !g.removed);
        let in_memory = live.as_ref().is_some_and(|g| g.state != GroupState::Dead);
        if live.as_ref().is_some_and(|g| !g.members.is_empty()) {
            return Err(ResponseError::NonEmptyGroup);
        }
        let on_disk = known && path.exists();
        if !on_disk {
            // No file: maybe removed by a delete whose directory sync failed (its
            // client told so, and retrying now). The removal is made durable before
            // the answer says the group is gone.
            let dir = self.volume.groups_dir();
            match kaas_core::fsutil::sync_dir(&dir) {
                // No group was ever written here.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    let e = VolumeError::io(&dir, e);
                    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, &e);
                    warn!(group = group_id, error = %e, "cannot make the group's deletion durable");
                    return Err(offsets::offsets_error(&e));
                }
                Ok(()) => {}
            }
            if !in_memory {
                return Err(ResponseError::GroupIdNotFound);
            }
        } else {
            // A KIP-848 consumer group's members are in its file: checked under the
            // file's lock, with the delete.
            let offsets = GroupOffsets::load(&self.volume, group_id).map_err(refused)?;
            if offsets.has_consumer_members() {
                return Err(ResponseError::NonEmptyGroup);
            }
            // A classic group recorded with members this broker did not load (a read
            // that failed a moment ago, a live-set change during the load), unless it
            // emptied here and its record waits to be cleared: refused too.
            if offsets.has_classic_members() && !in_memory && !self.record_pending(group_id) {
                return Err(ResponseError::NonEmptyGroup);
            }
            GroupOffsets::delete_locked(&self.volume, group_id).map_err(refused)?;
        }
        if let (Some(handle), Some(group)) = (&handle, guard.as_deref_mut()) {
            self.evict(handle, group);
        }
        self.offsets.lock().unwrap_or_else(|p| p.into_inner()).remove(group_id);
        info!(group = group_id, "deleted group");
        Ok(())
    }
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub state: String,
    pub protocol_type: String,
    /// `classic` or `consumer` (KIP-848).
    pub group_type: &'static str,
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

#[cfg(test)]
mod tests;
