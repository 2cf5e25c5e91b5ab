//! The transaction coordinator: orchestrates kaas-core's pure transaction state
//! machine with the effects each transition needs, in an order that survives a crash
//! at any point:
//!
//! 1. persist the new slot entry (under the slot lock: one journal line, see
//!    `kaas_core::txn_store`);
//! 2. on an epoch bump, fence the producer on every partition this broker leads and
//!    record the bump in this broker's fence log;
//! 3. for Prepare*, apply the offset hook (commit or discard the offsets staged at the
//!    transaction's epoch), write the markers (self-led partitions directly and
//!    durably; others through the marker queue, named by the transaction), then
//!    persist Complete* — only once every marker is in its log.
//!
//! Every finish is a compare-and-set: it runs with the slot lock held from the
//! re-read of the entry to the write of Complete*, and acts only if the entry is still
//! the same Prepare* transaction (producer id, epoch, transaction number, state). So a
//! stale copy of transaction N (a reaper's old read, a retried EndTxn, a late queue
//! entry) can never write its marker onto transaction N+1's records or commit N+1's
//! staged offsets, and a failed marker leaves the entry in Prepare* to be retried.
//!
//! Durability: a transition the next step depends on (Prepare* before its markers, a
//! timeout's PrepareAbort, InitProducerId's and AddPartitionsToTxn's answer) waits
//! for its journal line's fdatasync, shared with the transitions of the same slot
//! appended meanwhile (group commit: InitProducerId and AddPartitionsToTxn let the
//! slot go before they wait). What recovery redoes anyway — markers_queued,
//! Complete*, an expiry — is not waited for: the next sync of its slot, or the
//! background flush (`--flush-interval-ms`), makes it durable; a crash before that leaves the entry in its
//! Prepare state, and recovery finishes it again (markers and offset hooks are
//! idempotent). So a transaction answers after three fdatasyncs: AddPartitionsToTxn,
//! Prepare*, and the marker with its batch.
//!
//! Slot locks: one async mutex per slot in this process, then the slot's file lock for
//! other processes — kaasctl and other brokers — tried without blocking, with growing
//! pauses, up to a deadline ([`SLOT_LOCK_WAIT`]): a paused or stuck holder costs its
//! slot's callers a retriable error, never a thread. The async mutex keeps two tasks
//! of this process from polling each other's file lock while one of them awaits a
//! marker's fsync.
//!
//! A coordinator that dies between steps is finished by the next start (or owner) from
//! the slot file: [`TransactionCoordinator::recover`] finishes every Prepare* entry,
//! and markers and offset hooks are idempotent.

use crate::cluster::{Cluster, MarkerError};
use crate::groups::GroupCoordinator;
use kaas_core::fence_log::FenceLog;
use kaas_core::marker_queue::{self, MarkerEntry, MarkerResult};
use kaas_core::now_ms;
use kaas_core::txn::{self, slot_for, Actor, EndOutcome, InitOutcome, TopicPartition, TxnEntry, TxnError, TxnState};
use kaas_core::txn_store::{
    GroupCommit, Mark, Sighting, SlotLock, SlotLockId, SlotOp, SlotState, TxnStateStore, UnnamedHold, SLOTS,
};
use kaas_core::VolumeError;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing::{debug, error, info, warn};

/// Why a coordinator request failed: a protocol answer, or the volume.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    #[error(transparent)]
    Txn(#[from] TxnError),
    #[error("transaction state unavailable: {0}")]
    Volume(#[from] VolumeError),
    #[error("this broker does not coordinate slot {0}")]
    NotCoordinator(u32),
    /// This broker, just started beside others, takes the slot once its peers have
    /// seen it serve: COORDINATOR_LOAD_IN_PROGRESS, which clients retry in place.
    #[error("transaction slot {0} is taken here once the peers have seen this broker serve")]
    Loading(u32),
    /// [`CoordError::Loading`] for a group (TxnOffsetCommit).
    #[error("group {0:?} is taken here once the peers have seen this broker serve")]
    GroupLoading(String),
    #[error("this broker does not coordinate group {0:?}")]
    NotGroupCoordinator(String),
    /// A marker could not be written: the transaction stays in its Prepare state and
    /// is retried (by the client's retry, the reaper, or the next start).
    #[error(transparent)]
    Marker(#[from] MarkerError),
    /// The slot's file lock stayed held by another process (or kaasctl) for the whole
    /// wait: a paused or stuck holder never stalls this broker for longer.
    #[error("transaction slot {slot} is locked by another process; gave up after {waited_ms} ms")]
    SlotBusy { slot: u32, waited_ms: u64 },
    /// TxnOffsetCommit: the committing member is no longer the group's (checked again
    /// under the group's lock, with the staging).
    #[error("the committing member was refused: {0:?}")]
    MemberRefused(kafka_protocol::error::ResponseError),
}

impl CoordError {
    pub fn code(&self) -> i16 {
        match self {
            CoordError::Txn(e) => e.code(),
            // Retriable: the client keeps trying while an operator repairs the file.
            CoordError::Volume(_) => 15, // COORDINATOR_NOT_AVAILABLE
            CoordError::NotCoordinator(_) | CoordError::NotGroupCoordinator(_) => 16,
            CoordError::Loading(_) | CoordError::GroupLoading(_) => 14, // COORDINATOR_LOAD_IN_PROGRESS
            // Retriable: the outcome is decided and durable, its markers are not yet.
            CoordError::Marker(_) => 51, // CONCURRENT_TRANSACTIONS
            // Retriable: the client tries again until the holder lets go (or dies).
            CoordError::SlotBusy { .. } => 14, // COORDINATOR_LOAD_IN_PROGRESS
            CoordError::MemberRefused(e) => e.code(),
        }
    }
}

/// TxnOffsetCommit is answered by the group's coordinator.
fn check_group_owner(broker: &Cluster, group: &str) -> Result<(), CoordError> {
    if broker.owns_group(group) {
        Ok(())
    } else if broker.takes_soon(&kaas_core::ownership::group_key(group)) {
        Err(CoordError::GroupLoading(group.to_string()))
    } else {
        Err(CoordError::NotGroupCoordinator(group.to_string()))
    }
}

/// How far a finish got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Every marker is in its log; the entry is Complete*.
    Completed,
    /// Markers for partitions other brokers lead are queued and not yet applied;
    /// the entry stays Prepare* until they are (the outcome is durable).
    Queued,
    /// The entry is no longer the Prepare* transaction asked for: someone else
    /// finished it, or it moved on. Nothing was done.
    Stale,
}

/// A partition leader's notice (docs/cluster.md#markers-across-brokers): `entry` holds
/// the markers of the Prepare* transaction `prepared` asked of it, as a queue entry
/// in `marker_queue/to-<leader>/` would — on the volume only when the slot entry has
/// `markers_queued` (durable entries announced again); a fast finish writes it there
/// only if the notice fails. The broker's peer links send it as WriteTxnMarkers and
/// report every outcome to [`TransactionCoordinator::notice_answered`]. The volume
/// stays the record: the Prepare* line is durable before any notice, and a notice
/// lost anywhere leaves a durable entry for the leader's poll.
#[derive(Debug, Clone)]
pub struct MarkerNotice {
    pub leader: i32,
    pub entry: MarkerEntry,
    pub prepared: TxnEntry,
    /// When the Prepare* was durable (or, for a transaction finished by recovery, when
    /// the finish began): the start of `kaas_txn_marker_delivery_seconds`.
    pub prepared_at: Instant,
    /// When the notice was made: a notice older than the poll interval is not sent.
    pub announced_at: Instant,
}

/// What the peer links carry to another broker: markers queued for it, a fence
/// recorded in this broker's fence log (the fence log is the record; the notice makes
/// the peer's fence watcher read it now rather than at its next poll), or a change
/// peers act on in this broker's lease or in the topics (the volume is the record;
/// the notice makes the peer read the leases and sync with the volume now rather
/// than at its next renewal and sync: docs/cluster.md#cluster-notices).
#[derive(Debug, Clone)]
pub enum PeerNotice {
    Markers(Box<MarkerNotice>),
    Fence { to: i32, producer_id: i64, epoch: i16 },
    Cluster { to: i32 },
}

/// The producer id of a cluster notice's marker (it has no partitions, as a fence
/// notice's; no fence names producer -1).
pub const CLUSTER_NOTICE_PRODUCER_ID: i64 = -1;

impl PeerNotice {
    /// How long ago the notice was made (a fence's: never old).
    pub fn queued_for(&self) -> Duration {
        match self {
            PeerNotice::Markers(n) => n.announced_at.elapsed(),
            PeerNotice::Fence { .. } | PeerNotice::Cluster { .. } => Duration::ZERO,
        }
    }

    /// The broker it goes to.
    pub fn to(&self) -> i32 {
        match self {
            PeerNotice::Markers(n) => n.leader,
            PeerNotice::Fence { to, .. } | PeerNotice::Cluster { to } => *to,
        }
    }
}

/// How long AddPartitionsToTxn/AddOffsetsToTxn wait for the producer's previous
/// transaction to complete (its markers durable) before answering
/// CONCURRENT_TRANSACTIONS, which the client retries: enough for markers the leaders
/// were notified of, not for a poll.
const PREVIOUS_TXN_WAIT: Duration = Duration::from_millis(1_000);

/// Whether a transition must be durable before the caller goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durable {
    /// Wait for the fdatasync (shared with concurrent transitions of the slot).
    Now,
    /// The next sync of the slot, or the reaper's flush, covers it.
    Later,
}

