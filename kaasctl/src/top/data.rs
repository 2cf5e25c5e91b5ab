//! What the dashboard shows, loaded from the volume. The [`Watcher`] keeps every parsed
//! file with the stamp (size, mtime, inode) it had, and on each refresh re-reads only
//! files whose stamp changed, so a refresh over 100,000 idle transactional ids costs
//! 50 `stat` calls, not 117 MB of JSON. A file rewritten mid-read is simply read again
//! next tick (writers replace files atomically, so a read sees a whole old or new
//! file); a corrupt one becomes an error row.

use kaas_core::broker::list_brokers;
use kaas_core::fence_log::{fences_dir, list_fence_logs, FenceLog, ADMIN_WRITER};
use kaas_core::fsutil::{file_stamp, FileStamp};
use kaas_core::inspect::{inspect_partition, PartitionInspection};
use kaas_core::marker_queue::{self, MarkerEntry};
use kaas_core::offsets::{list_groups, GroupOffsets};
use kaas_core::ownership::{owner, txn_slot_key};
use kaas_core::topic::{list_topics, PartitionOwner};
use kaas_core::txn::{slot_for, TxnEntry, TxnState};
use kaas_core::txn_store::{SlotFile, SlotStamp, TxnStateStore, SLOTS};
use kaas_core::Volume;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::out::age;

/// A parsed file and the stamp it was parsed at.
struct Cached<T, S> {
    stamp: Option<S>,
    value: Result<T, String>,
}

/// Re-reads a file only when its stamp changed (a transaction slot's stamp covers
/// both its checkpoint and its journal).
struct StampCache<T, S = FileStamp> {
    entries: HashMap<PathBuf, Cached<T, S>>,
    pub reads: usize,
}

impl<T, S> Default for StampCache<T, S> {
    fn default() -> Self {
        StampCache {
            entries: HashMap::new(),
            reads: 0,
        }
    }
}

impl<T, S: PartialEq> StampCache<T, S> {
    fn get(&mut self, path: &Path, stamp: Option<S>, load: impl FnOnce() -> Result<T, String>) -> &Result<T, String> {
        let fresh = self
            .entries
            .get(path)
            .is_some_and(|c| c.stamp == stamp && stamp.is_some());
        if !fresh {
            self.reads += 1;
            self.entries.insert(path.to_path_buf(), Cached { stamp, value: load() });
        }
        &self.entries[path].value
    }
}

/// One transaction as the dashboard lists it; ages are computed at draw time from
/// `txn_start_ms`, so a cached row stays right while its file is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnView {
    pub transactional_id: String,
    pub slot: u32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: &'static str,
    pub partitions: usize,
    pub txn_start_ms: i64,
    pub timeout_ms: i32,
}

impl TxnView {
    pub fn is_open(&self) -> bool {
        matches!(self.state, "Ongoing" | "PrepareCommit" | "PrepareAbort") && self.txn_start_ms > 0
    }
    pub fn open_age_ms(&self, now_ms: i64) -> Option<i64> {
        self.is_open().then(|| now_ms - self.txn_start_ms)
    }
    pub fn overdue(&self, now_ms: i64) -> bool {
        self.state == "Ongoing" && self.txn_start_ms > 0 && now_ms > self.txn_start_ms + self.timeout_ms as i64
    }
}

/// A parsed slot file with its rows (in transactional-id order) and per-state counts,
/// computed once per version of the file.
#[derive(Debug)]
pub struct SlotData {
    pub file: SlotFile,
    pub rows: Vec<TxnView>,
    pub counts: [usize; 6],
}

impl SlotData {
    fn new(slot: u32, file: SlotFile) -> SlotData {
        let mut counts = [0; 6];
        let rows = file
            .entries
            .values()
            .map(|e| {
                counts[TxnState::ALL.iter().position(|s| *s == e.state).unwrap_or(0)] += 1;
                TxnView {
                    transactional_id: e.transactional_id.clone(),
                    slot,
                    producer_id: e.producer_id,
                    producer_epoch: e.producer_epoch,
                    state: e.state.as_str(),
                    partitions: e.partitions.len(),
                    txn_start_ms: e.txn_start_ms,
                    timeout_ms: e.timeout_ms,
                }
            })
            .collect();
        SlotData { file, rows, counts }
    }
}

