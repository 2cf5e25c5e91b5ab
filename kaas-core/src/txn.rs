//! The transaction coordinator's state: one [`TxnEntry`] per transactional.id, and the
//! pure transitions of the state machine (KIP-360 InitProducerId, AddPartitionsToTxn /
//! AddOffsetsToTxn, EndTxn through the Prepare states, completion, the timeout reaper,
//! an operator's force-abort). Every function here takes `now` and returns the new
//! entry (or an error code); persisting it is [`crate::txn_store`]'s job and acting on
//! it (markers, fences, offsets) the caller's.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

/// Transitions remembered per entry for `kaasctl txn timeline`.
pub const HISTORY_LEN: usize = 32;
/// Apache's transaction.max.timeout.ms default.
pub const MAX_TRANSACTION_TIMEOUT_MS: i32 = 900_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// Every state, in the order tools list them.
    pub const ALL: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];

    /// Apache's names (kafka-transactions.sh, DescribeTransactions).
    pub fn as_str(&self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }
    pub fn is_prepare(&self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
    /// A transaction is open or being finished: Ongoing or Prepare*.
    pub fn is_in_flight(&self) -> bool {
        *self == TxnState::Ongoing || self.is_prepare()
    }
}

/// Who made a transition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Actor {
    Broker { id: i32 },
    Admin { tool: String, user: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub at_ms: i64,
    pub from: TxnState,
    pub to: TxnState,
    pub producer_id: i64,
    pub epoch: i16,
    /// Why: "InitProducerId", "AddPartitionsToTxn", "EndTxn(commit)", "timeout", ...
    pub reason: String,
    pub by: Actor,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnEntry {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (Apache's lastProducerEpoch): a claim equal to it
    /// is a retry of that bump. -1 when none.
    pub last_epoch: i16,
    /// The producer id before the last rotation: a claim of it with an exhausted epoch
    /// is a retry of that rotation. -1 when none.
    pub last_producer_id: i64,
    pub state: TxnState,
    pub timeout_ms: i32,
    pub partitions: BTreeSet<TopicPartition>,
    pub groups: BTreeSet<String>,
    /// When the current transaction began (first AddPartitions/AddOffsets); -1 if none.
    pub txn_start_ms: i64,
    /// Number of the current (or last) transaction of this entry, counted up when one
    /// begins. With (producer id, epoch) it names one transaction, also among several
    /// consecutive ones at one epoch: markers, queue entries and every finish carry it.
    /// 0 in files written before it existed.
    #[serde(default)]
    pub txn_seq: u64,
    /// Set in a Prepare state once the markers for partitions other brokers lead are
    /// durably queued: the entry completes when those queue entries are gone (applied).
    /// Unset with queue entries on the volume, they may not be durable (written
    /// without fsync for leaders notified at once): their absence proves nothing.
    #[serde(default)]
    pub markers_queued: bool,
    pub last_update_ms: i64,
    /// Oldest first, at most [`HISTORY_LEN`].
    pub history: VecDeque<Transition>,
}

/// A Kafka error code the caller answers with, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("INVALID_REQUEST")]
    InvalidRequest,
    #[error("PRODUCER_FENCED")]
    ProducerFenced,
    #[error("INVALID_PRODUCER_ID_MAPPING")]
    InvalidProducerIdMapping,
    #[error("INVALID_TXN_STATE")]
    InvalidTxnState,
    #[error("CONCURRENT_TRANSACTIONS")]
    ConcurrentTransactions,
    #[error("INVALID_TRANSACTION_TIMEOUT")]
    InvalidTransactionTimeout,
}

impl TxnError {
    /// The Kafka wire error code.
    pub fn code(&self) -> i16 {
        match self {
            TxnError::InvalidRequest => 42,
            TxnError::ProducerFenced => 90,
            TxnError::InvalidProducerIdMapping => 49,
            TxnError::InvalidTxnState => 48,
            TxnError::ConcurrentTransactions => 51,
            TxnError::InvalidTransactionTimeout => 50,
        }
    }
}

/// An epoch is exhausted one short of i16::MAX: the last value is kept back so the
/// coordinator can always fence (Apache's isEpochExhausted).
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

impl TxnEntry {
    pub(crate) fn transition(&mut self, to: TxnState, reason: &str, by: &Actor, now_ms: i64) {
        if self.history.len() == HISTORY_LEN {
            self.history.pop_front();
        }
        self.history.push_back(Transition {
            at_ms: now_ms,
            from: self.state,
            to,
            producer_id: self.producer_id,
            epoch: self.producer_epoch,
            reason: reason.to_string(),
            by: by.clone(),
        });
        self.state = to;
        self.last_update_ms = now_ms;
    }

    /// Has the entry sat unused past `transactional.id.expiration.ms`? Only entries
    /// with no transaction in flight (Empty, Complete*) ever expire.
    pub fn is_expired(&self, now_ms: i64, expiration_ms: i64) -> bool {
        matches!(
            self.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) && now_ms - self.last_update_ms > expiration_ms
    }

    /// Is the open transaction past its timeout?
    pub fn is_overdue(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing && self.txn_start_ms >= 0 && now_ms > self.txn_start_ms + self.timeout_ms as i64
    }

    fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }
}

