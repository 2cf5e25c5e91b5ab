//! What keeps transactions moving when nobody asks: the partition leader's reconcile
//! against the slot files (a completed transaction whose marker was lost gets it),
//! the Prepare* entries finished at start, and the reaper that aborts overdue
//! transactions and finishes stuck ones in the slots this broker owns.

use super::*;
use std::collections::HashSet;

/// The sweep's key of a Prepare* entry.
fn prepare_key(e: &TxnEntry) -> PrepareKey {
    (
        e.transactional_id.clone(),
        e.producer_id,
        e.producer_epoch,
        e.txn_seq,
        e.state,
    )
}

/// What [`TransactionCoordinator::reconcile_one`] found, judged with the slot of the
/// producer's transactional id locked and the partition read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reconciled {
    /// Hanging: its marker is written.
    Ended,
    /// No transaction of the producer at that epoch is open there since the offset
    /// asked about any more (ended meanwhile, or another one began).
    NotOpen,
    /// Not hanging: its coordinator's entry (of `transactional_id`) covers it, a
    /// transaction still live there.
    Covered { transactional_id: Option<String> },
    /// Hanging, but its coordinator's outcome is `commit`, not the one asked for:
    /// nothing written.
    OtherOutcome {
        transactional_id: Option<String>,
        commit: bool,
    },
}