#[derive(Debug, Clone)]
pub struct BrokerInfo {
    pub id: i32,
    /// What the lease shows (alive, stale, stepped down, dead, stopped).
    pub liveness: kaas_core::broker::Liveness,
    pub lease_age_ms: i64,
    /// While joining: how long it has waited for its peers to route to it.
    pub joining_for_ms: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct PartitionInfo {
    pub topic: String,
    pub partition: i32,
    pub leader: Option<i32>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// (producer id, first offset) of open transactions.
    pub open: Vec<(i64, i64)>,
    pub producers: usize,
    pub error: Option<String>,
    /// The transaction pinning the LSO (the open one with the lowest first offset),
    /// as the coordinator's entry names it.
    pub pinned_by: Option<Pinner>,
}

/// The transaction holding a partition's LSO back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinner {
    pub producer_id: i64,
    pub first_offset: i64,
    /// None when no coordinator entry has (or had, before a rotation) the producer id:
    /// a hanging transaction.
    pub transactional_id: Option<String>,
    pub state: &'static str,
    pub txn_start_ms: i64,
    pub timeout_ms: i32,
    /// The coordinator has no open transaction of this producer (no entry, an entry
    /// that moved to another producer id, or one that says the transaction ended):
    /// a hanging transaction, for `kaasctl txn repair --fix`.
    pub hanging: bool,
}

/// How bad an item of the overview's "needs attention" list is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Problem,
    Warning,
}

/// One line of the overview's "needs attention" list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attention {
    pub severity: Severity,
    /// Orders items of one severity: the larger first (an age, a lag, a count).
    pub weight: i64,
    pub text: String,
}

/// A marker queue entry older than this in a live broker's queue is not draining
/// (a notified leader applies it within milliseconds, the poll within seconds).
const QUEUE_DRAIN_MS: i64 = 10_000;

#[derive(Debug, Clone)]
pub struct FenceInfo {
    pub writer: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub transactional_id: Option<String>,
    pub recorded_ms: i64,
}

#[derive(Debug, Clone)]
pub struct QueueInfo {
    pub broker: i32,
    pub alive: bool,
    pub entries: Vec<(PathBuf, Result<MarkerEntry, String>)>,
}

#[derive(Debug, Clone)]
pub struct GroupLag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
    pub lag: i64,
    pub real_lag: i64,
    pub blocked: i64,
    pub staged: usize,
}

/// One refresh's view of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub now_ms: i64,
    pub data_dir_missing: bool,
    pub brokers: Vec<BrokerInfo>,
    /// Slot n's data (None when the slot file is missing or unreadable).
    pub slots: Vec<Option<Arc<SlotData>>>,
    /// The live broker coordinating each slot.
    pub coordinators: Vec<Option<i32>>,
    /// Unreadable files: (path, error).
    pub errors: Vec<(String, String)>,
    /// Transaction slot files that exist but do not read: a producer without a
    /// coordinator entry may be in one of them (not hanging for sure).
    pub unreadable_slots: usize,
    pub queues: Vec<QueueInfo>,
    pub fences: Vec<FenceInfo>,
    pub partitions: Vec<PartitionInfo>,
    pub groups: Vec<GroupLag>,
    /// Staged offsets by producer id: (group, topic, partition, offset).
    pub staged: BTreeMap<i64, Vec<(String, String, i32, i64)>>,
}

impl Snapshot {
    pub fn count(&self, state: TxnState) -> usize {
        let i = TxnState::ALL.iter().position(|s| *s == state).unwrap_or(0);
        self.slots.iter().flatten().map(|d| d.counts[i]).sum()
    }
    pub fn txn_total(&self) -> usize {
        self.slots.iter().flatten().map(|d| d.rows.len()).sum()
    }
    pub fn txns(&self) -> impl Iterator<Item = &TxnView> {
        self.slots.iter().flatten().flat_map(|d| d.rows.iter())
    }
    /// The full entry of a transactional id.
    pub fn entry(&self, id: &str) -> Option<&TxnEntry> {
        self.slots.get(slot_for(id) as usize)?.as_ref()?.file.entries.get(id)
    }
    pub fn coordinator(&self, slot: u32) -> Option<i32> {
        self.coordinators.get(slot as usize).copied().flatten()
    }
    pub fn queue_depth(&self) -> usize {
        self.queues.iter().map(|q| q.entries.len()).sum()
    }
}

#[derive(Default)]
pub struct Watcher {
    slots: StampCache<Arc<SlotData>, SlotStamp>,
    fences: StampCache<FenceLog>,
    groups: StampCache<GroupOffsets>,
    partitions: StampCache<PartitionInspection>,
}

