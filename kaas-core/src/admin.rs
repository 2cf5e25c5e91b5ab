//! Operator actions on the volume, shared by `kaasctl` and its TUI: the force-abort
//! of a transaction and the completion of one left in a Prepare state, both safe while
//! brokers run, and the audit journal of every such action.
//!
//! Safety rules: every slot change happens under the slot lock and only if the entry
//! is still the one the plan was made from; the abort bumps the epoch, so the broker
//! never overwrites it (its own writes would be fenced) and the zombie producer is
//! fenced everywhere through the admin fence log; markers for a partition whose owner
//! is alive go through that broker's marker queue (only its owner may append to its
//! log), and are written directly only when no live broker owns the partition — under
//! its `owner.lock`, as a leadership of its own recorded in `owner.json` before the log
//! is read (the brokers' take-over rule: docs/cluster.md, "Safety rules").

use crate::broker::list_brokers;
use crate::error::VolumeError;
use crate::fence_log::{FenceLog, ADMIN_WRITER};
use crate::fsutil::write_json;
use crate::layout::Volume;
use crate::marker_queue::{self, MarkerEntry, MarkerResult, MARKER_FORMAT_VERSION};
use crate::offsets::GroupOffsets;
use crate::partition::PartitionState;
use crate::topic::{PartitionOwner, TopicMeta};
use crate::txn::{self, slot_for, Actor, TopicPartition, TxnEntry, TxnState};
use crate::txn_store::TxnStateStore;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

crate::versioned!(AuditRecord);

/// Brokers whose lease is younger than `session_timeout_ms`.
pub fn live_brokers(volume: &Volume, now_ms: i64, session_timeout_ms: i64) -> Result<Vec<i32>, VolumeError> {
    let mut live: Vec<i32> = list_brokers(volume)?
        .into_iter()
        .filter_map(|l| l.ok())
        .filter(|l| l.is_alive(now_ms, session_timeout_ms))
        .map(|l| l.broker_id)
        .collect();
    live.sort_unstable();
    Ok(live)
}

/// The live brokers that serve ([`live_brokers`] less those still opening the
/// volume, `BrokerLease::opening_ms`): the rendezvous owners of transaction slots and
/// groups, as the brokers compute them. An opening broker is still live for its own
/// partitions (its marker queue is applied once it serves).
pub fn serving_brokers(volume: &Volume, now_ms: i64, session_timeout_ms: i64) -> Result<Vec<i32>, VolumeError> {
    let mut serving: Vec<i32> = list_brokers(volume)?
        .into_iter()
        .filter_map(|l| l.ok())
        .filter(|l| l.is_alive(now_ms, session_timeout_ms) && !l.is_opening())
        .map(|l| l.broker_id)
        .collect();
    serving.sort_unstable();
    Ok(serving)
}

/// How a partition's marker gets written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "snake_case")]
pub enum MarkerRoute {
    /// No live broker owns the partition: the tool appends the marker itself.
    Direct,
    /// Through the marker queue of the live owner.
    Queue { broker: i32 },
}

/// The route for one partition given the live brokers.
pub fn marker_route(volume: &Volume, tp: &TopicPartition, live: &[i32]) -> MarkerRoute {
    match PartitionOwner::read(&PartitionOwner::path(volume, &tp.topic, tp.partition)) {
        Ok(o) if live.contains(&o.broker) => MarkerRoute::Queue { broker: o.broker },
        _ => MarkerRoute::Direct,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error("no transaction with transactional.id {0:?}")]
    NotFound(String),
    #[error("transaction {id:?} is {state}: {what}")]
    WrongState {
        id: String,
        state: &'static str,
        what: &'static str,
    },
    #[error("transaction {0:?} changed while the action was being prepared; look again")]
    Changed(String),
    #[error("slot {slot} not rescued: {why}; look at the slot's files, then run the repair again with --accept-slot-loss to rescue it anyway")]
    RescueRefused { slot: u32, why: String },
    #[error("transaction {id:?}: the abort is decided and its producer fenced, and it is now {now}, but a step after that failed: {cause}. Do not run the abort again; the coordinator's reaper finishes what is left, or `kaasctl txn repair --fix` ({audit})")]
    Unfinished {
        id: String,
        now: String,
        cause: String,
        audit: String,
    },
    #[error("writing the marker to {topic}-{partition}: {detail}")]
    Marker {
        topic: String,
        partition: i32,
        detail: String,
    },
}

/// What an abort or completion will do (shown before asking, printed after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionPlan {
    pub transactional_id: String,
    pub slot: u32,
    pub producer_id: i64,
    pub state_before: TxnState,
    pub epoch_before: i16,
    /// The transaction the plan was made for (the entry's `txn_seq`).
    #[serde(default)]
    pub txn_seq: u64,
    /// Epoch of the markers (and of the fence).
    pub marker_epoch: i16,
    pub commit: bool,
    pub partitions: Vec<(TopicPartition, MarkerRoute)>,
    pub groups: Vec<String>,
}

/// The outcome of an executed plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionReport {
    pub plan: ActionPlan,
    pub before: TxnEntry,
    pub after: TxnEntry,
    pub markers_written: Vec<TopicPartition>,
    pub markers_queued: Vec<(i32, PathBuf)>,
    /// False when queued markers were not consumed within the wait: the entry stays
    /// Prepare* and the owning broker's reaper completes it once they land.
    pub completed: bool,
    pub audit_file: PathBuf,
}

/// Plans `kaasctl txn abort`: the entry must be Ongoing (a Prepare* entry is finished
/// by `plan_finish` instead).
pub fn plan_abort(volume: &Volume, tid: &str, live: &[i32]) -> Result<(ActionPlan, TxnEntry), AdminError> {
    let store = TxnStateStore::new(volume.clone());
    let entry = store.get(tid)?.ok_or_else(|| AdminError::NotFound(tid.to_string()))?;
    match entry.state {
        TxnState::Ongoing => {}
        TxnState::PrepareCommit | TxnState::PrepareAbort => {
            return Err(AdminError::WrongState {
                id: tid.into(),
                state: entry.state.as_str(),
                what: "its outcome is decided; use `kaasctl txn repair --fix` to finish it",
            })
        }
        _ => {
            return Err(AdminError::WrongState {
                id: tid.into(),
                state: entry.state.as_str(),
                what: "there is no open transaction to abort",
            })
        }
    }
    Ok((
        plan_for(volume, &entry, entry.producer_epoch.saturating_add(1), false, live),
        entry,
    ))
}

