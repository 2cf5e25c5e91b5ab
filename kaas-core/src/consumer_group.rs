//! A KIP-848 consumer group (`group.protocol=consumer`) as the volume records it: in
//! the group's offsets file ([`crate::offsets::GroupOffsets::consumer`]), so it is
//! written under the same lock, atomically with the same fsync, and a broker taking
//! the group over (its coordinator moved with the live set) carries on with every
//! member's epoch and partitions. The rules that change it live in kaas-server's
//! `groups::consumer`; this is the data.
//!
//! Not recorded: session and rebalance deadlines (a coordinator loading the group
//! gives every member a full session from then, as Apache's does on load) and what
//! each member was last told (the next heartbeat's answer carries its assignment).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerGroupRecord {
    /// Goes up with every change the assignment depends on.
    pub group_epoch: i32,
    /// The group epoch the target assignment was computed at.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMemberRecord>,
    /// The target assignment, by member id.
    #[serde(default)]
    pub target: BTreeMap<String, Assignment>,
    /// The subscribed topics' sizes the target was computed from, by topic id.
    #[serde(default)]
    pub subscribed_topics: BTreeMap<Uuid, i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerMemberRecord {
    #[serde(default)]
    pub instance_id: Option<String>,
    #[serde(default)]
    pub rack_id: Option<String>,
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub client_host: String,
    #[serde(default)]
    pub subscribed_names: BTreeSet<String>,
    #[serde(default)]
    pub subscribed_regex: Option<String>,
    /// What the regular expression resolved to at the member's last heartbeat (the
    /// matching topics it may DESCRIBE).
    #[serde(default)]
    pub regex_topics: BTreeSet<String>,
    #[serde(default)]
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i32,
    /// The member's epoch; -2 for a static member away (it left with epoch -2 and
    /// its partitions wait for it).
    pub epoch: i32,
    pub previous_epoch: i32,
    /// `stable`, `unrevoked_partitions` or `unreleased_partitions`.
    pub state: String,
    /// Partitions it owns and may consume.
    #[serde(default)]
    pub assigned: Assignment,
    /// Partitions it owns but must give up.
    #[serde(default)]
    pub pending_revocation: Assignment,
}

impl ConsumerGroupRecord {
    /// Kafka's group state for describing ([`group_state`]).
    pub fn state(&self) -> &'static str {
        group_state(
            self.group_epoch,
            self.assignment_epoch,
            self.members.values().map(|m| (m.epoch, m.state == "stable")),
        )
    }
}

/// Kafka's state of a consumer group, from its epochs and each member's (epoch,
/// whether it is stable): Empty (no member), Assigning (the target is behind the group
/// epoch), Reconciling (a member is behind the target, or not stable; a static member
/// away at epoch -2 is not behind), Stable.
pub fn group_state(
    group_epoch: i32,
    assignment_epoch: i32,
    members: impl Iterator<Item = (i32, bool)>,
) -> &'static str {
    let (mut any, mut behind) = (false, false);
    for (epoch, stable) in members {
        any = true;
        behind |= (epoch != assignment_epoch && epoch != -2) || !stable;
    }
    if !any {
        "Empty"
    } else if assignment_epoch < group_epoch {
        "Assigning"
    } else if behind {
        "Reconciling"
    } else {
        "Stable"
    }
}
