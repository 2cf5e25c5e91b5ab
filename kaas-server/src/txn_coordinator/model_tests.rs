//! Property test of the whole transaction path — coordinator, produce-time
//! verification, partitions, reaper, restarts — against a small reference model of
//! what clients hold. For any sequence of InitProducerId (claimed or not, by two
//! instances of one transactional id), AddPartitionsToTxn, Produce (new batches and
//! retries), EndTxn, reaper ticks and restarts:
//! - epochs never go backwards;
//! - an identity that was fenced (another instance, the reaper or an abort-first moved
//!   the epoch past it) never succeeds at anything again, nor gets an epoch by claim;
//! - no batch is appended twice, and no acknowledged batch is lost across restarts;
//! - no partition keeps an open transaction its coordinator entry does not cover
//!   (`kaas_core::reconcile::judge`), so nothing ever hangs — without the backstop.

use super::*;
use crate::broker::Broker;
use kaas_core::batch::{build_batch, validate_all};
use kaas_core::partition::AppendOutcome;
use kaas_core::reconcile::{judge, Verdict};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const TID: &str = "tx";
const PARTITIONS: i32 = 2;

#[derive(Debug, Clone)]
enum Op {
    Init {
        inst: usize,
        claim: bool,
        short_timeout: bool,
    },
    Add {
        inst: usize,
        partition: i32,
    },
    Produce {
        inst: usize,
        partition: i32,
        retry: bool,
    },
    End {
        inst: usize,
        commit: bool,
    },
    Reap,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..2usize, any::<bool>(), proptest::bool::weighted(0.2))
            .prop_map(|(inst, claim, short_timeout)| Op::Init { inst, claim, short_timeout }),
        3 => (0..2usize, 0..PARTITIONS).prop_map(|(inst, partition)| Op::Add { inst, partition }),
        5 => (0..2usize, 0..PARTITIONS, proptest::bool::weighted(0.3))
            .prop_map(|(inst, partition, retry)| Op::Produce { inst, partition, retry }),
        2 => (0..2usize, any::<bool>()).prop_map(|(inst, commit)| Op::End { inst, commit }),
        1 => Just(Op::Reap),
        1 => Just(Op::Restart),
    ]
}

/// What one client instance holds.
#[derive(Debug, Default, Clone)]
struct Instance {
    identity: Option<(i64, i16)>,
    /// Next sequence per partition for the current identity.
    next_seq: BTreeMap<i32, i32>,
    /// The last batch sent per partition (for retries): (pid, epoch, seq).
    last_sent: BTreeMap<i32, (i64, i16, i32)>,
}

fn open_broker(dir: &std::path::Path) -> Arc<Broker> {
    crate::handlers::test_support::broker(dir)
}

fn partition_log(b: &Broker, p: i32) -> Arc<crate::broker::Partition> {
    b.topic("t").unwrap().partition(p).unwrap().clone().unwrap()
}