/// A Prepare* entry as the sweep watches it: unchanged while this key is.
pub(super) type PrepareKey = (String, i64, i16, u64, TxnState);

pub struct TransactionCoordinator {
    store: TxnStateStore,
    broker_id: i32,
    /// In-process queue in front of each slot's file lock.
    /// Whose turn it is at each slot's file lock, within this process; the holder of
    /// the turn keeps what it last read of the lock file while another process held
    /// it (kept across turns, so a stall longer than one request's wait is seen).
    slot_locks: Vec<tokio::sync::Mutex<Option<Sighting>>>,
    /// Each slot as this broker last read or wrote it. Writers (holding the slot's
    /// locks) append through it; readers without the locks (produce verification,
    /// the sweeps, ListTransactions) first bring it up to date — an open and fstat of
    /// the two files and a read of only the journal bytes appended since, by anyone:
    /// this broker, another broker, kaasctl. None until first read, or after an
    /// append failed (the next user reads the slot again).
    states: Arc<Vec<Mutex<Option<SlotState>>>>,
    /// One fdatasync for the transitions of a slot appended concurrently.
    group: Arc<GroupCommit>,
    /// This broker's outbound fence log; Err when the file on the volume is unreadable
    /// (bumps are then refused rather than recorded into a log that would be lost).
    fence_log: Mutex<Result<FenceLog, String>>,
    /// Hanging transactions the reconcile backstop ended since start.
    reconcile_repairs: std::sync::atomic::AtomicU64,
    /// Each Prepare* entry of the slots this broker owns, by (transactional id,
    /// producer id, epoch, transaction, state), and when this broker first saw it so:
    /// the sweep judges an entry stuck by its own clock, not by the wall-clock stamp
    /// another host wrote (`recovery.rs`).
    prepare_seen: Mutex<std::collections::HashMap<PrepareKey, Instant>>,
    /// The group coordinator staged offsets (KIP-447) are committed to or discarded
    /// from when a transaction ends.
    groups: Arc<GroupCoordinator>,
    /// Where notices for other brokers' partitions go (the peer links); unset, the
    /// leaders' polls alone deliver queued markers.
    notices: OnceLock<tokio::sync::mpsc::Sender<PeerNotice>>,
    /// Peers with a cluster notice queued and not yet taken by a link: another change
    /// meanwhile needs no second one (the peer reads everything when it gets the
    /// first), so however often this broker changes things, each peer has at most one
    /// waiting and marker notices keep their room in the queues.
    cluster_notices_queued: Mutex<std::collections::BTreeSet<i32>>,
    /// Transactions finished by notices whose leaders have not all answered yet
    /// ([`TransactionCoordinator::finish_by_notices`],
    /// [`TransactionCoordinator::notice_answered`]). Only this process's memory: an
    /// answer counts only for the finish of this life that sent its notice.
    unsynced: Mutex<std::collections::HashMap<UnsyncedKey, Unanswered>>,
    /// Woken when a transaction of the slot completes here, or a leader answered a
    /// notice of one (AddPartitionsToTxn waiting for the previous transaction).
    completed: Vec<tokio::sync::Notify>,
    /// Finishes running after EndTxn's answer, and a wake-up when the last ends.
    finishing: std::sync::atomic::AtomicUsize,
    finished_all: tokio::sync::Notify,
    /// How long a fast finish keeps the slot for its leaders' answers
    /// ([`NOTICE_ANSWER_WAIT`]; longer in tests that need the answer to come in it).
    answer_wait: std::sync::atomic::AtomicU64,
    /// Whether a broker is dead by its lease (confirmed by this broker's lease
    /// watch): a slot lock it holds is taken over; and how long a lock held under no
    /// holder's line waits. Unset, no slot lock is ever taken.
    dead_judge: OnceLock<(DeadJudge, UnnamedHold)>,
}

/// One Prepare* transaction: (transactional id, producer id, epoch, transaction number).
type UnsyncedKey = (String, i64, i16, u64);

/// A fast finish waiting for its leaders ([`TransactionCoordinator::finish_by_notices`]).
#[derive(Debug)]
pub(crate) struct Unanswered {
    /// Each notified leader's markers, and its answer once it came.
    pub leaders: BTreeMap<i32, (MarkerEntry, Option<NoticeAnswer>)>,
    /// Set from the moment the record is inserted until the finish that wrote it lets
    /// it go (its own markers durable, its wait of [`NOTICE_ANSWER_WAIT`] over): woken
    /// by the answer that completes the set, so a finish still holding the slot
    /// concludes under that lock. None once let go ([`Self::let_go`]): from then on,
    /// the answer that completes the set concludes.
    pub holder: Option<Arc<tokio::sync::Notify>>,
    /// When the Prepare* was durable: the delivery histogram's start.
    pub prepared_at: Instant,
}

/// What recording a leader's answer left to do
/// ([`TransactionCoordinator::record_answer`]).
#[derive(Debug)]
pub(crate) enum AnswerRecorded {
    /// Recorded with a finish that still waits (for another leader, or with the slot
    /// held, woken): nothing left.
    Recorded,
    /// The answer that completed the set of a finish that let go: conclude it.
    Ready(Unanswered),
    /// No finish of this life waits for it: act on the slot's files.
    NotWaiting,
}

impl Unanswered {
    fn all_answered(&self) -> bool {
        self.leaders.values().all(|(_, answer)| answer.is_some())
    }

