//! KIP-848 consumer groups (`group.protocol=consumer`): the group state machine of
//! Apache Kafka's `GroupMetadataManager`, without the wire. The broker computes the
//! assignment; members heartbeat (`ConsumerGroupHeartbeat`) and are reconciled one by
//! one towards the target, so a rebalance never stops the whole group.
//!
//! - The **group epoch** goes up whenever what the assignment depends on changes: a
//!   member joins or leaves, a subscription changes, a subscribed topic gains
//!   partitions, appears or disappears.
//! - The **target assignment** is recomputed by the assignor ([`assignor`]) when the
//!   group epoch is ahead of it; it then carries that epoch (the assignment epoch).
//! - Each **member epoch** catches up with the target one member at a time: a
//!   partition the member must give up is first revoked (the member keeps its epoch
//!   and reports the partitions it still owns in its next heartbeats), and only once no
//!   other member owns a partition is it given to its new owner. So no partition is
//!   ever owned by two members ([`ConsumerGroup::owner_of`]; the property test in
//!   `tests.rs` holds this against a reference model over random histories).
//!
//! Time is an argument (`now_ms`), so every rule is tested without sleeping.

pub mod assignor;
#[cfg(test)]
pub(crate) mod tests;

use kaas_core::consumer_group::{ConsumerGroupRecord, ConsumerMemberRecord};
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use uuid::Uuid;

/// Partitions by topic id.
pub use kaas_core::consumer_group::Assignment;

/// What the group needs to know of the cluster's topics: id and partition count by
/// name (a topic deleted is simply gone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicsView {
    by_name: BTreeMap<String, (Uuid, i32)>,
    by_id: HashMap<Uuid, i32>,
}

impl TopicsView {
    pub fn new(topics: impl IntoIterator<Item = (String, Uuid, i32)>) -> TopicsView {
        let mut v = TopicsView::default();
        for (name, id, partitions) in topics {
            v.by_name.insert(name, (id, partitions));
            v.by_id.insert(id, partitions);
        }
        v
    }
    pub fn partitions(&self, id: Uuid) -> i32 {
        self.by_id.get(&id).copied().unwrap_or(0)
    }
    pub fn id(&self, name: &str) -> Option<Uuid> {
        self.by_name.get(name).map(|(id, _)| *id)
    }
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// Where a member stands in its reconciliation (Apache's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Its assignment is the target's, at the target epoch (or it waits for nothing).
    Stable,
    /// It must give partitions up first: it waits at its epoch (the target epoch
    /// once it has given some up) until its heartbeats no longer report them.
    UnrevokedPartitions,
    /// It is at the target epoch but some of its target partitions are still owned by
    /// other members; they come in later heartbeats.
    UnreleasedPartitions,
}

impl MemberState {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }

    fn parse(s: &str) -> Option<MemberState> {
        [
            MemberState::Stable,
            MemberState::UnrevokedPartitions,
            MemberState::UnreleasedPartitions,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_names: BTreeSet<String>,
    pub subscribed_regex: Option<String>,
    /// What the regular expression resolved to at the member's last heartbeat: the
    /// matching topics its principal may DESCRIBE (as Apache filters a regex's
    /// matches by the ACLs of the member that set it).
    pub regex_topics: BTreeSet<String>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// Partitions it owns and may consume.
    pub assigned: Assignment,
    /// Partitions it owns but must give up (it still consumes them until it says so).
    pub pending_revocation: Assignment,
    pub session_deadline_ms: i64,
    /// Set while it has partitions to revoke: past it, the member is removed.
    pub rebalance_deadline_ms: Option<i64>,
    /// What it was last told, so a heartbeat answers with the assignment only when it
    /// changed (or was never sent).
    sent: Option<(i32, Assignment)>,
}

impl Member {
    /// When the member goes if nothing is heard of it: its session's end, or sooner
    /// its rebalance timeout while it holds partitions to revoke.
    pub fn deadline_ms(&self) -> i64 {
        self.rebalance_deadline_ms
            .map_or(self.session_deadline_ms, |r| r.min(self.session_deadline_ms))
    }
}

/// One `ConsumerGroupHeartbeat`, as the group reads it (the handler converts topic
/// names; nulls are "unchanged").
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_names: Option<Vec<String>>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns now; None when it did not say.
    pub owned: Option<Assignment>,
    /// Whether the member's principal may DESCRIBE a topic; None: every topic (no
    /// authorizer). A regular expression resolves only to these.
    pub describable: Option<Describable>,
    pub client_id: String,
    pub client_host: String,
}