impl Watcher {
    /// Files parsed since the watcher was made (tests and the frame-cost benchmark).
    #[cfg(test)]
    pub fn reads(&self) -> usize {
        self.slots.reads + self.fences.reads + self.groups.reads + self.partitions.reads
    }

    pub fn refresh(&mut self, data_dir: &Path, session_timeout_ms: i64, now_ms: i64) -> Snapshot {
        let mut snap = Snapshot {
            now_ms,
            ..Snapshot::default()
        };
        // No `__cluster` yet: a volume whose first broker has not started, or the wrong
        // directory; either way nothing to show.
        if !data_dir.join("__cluster").is_dir() {
            snap.data_dir_missing = true;
            return snap;
        }
        let volume = Volume::new(data_dir);
        let mut errors = Vec::new();
        // Brokers (tiny files, read every tick).
        let mut live = Vec::new();
        let mut serving = Vec::new();
        match list_brokers(&volume) {
            Ok(leases) => {
                for l in leases {
                    match l {
                        Ok(l) => {
                            if l.is_alive(now_ms, session_timeout_ms) {
                                live.push(l.broker_id);
                                // One still opening the volume coordinates no slot yet.
                                if !l.is_opening() {
                                    serving.push(l.broker_id);
                                }
                            }
                            snap.brokers.push(BrokerInfo {
                                id: l.broker_id,
                                liveness: l.liveness(now_ms, session_timeout_ms),
                                lease_age_ms: now_ms - l.heartbeat_ms,
                                // On the broker's own clock, as of its last renewal.
                                joining_for_ms: l.joining_ms.map(|at| l.heartbeat_ms - at),
                            });
                        }
                        Err(e) => errors.push((volume.brokers_dir().display().to_string(), e.to_string())),
                    }
                }
            }
            Err(e) => errors.push((volume.brokers_dir().display().to_string(), e.to_string())),
        }
        live.sort_unstable();
        snap.coordinators = (0..SLOTS).map(|s| owner(&txn_slot_key(s), &serving)).collect();
        // Transaction slots: only changed files are parsed; unchanged ones are shared.
        let store = TxnStateStore::new(volume.clone());
        for slot in 0..SLOTS {
            let path = store.slot_path(slot);
            let stamp = store.stamp(slot);
            if stamp.is_none() {
                snap.slots.push(None);
                continue;
            }
            let loaded = self.slots.get(&path, stamp, || {
                store
                    .read_slot(slot)
                    .map(|f| Arc::new(SlotData::new(slot, f)))
                    .map_err(|e| e.to_string())
            });
            match loaded {
                Ok(data) => snap.slots.push(Some(data.clone())),
                Err(e) => {
                    errors.push((path.display().to_string(), e.clone()));
                    snap.slots.push(None);
                    snap.unreadable_slots += 1;
                }
            }
        }
        // Fence logs.
        if let Ok(logs) = list_fence_logs(&volume) {
            for (writer, _) in logs {
                let path = kaas_core::fence_log::fence_log_path(&volume, writer);
                let stamp = file_stamp(&path);
                match self.fences.get(&path, stamp, || {
                    FenceLog::load(&volume, writer).map_err(|e| e.to_string())
                }) {
                    Ok(log) => {
                        for (pid, r) in &log.fences {
                            snap.fences.push(FenceInfo {
                                writer: if writer == ADMIN_WRITER {
                                    "admin".into()
                                } else {
                                    writer.to_string()
                                },
                                producer_id: *pid,
                                epoch: r.epoch,
                                transactional_id: r.transactional_id.clone(),
                                recorded_ms: r.recorded_ms,
                            });
                        }
                    }
                    Err(e) => errors.push((path.display().to_string(), e.clone())),
                }
            }
        } else {
            errors.push((fences_dir(&volume).display().to_string(), "unreadable".into()));
        }
        snap.fences.sort_by_key(|f| std::cmp::Reverse(f.recorded_ms));
        // Marker queues (transient small files, read every tick).
        if let Ok(targets) = marker_queue::targets(&volume) {
            for b in targets {
                let entries = marker_queue::list(&volume, b)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(p, e)| (p, e.map_err(|e| e.to_string())))
                    .collect();
                snap.queues.push(QueueInfo {
                    broker: b,
                    alive: live.contains(&b),
                    entries,
                });
            }
        }
        // Partitions: re-inspected when any file in the directory changed.
        match list_topics(&volume) {
            Ok(topics) => {
                for t in topics {
                    let t = match t {
                        Ok(t) => t,
                        Err(e) => {
                            errors.push((volume.topics_dir().display().to_string(), e.to_string()));
                            continue;
                        }
                    };
                    for p in 0..t.partitions {
                        let dir = volume.partition_dir(&t.name, p);
                        let stamp = dir_stamp(&dir);
                        let leader = PartitionOwner::read(&PartitionOwner::path(&volume, &t.name, p))
                            .ok()
                            .map(|o| o.broker);
                        let info = match self.partitions.get(&dir, stamp, || {
                            inspect_partition(&dir, false).map_err(|e| e.to_string())
                        }) {
                            Ok(v) => PartitionInfo {
                                topic: t.name.clone(),
                                partition: p,
                                leader,
                                high_watermark: v.log_end_offset,
                                last_stable_offset: v.last_stable_offset,
                                open: v
                                    .producers
                                    .producers
                                    .values()
                                    .filter_map(|e| e.txn_first_offset.map(|o| (e.producer_id, o)))
                                    .collect(),
                                producers: v.producers.producers.len(),
                                pinned_by: None,
                                error: v
                                    .bad_tail
                                    .as_ref()
                                    .map(|b| format!("bad tail at byte {}: {}", b.position, b.reason)),
                            },
                            Err(e) => PartitionInfo {
                                topic: t.name.clone(),
                                partition: p,
                                leader,
                                high_watermark: -1,
                                last_stable_offset: -1,
                                open: Vec::new(),
                                producers: 0,
                                pinned_by: None,
                                // The row names the partition; keep the file name.
                                error: Some(e.replace(&format!("{}/", dir.display()), "")),
                            },
                        };
                        snap.partitions.push(info);
                    }
                }
            }
            Err(e) => errors.push((volume.topics_dir().display().to_string(), e.to_string())),
        }
        // Groups.
        for g in list_groups(&volume).unwrap_or_default() {
            let path = kaas_core::offsets::offsets_file(&volume, &g);
            let stamp = file_stamp(&path);
            match self.groups.get(&path, stamp, || {
                GroupOffsets::load(&volume, &g).map_err(|e| e.to_string())
            }) {
                Ok(offsets) => {
                    for (pid, p) in &offsets.pending {
                        for (topic, parts) in &p.offsets {
                            for (partition, o) in parts {
                                snap.staged.entry(*pid).or_default().push((
                                    g.clone(),
                                    topic.clone(),
                                    *partition,
                                    o.offset,
                                ));
                            }
                        }
                    }
                    for (topic, parts) in &offsets.offsets {
                        for (p, co) in parts {
                            if let Some(info) = snap.partitions.iter().find(|i| i.topic == *topic && i.partition == *p)
                            {
                                let (hw, lso) = (info.high_watermark, info.last_stable_offset);
                                snap.groups.push(GroupLag {
                                    group: g.clone(),
                                    topic: topic.clone(),
                                    partition: *p,
                                    committed: co.offset,
                                    lag: (hw - co.offset).max(0),
                                    real_lag: (lso - co.offset).max(0),
                                    blocked: (hw - lso.max(co.offset)).max(0),
                                    staged: offsets
                                        .pending
                                        .values()
                                        .filter(|s| s.offsets.get(topic).is_some_and(|x| x.contains_key(p)))
                                        .count(),
                                });
                            }
                        }
                    }
                }
                Err(e) => errors.push((path.display().to_string(), e.clone())),
            }
        }
        snap.errors = errors;
        snap.name_pinners();
        snap
    }
}