/// Every data batch of every partition: (partition, base offset, pid, epoch, seq).
fn data_batches(b: &Broker) -> Vec<(i32, i64, i64, i16, i32)> {
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        let part = partition_log(b, p);
        let state = part.state();
        state
            .log
            .for_each_header_from(0, |h| {
                if !h.is_control() {
                    out.push((p, h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence));
                }
            })
            .unwrap();
    }
    out
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut b = open_broker(dir.path());
    b.create_topic("t", PARTITIONS, Default::default()).await.unwrap();
    let mut insts = [Instance::default(), Instance::default()];
    let mut acked: Vec<(i32, i64, i64, i16, i32)> = Vec::new();
    let mut last_entry: Option<(i64, i16)> = None;
    for (step, op) in ops.into_iter().enumerate() {
        let entry = b.txn.store().get(TID).unwrap();
        // An instance is fenced when the entry's epoch moved past its identity.
        let fenced = |inst: &Instance| matches!((inst.identity, &entry), (Some((pid, e)), Some(cur)) if cur.producer_id == pid && cur.producer_epoch > e);
        match op.clone() {
            Op::Init {
                inst,
                claim,
                short_timeout,
            } => {
                let i = &mut insts[inst];
                let was_fenced = fenced(i);
                let claimed = if claim {
                    i.identity.unwrap_or((-1, -1))
                } else {
                    (-1, -1)
                };
                let timeout = if short_timeout { 1 } else { 60_000 };
                match b.txn.init_producer_id(&b, TID, timeout, claimed).await {
                    Ok(id) => {
                        prop_assert!(
                            !(was_fenced && claimed != (-1, -1)),
                            "step {step}: fenced identity {claimed:?} claimed its way to {id:?}"
                        );
                        *i = Instance {
                            identity: Some(id),
                            ..Instance::default()
                        };
                    }
                    Err(e) => prop_assert!(matches!(e.code(), 51 | 90), "step {step}: {e}"),
                }
            }
            Op::Add { inst, partition } => {
                let i = &insts[inst];
                let Some((pid, epoch)) = i.identity else { continue };
                let tp = TopicPartition {
                    topic: "t".into(),
                    partition,
                };
                let r = b.txn.add(&b, TID, pid, epoch, &[tp], &[]).await;
                prop_assert!(
                    !(fenced(i) && r.is_ok()),
                    "step {step}: fenced {:?} added a partition",
                    i.identity
                );
            }
            Op::Produce { inst, partition, retry } => {
                let i = &mut insts[inst];
                let Some((pid, epoch)) = i.identity else { continue };
                let (bpid, bepoch, seq) = if retry {
                    match i.last_sent.get(&partition) {
                        Some(s) => *s,
                        None => continue,
                    }
                } else {
                    (pid, epoch, *i.next_seq.get(&partition).unwrap_or(&0))
                };
                let part = partition_log(&b, partition);
                let mut batch = build_batch(0, 1, Some((bpid, bepoch, seq)), 0x10, &[(None, Some(b"v"))]);
                let headers = validate_all(&batch).unwrap();
                let was_fenced = fenced(i);
                match b.append(&part, &mut batch, &headers, Some(TID)) {
                    Ok((AppendOutcome::Appended(info), _)) => {
                        prop_assert!(!was_fenced, "step {step}: fenced {:?} appended", (bpid, bepoch));
                        acked.push((partition, info.base_offset, bpid, bepoch, seq));
                        if !retry {
                            i.next_seq.insert(partition, seq + 1);
                        }
                        i.last_sent.insert(partition, (bpid, bepoch, seq));
                    }
                    Ok((AppendOutcome::Duplicate { .. }, _)) => {}
                    Err(_) => {
                        if !retry {
                            // A refused batch is not retried by the model.
                            i.last_sent.remove(&partition);
                        }
                    }
                }
            }
            Op::End { inst, commit } => {
                let i = &insts[inst];
                let Some((pid, epoch)) = i.identity else { continue };
                let r = b.txn.end_txn(&b, TID, pid, epoch, commit).await;
                prop_assert!(
                    !(fenced(i) && r.is_ok()),
                    "step {step}: fenced {:?} ended a transaction",
                    i.identity
                );
            }
            Op::Reap => {
                tokio::time::sleep(std::time::Duration::from_millis(3)).await;
                b.txn.reap(&b, 0).await;
            }
            Op::Restart => {
                drop(b);
                b = open_broker(dir.path());
                b.txn.recover(&b).await;
            }
        }
        // Epochs never go backwards.
        if let Some(e) = b.txn.store().get(TID).unwrap() {
            if let Some((pid, epoch)) = last_entry {
                prop_assert!(
                    e.producer_id != pid || e.producer_epoch >= epoch,
                    "step {step} ({op:?}): epoch went back from {epoch} to {}",
                    e.producer_epoch
                );
            }
            last_entry = Some((e.producer_id, e.producer_epoch));
        }
        // Nothing hangs: every open transaction is covered by its coordinator entry.
        let entry = b.txn.store().get(TID).unwrap();
        for p in 0..PARTITIONS {
            let tp = TopicPartition {
                topic: "t".into(),
                partition: p,
            };
            let part = partition_log(&b, p);
            let open: Vec<(i64, i16)> = part
                .state()
                .producers
                .producers
                .values()
                .filter(|e| e.txn_first_offset.is_some())
                .map(|e| (e.producer_id, e.epoch))
                .collect();
            for (pid, epoch) in open {
                prop_assert_eq!(
                    judge(entry.as_ref(), &tp, pid, epoch),
                    Verdict::Covered,
                    "step {} ({:?}): open transaction of {} on t-{} is not covered by {:?}",
                    step,
                    op,
                    pid,
                    p,
                    entry
                );
            }
        }
    }
    // No batch twice; no acknowledged batch lost.
    let batches = data_batches(&b);
    let mut seen = BTreeSet::new();
    for &(p, _, pid, epoch, seq) in &batches {
        prop_assert!(
            seen.insert((p, pid, epoch, seq)),
            "batch {:?} appended twice",
            (p, pid, epoch, seq)
        );
    }
    for a in &acked {
        prop_assert!(batches.contains(a), "acknowledged batch {:?} lost", a);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn transactions_match_the_reference_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops))?;
    }
}
