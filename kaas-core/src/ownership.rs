//! Who owns what: transaction slots, consumer groups and partitions are assigned to
//! live brokers by rendezvous (highest random weight) hashing, so every broker computes
//! the same owner from the same list of live brokers without talking to the others,
//! and a broker joining or leaving moves only the keys it wins or held.

/// 64-bit FNV-1a.
fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            hash ^= *b as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // A final avalanche so close keys spread across brokers.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// The owner of `key` among `live` brokers; None when no broker is alive.
pub fn owner(key: &str, live: &[i32]) -> Option<i32> {
    live.iter()
        .copied()
        .max_by_key(|b| (fnv1a64(&[key.as_bytes(), b"\0", &b.to_be_bytes()]), *b))
}

/// The ownership key of a consumer group.
pub fn group_key(group: &str) -> String {
    format!("group-{group}")
}

/// The ownership key of a transaction slot.
pub fn txn_slot_key(slot: u32) -> String {
    format!("txn-slot-{slot}")
}

/// The ownership key of a partition.
pub fn partition_key(topic: &str, partition: i32) -> String {
    format!("partition\0{topic}\0{partition}")
}

/// What a broker does with one partition, from its view of the live brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// It holds the partition and is its rendezvous owner: it keeps leading it.
    Keep,
    /// It holds the partition but another live broker is its rendezvous owner: it
    /// stops appending, flushes, writes the snapshot, marks `owner.json` released and
    /// drops `owner.lock`, and that broker takes it.
    HandOver(i32),
    /// It is the rendezvous owner and the last owner is gone: it may take the
    /// partition, if it can get `owner.lock`.
    Take,
    /// It does not take the partition; why.
    Wait(String),
}

/// The placement rule, the same on every broker. `held`: this broker leads the
/// partition now. `last`: the partition's `owner.json`, None if it has none yet.
///
/// A broker takes a partition only when it is the rendezvous owner over `live` and the
/// last owner let the partition go (`released`), or is this broker id (an earlier
/// incarnation), or is no longer live; and, whoever the owner, a partition this broker
/// id led and never released (which no one else may take while it is live). A free `owner.lock` alone is never enough — on
/// NFS it can be freed before a dead writer's last pages reach the server — and the
/// lock is still required on top (see `PartitionOwner::lock`): the rule decides who
/// may try, the lock who succeeds.
pub fn place(
    me: i32,
    live: &[i32],
    topic: &str,
    partition: i32,
    held: bool,
    last: Option<&crate::topic::PartitionOwner>,
) -> Placement {
    let assigned = owner(&partition_key(topic, partition), live);
    if held {
        return match assigned {
            Some(to) if to != me => Placement::HandOver(to),
            _ => Placement::Keep,
        };
    }
    if !live.contains(&me) {
        return Placement::Wait(format!(
            "partition {topic}-{partition}: this broker's own lease is not fresh"
        ));
    }
    // A partition this broker id led and never let go (it stepped down with a stale
    // lease, which writes nothing, or an earlier incarnation died): nobody else may
    // take it while this broker is live, so it takes it back — and hands it over
    // properly at its next sync if it is not its owner any more.
    if last.is_some_and(|o| o.broker == me && !o.released) {
        return Placement::Take;
    }
    match assigned {
        None => return Placement::Wait(format!("partition {topic}-{partition} has no live broker to lead it")),
        Some(b) if b != me => {
            return Placement::Wait(format!("partition {topic}-{partition} is assigned to broker {b}"));
        }
        Some(_) => {}
    }
    match last {
        Some(o) if !o.released && o.broker != me && live.contains(&o.broker) => Placement::Wait(format!(
            "partition {topic}-{partition} is led by broker {} (leader epoch {}), whose lease is live",
            o.broker, o.leader_epoch
        )),
        _ => Placement::Take,
    }
}