impl Snapshot {
    /// Names the transaction pinning each partition whose LSO is held back: one scan
    /// of the coordinator entries, and only when some partition is pinned.
    fn name_pinners(&mut self) {
        let wanted: std::collections::HashSet<i64> = self
            .partitions
            .iter()
            .filter_map(|p| p.open.iter().min_by_key(|(_, first)| *first).map(|(pid, _)| *pid))
            .collect();
        if wanted.is_empty() {
            return;
        }
        // Current producer ids win over the ids entries had before a rotation.
        let mut current: HashMap<i64, &TxnEntry> = HashMap::new();
        let mut previous: HashMap<i64, &TxnEntry> = HashMap::new();
        for e in self.slots.iter().flatten().flat_map(|d| d.file.entries.values()) {
            if wanted.contains(&e.producer_id) {
                current.insert(e.producer_id, e);
            } else if wanted.contains(&e.last_producer_id) {
                previous.insert(e.last_producer_id, e);
            }
        }
        let named: Vec<Option<Pinner>> = self
            .partitions
            .iter()
            .map(|p| {
                let &(pid, first) = p.open.iter().min_by_key(|(_, first)| *first)?;
                let now = current.get(&pid);
                let e = now.or_else(|| previous.get(&pid));
                let open = now.is_some_and(|e| matches!(e.state, TxnState::Ongoing) || e.state.is_prepare());
                Some(Pinner {
                    producer_id: pid,
                    first_offset: first,
                    transactional_id: e.map(|e| e.transactional_id.clone()),
                    state: e.map_or("-", |e| e.state.as_str()),
                    txn_start_ms: e.map_or(-1, |e| e.txn_start_ms),
                    timeout_ms: e.map_or(0, |e| e.timeout_ms),
                    hanging: !open,
                })
            })
            .collect();
        for (p, pin) in self.partitions.iter_mut().zip(named) {
            p.pinned_by = pin;
        }
    }

