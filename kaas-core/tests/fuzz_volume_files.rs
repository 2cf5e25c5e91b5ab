//! Property-based fuzzing of every parser of volume files and of the record-batch
//! validator (issue 11): arbitrary bytes, and mutations of real files, never make a
//! reader panic or allocate without bound; a file is either read or refused with an
//! error naming it. PROPTEST_CASES raises the number of cases for a longer run.

use kaas_core::batch::{self, build_batch};
use kaas_core::broker::BrokerLease;
use kaas_core::fence_log::{fence_log_path, FenceLog};
use kaas_core::log::LogConfig;
use kaas_core::offsets::GroupOffsets;
use kaas_core::partition::{PartitionState, ProducerStateSnapshot};
use kaas_core::topic::{PartitionOwner, TopicMeta};
use kaas_core::txn_store::TxnStateStore;
use kaas_core::Volume;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Arbitrary bytes, or `sample` with a few edits (flips, boundary integers, cuts,
/// insertions): most of a mutated file still parses far enough to reach deep checks.
fn bytes_like(sample: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((0usize..4, any::<usize>(), any::<u32>()), 1..6);
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2048),
        edits.prop_map(move |edits| {
            let mut b = sample.clone();
            for (kind, at, v) in edits {
                let i = if b.is_empty() { 0 } else { at % b.len() };
                match kind {
                    0 if !b.is_empty() => b[i] ^= 1 << (v % 8),
                    1 if b.len() >= i + 4 => b[i..i + 4].copy_from_slice(&[0x7f, 0xff, 0xff, (v % 256) as u8]),
                    2 => b.truncate(i),
                    _ => b.splice(i..i, v.to_be_bytes()).for_each(drop),
                }
            }
            b
        }),
    ]
}

fn volume() -> (tempfile::TempDir, Volume) {
    let dir = tempfile::tempdir().unwrap();
    let v = Volume::new(dir.path());
    (dir, v)
}