    /// Whether the finish that wrote this record has let it go.
    fn let_go(&self) -> bool {
        self.holder.is_none()
    }
}

fn unsynced_key(entry: &TxnEntry) -> UnsyncedKey {
    (
        entry.transactional_id.clone(),
        entry.producer_id,
        entry.producer_epoch,
        entry.txn_seq,
    )
}

/// See [`TransactionCoordinator::take_over_locks_of_dead_brokers`].
pub type DeadJudge = Box<dyn Fn(i32) -> bool + Send + Sync>;

/// A slot held under both locks; its state is `states[slot]`, caught up.
struct HeldSlot<'a> {
    // Dropped in this order: the file lock first, so a task of this process woken by
    // the async mutex finds it free.
    lock: SlotLock,
    _turn: tokio::sync::MutexGuard<'a, Option<Sighting>>,
    slot: u32,
}

impl TransactionCoordinator {
    pub fn new(volume: &kaas_core::Volume, broker_id: i32, groups: Arc<GroupCoordinator>) -> Self {
        let fence_log = FenceLog::load(volume, broker_id).map_err(|e| {
            error!(error = %e, "own fence log unreadable: transactional epoch bumps are refused until it is repaired");
            e.to_string()
        });
        TransactionCoordinator {
            store: TxnStateStore::for_broker(volume.clone(), broker_id),
            broker_id,
            slot_locks: (0..SLOTS).map(|_| tokio::sync::Mutex::new(None)).collect(),
            states: Arc::new((0..SLOTS).map(|_| Mutex::new(None)).collect()),
            group: Arc::new(GroupCommit::default()),
            fence_log: Mutex::new(fence_log),
            reconcile_repairs: std::sync::atomic::AtomicU64::new(0),
            prepare_seen: Mutex::new(std::collections::HashMap::new()),
            groups,
            notices: OnceLock::new(),
            cluster_notices_queued: Mutex::new(std::collections::BTreeSet::new()),
            unsynced: Mutex::new(std::collections::HashMap::new()),
            completed: (0..SLOTS).map(|_| tokio::sync::Notify::new()).collect(),
            finishing: std::sync::atomic::AtomicUsize::new(0),
            finished_all: tokio::sync::Notify::new(),
            answer_wait: std::sync::atomic::AtomicU64::new(NOTICE_ANSWER_WAIT.as_millis() as u64),
            dead_judge: OnceLock::new(),
        }
    }

    /// From now on, a slot lock held (for longer than [`SLOT_LOCK_STEAL_AFTER`]) by a
    /// broker that `is_dead` confirms dead is taken over (set once, at start): a
    /// broker paused while holding one — SIGSTOP, a frozen VM — stalls its slot only
    /// until its lease is confirmed dead (docs/transactions.md, "A paused lock
    /// holder"). A lock held under no holder's line is taken over once seen so for
    /// `unnamed` says ([`TxnStateStore::steal_slot`]).
    pub fn take_over_locks_of_dead_brokers(&self, is_dead: DeadJudge, unnamed: UnnamedHold) {
        if self.dead_judge.set((is_dead, unnamed)).is_err() {
            warn!("the judge of dead slot lock holders is already set; the second one is ignored");
        }
    }

    /// How long a fast finish keeps the slot for its leaders' answers (tests that need
    /// the answer to come within it).
    #[cfg(test)]
    pub(crate) fn set_answer_wait(&self, wait: Duration) {
        self.answer_wait
            .store(wait.as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sends notices for queued markers to `sender` from now on (set once, at start).
    pub fn notify_leaders_through(&self, sender: tokio::sync::mpsc::Sender<PeerNotice>) {
        if self.notices.set(sender).is_err() {
            warn!("marker notices already have a destination; the second one is ignored");
        }
    }

    /// Tells every live peer that this broker's lease, or the topics, changed in a way
    /// they act on (docs/cluster.md#cluster-notices): they read the leases and sync
    /// with the volume at once. Nothing when notices are off; a notice that cannot be
    /// queued is left to the peers' next renewal and sync, which read the same.
    pub fn announce_change(&self, broker: &Cluster) {
        if let Some(sender) = self.notices.get() {
            let mut queued = self.cluster_notices_queued.lock().unwrap_or_else(|p| p.into_inner());
            for to in broker.live_brokers().into_keys().filter(|b| *b != self.broker_id) {
                if queued.insert(to) && sender.try_send(PeerNotice::Cluster { to }).is_err() {
                    queued.remove(&to);
                    crate::metrics::metrics().cluster_notice(crate::metrics::ClusterNoticeEvent::Lost);
                }
            }
        }
    }

    /// A link took the cluster notice queued for `to` (to send it, or to drop it):
    /// the next change needs a new one.
    pub fn cluster_notice_taken(&self, to: i32) {
        self.cluster_notices_queued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&to);
    }

    fn actor(&self) -> Actor {
        Actor::Broker { id: self.broker_id }
    }

    pub fn store(&self) -> &TxnStateStore {
        &self.store
    }

    fn check_owner(&self, broker: &Cluster, slot: u32) -> Result<(), CoordError> {
        if broker.owns_txn_slot(slot) {
            Ok(())
        } else if broker.takes_soon(&kaas_core::ownership::txn_slot_key(slot)) {
            Err(CoordError::Loading(slot))
        } else {
            Err(CoordError::NotCoordinator(slot))
        }
    }

    /// Takes slot `slot` under both locks and brings its state up to date, waiting
    /// at most [`SLOT_LOCK_WAIT`] for them.
    async fn lock_slot(&self, slot: u32) -> Result<HeldSlot<'_>, CoordError> {
        self.lock_slot_within(slot, SLOT_LOCK_WAIT).await
    }