/// Plans finishing a Prepare* entry in its decided direction, at its epoch.
pub fn plan_finish(volume: &Volume, entry: &TxnEntry, live: &[i32]) -> Option<ActionPlan> {
    let commit = match entry.state {
        TxnState::PrepareCommit => true,
        TxnState::PrepareAbort => false,
        _ => return None,
    };
    Some(plan_for(volume, entry, entry.producer_epoch, commit, live))
}

fn plan_for(volume: &Volume, entry: &TxnEntry, marker_epoch: i16, commit: bool, live: &[i32]) -> ActionPlan {
    ActionPlan {
        transactional_id: entry.transactional_id.clone(),
        slot: slot_for(&entry.transactional_id),
        producer_id: entry.producer_id,
        state_before: entry.state,
        epoch_before: entry.producer_epoch,
        txn_seq: entry.txn_seq,
        marker_epoch,
        commit,
        partitions: entry
            .partitions
            .iter()
            .map(|tp| (tp.clone(), marker_route(volume, tp, live)))
            .collect(),
        groups: entry.groups.iter().cloned().collect(),
    }
}

/// Executes a plan from `plan_abort` or `plan_finish`. `wait` bounds how long queued
/// markers are waited for before the entry is left for the owning broker to complete.
pub fn execute(
    volume: &Volume,
    plan: &ActionPlan,
    actor: &Actor,
    command: &[String],
    now_ms: i64,
    wait: Duration,
) -> Result<ActionReport, AdminError> {
    execute_with(volume, plan, actor, command, now_ms, wait, &mut |_| {})
}

/// Where [`execute_with`] lets a test act as a live coordinator would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    /// The transition is made; the finish (under the slot lock) has not begun.
    TransitionAndFinish,
    /// The finish wrote its markers and queued the others, and let the slot go.
    FinishAndWait,
}

/// [`execute`], running `meanwhile` at each point of [`Between`] (tests: what a live
/// coordinator may do there).
fn execute_with(
    volume: &Volume,
    plan: &ActionPlan,
    actor: &Actor,
    command: &[String],
    now_ms: i64,
    wait: Duration,
    meanwhile: &mut dyn FnMut(Between),
) -> Result<ActionReport, AdminError> {
    let store = TxnStateStore::new(volume.clone());
    let tid = plan.transactional_id.clone();
    // 1. The transition, only if the entry is still what the plan saw.
    let (before, prepared) = store.update(plan.slot, now_ms, |entries| {
        let Some(current) = entries.get(&tid).cloned() else {
            return (Err(AdminError::NotFound(tid.clone())), false);
        };
        // A compare-and-set on the transaction the operator saw: same identity, same
        // transaction, same partitions and groups — the effects below are driven by
        // the plan, so they must be exactly the entry's.
        let planned: std::collections::BTreeSet<&TopicPartition> = plan.partitions.iter().map(|(tp, _)| tp).collect();
        let groups: std::collections::BTreeSet<&String> = plan.groups.iter().collect();
        if current.producer_id != plan.producer_id
            || current.producer_epoch != plan.epoch_before
            || current.state != plan.state_before
            || current.txn_seq != plan.txn_seq
            || current.partitions.iter().collect::<std::collections::BTreeSet<_>>() != planned
            || current.groups.iter().collect::<std::collections::BTreeSet<_>>() != groups
        {
            return (Err(AdminError::Changed(tid.clone())), false);
        }
        if current.state == TxnState::Ongoing {
            match txn::force_abort(&current, "kaasctl txn abort", now_ms, actor) {
                Some(next) => {
                    entries.insert(tid.clone(), next.clone());
                    (Ok((current, next)), true)
                }
                None => (Err(AdminError::Changed(tid.clone())), false),
            }
        } else {
            (Ok((current.clone(), current)), false)
        }
    })??;
    // From here the abort is decided (a durable PrepareAbort at the fencing epoch,
    // when step 1 made one): a failure below must say so, and be audited, not read
    // as "nothing happened" (an operator would run it again and abort the restarted
    // producer's next transaction). The reaper or `txn repair --fix` finishes it.
    let decided = prepared.state != before.state;
    // Audited as soon as it is decided, and the record brought up to date at the end:
    // a tool stopped while it waits for queued markers (Ctrl-C, `q` in `kaasctl top`)
    // leaves the decision in the audit journal, never nothing.
    // One that cannot be written does not stop the abort (as before): the record is
    // tried again, as a new file, at the end.
    let audit_at = if decided {
        record_audit(volume, actor, command, &tid, Some(&before), Some(&prepared), now_ms)
            .inspect_err(|e| tracing::warn!(error = %e, "the abort's audit record could not be written at its decision; tried again at the end"))
            .ok()
    } else {
        None
    };
    let rest = finish_prepared(
        volume,
        plan,
        (actor, command, audit_at.as_deref()),
        now_ms,
        wait,
        meanwhile,
        &before,
        prepared,
    );
    match rest {
        Err(e) if decided => {
            let after = store.get(&tid).ok().flatten();
            let audit = audit_at
                .as_deref()
                .map(|at| {
                    let record = audit_record(volume, actor, command, &tid, Some(&before), after.as_ref(), now_ms);
                    rewrite_audit(at, &record)
                })
                .unwrap_or_else(|| record_audit(volume, actor, command, &tid, Some(&before), after.as_ref(), now_ms));
            Err(AdminError::Unfinished {
                id: tid,
                now: after.map_or_else(
                    || "unreadable".to_string(),
                    |a| format!("{} at epoch {}", a.state.as_str(), a.producer_epoch),
                ),
                cause: e.to_string(),
                audit: match audit {
                    Ok(path) => format!("audit: {}", path.display()),
                    Err(a) => format!("the audit record could not be written either: {a}"),
                },
            })
        }
        other => other,
    }
}