/// What InitProducerId decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Persist `entry` and answer its (producer id, epoch). `fence` is set when the
    /// epoch was bumped on an existing producer id (epoch > 0): fence it everywhere.
    Ready { entry: TxnEntry, fence: Option<(i64, i16)> },
    /// The entry was Ongoing: persist `entry` (PrepareAbort at epoch + 1), fence that
    /// epoch, write the ABORT markers, complete, then answer CONCURRENT_TRANSACTIONS.
    AbortFirst { entry: TxnEntry },
    /// Answer this error; nothing changes.
    Reject(TxnError),
}

/// KIP-360 InitProducerId for a transactional id (the seed's rules, Apache 3.7's
/// prepareInitProducerIdTransit). `claimed` is the request's (producer id, epoch), both
/// -1 when the producer claims nothing. `new_pid` allocates a fresh producer id.
pub fn init_producer_id(
    existing: Option<&TxnEntry>,
    transactional_id: &str,
    timeout_ms: i32,
    claimed: (i64, i16),
    now_ms: i64,
    by: &Actor,
    new_pid: &mut dyn FnMut() -> i64,
) -> InitOutcome {
    let (claimed_pid, claimed_epoch) = claimed;
    if (claimed_pid == -1) != (claimed_epoch == -1) {
        return InitOutcome::Reject(TxnError::InvalidRequest);
    }
    if timeout_ms <= 0 || timeout_ms > MAX_TRANSACTION_TIMEOUT_MS {
        return InitOutcome::Reject(TxnError::InvalidTransactionTimeout);
    }
    let Some(current) = existing else {
        // No entry: any claim is accepted (a producer recovering from
        // UNKNOWN_PRODUCER_ID); a fresh producer id at epoch 0.
        let mut entry = TxnEntry {
            transactional_id: transactional_id.to_string(),
            producer_id: new_pid(),
            producer_epoch: 0,
            last_epoch: -1,
            last_producer_id: -1,
            state: TxnState::Empty,
            timeout_ms,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            txn_start_ms: -1,
            txn_seq: 0,
            markers_queued: false,
            last_update_ms: now_ms,
            history: VecDeque::new(),
        };
        entry.transition(TxnState::Empty, "InitProducerId (new)", by, now_ms);
        return InitOutcome::Ready { entry, fence: None };
    };
    let claim = (claimed_pid != -1).then_some((claimed_pid, claimed_epoch));
    if let Some((pid, epoch)) = claim {
        // The claimed producer id must be the entry's, or its previous one with an
        // exhausted epoch (a retry of a rotation whose answer was lost).
        let valid = pid == current.producer_id || (pid == current.last_producer_id && is_epoch_exhausted(epoch));
        if !valid {
            return InitOutcome::Reject(TxnError::ProducerFenced);
        }
    }
    match current.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => InitOutcome::Reject(TxnError::ConcurrentTransactions),
        TxnState::Ongoing => {
            // Abort the open transaction at a fencing epoch that is never handed out:
            // the producer's retry bumps a second time onto the clean entry.
            let mut entry = current.clone();
            entry.producer_epoch += 1;
            entry.last_epoch = -1;
            entry.transition(
                TxnState::PrepareAbort,
                "InitProducerId while Ongoing: abort first",
                by,
                now_ms,
            );
            InitOutcome::AbortFirst { entry }
        }
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
            let mut entry = current.clone();
            entry.timeout_ms = timeout_ms;
            let state = entry.state;
            if is_epoch_exhausted(entry.producer_epoch) && claim.is_none_or(|(_, e)| e == entry.producer_epoch) {
                entry.last_producer_id = entry.producer_id;
                entry.last_epoch = if claim.is_some() { entry.producer_epoch } else { -1 };
                entry.producer_id = new_pid();
                entry.producer_epoch = 0;
                // A fresh producer with no transaction yet (the transactions seed:
                // rotation "allocates a fresh PID and resets to Empty"; Apache's
                // prepareProducerIdRotation): nothing of the last transaction is the
                // new producer id's.
                entry.partitions.clear();
                entry.groups.clear();
                entry.txn_start_ms = -1;
                entry.transition(
                    TxnState::Empty,
                    "InitProducerId: epoch exhausted, rotated to a fresh producer id",
                    by,
                    now_ms,
                );
                return InitOutcome::Ready { entry, fence: None };
            }
            match claim {
                Some((_, epoch)) if epoch != entry.producer_epoch => {
                    if epoch == entry.last_epoch {
                        // A retry of the bump (or rotation) whose answer was lost:
                        // the current identity, unchanged. A bump's fence comes
                        // with it again (fencing is idempotent): the first attempt
                        // may have stopped after its line was durable and before
                        // its fence was raised and recorded.
                        let fence = (claimed_pid == current.producer_id)
                            .then_some((current.producer_id, current.producer_epoch));
                        return InitOutcome::Ready {
                            entry: current.clone(),
                            fence,
                        };
                    }
                    InitOutcome::Reject(TxnError::ProducerFenced)
                }
                _ => {
                    // Only a claimed bump can be retried; an unclaimed one is a new
                    // instance, and remembering the old epoch would let the instance
                    // it replaced claim its way onto the new one (Apache resets
                    // lastProducerEpoch to NO_PRODUCER_EPOCH here).
                    entry.last_epoch = if claim.is_some() { entry.producer_epoch } else { -1 };
                    entry.producer_epoch += 1;
                    entry.transition(state, "InitProducerId: epoch bump", by, now_ms);
                    let fence = Some((entry.producer_id, entry.producer_epoch));
                    InitOutcome::Ready { entry, fence }
                }
            }
        }
    }
}

/// AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with these partitions and groups.
/// Returns None when nothing would change (a retry): no write needed.
pub fn add_to_txn(
    current: &TxnEntry,
    producer_id: i64,
    epoch: i16,
    partitions: &[TopicPartition],
    groups: &[String],
    now_ms: i64,
    by: &Actor,
) -> Result<Option<TxnEntry>, TxnError> {
    current.check_producer(producer_id, epoch)?;
    if current.state.is_prepare() {
        return Err(TxnError::ConcurrentTransactions);
    }
    if current.state == TxnState::Ongoing
        && partitions.iter().all(|p| current.partitions.contains(p))
        && groups.iter().all(|g| current.groups.contains(g))
    {
        return Ok(None);
    }
    let mut entry = current.clone();
    if entry.state != TxnState::Ongoing {
        entry.partitions.clear();
        entry.groups.clear();
        entry.txn_start_ms = now_ms;
        entry.txn_seq += 1;
        entry.markers_queued = false;
    }
    entry.partitions.extend(partitions.iter().cloned());
    entry.groups.extend(groups.iter().cloned());
    let reason = if groups.is_empty() {
        "AddPartitionsToTxn"
    } else {
        "AddOffsetsToTxn"
    };
    entry.transition(TxnState::Ongoing, reason, by, now_ms);
    Ok(Some(entry))
}