    /// [`Self::lock_slot`], waiting at most `wait`: the file lock is tried, never
    /// waited on blocking (a holder that is paused — SIGSTOP, a frozen VM — or stuck
    /// would hold a thread and its caller forever), first after the short pauses of
    /// [`SLOT_LOCK_SHORT_PAUSES`] on the blocking pool, then with pauses that grow
    /// from 1 ms to [`SLOT_LOCK_POLL_MAX`]. Past `wait`, [`CoordError::SlotBusy`].
    async fn lock_slot_within(&self, slot: u32, wait: Duration) -> Result<HeldSlot<'_>, CoordError> {
        let started = Instant::now();
        let busy = || CoordError::SlotBusy {
            slot,
            waited_ms: started.elapsed().as_millis() as u64,
        };
        let mut turn = tokio::time::timeout(wait, self.slot_locks[slot as usize].lock())
            .await
            .map_err(|_| busy())?;
        let mut pause = Duration::from_millis(1);
        let mut judged_at: Option<Instant> = None;
        let mut first = true;
        let lock = loop {
            if let Some(lock) = self.store.try_lock_slot(slot)? {
                break lock;
            }
            if std::mem::take(&mut first) {
                // Most holders keep a slot well under a millisecond (a journal line, a
                // marker appended, a look at the state), and the runtime's timer
                // sleeps a whole tick or two: a few short pauses on the blocking pool
                // first (one thread per slot at most: the turn is held).
                let store = self.store.clone();
                let briefly = tokio::task::spawn_blocking(move || {
                    for pause in SLOT_LOCK_SHORT_PAUSES {
                        std::thread::sleep(pause);
                        if let Some(lock) = store.try_lock_slot(slot)? {
                            return Ok(Some(lock));
                        }
                    }
                    Ok::<_, VolumeError>(None)
                })
                .await
                .map_err(|e| VolumeError::io(self.store.lock_path(slot), std::io::Error::other(e)))??;
                if let Some(lock) = briefly {
                    break lock;
                }
            }
            // Held for a while: is its holder a broker confirmed dead? (A read of the
            // lock file and of that broker's lease, at most every few hundred ms; the
            // same holder line must be read twice, one interval apart.)
            if self.dead_judge.get().is_some()
                && started.elapsed() >= SLOT_LOCK_STEAL_AFTER
                && judged_at.is_none_or(|t| t.elapsed() >= SLOT_LOCK_STEAL_AFTER)
            {
                judged_at = Some(Instant::now());
                if let Some(lock) = self.steal(slot, &mut turn).await? {
                    break lock;
                }
            }
            let left = wait.saturating_sub(started.elapsed());
            if left.is_zero() {
                debug!(
                    slot,
                    waited_ms = started.elapsed().as_millis() as u64,
                    "transaction slot lock held elsewhere for the whole wait"
                );
                return Err(busy());
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(SLOT_LOCK_POLL_MAX);
        };
        // Held here now: whatever was seen of another holder is over.
        *turn = None;
        // The common case, inline: the slot's state is cached, so catching up is an
        // fstat of each file and the journal's new bytes. Otherwise (the slot is read
        // in full, a torn line is cut) on the blocking pool.
        {
            let mut state = self.state_of(slot);
            if self.store.catch_up_cheaply(&lock, &mut state)? {
                drop(state);
                return Ok(HeldSlot {
                    _turn: turn,
                    lock,
                    slot,
                });
            }
        }
        let (store, states) = (self.store.clone(), self.states.clone());
        let lock = tokio::task::spawn_blocking(move || {
            let mut state = states[slot as usize].lock().unwrap_or_else(|p| p.into_inner());
            store.catch_up(&lock, &mut state)?;
            Ok::<_, VolumeError>(lock)
        })
        .await
        .map_err(|e| VolumeError::io(self.store.lock_path(slot), std::io::Error::other(e)))??;
        Ok(HeldSlot {
            _turn: turn,
            lock,
            slot,
        })
    }

    /// [`TxnStateStore::steal_slot`] with this broker's judge, on the blocking pool
    /// (it may wait for the slot's gate).
    async fn steal(&self, slot: u32, sighting: &mut Option<Sighting>) -> Result<Option<SlotLock>, CoordError> {
        let (judge, unnamed) = self.dead_judge.get().expect("checked by the caller");
        let stolen = crate::blocking::off_worker(|| self.store.steal_slot(slot, judge, *unnamed, sighting))?;
        if stolen.is_some() {
            // Whatever this process cached of the slot is read again.
            *self.state_of(slot) = None;
        }
        Ok(stolen)
    }

