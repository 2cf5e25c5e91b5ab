//! Writes a benchmark volume: N transactional ids spread over the 50 slots, each with
//! a realistic entry (a few transitions of history, one partition when open).
//! Usage: cargo run --release -p kaasctl --example gen_txn_volume -- DIR [N]

use kaas_core::txn::{slot_for, Actor, TopicPartition, Transition, TxnEntry, TxnState};
use kaas_core::txn_store::{SlotFile, TxnStateStore, SLOTS, SLOT_FORMAT_VERSION};
use kaas_core::Volume;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: gen_txn_volume DIR [N]");
    let n: usize = args
        .next()
        .map(|s| s.parse().expect("N is a number"))
        .unwrap_or(100_000);
    let volume = Volume::new(&dir);
    let store = TxnStateStore::new(volume.clone());
    let now = kaas_core::now_ms();
    let mut slots: BTreeMap<u32, SlotFile> = (0..SLOTS).map(|s| (s, SlotFile::empty(s))).collect();
    let states = [
        TxnState::CompleteCommit,
        TxnState::CompleteCommit,
        TxnState::Ongoing,
        TxnState::CompleteAbort,
        TxnState::Empty,
    ];
    for i in 0..n {
        let id = format!("app-{:04}-txn-{i}", i % 1000);
        let state = states[i % states.len()];
        let by = Actor::Broker { id: (i % 3) as i32 };
        let mut history = VecDeque::new();
        for (k, (from, to)) in [
            (TxnState::Empty, TxnState::Empty),
            (TxnState::Empty, TxnState::Ongoing),
            (TxnState::Ongoing, state),
        ]
        .into_iter()
        .enumerate()
        {
            history.push_back(Transition {
                at_ms: now - 60_000 + k as i64 * 1000,
                from,
                to,
                producer_id: i as i64,
                epoch: 0,
                reason: "bench".into(),
                by: by.clone(),
            });
        }
        let open = state == TxnState::Ongoing;
        let entry = TxnEntry {
            transactional_id: id.clone(),
            producer_id: i as i64,
            producer_epoch: (i % 7) as i16,
            last_epoch: -1,
            last_producer_id: -1,
            state,
            timeout_ms: 60_000,
            partitions: if open {
                [TopicPartition {
                    topic: "orders".into(),
                    partition: (i % 12) as i32,
                }]
                .into()
            } else {
                BTreeSet::new()
            },
            groups: BTreeSet::new(),
            txn_start_ms: if open { now - 30_000 } else { -1 },
            txn_seq: 1,
            markers_queued: false,
            last_update_ms: now - 58_000,
            history,
        };
        slots.get_mut(&slot_for(&id)).expect("slot").entries.insert(id, entry);
    }
    std::fs::create_dir_all(store.dir()).expect("create txn_state");
    for (slot, mut file) in slots {
        file.version = SLOT_FORMAT_VERSION;
        file.generation = 1;
        file.updated_ms = now;
        kaas_core::fsutil::write_json(&store.slot_path(slot), &file).expect("write slot");
    }
    eprintln!("wrote {n} transactional ids under {dir}");
}