/// Steps 2 to 5 of [`execute_with`], once the entry is (or was found) Prepare*.
#[allow(clippy::too_many_arguments)]
fn finish_prepared(
    volume: &Volume,
    plan: &ActionPlan,
    (actor, command, audit_at): (&Actor, &[String], Option<&std::path::Path>),
    now_ms: i64,
    wait: Duration,
    meanwhile: &mut dyn FnMut(Between),
    before: &TxnEntry,
    prepared: TxnEntry,
) -> Result<ActionReport, AdminError> {
    let store = TxnStateStore::new(volume.clone());
    let tid = plan.transactional_id.clone();
    let before = before.clone();
    // 2. Fence the old epoch everywhere (brokers apply the admin fence log).
    if plan.marker_epoch > plan.epoch_before {
        // Several kaasctl processes may abort at once: one read-modify-write at a time.
        let lock_path = crate::fence_log::fence_log_path(volume, ADMIN_WRITER).with_extension("lock");
        let dir = crate::fence_log::fences_dir(volume);
        crate::fsutil::create_dir_durable(&dir).map_err(|e| VolumeError::io(&dir, e))?;
        let _lock = crate::fsutil::lock_exclusive(&lock_path).map_err(|e| VolumeError::io(&lock_path, e))?;
        let mut fences = FenceLog::load(volume, ADMIN_WRITER)?;
        if fences.append(plan.producer_id, plan.marker_epoch, Some(&tid), now_ms) {
            fences.save(volume)?;
        }
    }
    // 3. Under the slot lock, and only while the entry is still the one this action
    // prepared (or found) — the same transaction, still Prepare* — the staged
    // offsets are committed or discarded and the markers no live broker can write are
    // written here. Without the lock a live coordinator could finish this
    // transaction meanwhile and its producer stage the next one's offsets at the same
    // (producer id, epoch), which would then be committed with this one's outcome;
    // or take a partition and write the next one's first batches, which a direct
    // marker would close (issue 25 item 12b: `a_finish_racing_the_coordinator_touches_nothing_of_the_next_transaction`).
    // Staged offsets of (producer id, epoch) are only ever staged while the entry is
    // Ongoing and finished while it is Prepare*, both under this lock
    // (docs/transactions.md, "Staged offsets"): under it, with the entry Prepare*,
    // every one staged belongs to this transaction.
    meanwhile(Between::TransitionAndFinish);
    let (pid, epoch, txn_seq) = (plan.producer_id, plan.marker_epoch, prepared.txn_seq);
    let mut by_broker: std::collections::BTreeMap<i32, Vec<TopicPartition>> = std::collections::BTreeMap::new();
    let mut queued = Vec::new();
    let (written, prepared) = store.update(plan.slot, now_ms, |entries| {
        let same = entries.get(&tid).is_some_and(|c| {
            c.producer_id == prepared.producer_id
                && c.producer_epoch == prepared.producer_epoch
                && c.txn_seq == prepared.txn_seq
                && c.state == prepared.state
        });
        if !same {
            return (Err(AdminError::Changed(tid.clone())), false);
        }
        let written = match finish_under_lock(volume, plan, &mut by_broker, now_ms) {
            Ok(written) => written,
            Err(e) => return (Err(e), false),
        };
        // Queued here, under the slot lock, as every writer of queue entries does (a
        // coordinator removes an entry its leader answered for under this lock), and
        // merged with an entry of the transaction already there, never narrowing it.
        for (broker, partitions) in std::mem::take(&mut by_broker) {
            let entry = MarkerEntry::new(
                &tid,
                plan.producer_id,
                plan.marker_epoch,
                plan.commit,
                partitions,
                Some(prepared.txn_seq),
                ADMIN_WRITER,
                now_ms,
            );
            match marker_queue::enqueue_merged(volume, broker, &entry) {
                Ok(path) => queued.push((broker, path)),
                Err(e) => return (Err(e.into()), false),
            }
        }
        // Recorded in this same hold that the queue entries exist, so a broker
        // finishing the entry waits for them instead of writing its own set. In a
        // later hold, a coordinator's finish taking the slot in between saw no
        // `markers_queued`, took the notice path and rewrote or removed these entries
        // for its own set; a marker of its own failing then, the leaders' polls found
        // nothing for the partitions queued here and the transaction completed without
        // their markers (`kaasctl_records_its_queue_entries_in_the_hold_that_wrote_them`).
        // Every entry of the transaction is made durable first: a broker's finish may
        // have written some without their fsyncs (leaders it notifies at once,
        // docs/cluster.md "Markers from a notice"), and `markers_queued` must only
        // ever name durable entries.
        let Some(current) = entries.get(&tid).cloned() else {
            return (Err(AdminError::Changed(tid.clone())), false);
        };
        if queued.is_empty() || current.markers_queued {
            return (Ok((written, current)), false);
        }
        if let Err(e) = marker_queue::make_pending_durable(volume, pid, epoch, txn_seq) {
            return (Err(e.into()), false);
        }
        let mut next = current;
        next.markers_queued = true;
        entries.insert(tid.clone(), next.clone());
        (Ok((written, next)), true)
    })??;
    meanwhile(Between::FinishAndWait);
    // Every queue file of the transaction, whoever wrote it: a broker's finish may
    // have written the transaction's entries meanwhile (rewriting these, or putting
    // one in another leader's queue and removing ours there).
    let pending = || marker_queue::pending_files(volume, pid, epoch, txn_seq);
    // 5. Wait for the queued markers — every queue file of the transaction, not only
    // ours — then complete.
    let deadline = Instant::now() + wait;
    // A queue that cannot be checked counts as still waiting.
    let waiting = || !queued.is_empty() && pending().map_or(true, |left| !left.is_empty());
    while waiting() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let drained = !waiting();
    let mut after = prepared.clone();
    if drained {
        let done_at = now_ms;
        after = store.update(plan.slot, done_at, |entries| match entries.get(&tid) {
            Some(current) if *current == prepared => match txn::complete(current, done_at, actor) {
                Some(done) => {
                    entries.insert(tid.clone(), done.clone());
                    (done, true)
                }
                None => (current.clone(), false),
            },
            Some(current) => (current.clone(), false),
            None => (prepared.clone(), false),
        })?;
    }
    let audit_file = match audit_at {
        Some(at) => rewrite_audit(
            at,
            &audit_record(volume, actor, command, &tid, Some(&before), Some(&after), now_ms),
        )?,
        None => record_audit(volume, actor, command, &tid, Some(&before), Some(&after), now_ms)?,
    };
    Ok(ActionReport {
        plan: plan.clone(),
        before,
        after,
        markers_written: written,
        markers_queued: queued,
        completed: drained,
        audit_file,
    })
}