/// [`place`] with the brokers that are still opening the volume (`opening`: alive,
/// their leases renewed, but serving nothing yet; see `BrokerLease::opening_ms`), which
/// `live` leaves out: nothing is assigned to them, and a partition one of them leads
/// and never let go is theirs still — its lock is not free for the taking, it is
/// being recovered.
pub fn place_with(
    me: i32,
    live: &[i32],
    opening: &[i32],
    topic: &str,
    partition: i32,
    held: bool,
    last: Option<&crate::topic::PartitionOwner>,
) -> Placement {
    match last {
        Some(o) if !held && !o.released && o.broker != me && opening.contains(&o.broker) => Placement::Wait(format!(
            "partition {topic}-{partition} is led by broker {} (leader epoch {}), which is opening the volume",
            o.broker, o.leader_epoch
        )),
        _ => place(me, live, topic, partition, held, last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::PartitionOwner;

    fn last(broker: i32, released: bool) -> PartitionOwner {
        PartitionOwner {
            version: crate::topic::OWNER_FORMAT_VERSION,
            broker,
            leader_epoch: 4,
            released,
            updated_ms: 0,
            topic_id: None,
        }
    }

    /// A partition of `topic` that `live` assigns to `to`.
    fn assigned_to(to: i32, live: &[i32]) -> i32 {
        (0..1000)
            .find(|p| owner(&partition_key("t", *p), live) == Some(to))
            .unwrap()
    }

    #[test]
    fn only_the_rendezvous_owner_takes_and_only_once_the_last_owner_is_gone() {
        let live = [0, 1, 2];
        let p = assigned_to(1, &live);
        assert_eq!(place(1, &live, "t", p, false, None), Placement::Take, "never led");
        assert!(
            matches!(place(0, &live, "t", p, false, None), Placement::Wait(_)),
            "not the owner"
        );
        assert!(
            matches!(place(1, &live, "t", p, false, Some(&last(2, false))), Placement::Wait(r) if r.contains("broker 2")),
            "the last owner is live and did not let go"
        );
        assert_eq!(
            place(1, &live, "t", p, false, Some(&last(2, true))),
            Placement::Take,
            "released"
        );
        assert_eq!(
            place(1, &[0, 1], "t", assigned_to(1, &[0, 1]), false, Some(&last(2, false))),
            Placement::Take,
            "last owner dead"
        );
        assert_eq!(
            place(1, &live, "t", p, false, Some(&last(1, false))),
            Placement::Take,
            "an earlier incarnation"
        );
        assert!(
            matches!(
                place(1, &[0, 2], "t", p, false, Some(&last(1, false))),
                Placement::Wait(_)
            ),
            "a broker outside its own live set takes nothing"
        );
        let elsewhere = assigned_to(2, &live);
        assert_eq!(
            place(1, &live, "t", elsewhere, false, Some(&last(1, false))),
            Placement::Take,
            "one it led and never released is taken back (to be handed over properly)"
        );
        assert!(matches!(
            place(1, &live, "t", elsewhere, false, Some(&last(1, true))),
            Placement::Wait(_)
        ));
    }

    #[test]
    fn a_broker_still_opening_keeps_what_it_led_and_is_assigned_nothing() {
        // Broker 2 is opening: alive (its lease renewed) but not in the live set.
        let live = [0, 1];
        let opening = [2];
        let p = assigned_to(1, &live);
        assert!(
            matches!(
                place_with(1, &live, &opening, "t", p, false, Some(&last(2, false))),
                Placement::Wait(r) if r.contains("opening")
            ),
            "a partition it led and never let go is not taken from it while it recovers"
        );
        assert_eq!(
            place(1, &live, "t", p, false, Some(&last(2, false))),
            Placement::Take,
            "what the live set alone would say"
        );
        assert_eq!(
            place_with(1, &live, &opening, "t", p, false, Some(&last(2, true))),
            Placement::Take,
            "one it let go is taken by its owner among the serving brokers"
        );
        // A partition that would be its own over every broker stays with its holder.
        let its_own = (0..500)
            .find(|i| owner(&partition_key("t", *i), &[0, 1, 2]) == Some(2))
            .expect("broker 2 wins some key");
        let holder = owner(&partition_key("t", its_own), &live).unwrap();
        assert_eq!(
            place_with(holder, &live, &opening, "t", its_own, true, None),
            Placement::Keep,
            "not handed over to a broker that serves nothing yet"
        );
    }

    #[test]
    fn a_holder_hands_over_to_the_rendezvous_owner_and_keeps_the_rest() {
        let live = [0, 1, 2];
        let mine = assigned_to(0, &live);
        let theirs = assigned_to(2, &live);
        assert_eq!(place(0, &live, "t", mine, true, None), Placement::Keep);
        assert_eq!(place(0, &live, "t", theirs, true, None), Placement::HandOver(2));
        // A joining broker takes only the keys it wins; a leaving one gives up only its own.
        let before: Vec<i32> = (0..300)
            .map(|p| owner(&partition_key("t", p), &[0, 1]).unwrap())
            .collect();
        let after: Vec<i32> = (0..300)
            .map(|p| owner(&partition_key("t", p), &[0, 1, 2]).unwrap())
            .collect();
        assert!(before.iter().zip(&after).all(|(b, a)| a == b || *a == 2));
        assert!(
            after.iter().filter(|a| **a == 2).count() > 50,
            "the new broker gets its share"
        );
    }

    #[test]
    fn every_broker_computes_the_same_owner_and_a_lone_broker_owns_everything() {
        assert_eq!(owner("k", &[]), None);
        assert_eq!(owner("k", &[3]), Some(3));
        assert_eq!(owner("k", &[1, 2, 3]), owner("k", &[3, 2, 1]));
    }

    #[test]
    fn removing_a_broker_moves_only_its_keys() {
        let all = [0, 1, 2];
        let keys: Vec<String> = (0..50).map(txn_slot_key).collect();
        let before: Vec<i32> = keys.iter().map(|k| owner(k, &all).unwrap()).collect();
        assert!((0..3).all(|b| before.contains(&b)), "keys spread over brokers");
        let after: Vec<i32> = keys.iter().map(|k| owner(k, &[0, 2]).unwrap()).collect();
        for (b, a) in before.iter().zip(&after) {
            if *b != 1 {
                assert_eq!(b, a);
            }
        }
    }
}
