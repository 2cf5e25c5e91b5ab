//! Idempotent-producer state of one partition: per producer id, its epoch and a ring
//! of its last [`WINDOW`] batches (first/last sequence, offsets), plus the first
//! offset of its open transaction. Classification is a pure function of this state and
//! a batch header; the caller runs it under the partition lock, before the append.
//!
//! Rules (Apache 3.x `ProducerAppendInfo`, ARCHITECTURE.md §4), in order:
//! - a producer id without sequence numbers is an invalid record (LogValidator);
//! - a transactional producer id (`producer_ids::is_transactional`) takes only
//!   transactional batches, and so does any producer while its transaction is open
//!   here (InvalidTxnStateException);
//! - a batch identical (epoch, first and last sequence) to one in the window is a
//!   duplicate: answer its cached base offset, write nothing;
//! - an epoch older than the known one is INVALID_PRODUCER_EPOCH (a fenced zombie);
//! - a newer epoch must start at sequence 0 (unless nothing is known of the producer);
//! - the same epoch must continue at last sequence + 1, wrapping i32::MAX to 0;
//! - a producer with no state at all (new, or its records all deleted by retention)
//!   is accepted at any sequence, as Apache does since KIP-360.

use crate::batch::BatchHeader;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Batches remembered per producer: the Java client's max.in.flight of 5.
pub const WINDOW: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Oldest first; at most [`WINDOW`].
    pub batches: VecDeque<BatchMeta>,
    /// First offset of the producer's open transaction on this partition.
    pub txn_first_offset: Option<i64>,
    pub last_timestamp: i64,
}

impl ProducerEntry {
    fn new(producer_id: i64, epoch: i16) -> Self {
        ProducerEntry {
            producer_id,
            epoch,
            batches: VecDeque::with_capacity(WINDOW),
            txn_first_offset: None,
            last_timestamp: -1,
        }
    }
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification {
    /// Not idempotent, or the next batch in sequence: append it.
    Append,
    /// Already in the log: answer with these offsets, write nothing.
    Duplicate { base_offset: i64, last_offset: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("producer {producer_id}: epoch {got} is older than the current epoch {current}")]
    StaleEpoch { producer_id: i64, current: i16, got: i16 },
    #[error("producer {producer_id}: sequence {got} out of order, expected {expected}")]
    OutOfOrder { producer_id: i64, expected: i32, got: i32 },
    #[error("producer {producer_id} is transactional (or has an open transaction): only its transactional batches are accepted")]
    TransactionOpen { producer_id: i64 },
    #[error("producer {producer_id}: a batch with a producer id must carry sequence numbers")]
    NoSequence { producer_id: i64 },
}

fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerStateTable {
    pub producers: BTreeMap<i64, ProducerEntry>,
}

impl ProducerStateTable {
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Whether (producer id, epoch) has a transaction open here since `first_offset`:
    /// that one, not another begun since.
    pub fn has_open_since(&self, producer_id: i64, epoch: i16, first_offset: i64) -> bool {
        self.get(producer_id)
            .is_some_and(|e| e.epoch == epoch && e.txn_first_offset == Some(first_offset))
    }

