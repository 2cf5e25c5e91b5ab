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

#[cfg(test)]
mod tests {
    use super::*;

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