/// What EndTxn decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Persist this PrepareCommit/PrepareAbort entry, then write markers, then complete.
    Prepare(TxnEntry),
    /// Already done in this direction (a retry): answer success, change nothing.
    AlreadyComplete,
    /// Still being completed in this direction: retry later.
    InProgress,
}

/// EndTxn(commit or abort).
pub fn end_txn(
    current: &TxnEntry,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    now_ms: i64,
    by: &Actor,
) -> Result<EndOutcome, TxnError> {
    if producer_id != current.producer_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    // A retry from the producer whose answer was lost is matched on the epoch that
    // completed the transaction; anything older is a zombie.
    if epoch != current.producer_epoch {
        return Err(TxnError::ProducerFenced);
    }
    match (current.state, commit) {
        (TxnState::Ongoing, _) => {
            let mut entry = current.clone();
            let (to, reason) = if commit {
                (TxnState::PrepareCommit, "EndTxn(commit)")
            } else {
                (TxnState::PrepareAbort, "EndTxn(abort)")
            };
            entry.transition(to, reason, by, now_ms);
            Ok(EndOutcome::Prepare(entry))
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(EndOutcome::AlreadyComplete),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Ok(EndOutcome::InProgress),
        (TxnState::PrepareCommit, false) | (TxnState::PrepareAbort, true) => Err(TxnError::InvalidTxnState),
        (TxnState::CompleteCommit, false) | (TxnState::CompleteAbort, true) | (TxnState::Empty, _) => {
            Err(TxnError::InvalidTxnState)
        }
    }
}

/// Prepare* → Complete*, once every marker has landed. Clears partitions and groups.
pub fn complete(current: &TxnEntry, now_ms: i64, by: &Actor) -> Option<TxnEntry> {
    let to = match current.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort => TxnState::CompleteAbort,
        _ => return None,
    };
    let mut entry = current.clone();
    entry.partitions.clear();
    entry.groups.clear();
    entry.txn_start_ms = -1;
    entry.markers_queued = false;
    entry.transition(to, "markers written", by, now_ms);
    Some(entry)
}

/// Whether `current` is still exactly the Prepare* transaction `expected` was read as:
/// same producer id, epoch, transaction number and state. Every finish (markers,
/// offsets, completion) checks this under the slot lock, so a stale copy of
/// transaction N can never act on N+1.
pub fn is_same_prepared(current: &TxnEntry, expected: &TxnEntry) -> bool {
    current.state.is_prepare()
        && current.state == expected.state
        && current.producer_id == expected.producer_id
        && current.producer_epoch == expected.producer_epoch
        && current.txn_seq == expected.txn_seq
        && current.txn_start_ms == expected.txn_start_ms
}

/// Aborts an Ongoing transaction from outside the producer (timeout reaper, operator):
/// PrepareAbort at epoch + 1, so the producer's current epoch is fenced. None when the
/// entry is not Ongoing.
pub fn force_abort(current: &TxnEntry, reason: &str, now_ms: i64, by: &Actor) -> Option<TxnEntry> {
    if current.state != TxnState::Ongoing {
        return None;
    }
    let mut entry = current.clone();
    // The epoch is kept below i16::MAX by rotation, so there is always one to fence with.
    entry.producer_epoch = entry.producer_epoch.saturating_add(1);
    entry.last_epoch = -1;
    entry.transition(TxnState::PrepareAbort, reason, by, now_ms);
    Some(entry)
}

/// How many transaction slots there are: the transactional ids hash into 50, as in
/// Kafka's `__transaction_state` (each a `slot-N` file set in `txn_store`).
pub const SLOTS: u32 = 50;

/// The slot of a transactional id: FNV-1a 32-bit over its UTF-8 bytes, modulo 50.
pub fn slot_for(transactional_id: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in transactional_id.as_bytes() {
        hash ^= *b as u32;
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % SLOTS
}

#[cfg(test)]
mod tests;
