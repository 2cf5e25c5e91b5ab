//! The transaction coordinator: orchestrates kaas-core's pure transaction state
//! machine with the effects each transition needs, in an order that survives a crash
//! at any point:
//!
//! 1. persist the new slot entry (under the slot lock);
//! 2. on an epoch bump, fence the producer on every partition this broker leads and
//!    record the bump in this broker's fence log;
//! 3. for Prepare*, apply the offset hook (commit or discard staged offsets), write the
//!    markers (self-led partitions directly and durably, before any queue entry; others
//!    through the marker queue), then persist Complete*.
//!
//! A coordinator that dies between steps is finished by the next start (or owner) from
//! the slot file: [`TransactionCoordinator::recover`] completes every Prepare* entry,
//! and markers and offset hooks are idempotent.

use crate::broker::Broker;
use kaas_core::fence_log::FenceLog;
use kaas_core::marker_queue::{self, MarkerEntry, MarkerResult, MARKER_FORMAT_VERSION};
use kaas_core::now_ms;
use kaas_core::txn::{self, slot_for, Actor, EndOutcome, InitOutcome, TopicPartition, TxnEntry, TxnError, TxnState};
use kaas_core::txn_store::{TxnStateStore, SLOTS};
use kaas_core::VolumeError;
use std::sync::Mutex;
use tracing::{error, info, warn};

/// Why a coordinator request failed: a protocol answer, or the volume.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    #[error(transparent)]
    Txn(#[from] TxnError),
    #[error("transaction state unavailable: {0}")]
    Volume(#[from] VolumeError),
    #[error("this broker does not coordinate slot {0}")]
    NotCoordinator(u32),
}

impl CoordError {
    pub fn code(&self) -> i16 {
        match self {
            CoordError::Txn(e) => e.code(),
            // Retriable: the client keeps trying while an operator repairs the file.
            CoordError::Volume(_) => 15, // COORDINATOR_NOT_AVAILABLE
            CoordError::NotCoordinator(_) => 16,
        }
    }
}

/// What produce-time verification needs of an Ongoing transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OngoingTxn {
    producer_id: i64,
    epoch: i16,
    partitions: std::collections::BTreeSet<TopicPartition>,
}

pub struct TransactionCoordinator {
    store: TxnStateStore,
    broker_id: i32,
    /// Ongoing transactions as this broker last wrote or read them, so verifying a
    /// transactional produce costs a map lookup; a miss re-reads the slot file.
    ongoing: Mutex<std::collections::HashMap<String, OngoingTxn>>,
    /// This broker's outbound fence log; Err when the file on the volume is unreadable
    /// (bumps are then refused rather than recorded into a log that would be lost).
    fence_log: Mutex<Result<FenceLog, String>>,
}

impl TransactionCoordinator {
    pub fn new(volume: &kaas_core::Volume, broker_id: i32) -> Self {
        let fence_log = FenceLog::load(volume, broker_id).map_err(|e| {
            error!(error = %e, "own fence log unreadable: transactional epoch bumps are refused until it is repaired");
            e.to_string()
        });
        TransactionCoordinator {
            store: TxnStateStore::new(volume.clone()),
            broker_id,
            ongoing: Mutex::new(std::collections::HashMap::new()),
            fence_log: Mutex::new(fence_log),
        }
    }

    fn actor(&self) -> Actor {
        Actor::Broker { id: self.broker_id }
    }

    pub fn store(&self) -> &TxnStateStore {
        &self.store
    }

    fn check_owner(&self, broker: &Broker, slot: u32) -> Result<(), CoordError> {
        if broker.owns_txn_slot(slot) {
            Ok(())
        } else {
            Err(CoordError::NotCoordinator(slot))
        }
    }