/// Whether a member's principal may DESCRIBE a topic, asked only of the topics its
/// regular expression matches. Before, the handler asked it of every topic at every
/// heartbeat of every member, regex or not: topics × ACLs decisions per heartbeat on
/// the async workers (found by a review of authorization).
#[derive(Clone)]
pub struct Describable(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl Describable {
    /// Exactly the topics of `names`.
    pub fn only(names: impl IntoIterator<Item = String>) -> Describable {
        let names: BTreeSet<String> = names.into_iter().collect();
        Describable(std::sync::Arc::new(move |topic| names.contains(topic)))
    }
    pub fn allows(&self, topic: &str) -> bool {
        (self.0)(topic)
    }
}

impl std::fmt::Debug for Describable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Describable(..)")
    }
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatReply {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when it changed since the member was last told.
    pub assignment: Option<Assignment>,
}

/// A heartbeat refused: the error code, and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub error: ResponseError,
    pub message: String,
}

fn refuse(error: ResponseError, message: impl Into<String>) -> Refusal {
    Refusal {
        error,
        message: message.into(),
    }
}

/// Limits and timings of consumer groups (Kafka's `group.consumer.*`).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: usize::MAX,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub id: String,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// The target assignment, by member id.
    pub target: BTreeMap<String, Assignment>,
    /// Who owns each partition now (assigned or pending revocation).
    owners: HashMap<(Uuid, i32), String>,
    /// The subscribed topics' ids and sizes the target was computed from.
    subscribed_metadata: BTreeMap<Uuid, i32>,
}

/// Partitions in `a` and not in `b`.
fn minus(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        let rest: BTreeSet<i32> = ps
            .iter()
            .filter(|p| !b.get(t).is_some_and(|q| q.contains(*p)))
            .copied()
            .collect();
        if !rest.is_empty() {
            out.insert(*t, rest);
        }
    }
    out
}

/// Partitions in both.
fn both(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        if let Some(q) = b.get(t) {
            let common: BTreeSet<i32> = ps.intersection(q).copied().collect();
            if !common.is_empty() {
                out.insert(*t, common);
            }
        }
    }
    out
}

fn is_empty(a: &Assignment) -> bool {
    a.values().all(BTreeSet::is_empty)
}

/// A regular expression as KIP-848 matches it: the whole topic name. It is checked
/// on its own first, so text that is not an expression by itself (`a)|(b`) cannot
/// become one inside the anchoring group.
pub fn compile_regex(re: &str) -> Result<regex::Regex, Refusal> {
    let invalid = |e: regex::Error| {
        refuse(
            ResponseError::InvalidRegularExpression,
            format!("SubscribedTopicRegex {re:?} is not a valid regular expression: {e}"),
        )
    };
    regex::Regex::new(re).map_err(invalid)?;
    regex::Regex::new(&format!("^(?:{re})$")).map_err(invalid)
}

impl ConsumerGroup {
    pub fn new(id: &str) -> ConsumerGroup {
        ConsumerGroup {
            id: id.to_string(),
            ..ConsumerGroup::default()
        }
    }

    /// After a reload of the file: what it does not record (session and rebalance
    /// deadlines, what each member was last told) is taken from the group as it was
    /// in memory, for members still there at the same epoch — so a file rewritten by
    /// someone else (a transaction's offsets) neither extends a dead member's session
    /// nor resends every assignment.
    pub fn carry_over(&mut self, before: &ConsumerGroup) {
        for m in self.members.values_mut() {
            if let Some(b) = before.members.get(&m.id).filter(|b| b.epoch == m.epoch) {
                m.session_deadline_ms = b.session_deadline_ms;
                if m.state == MemberState::UnrevokedPartitions && b.rebalance_deadline_ms.is_some() {
                    m.rebalance_deadline_ms = b.rebalance_deadline_ms;
                }
                if b.assigned == m.assigned {
                    m.sent = b.sent.clone();
                }
            }
        }
    }