    /// Classifies one batch against the current state. Pure: changes nothing.
    pub fn classify(&self, h: &BatchHeader) -> Result<Classification, SequenceError> {
        if !h.has_producer_id() || h.is_control() {
            return Ok(Classification::Append);
        }
        // Kafka's LogValidator: a producer id without sequences is an invalid record
        // (it would write under that producer's id unchecked).
        if h.base_sequence < 0 {
            return Err(SequenceError::NoSequence {
                producer_id: h.producer_id,
            });
        }
        // A transactional producer's id takes only transactional batches (verified
        // against its transactional id's coordinator entry, WRITE-checked): its id is
        // no secret, and a plain batch under it could raise its epoch here (fencing
        // it) or use up its sequence numbers (its next batch then a "duplicate").
        if crate::producer_ids::is_transactional(h.producer_id) && !h.is_transactional() {
            return Err(SequenceError::TransactionOpen {
                producer_id: h.producer_id,
            });
        }
        let Some(entry) = self.producers.get(&h.producer_id) else {
            return Ok(Classification::Append);
        };
        if h.producer_epoch < entry.epoch {
            return Err(SequenceError::StaleEpoch {
                producer_id: h.producer_id,
                current: entry.epoch,
                got: h.producer_epoch,
            });
        }
        // Only the producer's own transactional batches while its transaction is open
        // (Kafka's InvalidTxnStateException): its producer id is no secret, and a
        // plain batch under it would land in the transaction's partition or, with a
        // higher epoch, fence it — from a client without WRITE on its transactional id.
        if entry.txn_first_offset.is_some() && !h.is_transactional() {
            return Err(SequenceError::TransactionOpen {
                producer_id: h.producer_id,
            });
        }
        if h.producer_epoch > entry.epoch {
            // A new epoch starts at sequence 0.
            return if h.base_sequence == 0 {
                Ok(Classification::Append)
            } else {
                Err(SequenceError::OutOfOrder {
                    producer_id: h.producer_id,
                    expected: 0,
                    got: h.base_sequence,
                })
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == h.last_sequence())
        {
            return Ok(Classification::Duplicate {
                base_offset: dup.base_offset,
                last_offset: dup.last_offset,
            });
        }
        let expected = match entry.last_seq() {
            Some(last) if in_sequence(last, h.base_sequence) => return Ok(Classification::Append),
            Some(last) => last.wrapping_add(1).max(0),
            None if h.base_sequence == 0 => return Ok(Classification::Append),
            None => 0,
        };
        Err(SequenceError::OutOfOrder {
            producer_id: h.producer_id,
            expected,
            got: h.base_sequence,
        })
    }

    /// Records an appended batch (offsets already assigned in `h`). Also used to
    /// replay the log after a snapshot.
    pub fn record(&mut self, h: &BatchHeader) {
        if !h.has_producer_id() {
            return;
        }
        let entry = self
            .producers
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry::new(h.producer_id, h.producer_epoch));
        if h.producer_epoch > entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(h.max_timestamp);
        if h.is_control() {
            // A COMMIT/ABORT marker ends the open transaction.
            entry.txn_first_offset = None;
            return;
        }
        if h.is_transactional() && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(h.base_offset);
        }
        if h.base_sequence >= 0 {
            if entry.batches.len() == WINDOW {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchMeta {
                first_seq: h.base_sequence,
                last_seq: h.last_sequence(),
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                max_timestamp: h.max_timestamp,
            });
        }
    }

    /// Fences a producer after an epoch bump: raises its epoch and clears its window,
    /// so batches of the old epoch are rejected here even if this partition never saw
    /// the new session. Returns whether anything changed.
    pub fn fence(&mut self, producer_id: i64, epoch: i16) -> bool {
        self.fence_at(producer_id, epoch, -1)
    }

