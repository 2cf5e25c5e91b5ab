//! Property test of the idempotence window against a small reference model: for any
//! sequence of new batches, retries (recent or long gone), producer restarts (epoch
//! bumps) and fences, the classification is the model's, no batch is ever appended
//! twice, and a duplicate is answered with the offsets it was first written at.

use kaas_core::batch::{build_batch, validate, BatchHeader};
use kaas_core::idempotence::{Classification, ProducerStateTable, SequenceError, WINDOW};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// The producer's next batch of `count` records.
    Send { pid: usize, count: i32 },
    /// A retry of the producer's `back`-th most recent batch.
    Retry { pid: usize, back: usize },
    /// The producer restarts with epoch + 1 (an InitProducerId bump).
    Bump { pid: usize },
    /// The coordinator fences the producer's current epoch.
    Fence { pid: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 1..4i32).prop_map(|(pid, count)| Op::Send { pid, count }),
        3 => (0..3usize, 0..8usize).prop_map(|(pid, back)| Op::Retry { pid, back }),
        1 => (0..3usize).prop_map(|pid| Op::Bump { pid }),
        1 => (0..3usize).prop_map(|pid| Op::Fence { pid }),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    epoch: i16,
    first: i32,
    last: i32,
}

#[derive(Default)]
struct Producer {
    epoch: i16,
    next_seq: i32,
    /// Everything this producer ever sent, oldest first.
    sent: Vec<Sent>,
}

/// (batch, base offset, last offset) of everything appended for one producer.
type Appended = Vec<(Sent, i64, i64)>;

fn header(pid: i64, s: Sent, base_offset: i64) -> BatchHeader {
    let recs: Vec<kaas_core::batch::PlainRecord> = (s.first..=s.last).map(|_| (None, Some(&b"v"[..]))).collect();
    let mut h = validate(&build_batch(0, 1, Some((pid, s.epoch, s.first)), 0, &recs), 0).unwrap();
    h.base_offset = base_offset;
    h
}

/// What the reference model expects for `sent`, given what was appended for its
/// producer and the highest epoch the broker knows of it. Err: refused.
fn expected(appended: &Appended, known: Option<i16>, sent: Sent) -> Result<Classification, ()> {
    if known.is_some_and(|k| sent.epoch < k) {
        return Err(());
    }
    let current: Vec<&(Sent, i64, i64)> = appended.iter().filter(|(s, _, _)| Some(s.epoch) == known).collect();
    if let Some((_, base, last)) = current.iter().rev().take(WINDOW).find(|(s, _, _)| *s == sent) {
        return Ok(Classification::Duplicate {
            base_offset: *base,
            last_offset: *last,
        });
    }
    match known {
        None => Ok(Classification::Append),
        Some(k) if sent.epoch > k => {
            if sent.first == 0 {
                Ok(Classification::Append)
            } else {
                Err(())
            }
        }
        Some(_) => match current.last() {
            Some((s, _, _)) if sent.first == s.last + 1 => Ok(Classification::Append),
            None if sent.first == 0 => Ok(Classification::Append),
            _ => Err(()),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn the_window_matches_the_reference_model(ops in proptest::collection::vec(op(), 1..80)) {
        let mut table = ProducerStateTable::default();
        let mut producers: Vec<Producer> = (0..3).map(|_| Producer::default()).collect();
        let mut appended: Vec<Appended> = vec![Vec::new(); 3];
        let mut known_epoch: Vec<Option<i16>> = vec![None; 3];
        let mut next_offset = 0i64;
        for op in ops {
            let (pid, sent) = match op {
                Op::Send { pid, count } => {
                    let p = &mut producers[pid];
                    let s = Sent { epoch: p.epoch, first: p.next_seq, last: p.next_seq + count - 1 };
                    p.next_seq += count;
                    p.sent.push(s);
                    (pid, s)
                }
                Op::Retry { pid, back } => {
                    let p = &producers[pid];
                    match p.sent.len().checked_sub(back + 1).map(|i| p.sent[i]) {
                        Some(s) => (pid, s),
                        None => continue,
                    }
                }
                Op::Bump { pid } => {
                    let p = &mut producers[pid];
                    p.epoch += 1;
                    p.next_seq = 0;
                    continue;
                }
                Op::Fence { pid } => {
                    let epoch = producers[pid].epoch + 1;
                    table.fence(pid as i64, epoch);
                    let known = &mut known_epoch[pid];
                    *known = Some(known.map_or(epoch, |k| k.max(epoch)));
                    continue;
                }
            };
            let known = known_epoch[pid];
            let want = expected(&appended[pid], known, sent);
            let h = header(pid as i64, sent, next_offset);
            let got = table.classify(&h);
            match (&got, &want) {
                (Ok(g), Ok(e)) => prop_assert_eq!(g, e),
                (Err(SequenceError::StaleEpoch { .. }), Err(())) => prop_assert!(known.is_some_and(|k| sent.epoch < k)),
                (Err(SequenceError::OutOfOrder { .. }), Err(())) => prop_assert!(known.is_none_or(|k| sent.epoch >= k)),
                _ => prop_assert!(false, "{:?}: got {:?}, the model expects {:?}", sent, got, want),
            }
            if got == Ok(Classification::Append) {
                prop_assert!(
                    !appended[pid].iter().any(|(s, _, _)| s.epoch == sent.epoch && s.first == sent.first),
                    "batch {:?} of producer {} appended twice", sent, pid
                );
                table.record(&h);
                let last = next_offset + (sent.last - sent.first) as i64;
                appended[pid].push((sent, next_offset, last));
                let known = &mut known_epoch[pid];
                *known = Some(known.map_or(sent.epoch, |k| k.max(sent.epoch)));
                next_offset = last + 1;
            }
        }
    }
}