/// What a direct marker write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DirectWrite {
    /// The topic or partition was deleted: there is no log left to end anything in.
    NoPartition,
    /// Nothing of the producer was open there (or not the transaction named): nothing
    /// written.
    NothingOpen,
    /// The marker was appended and synced.
    Written,
}

/// Steps 3 and 4 of [`execute`], run under the slot lock: the staged offsets, then
/// the direct markers; the partitions whose markers go through a live broker's queue
/// are gathered in `by_broker`. Returns the partitions written directly.
fn finish_under_lock(
    volume: &Volume,
    plan: &ActionPlan,
    by_broker: &mut std::collections::BTreeMap<i32, Vec<TopicPartition>>,
    now_ms: i64,
) -> Result<Vec<TopicPartition>, AdminError> {
    for group in &plan.groups {
        GroupOffsets::update(volume, group, |offsets| {
            let changed = if plan.commit {
                offsets.commit_pending(plan.producer_id, plan.marker_epoch)
            } else {
                offsets.discard_pending(plan.producer_id, plan.marker_epoch)
            };
            ((), changed)
        })?;
    }
    let mut written = Vec::new();
    for (tp, route) in &plan.partitions {
        match route {
            MarkerRoute::Queue { broker } => by_broker.entry(*broker).or_default().push(tp.clone()),
            MarkerRoute::Direct => {
                let done = write_marker_direct(
                    volume,
                    tp,
                    plan.producer_id,
                    plan.marker_epoch,
                    plan.commit,
                    None,
                    now_ms,
                )?;
                // Only a marker appended counts as written: a partition with nothing
                // open of the producer only had its epoch raised.
                if done == DirectWrite::Written {
                    written.push(tp.clone());
                }
            }
        }
    }
    Ok(written)
}

/// Appends a marker to a partition no live broker owns — when `open_since` is given,
/// only to the transaction of the producer open there since that offset.
fn write_marker_direct(
    volume: &Volume,
    tp: &TopicPartition,
    pid: i64,
    epoch: i16,
    commit: bool,
    open_since: Option<i64>,
    now_ms: i64,
) -> Result<DirectWrite, AdminError> {
    let err = |detail: String| AdminError::Marker {
        topic: tp.topic.clone(),
        partition: tp.partition,
        detail,
    };
    let meta = match TopicMeta::read(&volume.topic_file(&tp.topic)) {
        Ok(m) => m,
        // The topic was deleted since: there is no log left to end a transaction in.
        Err(e) if e.is_not_found() => return Ok(DirectWrite::NoPartition),
        Err(e) => return Err(err(e.to_string())),
    };
    if tp.partition < 0 || tp.partition >= meta.partitions {
        return Ok(DirectWrite::NoPartition);
    }
    // The same lock a leading broker holds: refused, with the owner named, while any
    // process writes this log.
    let owner_lock = PartitionOwner::lock(volume, &tp.topic, tp.partition).map_err(|e| err(e.to_string()))?;
    // The topic again, under the lock: one deleted while this waited for it had its
    // directory renamed away, and the lock made the directory again — nothing of it
    // to end, and no leadership to record for a topic that is gone (the sweep removes
    // the empty directory). Created again under the name: not the partition judged.
    let meta = match TopicMeta::read(&volume.topic_file(&tp.topic)) {
        Ok(m) if m.topic_id == meta.topic_id => m,
        Ok(_) => return Ok(DirectWrite::NoPartition),
        Err(e) if e.is_not_found() => return Ok(DirectWrite::NoPartition),
        Err(e) => return Err(err(e.to_string())),
    };
    let config = crate::topic::stored_log_config(&Default::default(), &meta.configs).0;
    // A leadership of its own, recorded before the log is read, as a broker taking a
    // partition over records one (docs/cluster.md, "Safety rules"): a broker judged
    // dead that is only frozen, or whose NFS lock lapsed, then has nothing
    // acknowledged after this point — its check after the fsync finds this
    // leadership — and what it appends lands past the segment started below.
    let owner_path = PartitionOwner::path(volume, &tp.topic, tp.partition);
    let last = match PartitionOwner::read(&owner_path) {
        Ok(o) => Some(o),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(err(e.to_string())),
    };
    // Leftovers of a deleted topic of the same name: no broker has opened this
    // topic's partition yet (the one that does removes them first, and records its
    // leadership only then), so nothing of this topic is in it — no transaction to
    // end. Left untouched: adopting them under this topic's id would serve the
    // deleted topic's records as this one's.
    if last
        .as_ref()
        .is_some_and(|o| o.topic_id.is_some_and(|id| id != meta.topic_id))
    {
        tracing::warn!(topic = %tp.topic, partition = tp.partition, "the partition's directory holds a deleted topic's leftovers; nothing of this topic to end there");
        return Ok(DirectWrite::NoPartition);
    }
    let mut own = PartitionOwner {
        version: crate::topic::OWNER_FORMAT_VERSION,
        broker: ADMIN_WRITER,
        leader_epoch: last.as_ref().map_or(0, |o| o.leader_epoch + 1),
        released: false,
        updated_ms: now_ms,
        topic_id: Some(meta.topic_id),
    };
    own.write(&owner_path).map_err(|e| err(e.to_string()))?;
    if let Some(o) = last.as_ref().filter(|o| !o.released && o.broker >= 0) {
        crate::topic::tell_deposed(volume, o.broker, &own, &tp.topic, tp.partition);
    }
    let dir = volume.partition_dir(&tp.topic, tp.partition);
    let mut state = PartitionState::open(&dir, config, now_ms).map_err(|e| err(e.to_string()))?;
    if last.as_ref().is_some_and(|o| !o.released) {
        state.log.start_fresh_segment(now_ms).map_err(|e| err(e.to_string()))?;
    }
    // A hanging transaction's marker ends the one that was judged — open since that
    // offset — and nothing a later session began since.
    let still_open = open_since.is_none_or(|first| state.producers.has_open_since(pid, epoch, first));
    let mut outcome = DirectWrite::NothingOpen;
    if still_open
        && state
            .write_marker(pid, epoch, commit, 0, own.leader_epoch, now_ms)
            .map_err(|e| err(e.to_string()))?
            .is_some()
    {
        let (file, _) = state.log.sync_handle().map_err(|e| err(e.to_string()))?;
        file.sync(false).map_err(|e| err(e.to_string()))?;
        outcome = DirectWrite::Written;
    }
    match state.write_snapshot(now_ms) {
        // Not written, and not needed: the previous snapshot stays, and the next
        // owner replays more of the log. The marker is written; failing here made
        // every retry of the repair fail too.
        Err(e @ crate::partition::PartitionError::SnapshotTooLarge { .. }) => {
            tracing::warn!(error = %e, "producer-state snapshot not written after the marker");
        }
        written => written.map_err(|e| err(e.to_string()))?,
    }
    // Let go cleanly, so the partition's rendezvous owner takes it at once. Should
    // this process die before, the leadership names no live broker: the next owner
    // takes it once the lock is free (the kernel frees it with the process).
    own.released = true;
    own.updated_ms = now_ms;
    own.write(&owner_path).map_err(|e| err(e.to_string()))?;
    drop(owner_lock);
    Ok(outcome)
}

