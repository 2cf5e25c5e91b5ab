//! The server-side assignors of KIP-848 consumer groups, chosen by a member's
//! `ServerAssignor`: `uniform` (the default: every member gets as many partitions as
//! the others, give or take one, keeping what it has where it can) and `range` (per
//! topic, consecutive ranges of partitions to the members subscribed to it, in member
//! id order: co-partitioned topics line up).
//!
//! Both are pure functions of the members' subscriptions, the topics and the current
//! target, so a group's target is the same whichever broker computes it.

use super::{Assignment, TopicsView};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// The assignors served, by the name a member asks for.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// The assignor used when no member names one.
pub const DEFAULT: &str = "uniform";

/// What an assignor sees of one member.
pub struct MemberSpec<'a> {
    /// Topic ids the member subscribes to (names and the regular expression resolved).
    pub topics: BTreeSet<Uuid>,
    /// The member's partitions in the current target (stickiness).
    pub current: Option<&'a Assignment>,
}

/// Runs the assignor `name` (one of [`ASSIGNORS`]) over `members` (by member id).
pub fn assign(
    name: &str,
    members: &BTreeMap<String, MemberSpec<'_>>,
    topics: &TopicsView,
) -> BTreeMap<String, Assignment> {
    match name {
        "range" => range(members, topics),
        _ => uniform(members, topics),
    }
}

/// Every partition of the subscribed topics to one member subscribed to its topic,
/// balanced (a member eligible for a partition never has two more than another
/// eligible member would have had), keeping a member's current partitions first.
fn uniform(members: &BTreeMap<String, MemberSpec<'_>>, topics: &TopicsView) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let mut count: BTreeMap<&str, usize> = members.keys().map(|m| (m.as_str(), 0)).collect();
    let subscribed: BTreeSet<Uuid> = members.values().flat_map(|m| m.topics.iter().copied()).collect();
    // Each member's fair share of what it may take: partitions of its topics divided
    // among the members that share them (exact for the usual case, everyone
    // subscribed to the same topics).
    let total: usize = subscribed.iter().map(|t| topics.partitions(*t) as usize).sum();
    let quota = |m: &MemberSpec<'_>| -> usize {
        let mine: usize = m.topics.iter().map(|t| topics.partitions(*t) as usize).sum();
        if mine == 0 {
            return 0;
        }
        let sharing = members
            .values()
            .filter(|o| o.topics.iter().any(|t| m.topics.contains(t)))
            .count()
            .max(1);
        mine.min(total).div_ceil(sharing)
    };
    let quotas: BTreeMap<&str, usize> = members.iter().map(|(id, m)| (id.as_str(), quota(m))).collect();
    let mut free: Vec<(Uuid, i32)> = Vec::new();
    // Sticky pass: a member keeps its current partitions still valid, up to its quota.
    let mut kept: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for (id, m) in members {
        let Some(current) = m.current else { continue };
        for (topic, parts) in current {
            if !m.topics.contains(topic) {
                continue;
            }
            for &p in parts {
                if p < topics.partitions(*topic) && count[id.as_str()] < quotas[id.as_str()] && kept.insert((*topic, p))
                {
                    out.get_mut(id)
                        .expect("every member has an entry")
                        .entry(*topic)
                        .or_default()
                        .insert(p);
                    *count.get_mut(id.as_str()).expect("counted") += 1;
                }
            }
        }
    }
    for t in &subscribed {
        for p in 0..topics.partitions(*t) {
            if !kept.contains(&(*t, p)) {
                free.push((*t, p));
            }
        }
    }
    // The rest, each to the eligible member with the fewest (ties: member id order).
    for (topic, p) in free {
        let Some(id) = members
            .iter()
            .filter(|(_, m)| m.topics.contains(&topic))
            .min_by_key(|(id, _)| (count[id.as_str()], (*id).clone()))
            .map(|(id, _)| id.clone())
        else {
            continue;
        };
        out.get_mut(&id)
            .expect("every member has an entry")
            .entry(topic)
            .or_default()
            .insert(p);
        *count.get_mut(id.as_str()).expect("counted") += 1;
    }
    // Stickiness may leave one member two above another eligible one (quotas are
    // approximate with mixed subscriptions): move partitions until it is not.
    loop {
        let mut moved = false;
        for topic in &subscribed {
            let eligible: Vec<&String> = members
                .iter()
                .filter(|(_, m)| m.topics.contains(topic))
                .map(|(id, _)| id)
                .collect();
            let (Some(most), Some(least)) = (
                eligible
                    .iter()
                    .max_by_key(|id| (count[id.as_str()], std::cmp::Reverse(id.as_str()))),
                eligible.iter().min_by_key(|id| (count[id.as_str()], id.as_str())),
            ) else {
                continue;
            };
            if count[most.as_str()] < count[least.as_str()] + 2 {
                continue;
            }
            let taken = out
                .get_mut(*most)
                .and_then(|a| a.get_mut(topic))
                .and_then(|ps| ps.pop_last());
            if let Some(p) = taken {
                if out[*most].get(topic).is_some_and(|ps| ps.is_empty()) {
                    out.get_mut(*most).expect("member").remove(topic);
                }
                out.get_mut(*least)
                    .expect("member")
                    .entry(*topic)
                    .or_default()
                    .insert(p);
                *count.get_mut(most.as_str()).expect("counted") -= 1;
                *count.get_mut(least.as_str()).expect("counted") += 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    out
}

/// Per topic: its partitions in consecutive ranges to the members subscribed to it,
/// in member id order, the first ones one more when they do not divide evenly.
fn range(members: &BTreeMap<String, MemberSpec<'_>>, topics: &TopicsView) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let subscribed: BTreeSet<Uuid> = members.values().flat_map(|m| m.topics.iter().copied()).collect();
    for topic in subscribed {
        let eligible: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.topics.contains(&topic))
            .map(|(id, _)| id)
            .collect();
        let n = topics.partitions(topic).max(0) as usize;
        if eligible.is_empty() || n == 0 {
            continue;
        }
        let (each, extra) = (n / eligible.len(), n % eligible.len());
        let mut next = 0;
        for (i, id) in eligible.into_iter().enumerate() {
            let take = each + usize::from(i < extra);
            if take > 0 {
                out.get_mut(id)
                    .expect("member")
                    .insert(topic, (next..next + take).map(|p| p as i32).collect());
            }
            next += take;
        }
    }
    out
}