    /// [`Self::fence`], recording `now_ms` as the producer's last activity, so a fence
    /// that never sees a batch still expires with [`Self::expire`].
    pub fn fence_at(&mut self, producer_id: i64, epoch: i16, now_ms: i64) -> bool {
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::new(producer_id, -1));
        if entry.epoch >= epoch {
            return false;
        }
        entry.epoch = epoch;
        entry.batches.clear();
        entry.last_timestamp = entry.last_timestamp.max(now_ms);
        true
    }

    /// Forgets producers idle for longer than `max_idle_ms` (Kafka's
    /// `producer.id.expiration.ms`), so memory and snapshots stay bounded. A producer
    /// with an open transaction here is kept whatever its age (the transaction pins
    /// the last stable offset until its marker), and so is one whose last activity is
    /// unknown. Returns how many were forgotten.
    pub fn expire(&mut self, now_ms: i64, max_idle_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some() || e.last_timestamp < 0 || now_ms - e.last_timestamp <= max_idle_ms
        });
        before - self.producers.len()
    }

    /// First offset of the earliest open transaction: what pins the last stable offset.
    pub fn first_open_offset(&self) -> Option<i64> {
        self.producers.values().filter_map(|e| e.txn_first_offset).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{build_batch, validate};

    fn header(pid: i64, epoch: i16, seq: i32, n: usize, base_offset: i64) -> BatchHeader {
        let recs: Vec<crate::batch::PlainRecord> = (0..n).map(|_| (None, Some(&b"v"[..]))).collect();
        let mut h = validate(&build_batch(base_offset, 1, Some((pid, epoch, seq)), 0, &recs), 0).unwrap();
        h.base_offset = base_offset;
        h
    }

    fn append(t: &mut ProducerStateTable, h: &BatchHeader) -> Classification {
        let c = t.classify(h).unwrap();
        if c == Classification::Append {
            t.record(h);
        }
        c
    }

    /// Review finding (issue 14): a producer id is visible to readers (batch headers,
    /// DescribeProducers). A plain batch under the id of a producer whose transaction
    /// is open — from a client without WRITE on its transactional id — must not land
    /// in the transaction's partition or raise its epoch (which would fence it); nor
    /// may a batch without sequences raise any producer's epoch. Kafka refuses both
    /// (InvalidTxnStateException; "Invalid sequence number for new epoch").
    #[test]
    fn a_plain_batch_cannot_ride_or_fence_an_open_transaction_and_every_batch_with_a_producer_id_has_sequences() {
        let mut t = ProducerStateTable::default();
        let mut txn = header(7, 3, 0, 2, 0);
        txn.attributes |= crate::batch::ATTR_TRANSACTIONAL;
        append(&mut t, &txn);
        for plain in [header(7, 3, 2, 1, 2), header(7, 4, 0, 1, 2)] {
            assert_eq!(
                t.classify(&plain),
                Err(SequenceError::TransactionOpen { producer_id: 7 }),
                "{plain:?}"
            );
        }
        let mut next = header(7, 3, 2, 1, 2);
        next.attributes |= crate::batch::ATTR_TRANSACTIONAL;
        assert_eq!(
            t.classify(&next),
            Ok(Classification::Append),
            "the producer itself goes on"
        );
        // A producer id without sequences is an invalid record, at any epoch.
        append(&mut t, &header(9, 0, 0, 1, 10));
        for epoch in [0, 1] {
            let mut unsequenced = header(9, epoch, 0, 1, 11);
            unsequenced.base_sequence = -1;
            assert_eq!(
                t.classify(&unsequenced),
                Err(SequenceError::NoSequence { producer_id: 9 })
            );
        }
        assert_eq!(t.classify(&header(9, 1, 0, 1, 11)), Ok(Classification::Append));
    }

    /// Review finding: between transactions, or on a partition the transaction has
    /// not written yet, a plain batch under a transactional id must be refused too.
    #[test]
    fn a_transactional_producer_id_takes_only_transactional_batches() {
        let mut t = ProducerStateTable::default();
        let pid = crate::producer_ids::TRANSACTIONAL_BASE + 5;
        for plain in [header(pid, 0, 0, 1, 0), header(pid, i16::MAX, 0, 1, 0)] {
            assert_eq!(
                t.classify(&plain),
                Err(SequenceError::TransactionOpen { producer_id: pid })
            );
        }
        let mut txn = header(pid, 0, 0, 1, 0);
        txn.attributes |= crate::batch::ATTR_TRANSACTIONAL;
        assert_eq!(append(&mut t, &txn), Classification::Append);
        t.record(&crate::batch::validate(&crate::batch::build_control_batch(pid, 0, true, 1, 1), 0).unwrap());
        assert_eq!(
            t.classify(&header(pid, 0, 1, 1, 2)),
            Err(SequenceError::TransactionOpen { producer_id: pid }),
            "after its transaction too"
        );
    }

    #[test]
    fn a_retried_batch_is_a_duplicate_with_its_cached_offsets() {
        let mut t = ProducerStateTable::default();
        append(&mut t, &header(7, 0, 0, 3, 0));
        append(&mut t, &header(7, 0, 3, 2, 3));
        assert_eq!(
            t.classify(&header(7, 0, 0, 3, 99)).unwrap(),
            Classification::Duplicate {
                base_offset: 0,
                last_offset: 2
            }
        );
        assert_eq!(
            t.classify(&header(7, 0, 3, 2, 99)).unwrap(),
            Classification::Duplicate {
                base_offset: 3,
                last_offset: 4
            }
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut t = ProducerStateTable::default();
        for i in 0..6 {
            append(&mut t, &header(7, 0, i, 1, i as i64));
        }
        assert_eq!(t.get(7).unwrap().batches.len(), WINDOW);
        // Seq 0 fell out of the window: it is no longer a duplicate but out of order.
        assert!(matches!(
            t.classify(&header(7, 0, 0, 1, 9)),
            Err(SequenceError::OutOfOrder { .. })
        ));
        assert!(matches!(
            t.classify(&header(7, 0, 1, 1, 9)),
            Ok(Classification::Duplicate { .. })
        ));
    }

    #[test]
    fn a_sequence_gap_is_out_of_order() {
        let mut t = ProducerStateTable::default();
        append(&mut t, &header(7, 0, 0, 2, 0));
        assert_eq!(
            t.classify(&header(7, 0, 5, 1, 2)),
            Err(SequenceError::OutOfOrder {
                producer_id: 7,
                expected: 2,
                got: 5
            })
        );
        assert_eq!(t.classify(&header(7, 0, 2, 1, 2)), Ok(Classification::Append));
    }

    #[test]
    fn an_older_epoch_is_rejected_and_a_newer_one_restarts_at_zero() {
        let mut t = ProducerStateTable::default();
        append(&mut t, &header(7, 3, 0, 2, 0));
        assert!(matches!(
            t.classify(&header(7, 2, 2, 1, 2)),
            Err(SequenceError::StaleEpoch { current: 3, got: 2, .. })
        ));
        assert!(matches!(
            t.classify(&header(7, 4, 2, 1, 2)),
            Err(SequenceError::OutOfOrder { expected: 0, .. })
        ));
        assert_eq!(append(&mut t, &header(7, 4, 0, 1, 2)), Classification::Append);
        assert_eq!(t.get(7).unwrap().epoch, 4);
        assert_eq!(t.get(7).unwrap().batches.len(), 1);
    }

    #[test]
    fn sequences_wrap_from_i32_max_to_zero() {
        let mut t = ProducerStateTable::default();
        append(&mut t, &header(7, 0, i32::MAX - 1, 2, 0));
        assert_eq!(t.get(7).unwrap().last_seq(), Some(i32::MAX));
        assert_eq!(t.classify(&header(7, 0, 0, 1, 2)), Ok(Classification::Append));
        // A batch straddling the wrap ends at a small sequence.
        let mut t = ProducerStateTable::default();
        append(&mut t, &header(7, 0, i32::MAX, 3, 0));
        assert_eq!(t.get(7).unwrap().last_seq(), Some(1));
        assert_eq!(t.classify(&header(7, 0, 2, 1, 3)), Ok(Classification::Append));
    }

    #[test]
    fn an_unknown_producer_is_accepted_at_any_sequence() {
        let t = ProducerStateTable::default();
        assert_eq!(t.classify(&header(9, 0, 42, 1, 0)), Ok(Classification::Append));
    }

    #[test]
    fn fence_bumps_epoch_and_clears_window() {
        let mut t = ProducerStateTable::default();
        append(&mut t, &header(7, 0, 0, 1, 0));
        assert!(t.fence(7, 1));
        assert!(!t.fence(7, 1), "same epoch again is a no-op");
        let e = t.get(7).unwrap();
        assert_eq!((e.epoch, e.batches.len()), (1, 0));
        // The zombie of epoch 0 is rejected, even its exact retry.
        assert!(matches!(
            t.classify(&header(7, 0, 0, 1, 5)),
            Err(SequenceError::StaleEpoch { .. })
        ));
        assert!(matches!(
            t.classify(&header(7, 0, 1, 1, 5)),
            Err(SequenceError::StaleEpoch { .. })
        ));
        // Fencing a producer this partition never saw still blocks its old epochs.
        assert!(t.fence(8, 2));
        assert!(matches!(
            t.classify(&header(8, 1, 0, 1, 5)),
            Err(SequenceError::StaleEpoch { .. })
        ));
        assert_eq!(t.classify(&header(8, 2, 0, 1, 5)), Ok(Classification::Append));
    }

    #[test]
    fn idle_producers_expire_but_open_transactions_are_kept() {
        let mut t = ProducerStateTable::default();
        let mut h = header(7, 0, 0, 1, 0);
        h.max_timestamp = 1_000;
        append(&mut t, &h);
        let mut open = header(8, 0, 0, 1, 1);
        open.max_timestamp = 1_000;
        open.attributes |= 0x10;
        append(&mut t, &open);
        t.fence_at(9, 3, 1_000);
        t.fence(10, 1); // activity unknown
        assert_eq!(t.expire(1_000 + 500, 1_000), 0);
        assert_eq!(t.expire(1_000 + 1_001, 1_000), 2, "7 and 9 expire");
        let left: Vec<i64> = t.producers.keys().copied().collect();
        assert_eq!(left, vec![8, 10]);
    }

    #[test]
    fn non_idempotent_batches_are_always_appended() {
        let t = ProducerStateTable::default();
        let recs: Vec<crate::batch::PlainRecord> = vec![(None, Some(b"v"))];
        let h = validate(&build_batch(0, 1, None, 0, &recs), 0).unwrap();
        assert_eq!(t.classify(&h), Ok(Classification::Append));
    }
}