/// How `kaasctl txn repair --fix` ended a hanging transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HangingEnd {
    /// Written here (no live broker owns the partition).
    Written,
    /// Queued for the partition's live owner, which judges it again when it applies
    /// the entry.
    Queued { broker: i32 },
    /// Judged again under the slot lock, it is no longer hanging (why): nothing written.
    NotHanging(String),
    /// Still hanging, but its coordinator's outcome is not the one shown (why):
    /// nothing written; a new look decides.
    OutcomeChanged(String),
}

/// The open transaction a repair ends: `producer_id` at `epoch` on `tp`, open there
/// since `first_offset`, whose coordinator entry (if any) is `transactional_id`'s.
#[derive(Debug, Clone)]
pub struct HangingTxn {
    pub tp: TopicPartition,
    pub producer_id: i64,
    pub epoch: i16,
    pub first_offset: i64,
    pub transactional_id: Option<String>,
    /// The marker the judge chose when the operator looked.
    pub commit: bool,
}

/// Ends a hanging transaction on one partition (open there, not covered by its
/// coordinator: see [`crate::reconcile::judge`]) with the marker the judge chose,
/// at the producer's epoch on that partition — through the owner's marker queue if
/// it is alive, directly otherwise. Either way it is judged again where it is
/// written, with its slot locked (no transaction of that id begins, adds a partition
/// or ends meanwhile) and the partition read again: only the transaction open there
/// since `first_offset`, still hanging with the same outcome, gets the marker — never
/// the early batches of a later transaction at the same epoch (issue 25 item 12a,
/// `a_hanging_repair_judged_before_the_next_transaction_leaves_it_alone`).
pub fn end_hanging(
    volume: &Volume,
    txn: &HangingTxn,
    live: &[i32],
    actor: &Actor,
    command: &[String],
    now_ms: i64,
) -> Result<HangingEnd, AdminError> {
    let (pid, epoch) = (txn.producer_id, txn.epoch);
    let outcome = match marker_route(volume, &txn.tp, live) {
        MarkerRoute::Direct => {
            let judged_and_written = |entry: Option<&TxnEntry>| -> Result<HangingEnd, AdminError> {
                match crate::reconcile::judge(entry, &txn.tp, pid, epoch) {
                    crate::reconcile::Verdict::Covered => {
                        Ok(HangingEnd::NotHanging("its coordinator covers it now".into()))
                    }
                    crate::reconcile::Verdict::Hanging { commit, .. } if commit != txn.commit => {
                        Ok(HangingEnd::OutcomeChanged(format!(
                            "its coordinator's outcome is {} now; run repair again",
                            if commit { "COMMIT" } else { "ABORT" }
                        )))
                    }
                    crate::reconcile::Verdict::Hanging { .. } => {
                        match write_marker_direct(volume, &txn.tp, pid, epoch, txn.commit, Some(txn.first_offset), now_ms)? {
                            DirectWrite::Written => Ok(HangingEnd::Written),
                            DirectWrite::NothingOpen => Ok(HangingEnd::NotHanging(format!(
                                "no transaction of producer {pid} at epoch {epoch} is open there since offset {} any more",
                                txn.first_offset
                            ))),
                            DirectWrite::NoPartition => Ok(HangingEnd::NotHanging("the partition was deleted".into())),
                        }
                    }
                }
            };
            match &txn.transactional_id {
                Some(tid) => {
                    let store = TxnStateStore::new(volume.clone());
                    store.update(slot_for(tid), now_ms, |entries| {
                        let entry = entries
                            .get(tid)
                            .filter(|e| e.producer_id == pid || e.last_producer_id == pid);
                        (judged_and_written(entry), false)
                    })??
                }
                // No coordinator entry had this producer id (and every slot was read):
                // producer ids are never handed out twice, so none will.
                None => judged_and_written(None)?,
            }
        }
        MarkerRoute::Queue { broker } => {
            let mut entry = MarkerEntry::new(
                txn.transactional_id.as_deref().unwrap_or(""),
                pid,
                epoch,
                txn.commit,
                vec![txn.tp.clone()],
                None,
                ADMIN_WRITER,
                now_ms,
            );
            entry.hanging_since = Some(txn.first_offset);
            marker_queue::enqueue(volume, broker, &entry)?;
            HangingEnd::Queued { broker }
        }
    };
    record_audit(
        volume,
        actor,
        command,
        &format!("{}-{} producer {pid}", txn.tp.topic, txn.tp.partition),
        None,
        None,
        now_ms,
    )?;
    Ok(outcome)
}

