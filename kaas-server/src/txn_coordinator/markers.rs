//! Finishing a transaction: the markers of a PrepareCommit/PrepareAbort entry
//! written to the partitions this broker leads and queued for the others
//! ([`TransactionCoordinator::finish`]), Complete* once every one is durable, and the
//! queue entries other coordinators left for this broker applied
//! ([`TransactionCoordinator::apply_queued`]).

use super::*;
use crate::WATCHERS_LOG_TARGET;

impl TransactionCoordinator {
    /// Finishes the Prepare* transaction `expected` if the entry still is it (see the
    /// module comment), taking the slot's locks. Idempotent.
    pub async fn finish(&self, broker: &Cluster, expected: &TxnEntry) -> Result<Finished, CoordError> {
        let held = self.lock_slot(slot_for(&expected.transactional_id)).await?;
        self.finish_held(broker, &held, expected).await
    }

    /// The compare-and-set finish, with the slot held: re-check, offset hook, markers,
    /// Complete*. Any failure leaves the entry in its Prepare state.
    pub(super) async fn finish_held(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        expected: &TxnEntry,
    ) -> Result<Finished, CoordError> {
        let Some(current) = self.held_entry(held, &expected.transactional_id)? else {
            return Ok(Finished::Stale);
        };
        if !txn::is_same_prepared(&current, expected) {
            return Ok(Finished::Stale);
        }
        let commit = current.state == TxnState::PrepareCommit;
        let (pid, epoch) = (current.producer_id, current.producer_epoch);
        for group in &current.groups {
            self.groups.finish_pending(group, pid, epoch, commit)?;
        }
        let mut remote: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for tp in &current.partitions {
            match broker.partition_leader(&tp.topic, tp.partition) {
                Some(leader) if leader != self.broker_id => remote.entry(leader).or_default().push(tp.clone()),
                _ => {
                    broker.write_marker(tp, pid, epoch, commit).await?;
                }
            }
        }
        if !remote.is_empty() {
            if !current.markers_queued {
                for (leader, partitions) in remote {
                    let marker = MarkerEntry::new(
                        &current.transactional_id,
                        pid,
                        epoch,
                        commit,
                        partitions,
                        Some(current.txn_seq),
                        self.broker_id,
                        now_ms(),
                    );
                    marker_queue::enqueue(&broker.volume, leader, &marker)?;
                }
                let mut next = current.clone();
                next.markers_queued = true;
                // Not waited for: lost, the queue entries are simply written again.
                self.record(held, &[SlotOp::Put(next)], now_ms(), Durable::Later)
                    .await?;
                return Ok(Finished::Queued);
            }
            if !marker_queue::pending_files(&broker.volume, pid, epoch, current.txn_seq)?.is_empty() {
                return Ok(Finished::Queued);
            }
        }
        kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_MARKERS);
        self.complete_held(held, &current)?;
        Ok(Finished::Completed)
    }

    /// Prepare* → Complete* of the entry `current` (already checked by the caller).
    pub(super) fn complete_held(&self, held: &HeldSlot<'_>, current: &TxnEntry) -> Result<(), CoordError> {
        let now = now_ms();
        if let Some(done) = txn::complete(current, now, &self.actor()) {
            // Not waited for: the outcome is durable (Prepare*) and every marker is in
            // its log; lost in a crash, recovery finishes the Prepare* entry again.
            self.append(held, &[SlotOp::Put(done)], now)?;
            crate::metrics::metrics().transaction_completed(current.state == TxnState::PrepareCommit);
            debug!(transactional_id = %current.transactional_id, producer_id = current.producer_id, state = current.state.as_str(), "transaction completed");
        }
        Ok(())
    }

    /// Applies, from one marker-queue entry (in any broker's queue), the markers of
    /// the partitions in `mine` — those this broker leads now, or that no longer
    /// exist — and rewrites the entry with the partitions left, or deletes it when
    /// none are. So a marker reaches its partition wherever the partition moved:
    /// to a broker restarted at once, to several survivors of a dead one.
    ///
    /// An entry naming its transaction is applied only while that transaction is
    /// still in its Prepare state at the coordinator (checked under the slot lock,
    /// held while the markers are written and the entry rewritten); a stale one is
    /// dropped unwritten. Whoever removes the last entry of a transaction completes it.
    /// Returns whether anything was applied or dropped.
    pub async fn apply_queued(
        &self,
        broker: &Cluster,
        path: &Path,
        entry: &MarkerEntry,
        mine: &[TopicPartition],
    ) -> Result<bool, CoordError> {
        let commit = entry.result == MarkerResult::Commit;
        let held = if entry.transactional_id.is_empty() {
            None
        } else {
            Some(self.lock_slot(slot_for(&entry.transactional_id)).await?)
        };
        // Re-read under the lock: another broker may have applied part of it.
        let entry = match kaas_core::error::read_versioned_json::<MarkerEntry>(
            path,
            "marker queue entry",
            marker_queue::MARKER_FORMAT_VERSION,
        ) {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let mine: Vec<TopicPartition> = entry
            .partitions
            .iter()
            .filter(|tp| mine.contains(tp))
            .cloned()
            .collect();
        if mine.is_empty() {
            return Ok(false);
        }
        let current = match &held {
            Some(h) => self.held_entry(h, &entry.transactional_id)?,
            None => None,
        };
        let wanted = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        let live = current.as_ref().filter(|c| {
            c.producer_id == entry.producer_id
                && c.producer_epoch == entry.producer_epoch
                && c.state == wanted
                && entry.txn_seq.is_none_or(|n| n == c.txn_seq)
        });
        if held.is_some() && live.is_none() {
            match entry.txn_seq {
                Some(_) => {
                    warn!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, partitions = ?entry.partitions, "queued marker of a transaction that is no longer being finished; dropped unwritten");
                    marker_queue::remove(path)?;
                    return Ok(true);
                }
                None => {
                    // An entry of an older version, which names no transaction: while
                    // the producer has a newer transaction active at the same epoch on
                    // one of these partitions, its marker could close that one instead;
                    // wait until it is over.
                    let ambiguous = current.as_ref().is_some_and(|c| {
                        c.producer_id == entry.producer_id
                            && c.producer_epoch == entry.producer_epoch
                            && matches!(
                                c.state,
                                TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
                            )
                            && mine.iter().any(|tp| c.partitions.contains(tp))
                    });
                    if ambiguous {
                        debug!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, "legacy queue entry waits until the producer's open transaction ends");
                        return Ok(false);
                    }
                }
            }
        }
        for tp in &mine {
            broker
                .write_marker(tp, entry.producer_id, entry.producer_epoch, commit)
                .await?;
        }
        let rest: Vec<TopicPartition> = entry
            .partitions
            .iter()
            .filter(|tp| !mine.contains(tp))
            .cloned()
            .collect();
        if rest.is_empty() {
            marker_queue::remove(path)?;
        } else {
            let mut left = entry.clone();
            left.partitions = rest;
            kaas_core::fsutil::write_json(path, &left).map_err(|e| VolumeError::io(path, e))?;
            return Ok(true);
        }
        if let (Some(held), Some(c)) = (held, live.cloned()) {
            let done =
                marker_queue::pending_files(&broker.volume, c.producer_id, c.producer_epoch, c.txn_seq)?.is_empty();
            if c.markers_queued && done {
                self.complete_held(&held, &c)?;
            }
        }
        Ok(true)
    }
}