fn put(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A real file written by its own writer, as the sample to mutate.
fn sample_of(write: impl FnOnce(&Volume) -> std::path::PathBuf) -> Vec<u8> {
    let (_d, v) = volume();
    std::fs::read(write(&v)).unwrap()
}

fn segment_sample() -> Vec<u8> {
    let mut seg = build_batch(
        0,
        1_700_000_000_000,
        None,
        0,
        &[(Some(b"k"), Some(b"v")), (None, Some(b"w"))],
    );
    seg.extend(build_batch(
        2,
        1_700_000_000_001,
        Some((7, 0, 0)),
        0,
        &[(None, Some(b"x"))],
    ));
    seg
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn topic_and_owner_files(topic in bytes_like(sample_of(|v| {
        TopicMeta::new("t", 3, BTreeMap::from([("retention.ms".into(), "5".into())]), 1).write(v).unwrap();
        v.topic_file("t")
    })), owner in prop::collection::vec(any::<u8>(), 0..512)) {
        let (_d, v) = volume();
        put(&v.topic_file("t"), &topic);
        if let Err(e) = TopicMeta::read(&v.topic_file("t")) {
            prop_assert!(e.to_string().contains("t.json"), "{e}");
        }
        let path = v.partition_dir("t", 0).join("owner.json");
        put(&path, &owner);
        let _ = PartitionOwner::read(&path);
    }

    #[test]
    fn leases_group_offsets_and_fence_logs(lease in bytes_like(sample_of(|v| {
        let lease = BrokerLease { version: 1, broker_id: 0, host: "h".into(), port: 1, incarnation: "i".into(), started_ms: 1, heartbeat_ms: 2, stopped_ms: None, stepped_down_ms: None, opening_ms: None, joining_ms: None, listeners: Default::default(), authorizer: None, renewal: 0, routes: None };
        lease.write(v).unwrap();
        v.broker_lease(0)
    })), offsets in bytes_like(sample_of(|v| {
        let mut g = GroupOffsets::new("g");
        g.set("t", 0, kaas_core::offsets::CommittedOffset { offset: 5, leader_epoch: 1, metadata: Some("m".into()), commit_ms: 1 });
        g.save(v).unwrap();
        v.group_offsets_file("g")
    })), fences in bytes_like(sample_of(|v| {
        let mut f = FenceLog::empty(0);
        f.append(7, 3, Some("tx"), 1);
        f.save(v).unwrap();
        fence_log_path(v, 0)
    }))) {
        let (_d, v) = volume();
        put(&v.broker_lease(0), &lease);
        let _ = BrokerLease::read(&v, 0);
        put(&v.group_offsets_file("g"), &offsets);
        let _ = GroupOffsets::load(&v, "g");
        let _ = kaas_core::offsets::list_groups(&v);
        put(&fence_log_path(&v, 0), &fences);
        let _ = FenceLog::load(&v, 0);
        let _ = kaas_core::fence_log::list_fence_logs(&v);
    }

    #[test]
    fn transaction_slot_checkpoints_and_journals(checkpoint in prop::collection::vec(any::<u8>(), 0..1024),
                                                 journal in prop::collection::vec(any::<u8>(), 0..2048),
                                                 mutated in bytes_like(br#"{"version":1,"generation":1,"at_ms":1,"put":{"transactional_id":"a"},"history_appended":0}
"#.to_vec())) {
        let (_d, v) = volume();
        let store = TxnStateStore::new(v.clone());
        put(&store.slot_path(3), &checkpoint);
        put(&store.journal_path(3), &journal);
        let _ = store.load(3);
        std::fs::remove_file(store.slot_path(3)).unwrap();
        put(&store.journal_path(3), &mutated);
        let _ = store.load(3);
        let _ = store.read_all();
    }

    #[test]
    fn partition_directories_open_or_are_refused(segment in bytes_like(segment_sample()),
                                                 index in prop::collection::vec(any::<u8>(), 0..256),
                                                 txnindex in prop::collection::vec(any::<u8>(), 0..256),
                                                 snapshot in prop::collection::vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().unwrap();
        put(&dir.path().join(format!("{:020}.log", 0)), &segment);
        put(&dir.path().join(format!("{:020}.index", 0)), &index);
        put(&dir.path().join(format!("{:020}.txnindex", 0)), &txnindex);
        put(&ProducerStateSnapshot::path(dir.path()), &snapshot);
        let _ = ProducerStateSnapshot::read(dir.path());
        let _ = kaas_core::inspect::scan_batches(dir.path(), 0, |_, _| {});
        let _ = kaas_core::partition::read_txn_indexes(dir.path());
        // Opening recovers (cuts what is torn): it must end in a state or an error.
        let _ = PartitionState::open(dir.path(), LogConfig::default(), 0);
    }

    #[test]
    fn the_batch_validator_and_record_decoder(bytes in bytes_like(segment_sample())) {
        let _ = batch::validate_all(&bytes);
        if let Ok(h) = batch::validate(&bytes, 0) {
            prop_assert!(h.total_len() <= bytes.len());
            let _ = batch::records(&bytes);
            let _ = batch::control_marker_type(&bytes);
        }
        let _ = batch::records(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn allocator_cluster_marker_audit_and_delivery_files(allocator in bytes_like(br#"{"version":1,"next_block_start":1000,"block_size":1000}"#.to_vec()),
                                                          cluster in bytes_like(br#"{"version":1,"cluster_id":"abc","created_ms":1}"#.to_vec()),
                                                          marker in prop::collection::vec(any::<u8>(), 0..512),
                                                          audit in prop::collection::vec(any::<u8>(), 0..512),
                                                          deliveries in prop::collection::vec(any::<u8>(), 0..512)) {
        let (_d, v) = volume();
        put(&v.cluster_dir().join("producer_ids.json"), &allocator);
        let _ = kaas_core::producer_ids::claim_block(&v, 0);
        put(&v.cluster_dir().join("cluster.json"), &cluster);
        let _ = kaas_core::broker::cluster_id(&v);
        put(&kaas_core::marker_queue::queue_dir(&v, 0).join("7-0-1.json"), &marker);
        let _ = kaas_core::marker_queue::list(&v, 0);
        put(&kaas_core::admin::audit_dir(&v).join("000000000000001-1-x.json"), &audit);
        let _ = kaas_core::admin::list_audit(&v);
        put(&kaas_core::fence_log::deliveries_path(&v, 0), &deliveries);
        let _ = kaas_core::fence_log::FenceDeliveries::load(&v, 0);
    }
}