/// What [`redeliver`] did with a queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivered {
    /// Its markers were written (or queued to the partitions' live leaders).
    Delivered,
    /// Its transaction was over: removed, nothing written.
    Spent,
    /// Gone (or replaced by another transaction's) by the time it was read under the
    /// slot lock: applied by its leader meanwhile; nothing done.
    Gone,
}

/// Delivers a queue entry addressed to a dead broker: its markers are written
/// directly (or re-queued to a live owner), then the entry is deleted. An entry
/// naming its transaction (`txn_seq`) is judged under that transaction's slot lock
/// first, as a broker's poll judges it: only while the transaction is still that
/// Prepare* are its markers delivered. Otherwise it is spent — its transaction
/// completed, its markers durable, and the producer may have begun the next one at
/// the same epoch, which a marker written now would close — and it is removed
/// without writing anything
/// (`a_spent_entry_of_a_completed_transaction_is_removed_without_writing_a_marker`).
pub fn redeliver(
    volume: &Volume,
    path: &std::path::Path,
    entry: &MarkerEntry,
    live: &[i32],
    actor: &Actor,
    command: &[String],
    now_ms: i64,
) -> Result<Redelivered, AdminError> {
    let (Some(seq), false, None) = (entry.txn_seq, entry.transactional_id.is_empty(), entry.hanging_since) else {
        return redeliver_unjudged(volume, path, entry, live, actor, command, now_ms).map(|()| Redelivered::Delivered);
    };
    let store = TxnStateStore::new(volume.clone());
    store.update(slot_for(&entry.transactional_id), now_ms, |entries| {
        // Read again under the lock: the coordinator may have rewritten it (wider)
        // while this waited for the lock, or a leader applied and removed it.
        let entry = match marker_queue::read_entry(path) {
            Ok(Some(now)) if now.txn_seq == Some(seq) && now.transactional_id == entry.transactional_id => now,
            Ok(_) => return (Ok(Redelivered::Gone), false),
            Err(e) => return (Err(e.into()), false),
        };
        let entry = &entry;
        let prepared = if entry.result == MarkerResult::Commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        let named = entries.get(&entry.transactional_id).is_some_and(|e| {
            e.producer_id == entry.producer_id
                && e.producer_epoch == entry.producer_epoch
                && e.txn_seq == seq
                && e.state == prepared
        });
        let done = if named {
            redeliver_unjudged(volume, path, entry, live, actor, command, now_ms).map(|()| Redelivered::Delivered)
        } else {
            (|| {
                marker_queue::remove(path)?;
                let named = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
                let what = format!("{} (spent: its transaction is over; nothing written)", named.display());
                record_audit(volume, actor, command, &what, None, None, now_ms)?;
                Ok(Redelivered::Spent)
            })()
        };
        (done, false)
    })?
}