    /// What an operator should look at first: problems before warnings, and within
    /// each, by kind — unreadable files, brokers (dead, stepped down, stale), marker
    /// queues (to a broker not live, or not draining), overdue transactions (with the
    /// LSOs they pin), other transactions pinning LSOs, consumer groups blocked behind
    /// them — the largest (oldest, most behind) first.
    pub fn needs_attention(&self) -> Vec<Attention> {
        use kaas_core::broker::Liveness;
        let now = self.now_ms;
        let mut items: Vec<(Severity, u8, Attention)> = Vec::new();
        let mut add = |severity, kind: u8, weight: i64, text: String| {
            items.push((severity, kind, Attention { severity, weight, text }))
        };
        for (path, e) in &self.errors {
            add(Severity::Problem, 0, 0, format!("unreadable: {path}: {e}"));
        }
        for b in &self.brokers {
            let text = match b.liveness {
                Liveness::Dead => format!(
                    "broker {} is dead (no heartbeat for {}): what it led is taken over by the live brokers",
                    b.id,
                    age(b.lease_age_ms)
                ),
                Liveness::SteppedDown => format!(
                    "broker {} stepped down: it cannot renew its lease in time and serves nothing",
                    b.id
                ),
                Liveness::Stale => format!(
                    "broker {} is stale: heartbeat {} old (killed or frozen?), judged dead soon",
                    b.id,
                    age(b.lease_age_ms)
                ),
                Liveness::Opening => format!(
                    "broker {} is opening the volume: the partitions it leads wait for its recovery, nothing else is routed to it until it serves",
                    b.id
                ),
                Liveness::Joining => format!(
                    "broker {} is joining: it takes its share of groups and transaction slots once every peer's lease routes to it (waiting {}; clients its peers already send there are told to retry meanwhile)",
                    b.id,
                    age(b.joining_for_ms.unwrap_or(0))
                ),
                Liveness::Alive | Liveness::Stopped => continue,
            };
            let severity = if b.liveness == Liveness::SteppedDown {
                Severity::Problem
            } else {
                Severity::Warning
            };
            add(severity, 1, b.lease_age_ms, text);
        }
        for q in &self.queues {
            let oldest = q
                .entries
                .iter()
                .filter_map(|(_, e)| e.as_ref().ok())
                .map(|e| now - e.enqueued_ms)
                .max();
            match oldest {
                Some(o) if !q.alive => add(
                    Severity::Problem,
                    2,
                    o,
                    format!(
                        "{} marker entries queued for broker {}, which is not live (oldest {})",
                        q.entries.len(),
                        q.broker,
                        age(o)
                    ),
                ),
                Some(o) if o > QUEUE_DRAIN_MS => add(
                    Severity::Warning,
                    2,
                    o,
                    format!(
                        "broker {}'s marker queue is not draining: {} entries, oldest {}",
                        q.broker,
                        q.entries.len(),
                        age(o)
                    ),
                ),
                _ => {}
            }
        }
        // Pinned partitions, by transaction (or producer, without an entry).
        // (transactional id, producer id) -> (partitions, records held back, pin).
        type Pins<'a> = BTreeMap<(Option<&'a str>, i64), (Vec<String>, i64, &'a Pinner)>;
        let mut pins: Pins = BTreeMap::new();
        for p in &self.partitions {
            if let Some(pin) = &p.pinned_by {
                let e = pins
                    .entry((pin.transactional_id.as_deref(), pin.producer_id))
                    .or_insert((Vec::new(), 0, pin));
                e.0.push(format!("{}-{}", p.topic, p.partition));
                e.1 += p.high_watermark - p.last_stable_offset;
            }
        }
        let pinning = |parts: &[String], held: i64| {
            let shown = match parts.len() {
                0..=3 => parts.join(", "),
                n => format!("{} +{} more", parts[..3].join(", "), n - 3),
            };
            format!("pins the LSO of {} partition(s), {held} records: {shown}", parts.len())
        };
        let mut overdue = std::collections::HashSet::new();
        for t in self.txns().filter(|t| t.overdue(now)) {
            overdue.insert(t.transactional_id.as_str());
            let late = now - t.txn_start_ms - t.timeout_ms as i64;
            let pinned = pins
                .iter()
                .find(|((tid, _), _)| *tid == Some(t.transactional_id.as_str()))
                .map(|(_, (parts, held, _))| format!(" and {}", pinning(parts, *held)))
                .unwrap_or_default();
            add(
                if self.coordinator(t.slot).is_none() {
                    Severity::Problem
                } else {
                    Severity::Warning
                },
                3,
                late,
                format!(
                    "{:?} is {} past its timeout ({}){pinned}: `{}`",
                    t.transactional_id,
                    age(late),
                    age(t.timeout_ms as i64),
                    crate::out::abort_command(&t.transactional_id)
                ),
            );
        }
        for ((tid, pid), (parts, held, pin)) in &pins {
            let open = (pin.txn_start_ms > 0).then(|| now - pin.txn_start_ms);
            match tid {
                Some(tid) if overdue.contains(tid) && !pin.hanging => {}
                Some(tid) if pin.hanging => add(
                    Severity::Problem,
                    4,
                    *held,
                    format!(
                        "producer {pid} (hanging: {tid:?}'s coordinator entry has no open transaction of it, it is {} there) {}; `kaasctl txn repair --fix`",
                        pin.state,
                        pinning(parts, *held)
                    ),
                ),
                Some(tid) => add(
                    Severity::Warning,
                    4,
                    open.unwrap_or(0),
                    format!(
                        "{tid:?} ({}{}) {}",
                        pin.state,
                        match open {
                            Some(o) => format!(", open {}, {} left", age(o), age(pin.timeout_ms as i64 - o)),
                            None => String::new(),
                        },
                        pinning(parts, *held)
                    ),
                ),
                None if self.unreadable_slots > 0 => add(
                    Severity::Problem,
                    4,
                    *held,
                    format!(
                        "producer {pid} {}; no readable coordinator entry has it (a slot file is unreadable)",
                        pinning(parts, *held)
                    ),
                ),
                None => add(
                    Severity::Problem,
                    4,
                    *held,
                    format!(
                        "producer {pid} (hanging: no coordinator entry) {}; `kaasctl txn repair --fix`",
                        pinning(parts, *held)
                    ),
                ),
            }
        }
        // Groups blocked behind open transactions.
        let mut blocked: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for g in &self.groups {
            if g.blocked > 0 {
                let e = blocked.entry(&g.group).or_default();
                e.0 += g.blocked;
                e.1 += g.lag;
            }
        }
        for (group, (held, lag)) in blocked {
            add(
                Severity::Warning,
                5,
                held,
                format!("group {group:?} is blocked behind open transactions: {held} records held back (lag {lag})"),
            );
        }
        items.sort_by(|(s1, k1, a), (s2, k2, b)| s1.cmp(s2).then(k1.cmp(k2)).then(b.weight.cmp(&a.weight)));
        items.into_iter().map(|(_, _, a)| a).collect()
    }
}

/// Time left, or how late.
pub fn left(ms: i64) -> String {
    if ms < 0 {
        format!("late {}", age(-ms))
    } else {
        age(ms)
    }
}

/// A combined stamp of a partition directory: the newest modification and total size
/// of its files, with their count folded into the inode field.
fn dir_stamp(dir: &Path) -> Option<FileStamp> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut len = 0u64;
    let mut newest = std::time::UNIX_EPOCH;
    let mut count = 0u64;
    for e in entries.flatten() {
        if let Some(s) = file_stamp(&e.path()) {
            len = len.wrapping_add(s.len).wrapping_add(s.inode.rotate_left(17));
            if let Some(m) = s.modified {
                newest = newest.max(m);
            }
            count += 1;
        }
    }
    Some(FileStamp {
        len,
        modified: Some(newest),
        inode: count,
        changed: (0, 0),
    })
}