/// The marker watcher's poll (every `--volume-poll-interval-ms`): the markers other
/// coordinators queued for the partitions this broker leads, written
/// ([`TransactionCoordinator::apply_queued`]) and each entry removed once its markers
/// are durable.
pub async fn process_marker_queue(broker: &Cluster, txn: &TransactionCoordinator) {
    let me = broker.config.broker_id;
    let targets = match marker_queue::targets(&broker.volume) {
        Ok(t) => t,
        Err(e) => {
            error!(target: WATCHERS_LOG_TARGET, error = %e, "cannot list marker queues");
            return;
        }
    };
    // Every queue: an entry's partitions may be led elsewhere by now (its addressee
    // died, restarted, or its partitions were taken over by several brokers); each
    // broker applies the partitions it leads.
    for target in targets {
        let entries = match marker_queue::list(&broker.volume, target) {
            Ok(e) => e,
            Err(e) => {
                error!(target: WATCHERS_LOG_TARGET, target, error = %e, "cannot read a marker queue");
                continue;
            }
        };
        for (path, entry) in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    if target == me {
                        error!(target: WATCHERS_LOG_TARGET, path = %path.display(), error = %e, "unreadable marker queue entry left in place");
                    }
                    continue;
                }
            };
            let mine: Vec<TopicPartition> = entry
                .partitions
                .iter()
                .filter(|tp| broker.partition_leader(&tp.topic, tp.partition) == Some(me) || gone(broker, tp))
                .cloned()
                .collect();
            if mine.is_empty() {
                continue;
            }
            match txn.apply_queued(broker, &path, &entry, &mine).await {
                // Per transaction (thousands a second): debug, not info.
                Ok(true) => {
                    debug!(target: WATCHERS_LOG_TARGET, transactional_id = %entry.transactional_id, producer_id = entry.producer_id, result = ?entry.result, partitions = mine.len(), queue = target, "applied queued markers")
                }
                Ok(false) => {}
                // Left in place: retried at the next poll.
                Err(e) => {
                    error!(target: WATCHERS_LOG_TARGET, path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, partitions = ?mine, error = %e, "applying a queued marker failed; retried at the next poll")
                }
            }
        }
    }
}

/// A partition that no longer exists on the volume (its topic was deleted, or it
/// never had that many partitions): its marker has nothing left to end.
fn gone(broker: &Cluster, tp: &TopicPartition) -> bool {
    match kaas_core::topic::TopicMeta::read(&broker.volume.topic_file(&tp.topic)) {
        Ok(meta) => tp.partition < 0 || tp.partition >= meta.partitions,
        Err(e) => e.is_not_found(),
    }
}