/// [`redeliver`] without the judgment: an entry of an older version, or a
/// hanging-transaction repair (judged where it is written, by its offset), or one
/// whose transaction is still the Prepare* it names.
fn redeliver_unjudged(
    volume: &Volume,
    path: &std::path::Path,
    entry: &MarkerEntry,
    live: &[i32],
    actor: &Actor,
    command: &[String],
    now_ms: i64,
) -> Result<(), AdminError> {
    let commit = entry.result == MarkerResult::Commit;
    if let Some(first_offset) = entry.hanging_since {
        // A hanging-transaction repair: judged again where it is written, as it was
        // first (`end_hanging`).
        for tp in &entry.partitions {
            let txn = HangingTxn {
                tp: tp.clone(),
                producer_id: entry.producer_id,
                epoch: entry.producer_epoch,
                first_offset,
                transactional_id: Some(entry.transactional_id.clone()).filter(|t| !t.is_empty()),
                commit,
            };
            end_hanging(volume, &txn, live, actor, command, now_ms)?;
        }
        marker_queue::remove(path)?;
        return Ok(());
    }
    let mut by_broker: std::collections::BTreeMap<i32, Vec<TopicPartition>> = std::collections::BTreeMap::new();
    for tp in &entry.partitions {
        match marker_route(volume, tp, live) {
            MarkerRoute::Direct => {
                write_marker_direct(
                    volume,
                    tp,
                    entry.producer_id,
                    entry.producer_epoch,
                    commit,
                    None,
                    now_ms,
                )?;
            }
            MarkerRoute::Queue { broker } => by_broker.entry(broker).or_default().push(tp.clone()),
        }
    }
    // One entry per target, merged with any entry of the same name already waiting
    // there (the same transaction), so no partition's marker is overwritten away.
    for (broker, partitions) in by_broker {
        let mut moved = entry.clone();
        moved.partitions = partitions;
        let target = marker_queue::entry_path(volume, broker, &moved);
        match crate::error::read_versioned_json::<MarkerEntry>(&target, "marker queue entry", MARKER_FORMAT_VERSION) {
            Ok(waiting) => {
                for tp in waiting.partitions {
                    if !moved.partitions.contains(&tp) {
                        moved.partitions.push(tp);
                    }
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        marker_queue::enqueue(volume, broker, &moved)?;
    }
    marker_queue::remove(path)?;
    // Absolute: the journal is read later, from anywhere.
    let named = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    record_audit(volume, actor, command, &named.display().to_string(), None, None, now_ms)?;
    Ok(())
}

/// What [`quarantine_slot`] did to a slot that does not read.
#[derive(Debug, Default)]
pub struct SlotRescue {
    /// The damaged files as they were, kept under `slot-N.json.corrupt-<now>` and
    /// `slot-N.journal.corrupt-<now>` (hard links: never deleted or emptied).
    pub kept_aside: Vec<PathBuf>,
    /// Entries the rescued slot holds.
    pub entries: usize,
    /// The checkpoint was used (it parsed).
    pub checkpoint_kept: bool,
    /// Journal lines kept, and dropped (the first bad one and all after it).
    pub lines_kept: usize,
    pub lines_dropped: usize,
    /// The first bad line: byte offset and what is wrong with it.
    pub dropped_at: Option<(u64, String)>,
    /// Transactional ids named by dropped lines: their entries may have lost a
    /// transition (the operator checks them).
    pub maybe_stale: Vec<String>,
    /// Idle entries a fence log shows bumped past their epoch (the bump's line was
    /// dropped): (id, rescued epoch, fenced epoch they were raised to), so the next
    /// bump never hands out an epoch a producer already holds.
    pub epochs_raised: Vec<(String, i16, i16)>,
    /// Entries with a transaction in flight that a fence log shows bumped past their
    /// epoch: left as they are (the operator checks them).
    pub behind_their_fence: Vec<String>,
    /// The risks the operator accepted (`--accept-slot-loss`); empty for a rescue
    /// that loses nothing in flight.
    pub accepted_loss: Vec<String>,
}

/// Rescues an unreadable slot under its lock: the damaged checkpoint and journal
/// are kept aside as they were (`slot-N.json.corrupt-<now>`,
/// `slot-N.journal.corrupt-<now>`), and the slot is rewritten from what can be
/// trusted — the checkpoint if it parses, and the journal's valid prefix
/// ([`TxnStateStore::salvage`]) — as a new checkpoint and an empty journal. It used
/// to move both aside and leave the slot empty: a healthy checkpoint was thrown away
/// with a bad journal, and a PrepareCommit in it, partly marked, was then aborted by
/// the reconcile backstop on the partitions not marked yet — a partial commit
/// (issue 25 item 13, `a_rescued_slot_keeps_its_checkpoint_and_the_journals_valid_prefix`).
/// A rescue that would lose something in flight — the checkpoint does not parse, or
/// a dropped line may have moved on an entry that is Ongoing or Prepare* — is
/// refused ([`AdminError::RescueRefused`]) unless `accept_loss`
/// (`a_rescue_that_could_finish_a_transaction_twice_is_refused_unless_accepted`).
/// Returns None when the slot reads fine under the lock. A slot of a newer format
/// version, or one that fails to read with an I/O error, is refused.
pub fn quarantine_slot(
    volume: &Volume,
    slot: u32,
    accept_loss: bool,
    actor: &Actor,
    command: &[String],
    now_ms: i64,
) -> Result<Option<SlotRescue>, AdminError> {
    let store = TxnStateStore::new(volume.clone());
    let lock = store.lock_slot(slot)?;
    // Judged again under the lock: a lock-free read can fail for a healthy slot (a
    // fold in between, a slow network file system), and a slot of a newer format
    // belongs to the newer build, which reads it.
    match store.load(slot) {
        Ok(_) => return Ok(None),
        // Only what is damaged is rescued: an I/O error (a flaky disk, a network
        // file system's stale handle) may pass.
        Err(VolumeError::Parse { .. } | VolumeError::Invalid { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let mut salvage = store.salvage(&lock)?;
    // What a rescue cannot give back must not be finished as if it were current: an
    // entry with a transaction in flight that a dropped line may have moved on (a
    // Prepare* already finished, whose producer began the next transaction at the
    // same epoch: finishing it again would close that one's batches and commit its
    // staged offsets), or entries only the lost checkpoint held (their open
    // transactions would be aborted, a PrepareCommit partly). Refused unless the
    // operator accepts the loss.
    let in_flight = |e: &TxnEntry| e.state.is_in_flight();
    let entries = &salvage.state.file.entries;
    let mut risks = Vec::new();
    if let Some(why) = &salvage.checkpoint_lost {
        risks.push(format!(
            "its checkpoint does not parse ({why}): the entries only it held are lost"
        ));
    }
    let mut in_doubt: std::collections::BTreeSet<&String> = salvage
        .maybe_stale
        .iter()
        .filter(|id| entries.get(*id).is_some_and(in_flight))
        .collect();
    in_doubt.extend(salvage.dropped_in_flight.iter());
    if !in_doubt.is_empty() {
        risks.push(format!(
            "dropped journal lines concern {} with a transaction in flight (in the rescued slot or in the dropped lines): it may be over already, or acknowledged further than the rescue knows",
            in_doubt.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
        ));
    }
    if salvage.unreadable > 0 {
        risks.push(format!(
            "{} dropped journal line(s) do not parse: what they did is unknown{}",
            salvage.unreadable,
            if salvage.maybe_stale.is_empty() {
                String::new()
            } else {
                format!(
                    " (ids in the dropped lines: {})",
                    salvage
                        .maybe_stale
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
    }
    if !risks.is_empty() && !accept_loss {
        return Err(AdminError::RescueRefused {
            slot,
            why: risks.join("; "),
        });
    }
    // A bump's fence is recorded after its slot line is durable: a fence log that
    // knows a producer at a higher epoch than its rescued entry shows the bump's line
    // was dropped. An idle entry is raised to that epoch (what the lost line said),
    // so the next bump hands out a new one; one with a transaction in flight is
    // reported, not guessed at.
    let mut fenced: std::collections::BTreeMap<i64, i16> = std::collections::BTreeMap::new();
    for (_, log) in crate::fence_log::list_fence_logs(volume)? {
        for (pid, f) in log?.fences {
            let e = fenced.entry(pid).or_insert(f.epoch);
            *e = (*e).max(f.epoch);
        }
    }
    let mut rescue = SlotRescue {
        accepted_loss: risks,
        ..SlotRescue::default()
    };
    for entry in salvage.state.file.entries.values_mut() {
        let Some(&epoch) = fenced.get(&entry.producer_id).filter(|e| **e > entry.producer_epoch) else {
            continue;
        };
        if in_flight(entry) {
            rescue.behind_their_fence.push(entry.transactional_id.clone());
        } else {
            rescue
                .epochs_raised
                .push((entry.transactional_id.clone(), entry.producer_epoch, epoch));
            entry.producer_epoch = epoch;
            entry.last_epoch = -1;
            let state = entry.state;
            entry.transition(
                state,
                "kaasctl txn repair: slot rescued, epoch raised to its fence",
                actor,
                now_ms,
            );
        }
    }
    // The files as they were, first: hard links, so the rescue's rename below
    // replaces the slot's names and never touches these.
    for from in [store.slot_path(slot), store.journal_path(slot)] {
        if std::fs::metadata(&from).is_ok_and(|m| m.len() == 0) {
            continue; // an empty journal holds nothing to keep
        }
        let mut name = from.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".corrupt-{now_ms}"));
        let to = from.with_file_name(name);
        match std::fs::hard_link(&from, &to) {
            Ok(()) => rescue.kept_aside.push(to),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(VolumeError::io(&to, e).into()),
        }
    }
    crate::fsutil::sync_dir(&store.dir()).map_err(|e| VolumeError::io(store.dir(), e))?;
    store.fold(&lock, &mut salvage.state)?;
    rescue.entries = salvage.state.file.entries.len();
    rescue.checkpoint_kept = salvage.checkpoint_lost.is_none();
    rescue.lines_kept = salvage.kept_lines;
    rescue.lines_dropped = salvage.dropped_lines;
    rescue.dropped_at = salvage.dropped_at;
    rescue.maybe_stale = salvage.maybe_stale.into_iter().collect();
    record_audit(volume, actor, command, &format!("slot-{slot}"), None, None, now_ms)?;
    Ok(Some(rescue))
}

pub const AUDIT_FORMAT_VERSION: u32 = 1;

/// One mutating admin command, as recorded in `__cluster/audit/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub version: u32,
    pub at_ms: i64,
    pub actor: Actor,
    pub command: Vec<String>,
    pub target: String,
    pub before: Option<TxnEntry>,
    pub after: Option<TxnEntry>,
    /// The volume the command acted on, as an absolute path: `command` names it only
    /// when `--data-dir` was typed (not from KAAS_DATA_DIR or the default `./data`).
    /// Absent in records from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
}

pub fn audit_dir(volume: &Volume) -> PathBuf {
    volume.cluster_dir().join("audit")
}

/// Writes one audit record (its own file, so concurrent tools never collide).
pub fn record_audit(
    volume: &Volume,
    actor: &Actor,
    command: &[String],
    target: &str,
    before: Option<&TxnEntry>,
    after: Option<&TxnEntry>,
    now_ms: i64,
) -> Result<PathBuf, VolumeError> {
    let record = audit_record(volume, actor, command, target, before, after, now_ms);
    // Unique per record: two records of one target in the same millisecond (a
    // CreateAcls and a DeleteAcls of one ACL) must not share a file, in one process
    // (the counter, zero-padded so names sort in order) or in two with the same pid
    // (brokers in containers are all pid 1: the process's random tag).
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static PROCESS_TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let tag = PROCESS_TAG.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..8].to_string());
    let path = audit_dir(volume).join(audit_file_name(
        now_ms,
        std::process::id(),
        tag,
        SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        target,
    ));
    write_json(&path, &record).map_err(|e| VolumeError::io(&path, e))?;
    Ok(path)
}

/// The file name of one audit record. Names sort oldest first: by millisecond, then
/// (for two tools in the same millisecond, as under a pinned clock) by process id, then
/// by the process's own count. Every number is zero-padded so that the sort by name is
/// the sort by number: an unpadded pid put 1003 before 998.
fn audit_file_name(now_ms: i64, pid: u32, tag: &str, n: u64, target: &str) -> String {
    format!(
        "{now_ms:015}-{pid:010}-{tag}-{n:06}-{}.json",
        crate::layout::stored_name(target)
    )
}

/// Replaces the audit record at `path` (one this process wrote with
/// [`record_audit`] when its action was decided) with the action's outcome.
fn rewrite_audit(path: &std::path::Path, record: &AuditRecord) -> Result<PathBuf, VolumeError> {
    write_json(path, record).map_err(|e| VolumeError::io(path, e))?;
    Ok(path.to_path_buf())
}

fn audit_record(
    volume: &Volume,
    actor: &Actor,
    command: &[String],
    target: &str,
    before: Option<&TxnEntry>,
    after: Option<&TxnEntry>,
    now_ms: i64,
) -> AuditRecord {
    AuditRecord {
        version: AUDIT_FORMAT_VERSION,
        at_ms: now_ms,
        actor: actor.clone(),
        command: command.to_vec(),
        target: target.to_string(),
        before: before.cloned(),
        after: after.cloned(),
        data_dir: Some(
            std::path::absolute(volume.root())
                .unwrap_or_else(|_| volume.root().to_path_buf())
                .display()
                .to_string(),
        ),
    }
}

/// Every audit record, oldest first; unreadable files as errors.
pub fn list_audit(volume: &Volume) -> Result<Vec<(PathBuf, crate::error::Loaded<AuditRecord>)>, VolumeError> {
    Ok(crate::error::json_files(&audit_dir(volume))?
        .into_iter()
        .map(|p| {
            let r = crate::error::read_versioned_json(&p, "audit record", AUDIT_FORMAT_VERSION);
            (p, r)
        })
        .collect())
}

#[cfg(test)]
mod tests;