impl TransactionCoordinator {
    /// Hanging transactions the reconcile backstop ended since start.
    pub fn reconcile_repairs(&self) -> u64 {
        self.reconcile_repairs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The reconcile backstop (see `kaas_core::reconcile`): compares every open
    /// transaction on the partitions this broker leads with its coordinator entry and
    /// writes the marker the coordinator's outcome calls for when nothing else will.
    /// A candidate found without locks is judged again with its slot locked (so no
    /// transaction can begin or end meanwhile) and the partition re-read, before any
    /// marker is written. Every repair is logged and counted. Returns the repairs.
    pub async fn reconcile(&self, broker: &Cluster) -> usize {
        // The open transactions of the partitions this broker leads, first: most
        // rounds find none and read no slot at all. The entries are read after: one
        // that exists before a transaction's first batch (always: its batches are
        // verified against it) is then found.
        let mut open = Vec::new();
        for p in broker.partitions() {
            if broker.partition_leader(&p.topic, p.index) != Some(self.broker_id) {
                continue;
            }
            let tp = TopicPartition {
                topic: p.topic.clone(),
                partition: p.index,
            };
            let txns: Vec<(i64, i16, i64)> = p
                .state()
                .producers
                .producers
                .values()
                .filter_map(|e| e.txn_first_offset.map(|first| (e.producer_id, e.epoch, first)))
                .collect();
            if !txns.is_empty() {
                open.push((p, tp, txns));
            }
        }
        if open.is_empty() {
            return 0;
        }
        let wanted: std::collections::BTreeSet<i64> = open.iter().flat_map(|(_, _, t)| t.iter().map(|o| o.0)).collect();
        let mut entries = Vec::new();
        let mut unreadable = Vec::new();
        for slot in 0..SLOTS {
            let found = self.visit(slot, |st| {
                st.entries()
                    .values()
                    .filter(|e| wanted.contains(&e.producer_id) || wanted.contains(&e.last_producer_id))
                    .cloned()
                    .collect::<Vec<_>>()
            });
            match found {
                Ok(found) => entries.extend(found),
                // Its producers cannot be judged: none of them is repaired.
                Err(e) => {
                    warn!(slot, error = %e, "reconcile skips an unreadable slot's transactions");
                    unreadable.push(slot);
                }
            }
        }
        let index = kaas_core::reconcile::index_by_producer(entries.iter());
        let mut repairs = 0;
        for (p, tp, txns) in open {
            for (pid, epoch, first) in txns {
                let seen = index.get(&pid).copied();
                if kaas_core::reconcile::judge(seen, &tp, pid, epoch) == kaas_core::reconcile::Verdict::Covered {
                    continue;
                }
                if seen.is_none() && !unreadable.is_empty() {
                    // Its entry may be in a slot we cannot read: never guess.
                    continue;
                }
                match self
                    .reconcile_one(broker, &p, &tp, seen, (pid, epoch, first), None)
                    .await
                {
                    Ok(Reconciled::Ended) => repairs += 1,
                    Ok(_) => {}
                    Err(e) => {
                        error!(topic = %tp.topic, partition = tp.partition, producer_id = pid, error = %e, "reconcile could not end a hanging transaction; retried next round")
                    }
                }
            }
        }
        self.reconcile_repairs
            .fetch_add(repairs as u64, std::sync::atomic::Ordering::Relaxed);
        crate::metrics::metrics().reconcile_repairs.inc_by(repairs as u64);
        repairs
    }

    pub(super) async fn reconcile_one(
        &self,
        broker: &Cluster,
        partition: &crate::registry::Partition,
        tp: &TopicPartition,
        seen: Option<&TxnEntry>,
        (pid, epoch, first): (i64, i16, i64),
        expected: Option<bool>,
    ) -> Result<Reconciled, CoordError> {
        let tid = match seen {
            Some(e) => Some(e.transactional_id.clone()),
            // The index may predate the transaction's producer (a caller's older read):
            // its entry was written before its first batch could be verified, so a
            // read now, after the open transaction was seen, finds it if it exists.
            None => {
                let mut found = None;
                for slot in 0..SLOTS {
                    found = self.visit(slot, |st| {
                        st.entries()
                            .values()
                            .find(|e| e.producer_id == pid || e.last_producer_id == pid)
                            .map(|e| e.transactional_id.clone())
                    })?;
                    if found.is_some() {
                        break;
                    }
                }
                found
            }
        };
        let held = match &tid {
            Some(t) => Some(self.lock_slot(slot_for(t)).await?),
            None => None,
        };
        let entry = match (&held, &tid) {
            (Some(h), Some(t)) => self
                .held_entry(h, t)?
                .filter(|c| c.producer_id == pid || c.last_producer_id == pid),
            _ => None,
        };
        let still_open = partition.state().producers.has_open_since(pid, epoch, first);
        if !still_open {
            return Ok(Reconciled::NotOpen);
        }
        let kaas_core::reconcile::Verdict::Hanging { commit, reason } =
            kaas_core::reconcile::judge(entry.as_ref(), tp, pid, epoch)
        else {
            return Ok(Reconciled::Covered { transactional_id: tid });
        };
        // A repair asked for by an operator is written only with the outcome shown.
        if expected.is_some_and(|c| c != commit) {
            warn!(topic = %tp.topic, partition = tp.partition, producer_id = pid, epoch, first_offset = first, commit, "a hanging-transaction repair asked for the other outcome; nothing written");
            return Ok(Reconciled::OtherOutcome {
                transactional_id: tid,
                commit,
            });
        }
        warn!(
            topic = %tp.topic,
            partition = tp.partition,
            producer_id = pid,
            epoch,
            first_offset = first,
            commit,
            reason = %reason,
            "reconcile: ending a hanging transaction nothing else would end"
        );
        broker.write_marker(tp, pid, epoch, commit).await?;
        drop(held);
        Ok(Reconciled::Ended)
    }

    /// At start: finishes every Prepare* entry left by a coordinator that died between
    /// PrepareCommit/PrepareAbort and Complete*. (Slots taken over from another broker
    /// are finished by the reaper's sweep once their entries have sat still.)
    pub async fn recover(&self, broker: &Cluster) {
        // Every one, however recent its stamp (written by another host's clock,
        // which may run ahead of this one's): each finish is a compare-and-set.
        self.sweep(broker, 0, false).await;
    }

    /// Whether Prepare* entry `e` has sat still for `stuck_after_ms`: by its stamp on
    /// this broker's wall clock, or, whatever the stamp (written by the clock of the
    /// host that prepared it, which may run ahead of this one's), by how long this
    /// broker has seen it unchanged ([`Self::note_prepares`]). 0 or less: at once.
    fn sat_still(&self, e: &TxnEntry, now: i64, stuck_after_ms: i64) -> bool {
        if stuck_after_ms <= 0 || now.saturating_sub(e.last_update_ms) >= stuck_after_ms {
            return true;
        }
        let wait = Duration::from_millis(stuck_after_ms as u64);
        self.prepare_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&prepare_key(e))
            .is_some_and(|seen| seen.elapsed() >= wait)
    }

    /// Records the Prepare* entries of one owned slot as seen now (those seen before
    /// keep their first sighting) into `seen`, the sweep's set.
    fn note_prepares(&self, entries: &[PrepareKey], seen: &mut HashSet<PrepareKey>) {
        let mut map = self.prepare_seen.lock().unwrap_or_else(|p| p.into_inner());
        for key in entries {
            map.entry(key.clone()).or_insert_with(Instant::now);
            seen.insert(key.clone());
        }
    }

    /// The timeout reaper: aborts every overdue Ongoing transaction of the slots this
    /// broker owns, with an epoch bump, discarding staged offsets. It also finishes
    /// Prepare* entries that have sat still for `stuck_after_ms` — a coordinator that
    /// died mid-dispatch on another broker, a marker that failed and was not retried
    /// by its client, queued markers that have since been applied, or a `kaasctl txn
    /// abort` whose queued markers were written after it stopped waiting.
    pub async fn reap(&self, broker: &Cluster, stuck_after_ms: i64) {
        self.sweep(broker, stuck_after_ms, true).await;
    }