    /// The state of a held slot, read again if an earlier failure dropped it.
    fn held_state(&self, held: &HeldSlot<'_>) -> Result<std::sync::MutexGuard<'_, Option<SlotState>>, CoordError> {
        let mut state = self.state_of(held.slot);
        if state.is_none() {
            // A full read of the slot (after an earlier failure).
            crate::blocking::off_worker(|| self.store.catch_up(&held.lock, &mut state))?;
        }
        Ok(state)
    }

    /// Runs `f` on the state of a held slot.
    fn with_held<R>(&self, held: &HeldSlot<'_>, f: impl FnOnce(&SlotState) -> R) -> Result<R, CoordError> {
        Ok(f(self.held_state(held)?.as_ref().expect("caught up")))
    }

    /// Before an answer derived from the held slot's state (followed by
    /// [`Self::durable_now`]): a slot whose last sync failed is rewritten first, as
    /// appending nothing does.
    fn heal(&self, held: &HeldSlot<'_>) -> Result<(), CoordError> {
        self.append(held, &[], now_ms()).map(|_| ())
    }

    fn held_entry(&self, held: &HeldSlot<'_>, tid: &str) -> Result<Option<TxnEntry>, CoordError> {
        self.with_held(held, |st| st.entry(tid).cloned())
    }

    /// Takes the slot of `tid` and its entry; no entry is INVALID_PRODUCER_ID_MAPPING.
    async fn lock_entry(&self, slot: u32, tid: &str) -> Result<(HeldSlot<'_>, TxnEntry), CoordError> {
        let held = self.lock_slot(slot).await?;
        let current = self.held_entry(&held, tid)?.ok_or(TxnError::InvalidProducerIdMapping)?;
        Ok((held, current))
    }

    /// Appends transitions to the held slot's journal, folds it when due, and with
    /// [`Durable::Now`] waits until they are durable.
    async fn record(&self, held: &HeldSlot<'_>, ops: &[SlotOp], now: i64, durable: Durable) -> Result<(), CoordError> {
        if let (Some(mark), Durable::Now) = (self.append(held, ops, now)?, durable) {
            self.durable(held.lock.id(), mark).await?;
        }
        Ok(())
    }

    /// The append of [`Self::record`], without waiting.
    /// Returns the mark of the last line appended (None: `ops` was empty).
    fn append(&self, held: &HeldSlot<'_>, ops: &[SlotOp], now: i64) -> Result<Option<Mark>, CoordError> {
        let mut state = self.held_state(held)?;
        let st = state.as_mut().expect("caught up");
        if self.group.poisoned(held.slot) {
            // A sync of this journal failed: rewrite the whole slot from memory (new
            // checkpoint and journal, synced) before anything else counts as durable.
            let folded = crate::blocking::off_worker(|| {
                self.group
                    .fold(held.slot, st, |st| self.store.fold(&held.lock, st).map(|()| true))
            });
            if let Err(e) = folded {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::SlotJournal, &e);
                *state = None;
                return Err(e.into());
            }
        }
        if ops.is_empty() {
            return Ok(None);
        }
        let generation = match self.store.append(&held.lock, st, ops, now) {
            Ok(g) => g,
            Err(e) => {
                // The journal may end in a torn line: the next holder cuts it off.
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::SlotJournal, &e);
                *state = None;
                return Err(e.into());
            }
        };
        let mark = self.group.appended(held.slot, generation, st.journal());
        let folded = if st.wants_fold() {
            crate::blocking::off_worker(|| {
                self.group
                    .fold(held.slot, st, |st| self.store.maybe_fold(&held.lock, st))
            })
        } else {
            Ok(false)
        };
        match folded {
            Ok(_) => {}
            // The transition is appended; only the fold failed (retried at the next
            // append, the journal meanwhile growing). Read again next time.
            Err(e) => {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::SlotJournal, &e);
                error!(slot = held.slot, error = %e, "folding a transaction slot journal into its checkpoint failed");
                *state = None;
            }
        }
        Ok(Some(mark))
    }

    /// Runs a group-commit step (an fdatasync) on the blocking pool.
    async fn syncing(
        &self,
        path: std::path::PathBuf,
        step: impl FnOnce(&GroupCommit, &TxnStateStore) -> Result<(), VolumeError> + Send + 'static,
    ) -> Result<(), VolumeError> {
        let (store, group) = (self.store.clone(), self.group.clone());
        let started = std::time::Instant::now();
        let synced = tokio::task::spawn_blocking(move || step(&group, &store))
            .await
            .map_err(|e| VolumeError::io(path, std::io::Error::other(e)))?;
        crate::metrics::metrics()
            .txn_journal_sync
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = &synced {
            crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::SlotJournal, e);
        }
        synced
    }

    /// Waits until the line `mark` names is durable (group commit), then checks that
    /// the slot's lock is still `lock` (the one it was appended under): a transition
    /// is acknowledged only if no other broker took the slot over before the check
    /// — then that broker's read of the slot, after its take-over, finds it.
    async fn durable(&self, lock: SlotLockId, mark: Mark) -> Result<(), CoordError> {
        let slot = lock.slot;
        if !self.group.is_durable(slot, mark) {
            self.syncing(self.store.journal_path(slot), move |g, s| g.wait_durable(s, slot, mark))
                .await?;
        }
        self.still_held(lock)
    }

    /// [`Self::durable`], and then, on the same trip to the blocking pool, `then` —
    /// blocking file work that may only start once the line is durable and only while
    /// this broker holds the slot (a fast finish's queue entries:
    /// [`markers::enqueue_fast_entries`]). Not run when the line is not made durable
    /// (an error), nor when the slot's lock is found lost after the sync (checked
    /// through the volume, as [`Self::still_held`] does, again after the trip). What
    /// `then` changes by path it changes under the slot's gate, checked held again
    /// (`TxnStateStore::while_held`: no take-over falls in between;
    /// `no_take_over_falls_between_the_ownership_check_and_the_entries_written`). Its
    /// outcome is returned apart — it does not undo the line's durability — with when
    /// the line was known durable (the start of the marker delivery histogram).
    async fn durable_then(
        &self,
        lock: SlotLockId,
        mark: Mark,
        then: impl FnOnce() -> Result<(), VolumeError> + Send + 'static,
    ) -> Result<(Result<(), VolumeError>, Instant), CoordError> {
        let slot = lock.slot;
        let done = if self.group.is_durable(slot, mark) {
            let durable_at = Instant::now();
            let held = self.store.clone();
            crate::blocking::run_blocking_held(
                move || Ok((held.check_held(lock).and_then(|()| then()), durable_at)),
                || self.store.journal_path(slot),
            )
            .await?
        } else {
            let (store, group) = (self.store.clone(), self.group.clone());
            let started = std::time::Instant::now();
            let held = self.store.clone();
            // Held: `then` never runs after the slot is let go (this task dropped at
            // shutdown), when the slot's next holder may be writing the same
            // transaction's entries.
            crate::blocking::run_blocking_held(
                move || {
                    let synced = group.wait_durable(&store, slot, mark);
                    // The sync alone, as `syncing` measures it.
                    crate::metrics::metrics()
                        .txn_journal_sync
                        .observe(started.elapsed().as_secs_f64());
                    let durable_at = Instant::now();
                    // A lock lost meanwhile (a take-over while the fsync stalled): the
                    // work is not done; `still_held` below refuses the answer.
                    synced.map(|()| (held.check_held(lock).and_then(|()| then()), durable_at))
                },
                || self.store.journal_path(slot),
            )
            .await
            .inspect_err(|e| {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::SlotJournal, e)
            })?
        };
        self.still_held(lock)?;
        Ok(done)
    }

    /// Makes the slot's journal durable as it is now: for an answer derived from a
    /// state this call did not append (see `GroupCommit::sync_now`). Then checks the
    /// lock as [`Self::durable`] does.
    async fn durable_now(&self, lock: SlotLockId) -> Result<(), CoordError> {
        let slot = lock.slot;
        self.syncing(self.store.journal_path(slot), move |g, s| g.sync_now(s, slot))
            .await?;
        self.still_held(lock)
    }

    /// Whether the slot's lock file is still `lock`; if not, the slot was taken over
    /// by a broker that judged this one dead: this process's copy is dropped and
    /// nothing is acknowledged.
    fn still_held(&self, lock: SlotLockId) -> Result<(), CoordError> {
        match self.store.check_held(lock) {
            Ok(()) => Ok(()),
            Err(e) => {
                *self.state_of(lock.slot) = None;
                warn!(slot = lock.slot, error = %e, "transaction slot taken over while this broker held it; nothing is acknowledged");
                Err(e.into())
            }
        }
    }

    /// Makes every transition this broker appended durable (the background flush,
    /// every `--flush-interval-ms`, and a clean stop).
    pub async fn flush(&self) -> Result<(), VolumeError> {
        // A slot whose sync failed is rewritten from memory under its lock.
        for slot in 0..SLOTS {
            if self.group.poisoned(slot) {
                let healed = match self.lock_slot(slot).await {
                    Ok(held) => self.append(&held, &[], now_ms()).map(|_| ()),
                    Err(e) => Err(e),
                };
                if let Err(e) = healed {
                    error!(slot, error = %e, "a transaction slot whose journal sync failed could not be rewritten; its transitions wait");
                }
            }
        }
        self.syncing(self.store.dir(), |g, s| g.flush(s)).await
    }

    /// fdatasyncs of slot journals this broker issued (benchmarks, tests).
    pub fn journal_syncs(&self) -> u64 {
        self.group.syncs()
    }

    /// Slot `slot`'s cached state, locked. Its holder may be in slow file work (an
    /// append folding the journal: four fsyncs and a wait for the slot's gate; a full
    /// read): a busy state is waited for off the runtime's workers, so that two
    /// waiters (a transactional produce's verification, say) never stall both
    /// (`a_slot_state_held_for_slow_file_work_stalls_no_worker`). Free, it costs one
    /// `try_lock`.
    fn state_of(&self, slot: u32) -> std::sync::MutexGuard<'_, Option<SlotState>> {
        let state = &self.states[slot as usize];
        match state.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                crate::blocking::off_worker(|| state.lock().unwrap_or_else(|p| p.into_inner()))
            }
        }
    }

    /// Runs `f` on slot `slot` brought up to date, without its locks.
    pub fn visit<R>(&self, slot: u32, f: impl FnOnce(&SlotState) -> R) -> Result<R, VolumeError> {
        let mut state = self.state_of(slot);
        match state.as_mut() {
            // An fstat of each file and the journal bytes appended since; a fold
            // elsewhere makes it a full read.
            Some(st) => {
                if self.store.refresh_if_cheap(st)?.is_none() {
                    crate::blocking::off_worker(|| self.store.refresh(st))?;
                }
            }
            None => *state = Some(crate::blocking::off_worker(|| self.store.load(slot))?),
        }
        Ok(f(state.as_ref().expect("loaded")))
    }

    /// The current entry of `tid`, without the slot's locks.
    pub fn entry(&self, tid: &str) -> Result<Option<TxnEntry>, VolumeError> {
        self.visit(slot_for(tid), |st| st.entry(tid).cloned())
    }

    /// Takes slot `slot` with the entry of `tid` (ownership checked), first waiting,
    /// up to [`PREVIOUS_TXN_WAIT`], while that entry is a Prepare* transaction `whose`
    /// markers are being written — here, or by leaders that were notified (markers
    /// left to a poll take longer than the wait). Kafka answers CONCURRENT_TRANSACTIONS
    /// there and the client retries after its back-off; waiting here instead answers
    /// as soon as the transaction completes.
    async fn lock_after_markers(
        &self,
        broker: &Cluster,
        slot: u32,
        tid: &str,
        whose: impl Fn(&TxnEntry) -> bool,
    ) -> Result<(HeldSlot<'_>, Option<TxnEntry>), CoordError> {
        let deadline = Instant::now() + PREVIOUS_TXN_WAIT;
        let still_finishing =
            |c: &TxnEntry| c.state.is_prepare() && whose(c) && (self.notices.get().is_some() || !c.markers_queued);
        loop {
            // Again after each wait: the slot may have moved to another broker.
            self.check_owner(broker, slot)?;
            // A look without the slot's locks first: while the previous transaction's
            // markers are still being written, taking them would only hold up the
            // leaders (and the answers) that finish it. Registered before the look, so
            // a completion here (or a leader's answer) after it wakes us; a completion
            // by another broker's poll is seen at the next look.
            let completed = self.completed[slot as usize].notified();
            tokio::pin!(completed);
            completed.as_mut().enable();
            if Instant::now() < deadline && self.visit(slot, |st| st.entry(tid).is_some_and(&still_finishing))? {
                let look_again = Duration::from_millis(100).min(deadline.saturating_duration_since(Instant::now()));
                let _ = tokio::time::timeout(look_again, completed).await;
                continue;
            }
            let held = self.lock_slot(slot).await?;
            let current = self.held_entry(&held, tid)?;
            if !(current.as_ref().is_some_and(&still_finishing) && Instant::now() < deadline) {
                return Ok((held, current));
            }
            // Still finishing after all (it changed between the two looks): let the
            // slot go and wait at the next look.
        }
    }

    /// InitProducerId for a transactional id: (producer id, epoch).
    pub async fn init_producer_id(
        &self,
        broker: &Cluster,
        tid: &str,
        timeout_ms: i32,
        claimed: (i64, i16),
    ) -> Result<(i64, i16), CoordError> {
        let slot = slot_for(tid);
        self.check_owner(broker, slot)?;
        // The fence log's mutex is held across a fence's save (write, fsyncs, a
        // reload after a failure): waited for off the worker, as `state_of` does.
        let unreadable = match self.fence_log.try_lock() {
            Ok(log) => log.as_ref().err().cloned(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().as_ref().err().cloned(),
            Err(std::sync::TryLockError::WouldBlock) => crate::blocking::off_worker(|| {
                self.fence_log
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .err()
                    .cloned()
            }),
        };
        // Unreadable when last read (at start, or after a failed save): read again,
        // so a repaired file is taken up without a restart.
        let unreadable = match unreadable {
            None => None,
            Some(_) => crate::blocking::off_worker(|| {
                let mut guard = self.fence_log.lock().unwrap_or_else(|p| p.into_inner());
                if guard.is_err() {
                    *guard = FenceLog::load(&broker.volume, self.broker_id).map_err(|e| e.to_string());
                    if guard.is_ok() {
                        info!("own fence log readable again: transactional epoch bumps resume");
                    }
                }
                guard.as_ref().err().cloned()
            }),
        };
        if let Some(e) = unreadable {
            return Err(CoordError::Volume(VolumeError::Invalid {
                path: kaas_core::fence_log::fence_log_path(&broker.volume, self.broker_id),
                detail: e,
            }));
        }
        // A new instance, or a bump after an abort, while the last transaction's
        // markers are being written: wait for them rather than refuse at once.
        let (held, current) = self.lock_after_markers(broker, slot, tid, |_| true).await?;
        let now = now_ms();
        let actor = self.actor();
        let mut alloc_error = None;
        let mut alloc = || match broker.next_transactional_producer_id() {
            Ok(id) => id,
            Err(e) => {
                alloc_error = Some(e);
                -1
            }
        };
        // `alloc` may claim a new block on the volume, under its lock: off the workers.
        let outcome = crate::blocking::off_worker(|| {
            txn::init_producer_id(current.as_ref(), tid, timeout_ms, claimed, now, &actor, &mut alloc)
        });
        if let Some(e) = alloc_error {
            return Err(e.into());
        }
        match outcome {
            InitOutcome::Ready { entry, fence } => {
                if current.as_ref() != Some(&entry) {
                    let mark = self.append(&held, &[SlotOp::Put(entry.clone())], now)?;
                    // Group commit: the slot is free for others while this waits.
                    let lock = held.lock.id();
                    drop(held);
                    if let Some(mark) = mark {
                        self.durable(lock, mark).await?;
                    }
                } else {
                    // The answer comes from a state this call did not write.
                    self.heal(&held)?;
                    let lock = held.lock.id();
                    drop(held);
                    self.durable_now(lock).await?;
                }
                if let Some((pid, epoch)) = fence {
                    self.fence(broker, pid, epoch, tid)?;
                }
                debug!(
                    transactional_id = tid,
                    producer_id = entry.producer_id,
                    epoch = entry.producer_epoch,
                    "InitProducerId"
                );
                Ok((entry.producer_id, entry.producer_epoch))
            }
            InitOutcome::AbortFirst { entry } => {
                self.record(&held, &[SlotOp::Put(entry.clone())], now, Durable::Now)
                    .await?;
                info!(
                    transactional_id = tid,
                    producer_id = entry.producer_id,
                    epoch = entry.producer_epoch,
                    "rejoin while Ongoing: aborting the open transaction first"
                );
                self.fence(broker, entry.producer_id, entry.producer_epoch, tid)?;
                self.finish_held(broker, &held, &entry, Some(Instant::now()), true)
                    .await?;
                Err(TxnError::ConcurrentTransactions.into())
            }
            InitOutcome::Reject(e) => Err(e.into()),
        }
    }

    /// Raises the producer's epoch on every partition this broker leads and records
    /// the bump in this broker's fence log for the other brokers' watchers.
    pub fn fence(&self, broker: &Cluster, producer_id: i64, epoch: i16, tid: &str) -> Result<(), CoordError> {
        // Every partition's lock in turn, then the fence log's fsync (under a mutex
        // another fence may wait on): off the runtime's workers.
        crate::blocking::off_worker(|| -> Result<(), CoordError> {
            broker.fence_producer_epoch(producer_id, epoch);
            let mut guard = self.fence_log.lock().unwrap_or_else(|p| p.into_inner());
            let log = guard.as_mut().map_err(|e| VolumeError::Invalid {
                path: kaas_core::fence_log::fence_log_path(&broker.volume, self.broker_id),
                detail: e.clone(),
            })?;
            let now = now_ms();
            let appended = log.append(producer_id, epoch, Some(tid), now);
            let pruned = log.prune(now, broker.config.transactional_id_expiration_ms);
            if appended || pruned {
                if let Err(e) = log.save(&broker.volume) {
                    // Memory must not run ahead of the file: a retry of this fence
                    // would otherwise find it recorded and never write it.
                    *guard = FenceLog::load(&broker.volume, self.broker_id).map_err(|e| e.to_string());
                    return Err(e.into());
                }
            }
            Ok(())
        })?;
        // Recorded (now or by an earlier call): the peers' fence watchers may read it.
        if let Some(sender) = self.notices.get() {
            for to in broker.live_brokers().into_keys().filter(|b| *b != self.broker_id) {
                // Full or closed (shutdown): the peers' polls read the log.
                let _ = sender.try_send(PeerNotice::Fence { to, producer_id, epoch });
            }
        }
        Ok(())
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn.
    pub async fn add(
        &self,
        broker: &Cluster,
        tid: &str,
        pid: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        groups: &[String],
    ) -> Result<(), CoordError> {
        let slot = slot_for(tid);
        let (held, current) = self
            .lock_after_markers(broker, slot, tid, |e| e.producer_id == pid && e.producer_epoch == epoch)
            .await?;
        let current = current.ok_or(TxnError::InvalidProducerIdMapping)?;
        let now = now_ms();
        match txn::add_to_txn(&current, pid, epoch, partitions, groups, now, &self.actor())? {
            Some(entry) => {
                let mark = self.append(&held, &[SlotOp::Put(entry)], now)?;
                // Group commit: the slot is free for others while this waits.
                let lock = held.lock.id();
                drop(held);
                if let Some(mark) = mark {
                    self.durable(lock, mark).await?;
                }
            }
            // Already added (a retry): answered once the state it saw is durable.
            None => {
                self.heal(&held)?;
                let lock = held.lock.id();
                drop(held);
                self.durable_now(lock).await?;
            }
        }
        Ok(())
    }

    /// A transactional produce must belong to an Ongoing transaction of this producer
    /// that includes the partition (Apache's transaction verification, KIP-890):
    /// otherwise its records could open a transaction no coordinator will ever end.
    /// The caller holds the partition's lock (see `Broker::append`). Returns the
    /// transaction's number (`txn_seq`), which the partition keeps for its open
    /// transaction (a coordinator's notice is checked against it).
    pub fn verify_produce(
        &self,
        tid: &str,
        producer_id: i64,
        epoch: i16,
        tp: &TopicPartition,
    ) -> Result<u64, CoordError> {
        // Judged in place (every transactional batch asks): no copy of the entry.
        self.visit(slot_for(tid), |st| match st.entry(tid) {
            Some(e) if e.producer_id == producer_id && e.producer_epoch > epoch => Err(TxnError::ProducerFenced.into()),
            Some(e)
                if e.state == TxnState::Ongoing
                    && e.producer_id == producer_id
                    && e.producer_epoch == epoch
                    && e.partitions.contains(tp) =>
            {
                Ok(e.txn_seq)
            }
            _ => Err(TxnError::InvalidTxnState.into()),
        })?
    }

    /// The producer's identity and open transaction, checked for TxnOffsetCommit.
    fn check_ongoing(entry: Option<&TxnEntry>, pid: i64, epoch: i16, group: &str) -> Result<(), CoordError> {
        let entry = entry.ok_or(TxnError::InvalidProducerIdMapping)?;
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

    /// The current entry, checked against the producer's identity (TxnOffsetCommit's
    /// early answer; the staging itself re-checks under the lock).
    pub fn verify_ongoing(
        &self,
        broker: &Cluster,
        tid: &str,
        pid: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), CoordError> {
        check_group_owner(broker, group)?;
        Self::check_ongoing(self.entry(tid)?.as_ref(), pid, epoch, group)
    }

    /// TxnOffsetCommit: stages the offsets under (group, producer id, epoch), with the
    /// slot locked from the transaction check to the staged write, so an EndTxn (or a
    /// reaper abort) cannot finish the transaction in between and leave offsets
    /// staged for a transaction that is already over.
    #[allow(clippy::too_many_arguments)]
    pub async fn stage_offsets(
        &self,
        broker: &Cluster,
        tid: &str,
        pid: i64,
        epoch: i16,
        group: &str,
        entries: &[(String, i32, i64, i32, Option<String>)],
        member: &(dyn Fn(&kaas_core::offsets::GroupOffsets) -> Result<(), kafka_protocol::error::ResponseError> + Sync),
    ) -> Result<(), CoordError> {
        // TxnOffsetCommit goes to the group's coordinator (as in Apache), which checks
        // the transaction in the slot file on the shared volume, under its lock.
        check_group_owner(broker, group)?;
        let held = self.lock_slot(slot_for(tid)).await?;
        Self::check_ongoing(self.held_entry(&held, tid)?.as_ref(), pid, epoch, group)?;
        let lock = held.lock.id();
        let staged =
            self.groups
                .stage_offsets(group, pid, epoch, tid, entries, &|| self.store.check_held(lock), member)?;
        drop(held);
        staged.map_err(CoordError::MemberRefused)
    }

    /// EndTxn, whole: Prepare*, then offsets, markers and Complete* before returning
    /// (tests, and anything that needs the transaction over when it returns).
    pub async fn end_txn(
        &self,
        broker: &Cluster,
        tid: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), CoordError> {
        match self.end_txn_decide(broker, tid, pid, epoch, commit).await? {
            (Ended::Done, _) => Ok(()),
            (Ended::Prepared { entry, prepared_at }, held) => {
                let finished = match held {
                    Some(decided) => self.finish_decided(broker, decided, &entry, prepared_at).await?,
                    None => self.finish_at(broker, &entry, prepared_at).await?,
                };
                debug!(
                    transactional_id = tid,
                    producer_id = pid,
                    epoch,
                    commit,
                    ?finished,
                    "EndTxn"
                );
                Ok(())
            }
        }
    }

    /// EndTxn as a client sends it: `answer` is called with the decision as soon as
    /// it is durable — Prepare* (or found already so, for a retry) — which is what the
    /// client is answered on, as Kafka answers it; then the transaction is finished
    /// (markers, Complete*), and the producer's next AddPartitionsToTxn waits for
    /// that. A Prepare* made here is finished under the same hold of the slot, so
    /// the finish neither waits for the slot again nor reads it again; a finish that
    /// fails is retried ([`Self::finish_retrying`]), then left to the reaper.
    pub async fn end_txn_answering(
        &self,
        broker: &Cluster,
        tid: &str,
        (pid, epoch, commit): (i64, i16, bool),
        answer: impl FnOnce(Result<(), CoordError>),
    ) {
        // Counted from the start (a clean stop waits for it: [`Self::wait_for_finishes`]),
        // until it ends, however it ends.
        struct Finishing<'a>(&'a TransactionCoordinator);
        impl Drop for Finishing<'_> {
            fn drop(&mut self) {
                if self.0.finishing.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
                    self.0.finished_all.notify_waiters();
                }
            }
        }
        self.finishing.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let _finishing = Finishing(self);
        let (entry, prepared_at, held) = match self.end_txn_decide(broker, tid, pid, epoch, commit).await {
            Err(e) => return answer(Err(e)),
            Ok((Ended::Done, _)) => return answer(Ok(())),
            Ok((Ended::Prepared { entry, prepared_at }, held)) => (entry, prepared_at, held),
        };
        answer(Ok(()));
        let first = match held {
            Some(decided) => Some(self.finish_decided(broker, decided, &entry, prepared_at).await),
            None => None,
        };
        match first {
            Some(Ok(finished)) => {
                debug!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, ?finished, "EndTxn finished");
            }
            Some(Err(e)) => {
                warn!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, error = %e, "EndTxn answered, its markers not all written; the transaction stays prepared and is retried");
                self.finish_retrying(broker, &entry, prepared_at, true).await;
            }
            None => self.finish_retrying(broker, &entry, prepared_at, false).await,
        }
    }

    /// The finish of the Prepare* `entry` EndTxn made, under the hold it made it with.
    async fn finish_decided(
        &self,
        broker: &Cluster,
        Decided { held, queued }: Decided<'_>,
        entry: &TxnEntry,
        prepared_at: Option<Instant>,
    ) -> Result<Finished, CoordError> {
        self.finish_held_queued(broker, &held, entry, prepared_at, prepared_at.is_some(), queued)
            .await
    }

    /// EndTxn's decision: PrepareCommit/PrepareAbort durable (or found already so, for
    /// a retry). What EndTxn is answered on, as Kafka answers it. When this call made
    /// the Prepare*, the slot is returned still held, for its finish
    /// ([`Self::end_txn_answering`]); otherwise it is let go.
    async fn end_txn_decide(
        &self,
        broker: &Cluster,
        tid: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(Ended, Option<Decided<'_>>), CoordError> {
        let slot = slot_for(tid);
        self.check_owner(broker, slot)?;
        let now = now_ms();
        let (held, current) = self.lock_entry(slot, tid).await?;
        match txn::end_txn(&current, pid, epoch, commit, now, &self.actor())? {
            EndOutcome::Prepare(entry) => {
                // Durable before any marker: a marker is the outcome's effect. The
                // queue entries of a fast finish go on the same trip to the blocking
                // pool, right after the line is durable (they may not come before).
                let mut queued = self.fast_entries(broker, &entry);
                let mut prepared_at = None;
                match self.append(&held, &[SlotOp::Put(entry.clone())], now)? {
                    Some(mark) => match queued.clone() {
                        Some(entries) => {
                            let (volume, store, lock) = (broker.volume.clone(), self.store.clone(), held.lock.id());
                            let written = self
                                .durable_then(lock, mark, move || {
                                    markers::enqueue_fast_entries(&volume, (&store, lock), &entries)
                                })
                                .await?;
                            let (written, durable_at) = written;
                            prepared_at = Some(durable_at);
                            if let Err(e) = written {
                                // The finish writes them again (and fails there if
                                // the volume still refuses). Counted where it failed.
                                warn!(transactional_id = tid, producer_id = pid, epoch, error = %e, "writing the queue entries with the Prepare* failed; its finish writes them again");
                                queued = None;
                            }
                        }
                        None => self.durable(held.lock.id(), mark).await?,
                    },
                    None => queued = None,
                }
                kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_PREPARE);
                // The offset hook before the answer, under the slot lock: once the
                // commit returns, OffsetFetch gives its offsets (the finish runs the
                // hook again and finds nothing left).
                for group in &entry.groups {
                    self.groups
                        .finish_pending(group, entry.producer_id, entry.producer_epoch, commit, &|| {
                            self.store.check_held(held.lock.id())
                        })?;
                }
                Ok((
                    Ended::Prepared {
                        entry,
                        prepared_at: Some(prepared_at.unwrap_or_else(Instant::now)),
                    },
                    Some(Decided { held, queued }),
                ))
            }
            EndOutcome::AlreadyComplete => {
                self.heal(&held)?;
                let lock = held.lock.id();
                drop(held);
                self.durable_now(lock).await?;
                Ok((Ended::Done, None))
            }
            // A retry while the markers are still being written (or failed before):
            // finished again — once its Prepare* is known durable.
            EndOutcome::InProgress => {
                self.heal(&held)?;
                let lock = held.lock.id();
                drop(held);
                self.durable_now(lock).await?;
                Ok((
                    Ended::Prepared {
                        entry: current,
                        prepared_at: None,
                    },
                    None,
                ))
            }
        }
    }

    /// Waits (up to `deadline`) for the finishes EndTxn's answers left running: a clean
    /// stop lets them write their markers before it lets the partitions go, so the
    /// next owner does not find transactions its producers wait on still prepared.
    pub async fn wait_for_finishes(&self, deadline: Duration) {
        let until = Instant::now() + deadline;
        loop {
            let all = self.finished_all.notified();
            tokio::pin!(all);
            all.as_mut().enable();
            let left = self.finishing.load(std::sync::atomic::Ordering::Acquire);
            if left == 0 {
                return;
            }
            let remaining = until.saturating_duration_since(Instant::now());
            if remaining.is_zero() || tokio::time::timeout(remaining, all).await.is_err() {
                warn!(
                    transactions = self.finishing.load(std::sync::atomic::Ordering::Acquire),
                    "stopping with transactions still being finished; their next coordinator finishes them"
                );
                return;
            }
        }
    }

    /// Finishes a transaction EndTxn prepared, after its answer: markers, Complete*.
    /// A failure (a marker that cannot be written) is retried here with a growing
    /// pause for up to [`BACKGROUND_FINISH`], then left to the reaper (and to the
    /// producer's EndTxn retry, recovery at start); the entry stays Prepare* meanwhile,
    /// so the producer's next AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS.
    /// `failed_once`: a first try already failed (it was logged): pause before the next.
    async fn finish_retrying(
        &self,
        broker: &Cluster,
        entry: &TxnEntry,
        prepared_at: Option<Instant>,
        failed_once: bool,
    ) {
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        if failed_once {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
        loop {
            match self.finish_at(broker, entry, prepared_at).await {
                Ok(finished) => {
                    debug!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, ?finished, "EndTxn finished");
                    return;
                }
                Err(e) if started.elapsed() < BACKGROUND_FINISH => {
                    warn!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, error = %e, "EndTxn answered, its markers not all written; the transaction stays prepared and is retried");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    error!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, error = %e, "a prepared transaction could not be finished; left to the reaper");
                    return;
                }
            }
        }
    }
}