    /// The assignor the group's target is computed with: the one most members ask
    /// for (ties: the first by name), else the default.
    pub fn assignor_name(&self) -> &'static str {
        let mut votes: BTreeMap<&'static str, usize> = BTreeMap::new();
        for m in self.members.values() {
            let name = m
                .server_assignor
                .as_deref()
                .and_then(|a| assignor::ASSIGNORS.iter().find(|n| **n == a).copied())
                .unwrap_or(assignor::DEFAULT);
            *votes.entry(name).or_default() += 1;
        }
        votes
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map_or(assignor::DEFAULT, |(name, _)| *name)
    }

    /// The group as the volume records it ([`ConsumerGroupRecord`]).
    pub fn to_record(&self) -> ConsumerGroupRecord {
        ConsumerGroupRecord {
            group_epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            members: self
                .members
                .values()
                .map(|m| {
                    (
                        m.id.clone(),
                        ConsumerMemberRecord {
                            instance_id: m.instance_id.clone(),
                            rack_id: m.rack_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            subscribed_names: m.subscribed_names.clone(),
                            subscribed_regex: m.subscribed_regex.clone(),
                            regex_topics: m.regex_topics.clone(),
                            server_assignor: m.server_assignor.clone(),
                            rebalance_timeout_ms: m.rebalance_timeout_ms,
                            epoch: m.epoch,
                            previous_epoch: m.previous_epoch,
                            state: m.state.as_str().to_string(),
                            assigned: m.assigned.clone(),
                            pending_revocation: m.pending_revocation.clone(),
                        },
                    )
                })
                .collect(),
            target: self.target.clone(),
            subscribed_topics: self.subscribed_metadata.clone(),
        }
    }

    /// The group a record describes, loaded at `now_ms`: every member gets a full
    /// session from now (and one with partitions to revoke, a full rebalance
    /// timeout), as Apache's coordinator does when it loads a group. A member state
    /// this version does not know is an error naming it, never a guess.
    pub fn from_record(
        id: &str,
        r: &ConsumerGroupRecord,
        settings: &Settings,
        now_ms: i64,
    ) -> Result<ConsumerGroup, String> {
        let mut g = ConsumerGroup::new(id);
        g.epoch = r.group_epoch;
        g.assignment_epoch = r.assignment_epoch;
        g.target = r.target.clone();
        g.subscribed_metadata = r.subscribed_topics.clone();
        for (mid, m) in &r.members {
            let state = MemberState::parse(&m.state)
                .ok_or_else(|| format!("member {mid:?} of consumer group {id:?} has state {:?}, not one of stable, unrevoked_partitions, unreleased_partitions", m.state))?;
            for (t, ps) in m.assigned.iter().chain(&m.pending_revocation) {
                for p in ps {
                    if let Some(other) = g.owners.insert((*t, *p), mid.clone()).filter(|o| o != mid) {
                        return Err(format!(
                            "partition {p} of topic id {t} is owned by both {other:?} and {mid:?} in consumer group {id:?}"
                        ));
                    }
                }
            }
            g.members.insert(
                mid.clone(),
                Member {
                    id: mid.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_names: m.subscribed_names.clone(),
                    subscribed_regex: m.subscribed_regex.clone(),
                    regex_topics: m.regex_topics.clone(),
                    server_assignor: m.server_assignor.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    epoch: m.epoch,
                    previous_epoch: m.previous_epoch,
                    state,
                    assigned: m.assigned.clone(),
                    pending_revocation: m.pending_revocation.clone(),
                    session_deadline_ms: now_ms + settings.session_timeout_ms as i64,
                    rebalance_deadline_ms: (state == MemberState::UnrevokedPartitions)
                        .then(|| now_ms + m.rebalance_timeout_ms as i64),
                    sent: None,
                },
            );
        }
        Ok(g)
    }

    /// The member owning a partition now (assigned, or still to revoke).
    pub fn owner_of(&self, topic: Uuid, partition: i32) -> Option<&str> {
        self.owners.get(&(topic, partition)).map(String::as_str)
    }

    /// Empty (no member): a classic group of the same name may take its place.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's group state for describing: Empty, Assigning (the target is behind
    /// the group epoch), Reconciling (some member is behind the target), Stable.
    pub fn state(&self) -> &'static str {
        kaas_core::consumer_group::group_state(
            self.epoch,
            self.assignment_epoch,
            self.members.values().map(|m| (m.epoch, m.state == MemberState::Stable)),
        )
    }

    /// The topics a member subscribes to: its names, and what its regular expression
    /// resolved to at its last heartbeat, that exist now.
    fn subscribed_topics(m: &Member, topics: &TopicsView) -> BTreeSet<Uuid> {
        m.subscribed_names
            .iter()
            .chain(&m.regex_topics)
            .filter_map(|n| topics.id(n))
            .collect()
    }

    /// The subscribed topics' ids and sizes now.
    fn metadata(&self, topics: &TopicsView) -> BTreeMap<Uuid, i32> {
        self.members
            .values()
            .flat_map(|m| Self::subscribed_topics(m, topics))
            .map(|t| (t, topics.partitions(t)))
            .collect()
    }

    /// What a heartbeat asks for that is refused whatever the group holds: a regular
    /// expression that does not compile (INVALID_REGULAR_EXPRESSION), an assignor that
    /// is not served (UNSUPPORTED_ASSIGNOR). The compiled expression, if any.
    pub fn check_request(hb: &Heartbeat) -> Result<Option<regex::Regex>, Refusal> {
        let new_regex = hb
            .subscribed_regex
            .as_deref()
            .filter(|r| !r.is_empty())
            .map(compile_regex)
            .transpose()?;
        if let Some(a) = hb.server_assignor.as_deref().filter(|a| !a.is_empty()) {
            if !assignor::ASSIGNORS.contains(&a) {
                return Err(refuse(
                    ResponseError::UnsupportedAssignor,
                    format!("ServerAssignor {a:?} is not one of {:?}", assignor::ASSIGNORS),
                ));
            }
        }
        Ok(new_regex)
    }

    /// Handles one heartbeat at `now_ms`. `new_member_id` names a member joining
    /// without an id (version 0; from version 1 the client picks it).
    pub fn heartbeat(
        &mut self,
        mut hb: Heartbeat,
        topics: &TopicsView,
        settings: &Settings,
        now_ms: i64,
        new_member_id: impl FnOnce() -> String,
    ) -> Result<HeartbeatReply, Refusal> {
        // Checked before anything changes, and kept to resolve below.
        let new_regex = Self::check_request(&hb)?;
        let joined = match hb.member_epoch {
            -1 | -2 => return self.leave(&hb, topics),
            0 => self.join(&mut hb, settings, new_member_id)?,
            e if e > 0 => {
                self.check_epoch(&hb)?;
                false
            }
            e => {
                return Err(refuse(
                    ResponseError::InvalidRequest,
                    format!("MemberEpoch {e} is not valid"),
                ))
            }
        };
        let id = self.member_id_for(&hb).expect("joined or checked above").to_string();
        // The member's subscription and settings (a null field leaves one unchanged).
        let changed = {
            let m = self.members.get_mut(&id).expect("the member exists");
            let mut changed = false;
            if let Some(names) = &hb.subscribed_names {
                let names: BTreeSet<String> = names.iter().cloned().collect();
                changed |= names != m.subscribed_names;
                m.subscribed_names = names;
            }
            if let Some(re) = &hb.subscribed_regex {
                let re = Some(re.clone()).filter(|r| !r.is_empty());
                changed |= re != m.subscribed_regex;
                m.subscribed_regex = re;
            }
            // The regular expression is resolved again at each of the member's
            // heartbeats (a topic created since, an ACL changed), compiled once.
            let regex = match (new_regex, m.subscribed_regex.as_deref()) {
                (Some(re), _) => Some(re),
                (None, Some(stored)) => compile_regex(stored).ok(),
                (None, None) => None,
            };
            let resolved: BTreeSet<String> = match regex {
                Some(re) => topics
                    .names()
                    .filter(|n| re.is_match(n))
                    .filter(|n| hb.describable.as_ref().is_none_or(|d| d.allows(n)))
                    .map(str::to_string)
                    .collect(),
                None => BTreeSet::new(),
            };
            changed |= resolved != m.regex_topics;
            m.regex_topics = resolved;
            if let Some(a) = &hb.server_assignor {
                let a = Some(a.clone()).filter(|a| !a.is_empty());
                changed |= a != m.server_assignor;
                m.server_assignor = a;
            }
            if hb.rack_id.is_some() {
                m.rack_id = hb.rack_id.clone();
            }
            if hb.rebalance_timeout_ms > 0 {
                m.rebalance_timeout_ms = hb.rebalance_timeout_ms;
            }
            m.client_id = hb.client_id.clone();
            m.client_host = hb.client_host.clone();
            m.session_deadline_ms = now_ms + settings.session_timeout_ms as i64;
            changed
        };
        if changed || joined {
            self.epoch += 1;
        }
        self.refresh(topics);
        self.reconcile(&id, hb.owned.as_ref(), now_ms);
        let m = self.members.get_mut(&id).expect("the member exists");
        // Sent again when the member heartbeats at another epoch than its own: the
        // answer that moved it on was lost, and with it the assignment (Apache sends
        // it on a full request, which a client makes after an error).
        let assignment = (m.sent.as_ref() != Some(&(m.epoch, m.assigned.clone()))
            || hb.member_epoch != m.epoch
            || hb.owned.as_ref().is_some_and(|o| *o != m.assigned))
        .then(|| m.assigned.clone());
        m.sent = Some((m.epoch, m.assigned.clone()));
        Ok(HeartbeatReply {
            member_id: id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: settings.heartbeat_interval_ms,
            assignment,
        })
    }

    /// The member a heartbeat is about: by member id, or for a static member joining
    /// again, the id it had.
    fn member_id_for(&self, hb: &Heartbeat) -> Option<&str> {
        self.members.get(&hb.member_id).map(|m| m.id.as_str())
    }

    /// Adds the member a heartbeat at epoch 0 names (making up its id for version 0).
    /// Returns whether the group changed (false for a static member taking its own
    /// place back).
    fn join(
        &mut self,
        hb: &mut Heartbeat,
        settings: &Settings,
        new_member_id: impl FnOnce() -> String,
    ) -> Result<bool, Refusal> {
        if hb.subscribed_names.is_none() && hb.subscribed_regex.is_none() {
            return Err(refuse(
                ResponseError::InvalidRequest,
                "SubscribedTopicNames or SubscribedTopicRegex must be set when joining (MemberEpoch 0)",
            ));
        }
        if hb.rebalance_timeout_ms <= 0 {
            return Err(refuse(
                ResponseError::InvalidRequest,
                "RebalanceTimeoutMs must be set when joining (MemberEpoch 0)",
            ));
        }
        let id = if hb.member_id.is_empty() {
            new_member_id()
        } else {
            hb.member_id.clone()
        };
        hb.member_id = id.clone();
        // A static member joining again takes the place (and partitions) of its
        // previous incarnation if that one left temporarily (epoch -2), without a
        // rebalance; one still running keeps it.
        if let Some(instance) = &hb.instance_id {
            if let Some(old) = self
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(instance))
                .cloned()
            {
                if old.epoch != -2 && old.id != id {
                    return Err(refuse(
                        ResponseError::UnreleasedInstanceId,
                        format!(
                            "instance id {instance:?} is still used by member {:?}, which must leave first",
                            old.id
                        ),
                    ));
                }
                if old.epoch == -2 {
                    let old_id = old.id.clone();
                    self.members.remove(&old_id);
                    let mut m = old;
                    m.id = id.clone();
                    m.epoch = self.assignment_epoch;
                    m.previous_epoch = self.assignment_epoch;
                    m.sent = None;
                    for owner in self.owners.values_mut().filter(|o| **o == old_id) {
                        *owner = id.clone();
                    }
                    if let Some(t) = self.target.remove(&old_id) {
                        self.target.insert(id.clone(), t);
                    }
                    self.members.insert(id, m);
                    return Ok(false);
                }
            }
        }
        // The same member joining again (it was fenced, or a join it retried was
        // answered meanwhile) keeps its place: its assignment stays its own and is
        // sent to it again with its epoch, as Apache's coordinator does since
        // KAFKA-19233. What it reports owning (nothing, after a fencing) completes
        // any revocation it had pending. Before, it was taken out and joined afresh:
        // its partitions were free at once, went to others by a new group epoch, and
        // a late copy of a join already answered took them from the client still
        // consuming them (`a_member_joining_again_keeps_its_partitions`).
        if self.members.contains_key(&id) {
            return Ok(false);
        }
        if self.members.len() >= settings.max_size {
            return Err(refuse(
                ResponseError::GroupMaxSizeReached,
                format!("the group has reached its maximum size ({})", settings.max_size),
            ));
        }
        self.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: hb.instance_id.clone(),
                rack_id: hb.rack_id.clone(),
                client_id: hb.client_id.clone(),
                client_host: hb.client_host.clone(),
                subscribed_names: BTreeSet::new(),
                subscribed_regex: None,
                regex_topics: BTreeSet::new(),
                server_assignor: None,
                rebalance_timeout_ms: hb.rebalance_timeout_ms,
                epoch: 0,
                previous_epoch: 0,
                state: MemberState::Stable,
                assigned: Assignment::new(),
                pending_revocation: Assignment::new(),
                session_deadline_ms: 0,
                rebalance_deadline_ms: None,
                sent: None,
            },
        );
        Ok(true)
    }

    /// A heartbeat of a member already in the group, at its epoch — or at its previous
    /// one when the answer that moved it on was lost, and what it says it owns is
    /// still within what it has.
    fn check_epoch(&self, hb: &Heartbeat) -> Result<(), Refusal> {
        let Some(m) = self.members.get(&hb.member_id) else {
            return Err(refuse(
                ResponseError::UnknownMemberId,
                format!("member {:?} is not in group {:?}", hb.member_id, self.id),
            ));
        };
        // A static member that left for a while (epoch -2) comes back by joining
        // (epoch 0), never by heartbeating at an epoch it had.
        if m.epoch == -2 {
            return Err(refuse(
                ResponseError::FencedMemberEpoch,
                format!("member {:?} left the group (epoch -2); it must join again", m.id),
            ));
        }
        if hb.member_epoch == m.epoch {
            return Ok(());
        }
        // Its previous epoch, when the answer that moved it on was lost — if what it
        // says it owns is within what it has now (Apache: a subset of its assigned
        // partitions, those pending revocation not included).
        let owned_within = hb.owned.as_ref().is_some_and(|o| is_empty(&minus(o, &m.assigned)));
        if hb.member_epoch == m.previous_epoch && owned_within {
            return Ok(());
        }
        Err(refuse(
            ResponseError::FencedMemberEpoch,
            format!(
                "member {:?} is at epoch {}, not {}: it must give up its partitions and join again",
                m.id, m.epoch, hb.member_epoch
            ),
        ))
    }

    fn leave(&mut self, hb: &Heartbeat, topics: &TopicsView) -> Result<HeartbeatReply, Refusal> {
        // A static member is the one holding its instance id: a leave naming another
        // member id comes from an older incarnation (Apache: FENCED_INSTANCE_ID).
        if let Some(instance) = &hb.instance_id {
            if let Some(holder) = self.members.values().find(|m| m.instance_id.as_ref() == Some(instance)) {
                if holder.id != hb.member_id {
                    return Err(refuse(
                        ResponseError::FencedInstanceId,
                        format!(
                            "instance id {instance:?} belongs to member {:?}, not {:?}",
                            holder.id, hb.member_id
                        ),
                    ));
                }
            }
        }
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return Err(refuse(
                ResponseError::UnknownMemberId,
                format!("member {:?} is not in group {:?}", hb.member_id, self.id),
            ));
        };
        if hb.member_epoch == -2 && m.instance_id.is_some() {
            // A static member leaving for a while: its partitions wait for it, until
            // its session expires. What it still had to give up is free at once (the
            // client revoked everything before it left), and no rebalance timeout
            // runs on it while it is away, as Apache's
            // `consumerGroupStaticMemberGroupLeave`
            // (`a_static_member_leaving_for_a_while_frees_what_it_had_to_give_up`).
            m.epoch = -2;
            m.rebalance_deadline_ms = None;
            let revoked = std::mem::take(&mut m.pending_revocation);
            self.release(&hb.member_id, revoked);
            return Ok(HeartbeatReply {
                member_id: hb.member_id.clone(),
                member_epoch: -2,
                heartbeat_interval_ms: 0,
                assignment: None,
            });
        }
        self.remove_member(&hb.member_id);
        self.epoch += 1;
        self.refresh(topics);
        Ok(HeartbeatReply {
            member_id: hb.member_id.clone(),
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Takes a member out: its partitions are free at once (it is gone: nobody
    /// consumes them), its target too.
    fn remove_member(&mut self, id: &str) {
        self.members.remove(id);
        self.target.remove(id);
        self.owners.retain(|_, owner| owner != id);
    }

    /// Members whose session ended, or who held partitions to revoke past their
    /// rebalance timeout, are removed (Apache fences them). Returns their ids.
    pub fn expire(&mut self, topics: &TopicsView, now_ms: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| now_ms >= m.session_deadline_ms || m.rebalance_deadline_ms.is_some_and(|d| now_ms >= d))
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove_member(id);
        }
        if !gone.is_empty() {
            self.epoch += 1;
            self.refresh(topics);
        }
        gone
    }

    /// Brings the target up to the group epoch: a subscribed topic that grew or went
    /// away bumps the epoch first, then the assignor runs if the target is behind.
    pub fn refresh(&mut self, topics: &TopicsView) {
        let metadata = self.metadata(topics);
        if metadata != self.subscribed_metadata {
            self.subscribed_metadata = metadata;
            if self.assignment_epoch == self.epoch {
                self.epoch += 1;
            }
        }
        if self.assignment_epoch >= self.epoch {
            return;
        }
        let specs: BTreeMap<String, assignor::MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| {
                (
                    m.id.clone(),
                    assignor::MemberSpec {
                        topics: Self::subscribed_topics(m, topics),
                        current: self.target.get(&m.id),
                    },
                )
            })
            .collect();
        self.target = assignor::assign(self.assignor_name(), &specs, topics);
        self.assignment_epoch = self.epoch;
    }

    /// `partitions` leave member `id`: those the books still give it are free.
    fn release(&mut self, id: &str, partitions: Assignment) {
        for (t, ps) in partitions {
            for p in ps {
                if self.owners.get(&(t, p)).is_some_and(|o| o == id) {
                    self.owners.remove(&(t, p));
                }
            }
        }
    }

    /// Moves one member towards its target (Apache's `CurrentAssignmentBuilder`):
    /// partitions it must give up first (it stays at its epoch until its heartbeat no
    /// longer reports them), then the target's partitions no other member owns.
    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now_ms: i64) {
        let target = self.target.get(id).cloned().unwrap_or_default();
        let target_epoch = self.assignment_epoch;
        let m = self.members.get(id).expect("reconciling a member").clone();
        // Still owns a partition it was asked to revoke: nothing moves.
        let still_owns = |pending: &Assignment| match owned {
            None => !is_empty(pending),
            Some(o) => !is_empty(&both(o, pending)),
        };
        if m.state == MemberState::UnrevokedPartitions && still_owns(&m.pending_revocation) {
            return;
        }
        if m.state == MemberState::Stable
            && m.epoch == target_epoch
            && is_empty(&minus(&target, &m.assigned))
            && is_empty(&minus(&m.assigned, &target))
        {
            return;
        }
        // What it revoked is free now.
        let mut m = m;
        let released = !is_empty(&m.pending_revocation);
        self.release(id, std::mem::take(&mut m.pending_revocation));
        let keep = both(&m.assigned, &target);
        let revoke = minus(&m.assigned, &target);
        // A member's epoch moves whenever partitions leave it: an assignment it was
        // sent at an earlier epoch, applied late (its answers lost), then comes back
        // at an epoch that is fenced — or, at its previous epoch, accepted only within
        // what it has now — never accepted claiming partitions given to another
        // meanwhile (as Apache's CurrentAssignmentBuilder). So revoked partitions its
        // report says it no longer owns are free at once and it moves on to the target
        // epoch (Apache's ownsRevokedPartitions); and a member that released some
        // but must revoke more waits for that at the target epoch, not its old one.
        if still_owns(&revoke) {
            if released && m.epoch != target_epoch {
                m.previous_epoch = m.epoch;
                m.epoch = target_epoch;
            }
            m.state = MemberState::UnrevokedPartitions;
            m.assigned = keep;
            m.pending_revocation = revoke;
            m.rebalance_deadline_ms = Some(now_ms + m.rebalance_timeout_ms as i64);
            self.members.insert(id.to_string(), m);
            return;
        }
        self.release(id, revoke);
        // Nothing left to revoke: move to the target epoch, with every target
        // partition no other member owns.
        let mut assigned = keep;
        let mut unreleased = false;
        for (t, ps) in minus(&target, &assigned) {
            for p in ps {
                match self.owners.get(&(t, p)) {
                    Some(o) if o != id => unreleased = true,
                    _ => {
                        self.owners.insert((t, p), id.to_string());
                        assigned.entry(t).or_default().insert(p);
                    }
                }
            }
        }
        m.previous_epoch = m.epoch;
        m.epoch = target_epoch;
        m.assigned = assigned;
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        m.rebalance_deadline_ms = None;
        self.members.insert(id.to_string(), m);
    }
}