    /// InitProducerId for a transactional id: (producer id, epoch).
    pub async fn init_producer_id(
        &self,
        broker: &Broker,
        tid: &str,
        timeout_ms: i32,
        claimed: (i64, i16),
    ) -> Result<(i64, i16), CoordError> {
        let slot = slot_for(tid);
        self.check_owner(broker, slot)?;
        if let Err(e) = &*self.fence_log.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(CoordError::Volume(VolumeError::Invalid {
                path: kaas_core::fence_log::fence_log_path(&broker.volume, self.broker_id),
                detail: e.clone(),
            }));
        }
        let now = now_ms();
        let mut alloc_error = None;
        let actor = self.actor();
        let outcome = self.store.update(slot, now, |entries| {
            let mut alloc = || match broker.next_producer_id() {
                Ok(id) => id,
                Err(e) => {
                    alloc_error = Some(e);
                    -1
                }
            };
            let outcome = txn::init_producer_id(entries.get(tid), tid, timeout_ms, claimed, now, &actor, &mut alloc);
            if alloc_error.is_some() {
                return (outcome, false);
            }
            let changed = match &outcome {
                InitOutcome::Ready { entry, .. } | InitOutcome::AbortFirst { entry } => {
                    let changed = entries.get(tid) != Some(entry);
                    entries.insert(tid.to_string(), entry.clone());
                    changed
                }
                InitOutcome::Reject(_) => false,
            };
            (outcome, changed)
        })?;
        if let Some(e) = alloc_error {
            return Err(e.into());
        }
        match outcome {
            InitOutcome::Ready { entry, fence } => {
                if let Some((pid, epoch)) = fence {
                    self.fence(broker, pid, epoch, tid)?;
                }
                info!(
                    transactional_id = tid,
                    producer_id = entry.producer_id,
                    epoch = entry.producer_epoch,
                    "InitProducerId"
                );
                Ok((entry.producer_id, entry.producer_epoch))
            }
            InitOutcome::AbortFirst { entry } => {
                info!(
                    transactional_id = tid,
                    producer_id = entry.producer_id,
                    epoch = entry.producer_epoch,
                    "rejoin while Ongoing: aborting the open transaction first"
                );
                self.fence(broker, entry.producer_id, entry.producer_epoch, tid)?;
                self.finish(broker, &entry).await?;
                Err(TxnError::ConcurrentTransactions.into())
            }
            InitOutcome::Reject(e) => Err(e.into()),
        }
    }

    /// Raises the producer's epoch on every partition this broker leads and records
    /// the bump in this broker's fence log for the other brokers' watchers.
    pub fn fence(&self, broker: &Broker, producer_id: i64, epoch: i16, tid: &str) -> Result<(), CoordError> {
        broker.fence_producer_epoch(producer_id, epoch);
        let mut guard = self.fence_log.lock().unwrap_or_else(|p| p.into_inner());
        let log = guard.as_mut().map_err(|e| VolumeError::Invalid {
            path: kaas_core::fence_log::fence_log_path(&broker.volume, self.broker_id),
            detail: e.clone(),
        })?;
        if log.append(producer_id, epoch, Some(tid), now_ms()) {
            log.save(&broker.volume)?;
        }
        Ok(())
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn.
    pub fn add(
        &self,
        broker: &Broker,
        tid: &str,
        pid: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        groups: &[String],
    ) -> Result<(), CoordError> {
        let slot = slot_for(tid);
        self.check_owner(broker, slot)?;
        let now = now_ms();
        let actor = self.actor();
        let entry = self.store.update(slot, now, |entries| {
            let Some(current) = entries.get(tid) else {
                return (Err(TxnError::InvalidProducerIdMapping), false);
            };
            match txn::add_to_txn(current, pid, epoch, partitions, groups, now, &actor) {
                Ok(Some(entry)) => {
                    entries.insert(tid.to_string(), entry.clone());
                    (Ok(entry), true)
                }
                Ok(None) => (Ok(current.clone()), false),
                Err(e) => (Err(e), false),
            }
        })??;
        self.remember(tid, Some(&entry));
        Ok(())
    }

    /// A transactional produce must belong to an Ongoing transaction of this producer
    /// that includes the partition (Apache's transaction verification, KIP-890):
    /// otherwise its records could open a transaction no coordinator will ever end.
    pub fn verify_produce(
        &self,
        tid: &str,
        producer_id: i64,
        epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), CoordError> {
        let matches = |o: &OngoingTxn| o.producer_id == producer_id && o.epoch == epoch && o.partitions.contains(tp);
        if self
            .ongoing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(tid)
            .is_some_and(matches)
        {
            return Ok(());
        }
        let entry = self.store.get(tid)?;
        self.remember(tid, entry.as_ref());
        match entry {
            Some(e) if e.producer_id == producer_id && e.producer_epoch > epoch => Err(TxnError::ProducerFenced.into()),
            Some(e)
                if e.state == TxnState::Ongoing
                    && e.producer_id == producer_id
                    && e.producer_epoch == epoch
                    && e.partitions.contains(tp) =>
            {
                Ok(())
            }
            _ => Err(TxnError::InvalidTxnState.into()),
        }
    }

    /// Updates the Ongoing cache from an entry just written or read.
    fn remember(&self, tid: &str, entry: Option<&TxnEntry>) {
        let mut cache = self.ongoing.lock().unwrap_or_else(|p| p.into_inner());
        match entry {
            Some(e) if e.state == TxnState::Ongoing => {
                cache.insert(
                    tid.to_string(),
                    OngoingTxn {
                        producer_id: e.producer_id,
                        epoch: e.producer_epoch,
                        partitions: e.partitions.clone(),
                    },
                );
            }
            _ => {
                cache.remove(tid);
            }
        }
    }

    /// The current entry, checked against the producer's identity (TxnOffsetCommit).
    pub fn verify_ongoing(
        &self,
        broker: &Broker,
        tid: &str,
        pid: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), CoordError> {
        self.check_owner(broker, slot_for(tid))?;
        let entry = self.store.get(tid)?.ok_or(TxnError::InvalidProducerIdMapping)?;
        if entry.producer_id != pid {
            return Err(TxnError::InvalidProducerIdMapping.into());
        }
        if entry.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced.into());
        }
        if entry.state != TxnState::Ongoing || !entry.groups.contains(group) {
            return Err(TxnError::InvalidTxnState.into());
        }
        Ok(())
    }

    /// EndTxn: Prepare*, offsets, markers, Complete*.
    pub async fn end_txn(
        &self,
        broker: &Broker,
        tid: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), CoordError> {
        let slot = slot_for(tid);
        self.check_owner(broker, slot)?;
        let now = now_ms();
        let actor = self.actor();
        let outcome = self.store.update(slot, now, |entries| {
            let Some(current) = entries.get(tid) else {
                return (Err(TxnError::InvalidProducerIdMapping), false);
            };
            match txn::end_txn(current, pid, epoch, commit, now, &actor) {
                Ok(EndOutcome::Prepare(entry)) => {
                    entries.insert(tid.to_string(), entry.clone());
                    (Ok(EndOutcome::Prepare(entry)), true)
                }
                other => (other, false),
            }
        })??;
        match outcome {
            EndOutcome::Prepare(entry) => {
                kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_PREPARE);
                self.finish(broker, &entry).await?;
                info!(
                    transactional_id = tid,
                    producer_id = pid,
                    epoch,
                    commit,
                    "transaction completed"
                );
                Ok(())
            }
            EndOutcome::AlreadyComplete => Ok(()),
            EndOutcome::InProgress => {
                // Another request (or recovery) is completing it: help it along.
                if let Some(entry) = self.store.get(tid)? {
                    if entry.state.is_prepare() {
                        self.finish(broker, &entry).await?;
                        return Ok(());
                    }
                }
                Ok(())
            }
        }
    }

    /// Completes a Prepare* entry: offset hook, markers, Complete*. Idempotent.
    pub async fn finish(&self, broker: &Broker, entry: &TxnEntry) -> Result<(), CoordError> {
        let commit = match entry.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return Ok(()),
        };
        for group in &entry.groups {
            broker.groups.finish_pending(group, entry.producer_id, commit)?;
        }
        let mut queued: std::collections::BTreeMap<i32, Vec<TopicPartition>> = std::collections::BTreeMap::new();
        for tp in &entry.partitions {
            match broker.partition_leader(&tp.topic, tp.partition) {
                Some(leader) if leader != self.broker_id => queued.entry(leader).or_default().push(tp.clone()),
                _ => {
                    broker
                        .write_marker(tp, entry.producer_id, entry.producer_epoch, commit)
                        .await
                }
            }
        }
        for (leader, partitions) in queued {
            let marker = MarkerEntry {
                version: MARKER_FORMAT_VERSION,
                transactional_id: entry.transactional_id.clone(),
                producer_id: entry.producer_id,
                producer_epoch: entry.producer_epoch,
                result: if commit {
                    MarkerResult::Commit
                } else {
                    MarkerResult::Abort
                },
                coordinator_epoch: 0,
                partitions,
                enqueued_by: self.broker_id,
                enqueued_ms: now_ms(),
            };
            marker_queue::enqueue(&broker.volume, leader, &marker)?;
        }
        kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_MARKERS);
        let slot = slot_for(&entry.transactional_id);
        let now = now_ms();
        let actor = self.actor();
        self.store.update(slot, now, |entries| {
            let Some(current) = entries.get(&entry.transactional_id) else {
                return ((), false);
            };
            // Only complete the transaction we prepared; a newer state wins.
            if current.producer_id != entry.producer_id
                || current.producer_epoch != entry.producer_epoch
                || current.state != entry.state
            {
                return ((), false);
            }
            match txn::complete(current, now, &actor) {
                Some(done) => {
                    entries.insert(entry.transactional_id.clone(), done);
                    ((), true)
                }
                None => ((), false),
            }
        })?;
        Ok(())
    }

    /// At start (and on taking a slot over): completes every Prepare* entry left by a
    /// coordinator that died between PrepareCommit/PrepareAbort and its markers.
    pub async fn recover(&self, broker: &Broker) {
        for slot in 0..SLOTS {
            if !broker.owns_txn_slot(slot) {
                continue;
            }
            let file = match self.store.read_slot(slot) {
                Ok(f) => f,
                Err(e) => {
                    error!(slot, error = %e, "transaction slot unreadable; its transactional ids get COORDINATOR_NOT_AVAILABLE until it is repaired");
                    continue;
                }
            };
            for entry in file.entries.values().filter(|e| e.state.is_prepare()) {
                info!(transactional_id = %entry.transactional_id, state = entry.state.as_str(), "completing a transaction left in a Prepare state");
                if let Err(e) = self.finish(broker, entry).await {
                    error!(transactional_id = %entry.transactional_id, error = %e, "could not complete transaction");
                }
            }
        }
    }

    /// The timeout reaper: aborts every overdue Ongoing transaction of the slots this
    /// broker owns, with an epoch bump, discarding staged offsets. It also finishes
    /// Prepare* entries that have sat still for `stuck_after_ms` — a coordinator that
    /// died mid-dispatch on another broker, or a `kaasctl txn abort` whose queued
    /// markers were written after it stopped waiting (markers are idempotent).
    pub async fn reap(&self, broker: &Broker, stuck_after_ms: i64) {
        let now = now_ms();
        let actor = self.actor();
        for slot in 0..SLOTS {
            if !broker.owns_txn_slot(slot) {
                continue;
            }
            if let Ok(file) = self.store.read_slot(slot) {
                for entry in file.entries.values() {
                    if entry.state.is_prepare() && now - entry.last_update_ms > stuck_after_ms {
                        info!(transactional_id = %entry.transactional_id, state = entry.state.as_str(), "finishing a transaction left in a Prepare state");
                        if let Err(e) = self.finish(broker, entry).await {
                            error!(transactional_id = %entry.transactional_id, error = %e, "could not finish transaction");
                        }
                    }
                }
            }
            let aborted = self.store.update(slot, now, |entries| {
                let mut aborted = Vec::new();
                for entry in entries.values_mut() {
                    if entry.is_overdue(now) {
                        if let Some(next) = txn::force_abort(entry, "transaction timeout", now, &actor) {
                            *entry = next.clone();
                            aborted.push(next);
                        }
                    }
                }
                let changed = !aborted.is_empty();
                (aborted, changed)
            });
            let aborted = match aborted {
                Ok(a) => a,
                Err(e) => {
                    warn!(slot, error = %e, "reaper skipped an unreadable slot");
                    continue;
                }
            };
            for entry in aborted {
                warn!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, "aborting transaction past its timeout");
                if let Err(e) = self.fence(broker, entry.producer_id, entry.producer_epoch, &entry.transactional_id) {
                    error!(error = %e, "fencing a timed-out producer failed");
                }
                if let Err(e) = self.finish(broker, &entry).await {
                    error!(transactional_id = %entry.transactional_id, error = %e, "could not complete the timed-out abort");
                }
            }
        }
    }
}