/// How long a request (or a finish) waits for a transaction slot's locks before
/// giving up with [`CoordError::SlotBusy`] (retriable).
pub const SLOT_LOCK_WAIT: Duration = Duration::from_secs(5);

/// How long a fast finish, its own markers durable, keeps the slot and waits for
/// its leaders' answers before it lets the slot go (the answer that completes the set
/// then concludes, taking the slot again). The answers usually come within a leader's
/// fsync; waiting for them here saves a second look at the slot per transaction.
/// Bounded, so that a slow leader holds the slot, and the producer's next request,
/// no longer than this.
pub const NOTICE_ANSWER_WAIT: Duration = Duration::from_millis(20);

/// How long the marker watcher's poll, a notified leader and the reaper wait for one
/// slot before they move on (the poll and the reaper try it again at their next
/// round; a notice answers an error and leaves its entry to the poll).
pub const SLOT_LOCK_WAIT_BACKGROUND: Duration = Duration::from_secs(1);

/// The first pauses between tries of a slot's file lock held elsewhere, slept on the
/// blocking pool (1.6 ms together); then the runtime's timer, from 1 ms.
const SLOT_LOCK_SHORT_PAUSES: [Duration; 6] = [
    Duration::from_micros(25),
    Duration::from_micros(50),
    Duration::from_micros(100),
    Duration::from_micros(200),
    Duration::from_micros(400),
    Duration::from_micros(800),
];
/// The longest pause between two tries of a slot's file lock held elsewhere.
const SLOT_LOCK_POLL_MAX: Duration = Duration::from_millis(8);
/// How long a slot lock is seen held before its holder is judged (and then again at
/// this interval while it stays held).
const SLOT_LOCK_STEAL_AFTER: Duration = Duration::from_millis(250);

/// How long a finish after EndTxn's answer retries by itself.
const BACKGROUND_FINISH: Duration = Duration::from_secs(30);

/// A Prepare* EndTxn made, with the slot still held for its finish: `queued`, the
/// fast finish's queue entries written since the line was durable.
struct Decided<'a> {
    held: HeldSlot<'a>,
    queued: Option<Vec<(i32, MarkerEntry)>>,
}

/// Where EndTxn's decision left the transaction.
#[derive(Debug)]
pub enum Ended {
    /// Already complete (a retry after the end): nothing left to do.
    Done,
    /// Prepare* is durable; `entry` is to be finished. `prepared_at`: when this call
    /// made it durable (None for a retry that found it prepared).
    Prepared {
        entry: TxnEntry,
        prepared_at: Option<Instant>,
    },
}

mod markers;
mod recovery;

pub use markers::{process_marker_queue, txn_seq_in, txn_seq_tag, NoticeAnswer, NotifiedMarkers, TXN_SEQ_TAG};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod model_tests;
