//! Criterion micro-benchmarks of the broker's hot paths (docs/performance.md):
//! `cargo bench -p kaas-core --bench hot_paths`.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use kaas_core::batch::{build_batch, validate_all, BatchHeader};
use kaas_core::idempotence::ProducerStateTable;
use kaas_core::log::Segment;
use kaas_core::txn::{Actor, Transition, TxnEntry, TxnState, HISTORY_LEN};
use kaas_core::txn_store::{SlotOp, TxnStateStore};
use kaas_core::Volume;
use std::collections::{BTreeSet, VecDeque};
use std::hint::black_box;

/// A producer's batch of `n` records of `size` bytes.
fn batch(n: usize, size: usize, seq: i32) -> Vec<u8> {
    let value = vec![b'v'; size];
    let records: Vec<_> = (0..n).map(|_| (None, Some(&value[..]))).collect();
    build_batch(0, 1_700_000_000_000, Some((42, 0, seq)), 0, &records)
}

fn validation(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch validation + CRC32C");
    for (n, size) in [(10, 100), (16, 1024), (1, 64 * 1024)] {
        let b = batch(n, size, 0);
        g.throughput(Throughput::Bytes(b.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(format!("{n}x{size}B")), &b, |bench, b| {
            bench.iter(|| validate_all(black_box(b)).expect("valid"))
        });
    }
    g.finish();
}

fn classification(c: &mut Criterion) {
    let mut g = c.benchmark_group("idempotence classification");
    let x: &[u8] = b"x";
    for producers in [1usize, 10_000] {
        let mut table = ProducerStateTable::default();
        let mut next: Option<BatchHeader> = None;
        for pid in 0..producers as i64 {
            for k in 0..5 {
                let b = build_batch(k * 10, 1, Some((pid, 0, (k * 10) as i32)), 0, &[(None, Some(x)); 10]);
                let mut h = validate_all(&b).expect("valid").remove(0);
                h.base_offset = pid * 100 + k * 10;
                table.record(&h);
            }
            let b = build_batch(0, 1, Some((pid, 0, 50)), 0, &[(None, Some(x)); 10]);
            next = Some(validate_all(&b).expect("valid").remove(0));
        }
        let h = next.expect("one producer at least");
        g.bench_function(BenchmarkId::new("next in sequence", producers), |bench| {
            bench.iter(|| table.classify(black_box(&h)).expect("in sequence"))
        });
    }
    g.finish();
}

fn index_lookup(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seg = Segment::create(dir.path(), 0, 4096, 0).expect("segment");
    let mut offset = 0i64;
    for _ in 0..20_000 {
        let mut b = batch(10, 100, 0);
        let headers = validate_all(&b).expect("valid");
        kaas_core::batch::set_base_offset(&mut b, offset);
        let headers: Vec<BatchHeader> = headers
            .into_iter()
            .map(|mut h| {
                h.base_offset = offset;
                h
            })
            .collect();
        seg.append(&b, &headers, offset).expect("append");
        offset += 10;
    }
    let mut g = c.benchmark_group("offset index lookup");
    g.bench_function("batch holding an offset, 200k records / 20k batches", |bench| {
        let mut k = 0i64;
        bench.iter(|| {
            k = (k + 7_919) % offset;
            seg.batch_holding(black_box(k)).expect("read").expect("found")
        })
    });
    g.finish();
}

fn entry(i: usize) -> TxnEntry {
    let history: VecDeque<Transition> = (0..HISTORY_LEN)
        .map(|k| Transition {
            at_ms: k as i64,
            from: TxnState::Ongoing,
            to: TxnState::CompleteCommit,
            producer_id: i as i64,
            epoch: 0,
            reason: "EndTxn(commit)".into(),
            by: Actor::Broker { id: 0 },
        })
        .collect();
    TxnEntry {
        transactional_id: format!("app-txn-{i}"),
        producer_id: i as i64,
        producer_epoch: 0,
        last_epoch: -1,
        last_producer_id: -1,
        state: TxnState::CompleteCommit,
        timeout_ms: 60_000,
        partitions: BTreeSet::new(),
        groups: BTreeSet::new(),
        txn_start_ms: -1,
        txn_seq: 1,
        markers_queued: false,
        last_update_ms: 0,
        history,
    }
}

/// One transition appended to a slot's journal (page cache; the fdatasync is the
/// disk's), with the slot holding 1 or 100,000 ids.
fn slot_transition(c: &mut Criterion) {
    let mut g = c.benchmark_group("slot transition (journal append)");
    for ids in [1usize, 100_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TxnStateStore::new(Volume::new(dir.path()));
        let lock = store.lock_slot(0).expect("lock");
        let mut state = None;
        store.catch_up(&lock, &mut state).expect("read");
        let mut st = state.expect("state");
        let ops: Vec<SlotOp> = (0..ids).map(|i| SlotOp::Put(entry(i))).collect();
        store.append(&lock, &mut st, &ops, 0).expect("fill");
        store.fold(&lock, &mut st).expect("fold");
        let mut e = entry(0);
        g.bench_function(BenchmarkId::from_parameter(ids), |bench| {
            bench.iter_batched(
                || {
                    e.history.pop_front();
                    e.history.push_back(Transition {
                        at_ms: 1,
                        from: TxnState::CompleteCommit,
                        to: TxnState::Ongoing,
                        producer_id: 0,
                        epoch: 0,
                        reason: "AddPartitionsToTxn".into(),
                        by: Actor::Broker { id: 0 },
                    });
                    [SlotOp::Put(e.clone())]
                },
                // No fold here: its cost, O(ids) once per checkpoint-size of journal
                // bytes, is amortised (docs/performance.md), not per transition.
                |op| store.append(&lock, &mut st, &op, 1).expect("append"),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, validation, classification, index_lookup, slot_transition);
criterion_main!(benches);
