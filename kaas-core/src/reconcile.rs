//! The reconcile backstop: does an open transaction found on a partition belong to a
//! transaction its coordinator will still finish, and if not, which marker ends it?
//! One pure rule, shared by the broker's periodic reconcile of the partitions it leads
//! and by `kaasctl txn find-hanging` / `txn repair`, so both always agree.
//!
//! An open transaction of (producer id, epoch) on partition P is **covered** when the
//! coordinator entry of that producer id is Ongoing or Prepare* with P in its
//! partitions: the coordinator writes its marker. Otherwise nothing will ever end it
//! (its marker, or the queue entry carrying it, was lost; or it predates produce-time
//! verification) and it pins the partition's last stable offset forever: it is
//! **hanging**, and gets the marker of the outcome the coordinator recorded for that
//! (producer id, epoch) — COMMIT only if the entry's history shows the last decision
//! at that epoch was a commit, ABORT in every other case (no entry, an entry at a
//! newer epoch or another producer id, no decision remembered).

use crate::txn::{TopicPartition, TxnEntry, TxnState};
use std::collections::BTreeMap;

/// What to do with one open transaction on a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The coordinator will finish it: leave it.
    Covered,
    /// Nothing will: write this marker (at the open transaction's epoch).
    Hanging { commit: bool, reason: String },
}

/// Judges the open transaction of (`producer_id`, `epoch`) on `tp` against the
/// coordinator entry that has (or had) this producer id.
pub fn judge(entry: Option<&TxnEntry>, tp: &TopicPartition, producer_id: i64, epoch: i16) -> Verdict {
    let Some(e) = entry else {
        return Verdict::Hanging {
            commit: false,
            reason: "no coordinator entry has this producer id".into(),
        };
    };
    let active = e.state.is_in_flight();
    if active && e.producer_id == producer_id && e.partitions.contains(tp) {
        return Verdict::Covered;
    }
    let reason = if active && !e.partitions.contains(tp) {
        format!(
            "coordinator entry {:?} is {} without this partition",
            e.transactional_id,
            e.state.as_str()
        )
    } else {
        format!("coordinator entry {:?} is {}", e.transactional_id, e.state.as_str())
    };
    let decided_commit = e
        .history
        .iter()
        .rev()
        .find(|t| {
            t.producer_id == producer_id
                && t.epoch == epoch
                && matches!(
                    t.to,
                    TxnState::PrepareCommit
                        | TxnState::CompleteCommit
                        | TxnState::PrepareAbort
                        | TxnState::CompleteAbort
                )
        })
        .is_some_and(|t| matches!(t.to, TxnState::PrepareCommit | TxnState::CompleteCommit));
    // A commit is replayed only while the entry is still at that producer id and
    // epoch: after a bump, the old epoch's open records are a fenced instance's.
    let commit = decided_commit && e.producer_id == producer_id && e.producer_epoch == epoch;
    Verdict::Hanging { commit, reason }
}

/// Entries by every producer id they hold or held (the current one, and the one
/// before a rotation), for looking up the owner of an open transaction.
pub fn index_by_producer<'a>(entries: impl IntoIterator<Item = &'a TxnEntry>) -> BTreeMap<i64, &'a TxnEntry> {
    let mut out = BTreeMap::new();
    for e in entries {
        if e.last_producer_id >= 0 {
            out.entry(e.last_producer_id).or_insert(e);
        }
        out.insert(e.producer_id, e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{add_to_txn, complete, end_txn, init_producer_id, Actor, EndOutcome, InitOutcome};

    const BY: Actor = Actor::Broker { id: 0 };

    fn tp(p: i32) -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition: p,
        }
    }

    fn fresh() -> TxnEntry {
        match init_producer_id(None, "tx", 60_000, (-1, -1), 1, &BY, &mut || 7) {
            InitOutcome::Ready { entry, .. } => entry,
            other => panic!("{other:?}"),
        }
    }

    fn finished(e: &TxnEntry, parts: &[TopicPartition], commit: bool) -> (TxnEntry, TxnEntry) {
        let ongoing = add_to_txn(e, 7, e.producer_epoch, parts, &[], 2, &BY).unwrap().unwrap();
        let EndOutcome::Prepare(prepared) = end_txn(&ongoing, 7, e.producer_epoch, commit, 3, &BY).unwrap() else {
            panic!()
        };
        let done = complete(&prepared, 4, &BY).unwrap();
        (ongoing, done)
    }

    #[test]
    fn a_transaction_the_coordinator_is_finishing_is_covered() {
        let (ongoing, _) = finished(&fresh(), &[tp(0)], true);
        assert_eq!(judge(Some(&ongoing), &tp(0), 7, 0), Verdict::Covered);
    }

    #[test]
    fn no_entry_or_an_entry_without_the_partition_is_hanging_and_aborted() {
        assert!(matches!(
            judge(None, &tp(0), 7, 0),
            Verdict::Hanging { commit: false, .. }
        ));
        let (ongoing, _) = finished(&fresh(), &[tp(1)], true);
        match judge(Some(&ongoing), &tp(0), 7, 0) {
            Verdict::Hanging { commit: false, reason } => {
                assert!(reason.contains("without this partition"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_completed_transaction_gets_the_marker_of_its_recorded_outcome() {
        let (_, committed) = finished(&fresh(), &[tp(0)], true);
        assert!(matches!(
            judge(Some(&committed), &tp(0), 7, 0),
            Verdict::Hanging { commit: true, .. }
        ));
        let (_, aborted) = finished(&fresh(), &[tp(0)], false);
        assert!(matches!(
            judge(Some(&aborted), &tp(0), 7, 0),
            Verdict::Hanging { commit: false, .. }
        ));
    }

    #[test]
    fn an_older_epoch_is_always_aborted() {
        let (_, committed) = finished(&fresh(), &[tp(0)], true);
        let bumped = match init_producer_id(Some(&committed), "tx", 60_000, (-1, -1), 5, &BY, &mut || 8) {
            InitOutcome::Ready { entry, .. } => entry,
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            judge(Some(&bumped), &tp(0), 7, 0),
            Verdict::Hanging { commit: false, .. }
        ));
    }

    #[test]
    fn the_index_finds_entries_by_current_and_previous_producer_id() {
        let mut e = fresh();
        e.last_producer_id = 3;
        let entries = [e];
        let idx = index_by_producer(entries.iter());
        assert_eq!(idx[&7].transactional_id, "tx");
        assert_eq!(idx[&3].transactional_id, "tx");
    }
}