    pub(super) async fn sweep(&self, broker: &Cluster, stuck_after_ms: i64, abort_overdue: bool) {
        // The Prepare* entries seen this sweep: sightings of others (finished, or of
        // slots no longer owned here) are forgotten after it.
        let mut seen = HashSet::new();
        for slot in 0..SLOTS {
            if !broker.owns_txn_slot(slot) {
                continue;
            }
            // A lock-free look first: most slots need nothing.
            let now = now_ms();
            let expiration = broker.config.transactional_id_expiration_ms;
            // Prepare* entries noted as seen now (first sightings kept), then judged by
            // `sat_still`, the rule the slot's sweep applies again under the lock.
            let looked = self.visit(slot, |st| {
                let prepares: Vec<&TxnEntry> = st.entries().values().filter(|e| e.state.is_prepare()).collect();
                let keys: Vec<PrepareKey> = prepares.iter().map(|e| prepare_key(e)).collect();
                self.note_prepares(&keys, &mut seen);
                prepares.iter().any(|e| self.sat_still(e, now, stuck_after_ms))
                    || (abort_overdue
                        && st
                            .entries()
                            .values()
                            .any(|e| e.is_overdue(now) || e.is_expired(now, expiration)))
            });
            let needs_work = match looked {
                Ok(due) => due,
                Err(e) => {
                    error!(slot, error = %e, "transaction slot unreadable; its transactional ids get COORDINATOR_NOT_AVAILABLE until it is repaired");
                    continue;
                }
            };
            if !needs_work {
                continue;
            }
            if let Err(e) = self.sweep_slot(broker, slot, stuck_after_ms, abort_overdue).await {
                error!(slot, error = %e, "transaction sweep of a slot failed; retried at the next tick");
            }
        }
        self.prepare_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| seen.contains(k));
    }

    pub(super) async fn sweep_slot(
        &self,
        broker: &Cluster,
        slot: u32,
        stuck_after_ms: i64,
        abort_overdue: bool,
    ) -> Result<(), CoordError> {
        let now = now_ms();
        let held = self.lock_slot_within(slot, SLOT_LOCK_WAIT_BACKGROUND).await?;
        let mut aborted = Vec::new();
        if abort_overdue {
            let expiration = broker.config.transactional_id_expiration_ms;
            let expired: Vec<String> = self.with_held(&held, |st| {
                st.entries()
                    .values()
                    .filter(|e| e.is_expired(now, expiration))
                    .map(|e| e.transactional_id.clone())
                    .collect()
            })?;
            if !expired.is_empty() {
                for tid in &expired {
                    info!(transactional_id = %tid, "transactional id expired (transactional.id.expiration.ms)");
                }
                let ops: Vec<SlotOp> = expired.into_iter().map(SlotOp::Remove).collect();
                self.record(&held, &ops, now, Durable::Later).await?;
            }
            let actor = self.actor();
            aborted = self.with_held(&held, |st| {
                st.entries()
                    .values()
                    .filter(|e| e.is_overdue(now))
                    .filter_map(|e| txn::force_abort(e, "transaction timeout", now, &actor))
                    .collect::<Vec<_>>()
            })?;
            if !aborted.is_empty() {
                let ops: Vec<SlotOp> = aborted.iter().cloned().map(SlotOp::Put).collect();
                // Durable before the ABORT markers.
                self.record(&held, &ops, now, Durable::Now).await?;
            }
        }
        for entry in &aborted {
            warn!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, "aborting transaction past its timeout");
            // The abort goes on without the broadcast (its ABORT markers fence the
            // epoch where they land, and produce-time verification refuses it
            // everywhere); the failure is surfaced, not swallowed.
            if let Err(e) = self.fence(broker, entry.producer_id, entry.producer_epoch, &entry.transactional_id) {
                error!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, error = %e, "recording the timed-out producer's fence failed");
            }
        }
        let stuck: Vec<TxnEntry> = self.with_held(&held, |st| {
            st.entries()
                .values()
                .filter(|e| e.state.is_prepare() && (self.sat_still(e, now, stuck_after_ms) || aborted.contains(e)))
                .cloned()
                .collect()
        })?;
        let mut first_error = None;
        for entry in stuck {
            // The timed-out ones were made durable just above; the others were read
            // from the files and are synced by the finish first.
            let made_durable_here = aborted.contains(&entry).then(Instant::now);
            match self.finish_held(broker, &held, &entry, made_durable_here, false).await {
                Ok(Finished::Completed) => {
                    info!(transactional_id = %entry.transactional_id, state = entry.state.as_str(), "finished a transaction left in a Prepare state")
                }
                Ok(_) => {}
                Err(e) => {
                    error!(transactional_id = %entry.transactional_id, error = %e, "could not finish transaction; retried at the next tick");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
