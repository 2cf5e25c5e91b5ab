//! A deterministic simulation of the ownership protocol of brokers sharing one volume
//! (docs/cluster.md): a simulated clock and volume (lease files, `owner.json`,
//! `owner.lock`), no sockets, no threads. The brokers run the real rules —
//! `LeaseTracker` for liveness, `ownership::place` for who takes and who hands over —
//! on the schedule `kaas-server` runs them (lease task and volume sync every second),
//! through random crashes, restarts, pauses and clock skew and rate drift within the
//! documented bounds, for many seeds. It checks:
//!
//! - never two writers: at no instant may two brokers append to one partition (a
//!   broker may append while it holds the partition and its own lease is fresh), and
//!   a broker appends only at the partition's current leader epoch — except a broker
//!   frozen with its clock (below), for a bounded time after it thaws;
//! - no acknowledged write lost: brokers append every tick to what they hold (once
//!   they recovered it: a take-over records its leadership, then recovers at its next
//!   step) and acknowledge at a later tick, after re-reading `owner.json` (as
//!   `Partition::wait_durable` does); an acknowledged record must have landed where
//!   the partition's current leadership reads it (before any later leadership
//!   recovered the log), whatever pause fell between the append and the check;
//! - every partition is led again within [`RECOVERY_MS`] of the last fault, also
//!   when its leader is paused holding its lock (SIGSTOP keeps a local lock, an NFS
//!   lock lasts until the server's lease lapses): the lock of a holder judged dead by
//!   its lease is stolen, as kaas-server does.
//!
//! - transaction slots (the `TxnStateStore` rules, in the order a group-commit
//!   writer runs them — lock and read; append and let go, marking the lock file
//!   released only if it still names this node; sync and check — one step per tick,
//!   pauses in between): no slot generation is answered twice, every answered
//!   transition is still what readers see at the end, and every slot answers again
//!   within [`RECOVERY_MS`] of the last fault (without take-overs, seed 5 stalls).
//!   A host cut off from the NFS server in the middle of an append keeps the line in
//!   its cache and flushes it when it is back, at the offset it computed: over the
//!   next holder's line, if that journal is still in use — so a holder that finds
//!   the lock file naming another process that did not let go cleanly starts a
//!   fresh journal (without that rule seed 1 loses an answered transition).
//!
//! - disk faults (a generator of their own, during the chaos): a partition log fsync
//!   that fails loses the records it covered, and the partition is failed until the
//!   next volume sync opens it again at a new leader epoch (answering a retry after
//!   the next successful fsync, as before issue 25 item 4, fails at the first seed);
//!   a slot journal line whose write-back fails is read from the page cache until
//!   it is dropped (at random, and at a final power cut), which cuts the journal
//!   there; the first sync after it, by any process, fails and marks the journal,
//!   and the next holder folds it (without the mark, or without reading it after a
//!   successful sync, an answered transition is lost).
//!
//! Three kinds of pause: a process pause (SIGSTOP: its locks are kept), a host cut
//! off from the volume (NFS: the server frees its locks after a lease of its own,
//! here at any moment, even at once — the gate must not rely on that lease), and a
//! VM frozen with its clocks (locks kept; when it thaws neither its monotonic nor its
//! wall clock shows that time passed, so by its own clock its lease is fresh). Wall
//! clocks also jump, both ways, within the skew bound, and a frozen wall clock is
//! set right later (NTP).
//! `KAAS_SIM_SEEDS` sets how many seeds run (default 2,000, spread over the cores).

use kaas_core::broker::{BrokerLease, LeaseTracker, LEASE_FORMAT_VERSION};
use kaas_core::ownership::{owner, partition_key, place, txn_slot_key, Placement};
use kaas_core::topic::{PartitionOwner, OWNER_FORMAT_VERSION};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

const BROKERS: i32 = 10;
const PARTITIONS: i32 = 1000;
const TOPIC: &str = "t";
const TIMEOUT_MS: i64 = 10_000;
const PERIOD_MS: i64 = 1_000;
const TICK_MS: i64 = 200;
/// Wall clocks of any two hosts differ by less than this (the start-up check refuses
/// a peer more than one session timeout ahead).
const MAX_SKEW_MS: i64 = TIMEOUT_MS;
/// Monotonic clocks run at the same rate to within this fraction.
const MAX_DRIFT: f64 = 0.05;
/// After the last fault, every partition is led again within this long: the dead
/// owner's lease expires (timeout after its last change, seen within a period), the
/// rendezvous owner's next sync takes it, and a partition first taken by a broker
/// that is not its final owner is handed over once more (two syncs).
const RECOVERY_MS: i64 = TIMEOUT_MS + 5 * PERIOD_MS;
const CHAOS_MS: i64 = 60_000;
/// Transaction slots, each written by whoever coordinates it (rendezvous over the
/// live set) under the slot's lock.
const SLOTS: u32 = kaas_core::txn::SLOTS;
const CALM_MS: i64 = RECOVERY_MS + 5_000;
/// During the chaos, one partition log fsync in this many fails (EIO: the kernel
/// drops the dirty pages and reports the error once).
const LOG_FSYNC_FAILS: i64 = 20_000;
/// During the chaos, the write-back of one slot journal line in this many fails.
const JOURNAL_WRITEBACK_FAILS: i64 = 25;
/// Each tick, the page cache drops the pages of a journal whose write-back failed
/// with a chance of one in this many (and all of them at the end: a power cut).
const EVICTION: i64 = 10;

/// splitmix64: small, deterministic, good enough to pick faults.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: i64) -> i64 {
        (self.next() % n.max(1) as u64) as i64
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Run {
    Up,
    Down,
    /// Paused until the time given; `keeps_locks`: SIGSTOP on a local filesystem,
    /// else a host cut off from an NFS server, whose locks lapse at `lapse_at`.
    Paused {
        until: i64,
        keeps_locks: bool,
        lapse_at: i64,
        /// A VM freeze: the node's clocks stop while it is paused.
        frozen_since: Option<i64>,
    },
}

struct Node {
    id: i32,
    incarnation: u64,
    run: Run,
    skew_ms: i64,
    drift: f64,
    phase_ms: i64,
    tracker: LeaseTracker,
    /// Last successful renewal, by this node's monotonic clock.
    renewed: Option<Instant>,
    live: Vec<i32>,
    /// Partitions this process leads, with the leader epoch it took them at.
    held: BTreeMap<i32, i32>,
    /// How far both its clocks are behind for the time it was frozen (the wall
    /// clock until NTP sets it right: `wall_lag_ms`).
    frozen_ms: i64,
    wall_lag_ms: i64,
    /// Thawed from a freeze, and no volume sync since its first lease renewal after
    /// the thaw (however late those come: it may be paused again first). Until that
    /// renewal, peers may still confirm it dead and take its partitions; until that
    /// sync, it does not know.
    unsynced_thaw: bool,
    /// Renewed its lease since it thawed.
    renewed_since_thaw: bool,
    /// Records appended and not yet acknowledged: (partition, leader epoch, whether
    /// it landed where the partition's leadership reads it).
    pending: Vec<(i32, i32, bool)>,
    /// Partitions taken (leadership recorded in `owner.json`) whose log this node
    /// recovers at its next step: a pause can fall in between.
    recovering: Vec<(i32, i32)>,
    /// Slot operations in flight (one step each: lock and read, append, sync and
    /// check and answer; a pause can fall between any two).
    ops: BTreeMap<u32, SlotOp>,
    /// The holder line of a slot lock found held, as this node last read it, and
    /// when: judged only when read unchanged twice in a row.
    judging: BTreeMap<u32, (LockSeen, i64)>,
    /// Partitions whose log fsync failed: nothing more is appended or acknowledged;
    /// the next volume sync opens them again from their files at a new leader epoch
    /// (kaas-server fails the partition, stickily).
    failed: BTreeSet<i32>,
    /// Slots whose journal sync failed here, or was found marked after a sync: this
    /// process counts nothing durable there until it rewrote the slot (a fold).
    poisoned: BTreeSet<u32>,
}

/// A slot lock file as a judge reads it: which file, and the holder its line names.
type LockSeen = (u64, Option<(i32, u64)>);

/// One transition of a transaction slot, in flight at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotOp {
    /// The lock is taken (this lock file, holding this node's line) and the slot read
    /// (from this journal, up to this generation).
    Locked { lock: u64, journal: u64, generation: u64 },
    /// The line was appended (at the journal's end: a connected NFS client's append
    /// goes where the server says the end is, and its close flushes it) and the lock
    /// let go — cleanly if the lock file still named this node then. Answered at the
    /// next step, after the sync, if it landed as the next generation, the lock was
    /// let go cleanly and the lock file is still the one locked (the group commit's
    /// check).
    Appended {
        lock: u64,
        journal: u64,
        generation: u64,
        token: u64,
        landed: bool,
        clean: bool,
    },
    /// A host cut off from the NFS server in the middle of the append: the line is in
    /// its cache, at the offset it computed (`at`, the end it knew), and reaches the
    /// server only when the host is back — over whatever another holder wrote there
    /// meanwhile, if that journal is still in use.
    InTheAir { journal: u64, at: u64, token: u64 },
}

/// A slot's lock file: its identity (a take-over renames a new one in), who holds
/// its `flock`, and the holder line the last holder wrote in it.
#[derive(Debug, Clone, Copy)]
struct SlotLockFile {
    inode: u64,
    flock: Option<(i32, u64)>,
    line: Option<(i32, u64)>,
    /// The line is marked released: its holder let the lock go cleanly.
    released: bool,
}

/// A slot's journal as readers see it: the token of generation i + 1 at index i.
#[derive(Debug, Clone)]
struct Journal {
    inode: u64,
    effective: Vec<u64>,
    /// Lines (indices) whose write-back failed: readers on the host still read them
    /// from the page cache, until it drops them (`evict`) — then the journal reads
    /// as cut at the first one (a torn tail), and every line after it is gone too.
    holes: BTreeSet<usize>,
    /// A failed write-back no sync has reported yet: the next sync of this journal,
    /// by whichever process, fails (Linux reports it once).
    unreported: bool,
    /// Marked for a rewrite (`FOLD_DUE_MODE`) by a process whose sync failed.
    marked: bool,
}

impl Journal {
    /// A fold: the slot as read (through the page cache) written to a new journal
    /// file and synced; nothing of the old file's write-back matters any more.
    fn fold(&mut self, inode: u64) {
        self.inode = inode;
        self.holes.clear();
        self.unreported = false;
        self.marked = false;
    }
    /// The page cache drops the lines whose write-back failed.
    fn evict(&mut self) {
        if let Some(first) = self.holes.first() {
            self.effective.truncate(*first);
            self.holes.clear();
        }
    }
}

struct Volume {
    leases: BTreeMap<i32, BrokerLease>,
    /// owner.json per partition.
    owners: Vec<Option<PartitionOwner>>,
    /// owner.lock per partition: held by (broker, incarnation).
    locks: Vec<Option<(i32, u64)>>,
    /// Per partition, the leader epoch of the last leadership that recovered the log
    /// (and started a segment of its own): an append at an older epoch lands where
    /// nobody reads it.
    recovered: Vec<i32>,
    slot_locks: Vec<SlotLockFile>,
    journals: Vec<Journal>,
    /// Per slot, the transitions answered: generation → token.
    acked: Vec<BTreeMap<u64, u64>>,
    /// Per slot, when a transition was last answered.
    last_ack: Vec<i64>,
    next_inode: u64,
    next_token: u64,
}

impl Volume {
    fn owner(&self, p: i32) -> Option<&PartitionOwner> {
        self.owners[p as usize].as_ref()
    }
    /// Frees `owner.lock` of `p` if `holder` holds it.
    fn unlock(&mut self, p: i32, holder: (i32, u64)) {
        if self.locks[p as usize] == Some(holder) {
            self.locks[p as usize] = None;
        }
    }
    /// Frees every lock `holder` holds (partition and slot locks); whether it held
    /// any. The slot lock files keep the holder line it wrote.
    fn free_all(&mut self, holder: (i32, u64)) -> bool {
        let mut any = false;
        for l in self.locks.iter_mut().filter(|l| **l == Some(holder)) {
            *l = None;
            any = true;
        }
        for l in self.slot_locks.iter_mut().filter(|l| l.flock == Some(holder)) {
            l.flock = None;
            any = true;
        }
        any
    }
    fn inode(&mut self) -> u64 {
        self.next_inode += 1;
        self.next_inode
    }
}

/// `owner.json` naming `broker`'s leadership at `leader_epoch`.
fn leadership(broker: i32, leader_epoch: i32, released: bool) -> PartitionOwner {
    PartitionOwner {
        version: OWNER_FORMAT_VERSION,
        broker,
        leader_epoch,
        released,
        updated_ms: 0,
        topic_id: None,
    }
}

struct Sim {
    t: i64,
    base: Instant,
    nodes: Vec<Node>,
    vol: Volume,
    /// Rendezvous assignment per live set, so the real rule is only asked about
    /// partitions whose answer may change something.
    assigned: HashMap<Vec<i32>, Vec<i32>>,
    /// The same for transaction slots.
    slot_owners: HashMap<Vec<i32>, Vec<i32>>,
    last_fault: i64,
    /// Disk faults: fsync and write-back errors (a generator of its own, so the
    /// fault schedule stays the one each seed had before they were simulated).
    disk: Rng,
}

impl Sim {
    fn wall(&self, n: &Node) -> i64 {
        1_700_000_000_000 + self.t + n.skew_ms - n.wall_lag_ms
    }
    fn mono(&self, n: &Node) -> Instant {
        self.base + Duration::from_micros(((self.t - n.frozen_ms) as f64 * 1000.0 * (1.0 + n.drift)) as u64)
    }
    fn fresh(&self, n: &Node) -> bool {
        n.renewed
            .is_some_and(|r| self.mono(n).duration_since(r) < Duration::from_millis((TIMEOUT_MS / 2) as u64))
    }
    fn assignment(&mut self, live: &[i32]) -> &Vec<i32> {
        self.assigned.entry(live.to_vec()).or_insert_with(|| {
            (0..PARTITIONS)
                .map(|p| owner(&partition_key(TOPIC, p), live).unwrap_or(-1))
                .collect()
        })
    }

    /// The lease task: step down if stale (let go, writing nothing), renew, refresh
    /// the live set.
    fn lease_tick(&mut self, i: usize) {
        if !self.fresh(&self.nodes[i]) {
            let n = &mut self.nodes[i];
            for (p, _) in std::mem::take(&mut n.held) {
                self.vol.unlock(p, (n.id, n.incarnation));
            }
        }
        let (wall, mono) = (self.wall(&self.nodes[i]), self.mono(&self.nodes[i]));
        let n = &self.nodes[i];
        self.vol.leases.insert(
            n.id,
            BrokerLease {
                version: LEASE_FORMAT_VERSION,
                broker_id: n.id,
                host: "h".into(),
                port: 9092,
                incarnation: n.incarnation.to_string(),
                started_ms: 0,
                heartbeat_ms: wall,
                stopped_ms: None,
                stepped_down_ms: None,
                opening_ms: None,
                joining_ms: None,
                listeners: Default::default(),
                authorizer: None,
                renewal: 0,
                routes: None,
            },
        );
        self.nodes[i].renewed = Some(mono);
        self.nodes[i].renewed_since_thaw = true;
        self.refresh_live(i);
    }

    fn refresh_live(&mut self, i: usize) {
        let (wall, mono) = (self.wall(&self.nodes[i]), self.mono(&self.nodes[i]));
        let fresh = self.fresh(&self.nodes[i]);
        let leases: Vec<BrokerLease> = self.vol.leases.values().cloned().collect();
        let n = &mut self.nodes[i];
        let mut live: BTreeSet<i32> = n
            .tracker
            .observe(&leases, wall, mono, TIMEOUT_MS)
            .into_iter()
            .map(|l| l.broker_id)
            .collect();
        if fresh {
            live.insert(n.id);
        } else {
            live.remove(&n.id);
        }
        n.live = live.into_iter().collect();
    }

    /// The volume sync: hand over what another broker owns now, take what this one
    /// owns and its last owner let go or is dead.
    fn sync_tick(&mut self, i: usize) {
        if !self.fresh(&self.nodes[i]) {
            return;
        }
        let live = self.nodes[i].live.clone();
        let assigned = self.assignment(&live).clone();
        let n = &mut self.nodes[i];
        let me = n.id;
        // As `give_up_taken_over`: a partition whose owner.json names another
        // leadership was taken over (this node was frozen); it is given up, writing
        // nothing.
        let vol = &self.vol;
        n.held
            .retain(|p, e| vol.owner(*p).is_some_and(|o| o.broker == me && o.leader_epoch == *e));
        // A partition failed by a log fsync error and still led here is opened again
        // from its files, at a new leader epoch (recovered at the next step).
        for p in std::mem::take(&mut n.failed) {
            if let Some(e) = n.held.get(&p).copied() {
                let epoch = e + 1;
                self.vol.owners[p as usize] = Some(leadership(me, epoch, false));
                n.held.insert(p, epoch);
                n.recovering.push((p, epoch));
            }
        }
        if n.renewed_since_thaw {
            n.unsynced_thaw = false;
        }
        let moving: Vec<(i32, i32)> = n
            .held
            .iter()
            .filter(|(p, _)| assigned[**p as usize] != me)
            .map(|(p, e)| (*p, *e))
            .collect();
        for (p, epoch) in moving {
            if let Placement::HandOver(_) = place(me, &live, TOPIC, p, true, None) {
                n.held.remove(&p);
                self.vol.owners[p as usize] = Some(leadership(me, epoch, true));
                self.vol.unlock(p, (me, n.incarnation));
            }
        }
        let wanted: Vec<i32> = (0..PARTITIONS)
            // Only the partitions the rule can say Take for (the rule decides).
            .filter(|p| assigned[*p as usize] == me || self.vol.owner(*p).is_some_and(|o| o.broker == me))
            .filter(|p| !n.held.contains_key(p))
            .collect();
        for p in wanted {
            let last = self.vol.owner(p);
            if place(me, &live, TOPIC, p, false, last) != Placement::Take {
                continue;
            }
            // As kaas-server's gate: a last owner that did not let go counts as gone
            // only while its lease is the one the live set was built from (a node
            // thawed from a freeze holds a stale live set).
            let renewed_since = last.is_some_and(|o| {
                !o.released
                    && o.broker != me
                    && self
                        .vol
                        .leases
                        .get(&o.broker)
                        .is_some_and(|l| !l.stands_down() && !n.tracker.unchanged_since_seen(l))
            });
            if renewed_since {
                continue;
            }
            // As kaas-server's take-over gate: the lock of a holder judged dead by its
            // lease is stolen (a SIGSTOPped process keeps it forever), whether or not
            // its leadership was marked released.
            let mono =
                self.base + Duration::from_micros(((self.t - n.frozen_ms) as f64 * 1000.0 * (1.0 + n.drift)) as u64);
            let may_steal = last.is_some_and(|o| {
                o.broker != me
                    && self
                        .vol
                        .leases
                        .get(&o.broker)
                        .is_some_and(|l| n.tracker.confirms_dead(l, mono, TIMEOUT_MS))
            });
            if self.vol.locks[p as usize].is_some() && !may_steal {
                continue; // another process holds owner.lock
            }
            if std::env::var_os("SIM_DEBUG").is_some() && self.vol.locks[p as usize].is_some() {
                eprintln!(
                    "t={} node {me} steals {p} from {:?}, last {:?}, live {:?}",
                    self.t, self.vol.locks[p as usize], last, live
                );
            }
            self.vol.locks[p as usize] = Some((me, n.incarnation));
            let epoch = self.vol.owner(p).map_or(0, |o| o.leader_epoch + 1);
            self.vol.owners[p as usize] = Some(leadership(me, epoch, false));
            // Recovery reads the log, then a segment of its own is started: at the
            // node's next step (`write_tick`), after the leadership is recorded.
            n.recovering.push((p, epoch));
            n.held.insert(p, epoch);
        }
    }

    /// The produce path of an Up node, each tick: acknowledge what it appended at its
    /// last tick — only if `owner.json` still names the leadership it appended under
    /// (the check after the fsync) — then append to every partition it may append to.
    fn write_tick(&mut self, i: usize, seed: u64) {
        let me = self.nodes[i].id;
        for (p, epoch) in std::mem::take(&mut self.nodes[i].recovering) {
            if self.nodes[i].held.get(&p) == Some(&epoch) {
                self.vol.recovered[p as usize] = epoch;
            }
        }
        for (p, epoch, landed) in std::mem::take(&mut self.nodes[i].pending) {
            // The fsync before the check. When it fails, the kernel has dropped the
            // dirty pages: the record is lost, and the partition is failed — nothing
            // more acknowledged or appended until it is opened again from its files.
            if self.t < CHAOS_MS && self.disk.below(LOG_FSYNC_FAILS) == 0 {
                self.nodes[i].failed.insert(p);
                self.last_fault = self.t;
                continue;
            }
            if self.nodes[i].failed.contains(&p) {
                continue; // a sync after a failed one proves nothing
            }
            let confirmed = self
                .vol
                .owner(p)
                .is_some_and(|o| o.broker == me && o.leader_epoch == epoch);
            assert!(
                !confirmed || landed,
                "seed {seed}, t={} ms: broker {me} acknowledged a record of partition {p} (leader epoch {epoch}) that is not where leader epoch {} reads it (past a successor's base, or lost to a failed fsync)",
                self.t,
                self.vol.recovered[p as usize]
            );
        }
        if !self.fresh(&self.nodes[i]) {
            return;
        }
        let n = &mut self.nodes[i];
        for (p, epoch) in n.held.iter().filter(|(p, _)| !n.failed.contains(p)) {
            if self.vol.recovered[*p as usize] == *epoch {
                n.pending.push((*p, *epoch, true));
            } else if self.vol.recovered[*p as usize] > *epoch {
                // Past its successor's base: never read.
                n.pending.push((*p, *epoch, false));
            }
            // Not recovered yet at this epoch (an earlier leadership's log is read
            // first): this node does not append before its recovery.
        }
    }

    /// The transaction coordinator of an Up node, each tick, one step of each slot
    /// operation in flight (kaas-server's `TxnStateStore` rules):
    /// - lock and read: a slot this node coordinates (fresh, rendezvous over its live
    ///   set) is locked when its `flock` is free (the holder writes its line), or
    ///   taken over when the line, read unchanged twice in a row, names a broker its
    ///   lease tracker confirms dead: a new lock file renamed in, and the slot folded
    ///   into a fresh journal holding what readers saw;
    /// - append: refused if the journal is not the one read; the line lands anyway if
    ///   another writer appended since (the length check fails the operation);
    /// - answer: only if the lock file is still the one locked and still names this
    ///   holder (the check after the sync), then the lock is let go.
    fn slot_tick(&mut self, i: usize, seed: u64) {
        let me = (self.nodes[i].id, self.nodes[i].incarnation);
        let t = self.t;
        for (slot, op) in std::mem::take(&mut self.nodes[i].ops) {
            let s = slot as usize;
            // Letting go: whether the lock file still names this node (read first),
            // then the release line (counted only under this node's own line), then
            // the flock. Returns whether it was let go cleanly.
            let release = |vol: &mut Volume| {
                let l = &mut vol.slot_locks[s];
                let clean = l.line == Some(me);
                if clean {
                    l.released = true;
                }
                if l.flock == Some(me) {
                    l.flock = None;
                }
                clean
            };
            match op {
                SlotOp::Locked {
                    lock: l,
                    journal,
                    generation,
                } => {
                    // Drawn whatever happens next, so the schedule does not shift.
                    let doomed = t < CHAOS_MS && self.disk.below(JOURNAL_WRITEBACK_FAILS) == 0;
                    let j = &mut self.vol.journals[s];
                    if j.inode != journal {
                        release(&mut self.vol); // the journal was replaced: refused
                        continue;
                    }
                    let token = self.vol.next_token;
                    self.vol.next_token += 1;
                    // At the end: the next generation if nobody appended since this
                    // node read the slot; otherwise a line of a taken generation,
                    // which readers skip (and the length check fails the operation).
                    let landed = j.effective.len() as u64 == generation;
                    if landed {
                        j.effective.push(token);
                        // Its write-back will fail: readable from the page cache
                        // until it is dropped, and the next sync reports it.
                        if doomed {
                            j.holes.insert(j.effective.len() - 1);
                            j.unreported = true;
                            self.last_fault = t;
                        }
                    }
                    let clean = release(&mut self.vol);
                    self.nodes[i].ops.insert(
                        slot,
                        SlotOp::Appended {
                            lock: l,
                            journal,
                            generation: generation + 1,
                            token,
                            landed,
                            clean,
                        },
                    );
                }
                SlotOp::Appended {
                    lock: l,
                    journal,
                    generation,
                    token,
                    landed,
                    clean,
                } => {
                    // The sync, of the journal in place: the first one after a failed
                    // write-back reports it (and marks the journal); one that
                    // succeeds over a marked journal counts nothing (the check
                    // after it reads the mark). Either way this process is poisoned
                    // for the slot until it folds. A sync of another journal than the
                    // one appended to credits nothing (issue 25 item 10).
                    let j = &mut self.vol.journals[s];
                    if std::mem::take(&mut j.unreported) {
                        j.marked = true;
                    }
                    if j.marked {
                        self.nodes[i].poisoned.insert(slot);
                    }
                    let synced = j.inode == journal && !self.nodes[i].poisoned.contains(&slot);
                    if synced && landed && clean && self.vol.slot_locks[s].inode == l {
                        assert_eq!(
                            self.vol.journals[s].effective.get(generation as usize - 1),
                            Some(&token),
                            "seed {seed}, t={t} ms: broker {} answers slot {slot} generation {generation}, which readers do not see",
                            me.0
                        );
                        let acked = &mut self.vol.acked[s];
                        if let Some(other) = acked.insert(generation, token) {
                            panic!("seed {seed}, t={t} ms: slot {slot} generation {generation} answered twice (tokens {other} and {token})");
                        }
                        self.vol.last_ack[s] = t;
                    }
                }
                SlotOp::InTheAir { journal, at, token } => {
                    // Back: the cached line reaches the server at its offset. Its
                    // writer then finds its lock lost (nothing answered).
                    let j = &mut self.vol.journals[s];
                    if j.inode == journal {
                        let len = j.effective.len() as u64;
                        if at < len {
                            j.effective[at as usize] = token;
                        } else if at == len {
                            j.effective.push(token);
                        }
                    }
                    release(&mut self.vol);
                }
            }
        }
        // The coordinator's flush: a slot whose sync failed here is rewritten under
        // its lock (when free) whoever coordinates it now.
        let poisoned: Vec<u32> = self.nodes[i].poisoned.iter().copied().collect();
        for slot in poisoned {
            let s = slot as usize;
            if self.nodes[i].ops.contains_key(&slot) || self.vol.slot_locks[s].flock.is_some() {
                continue;
            }
            let journal = self.vol.inode();
            self.vol.journals[s].fold(journal);
            let l = &mut self.vol.slot_locks[s];
            l.line = Some(me);
            l.released = true;
            self.nodes[i].poisoned.remove(&slot);
        }
        if !self.fresh(&self.nodes[i]) {
            return;
        }
        let live = self.nodes[i].live.clone();
        let mono = self.mono(&self.nodes[i]);
        let owners = self
            .slot_owners
            .entry(live.clone())
            .or_insert_with(|| {
                (0..SLOTS)
                    .map(|s| owner(&txn_slot_key(s), &live).unwrap_or(-1))
                    .collect()
            })
            .clone();
        for slot in 0..SLOTS {
            if self.nodes[i].ops.contains_key(&slot) || owners[slot as usize] != me.0 {
                continue;
            }
            let s = slot as usize;
            let lock = self.vol.slot_locks[s];
            let taken = match lock.flock {
                None => {
                    self.vol.slot_locks[s].flock = Some(me);
                    self.vol.slot_locks[s].line = Some(me);
                    self.vol.slot_locks[s].released = false;
                    // Its line names another process that did not let go cleanly,
                    // whose lock may have lapsed with writes still to flush: a fresh
                    // journal first.
                    if !lock.released && lock.line != Some(me) {
                        let journal = self.vol.inode();
                        self.vol.journals[s].fold(journal);
                    }
                    true
                }
                Some(holder) if holder == me => false, // cannot happen: one op per slot
                Some(_) => {
                    let seen = (lock.inode, lock.line);
                    let judged = match self.nodes[i].judging.get(&slot) {
                        Some((before, at)) if *before == seen && t - at >= TICK_MS => {
                            lock.line.is_some_and(|(b, _)| {
                                b != me.0
                                    && self
                                        .vol
                                        .leases
                                        .get(&b)
                                        .is_some_and(|l| self.nodes[i].tracker.confirms_dead(l, mono, TIMEOUT_MS))
                            })
                        }
                        Some((before, _)) if *before == seen => false,
                        _ => {
                            self.nodes[i].judging.insert(slot, (seen, t));
                            false
                        }
                    };
                    if judged {
                        // The take-over: a new lock file, and a fresh journal with the
                        // history readers saw (the fold before the first append).
                        let inode = self.vol.inode();
                        self.vol.slot_locks[s] = SlotLockFile {
                            inode,
                            flock: Some(me),
                            line: Some(me),
                            released: false,
                        };
                        let journal = self.vol.inode();
                        self.vol.journals[s].fold(journal);
                    }
                    judged
                }
            };
            if taken {
                self.nodes[i].judging.remove(&slot);
                // A journal marked for a rewrite, or a slot whose sync failed here: a
                // fold before the first append.
                if self.vol.journals[s].marked || self.nodes[i].poisoned.remove(&slot) {
                    let journal = self.vol.inode();
                    self.vol.journals[s].fold(journal);
                }
                let j = &self.vol.journals[s];
                self.nodes[i].ops.insert(
                    slot,
                    SlotOp::Locked {
                        lock: self.vol.slot_locks[s].inode,
                        journal: j.inode,
                        generation: j.effective.len() as u64,
                    },
                );
            }
        }
    }

    /// Every answered slot transition is still what readers see.
    fn check_slots(&self, seed: u64) {
        for (s, acked) in self.vol.acked.iter().enumerate() {
            for (generation, token) in acked {
                assert_eq!(
                    self.vol.journals[s].effective.get(*generation as usize - 1),
                    Some(token),
                    "seed {seed}: slot {s} lost answered generation {generation}"
                );
            }
        }
    }

    /// Process start: a fresh tracker judges the leases at first sight, partitions
    /// are opened under the same rule, then the lease is written.
    fn start(&mut self, i: usize, rng: &mut Rng) {
        let n = &mut self.nodes[i];
        n.incarnation = rng.next();
        n.tracker = LeaseTracker::default();
        n.held.clear();
        n.pending.clear();
        n.recovering.clear();
        n.ops.clear();
        n.judging.clear();
        n.failed.clear();
        n.poisoned.clear();
        n.run = Run::Up;
        n.renewed = None;
        let mono = self.mono(&self.nodes[i]);
        // Broker::open: live set from first sight, this broker included; it opens
        // partitions before its first renewal (a fresh lease by definition).
        self.nodes[i].renewed = Some(mono);
        self.nodes[i].renewed_since_thaw = true;
        self.refresh_live(i);
        self.sync_tick(i);
        self.lease_tick(i);
    }

    fn crash(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        n.run = Run::Down;
        n.held.clear();
        n.pending.clear();
        n.recovering.clear();
        n.ops.clear();
        n.judging.clear();
        n.failed.clear();
        n.poisoned.clear();
        let key = (n.id, n.incarnation);
        self.vol.free_all(key);
    }

    /// Resumes a paused node; one frozen with its clocks finds no time passed.
    fn thaw(&mut self, i: usize, frozen_since: Option<i64>) {
        let n = &mut self.nodes[i];
        n.run = Run::Up;
        if let Some(since) = frozen_since {
            n.frozen_ms += self.t - since;
            n.wall_lag_ms += self.t - since;
            n.unsynced_thaw = true;
            n.renewed_since_thaw = false;
        }
    }

    /// Checks the safety invariants at this instant.
    fn check_writers(&self, seed: u64) {
        let mut writer: Vec<Option<i32>> = vec![None; PARTITIONS as usize];
        for n in &self.nodes {
            if n.run != Run::Up || !self.fresh(n) {
                continue;
            }
            // Thawed from a freeze, its clock says its lease is fresh: it may append
            // (nothing of it is acknowledged, nor read: `write_tick`) until the volume
            // sync after its first renewal gives up what was taken.
            if n.unsynced_thaw {
                continue;
            }
            for (p, epoch) in &n.held {
                if let Some(other) = writer[*p as usize].replace(n.id) {
                    panic!(
                        "seed {seed}, t={} ms: brokers {other} and {} may both append to partition {p}",
                        self.t, n.id
                    );
                }
                let current = self.vol.owner(*p).map_or(-1, |o| o.leader_epoch);
                assert_eq!(
                    *epoch, current,
                    "seed {seed}, t={} ms: broker {} may append to partition {p} at leader epoch {epoch}, but it was taken at {current}",
                    self.t, n.id
                );
            }
        }
    }

    /// Partitions no broker may append to.
    fn leaderless(&self) -> Vec<i32> {
        let mut led = vec![false; PARTITIONS as usize];
        for n in &self.nodes {
            if n.run == Run::Up && self.fresh(n) {
                n.held.keys().for_each(|p| led[*p as usize] = true);
            }
        }
        (0..PARTITIONS).filter(|p| !led[*p as usize]).collect()
    }
}

fn run(seed: u64) {
    let mut rng = Rng(seed);
    let mut slot_rng = Rng(seed ^ 0x5107_5107_5107_5107);
    let mut sim = Sim {
        t: 0,
        base: Instant::now(),
        nodes: (0..BROKERS)
            .map(|id| Node {
                id,
                incarnation: 0,
                run: Run::Down,
                skew_ms: 0,
                drift: 0.0,
                phase_ms: 0,
                tracker: LeaseTracker::default(),
                renewed: None,
                live: Vec::new(),
                held: BTreeMap::new(),
                frozen_ms: 0,
                wall_lag_ms: 0,
                unsynced_thaw: false,
                renewed_since_thaw: false,
                pending: Vec::new(),
                recovering: Vec::new(),
                ops: BTreeMap::new(),
                judging: BTreeMap::new(),
                failed: BTreeSet::new(),
                poisoned: BTreeSet::new(),
            })
            .collect(),
        vol: Volume {
            leases: BTreeMap::new(),
            owners: vec![None; PARTITIONS as usize],
            locks: vec![None; PARTITIONS as usize],
            recovered: vec![-1; PARTITIONS as usize],
            slot_locks: (0..SLOTS as u64)
                .map(|s| SlotLockFile {
                    inode: s + 1,
                    flock: None,
                    line: None,
                    released: false,
                })
                .collect(),
            journals: (0..SLOTS as u64)
                .map(|s| Journal {
                    inode: SLOTS as u64 + s + 1,
                    effective: Vec::new(),
                    holes: BTreeSet::new(),
                    unreported: false,
                    marked: false,
                })
                .collect(),
            acked: vec![BTreeMap::new(); SLOTS as usize],
            last_ack: vec![0; SLOTS as usize],
            next_inode: 2 * SLOTS as u64,
            next_token: 0,
        },
        assigned: HashMap::new(),
        slot_owners: HashMap::new(),
        last_fault: 0,
        disk: Rng(seed ^ 0xd15c_d15c_d15c_d15c),
    };
    for n in sim.nodes.iter_mut() {
        n.skew_ms = rng.below(MAX_SKEW_MS) - MAX_SKEW_MS / 2;
        n.drift = (rng.below(2001) - 1000) as f64 / 1000.0 * MAX_DRIFT;
        n.phase_ms = rng.below(PERIOD_MS / TICK_MS) * TICK_MS;
    }
    // Brokers start at random moments in the first few seconds.
    let starts: Vec<i64> = (0..BROKERS).map(|_| rng.below(5_000) / TICK_MS * TICK_MS).collect();
    let mut next_fault = 10_000 + rng.below(8_000);
    while sim.t <= CHAOS_MS + CALM_MS {
        let t = sim.t;
        for (i, start) in starts.iter().enumerate() {
            if sim.nodes[i].run == Run::Down && *start == t {
                sim.start(i, &mut rng);
            }
            if let Run::Paused {
                until,
                keeps_locks,
                lapse_at,
                frozen_since,
            } = sim.nodes[i].run
            {
                if !keeps_locks && t >= lapse_at {
                    let key = (sim.nodes[i].id, sim.nodes[i].incarnation);
                    // The NFS server freed them.
                    if sim.vol.free_all(key) {
                        sim.last_fault = t; // partitions may move only from now
                    }
                }
                if t >= until {
                    sim.thaw(i, frozen_since);
                    sim.last_fault = t;
                }
            }
        }
        // Faults during the chaos phase; then everything paused resumes and every
        // crashed broker restarts.
        if t < CHAOS_MS && t >= next_fault {
            let i = rng.below(BROKERS as i64) as usize;
            match (sim.nodes[i].run, rng.below(7)) {
                (Run::Up, 0) => sim.crash(i),
                (Run::Up, 1) => {
                    sim.nodes[i].run = Run::Paused {
                        until: t + rng.below(3 * TIMEOUT_MS),
                        keeps_locks: true,
                        lapse_at: i64::MAX,
                        frozen_since: None,
                    }
                }
                (Run::Up, 2 | 3) => {
                    sim.nodes[i].run = Run::Paused {
                        until: t + rng.below(3 * TIMEOUT_MS),
                        keeps_locks: true,
                        lapse_at: i64::MAX,
                        frozen_since: Some(t),
                    }
                }
                (Run::Up, 4) => {
                    // The wall clock jumps, either way, within the skew bound; a
                    // frozen one is set right.
                    sim.nodes[i].skew_ms = rng.below(MAX_SKEW_MS) - MAX_SKEW_MS / 2;
                    sim.nodes[i].wall_lag_ms = 0;
                }
                (Run::Up, _) => {
                    sim.nodes[i].run = Run::Paused {
                        until: t + rng.below(3 * TIMEOUT_MS),
                        keeps_locks: false,
                        lapse_at: t + rng.below(3 * TIMEOUT_MS),
                        frozen_since: None,
                    };
                    // Cut off in the middle of an append: the line stays in its cache.
                    // (Drawn from a generator of its own: the fault schedule stays the
                    // one each seed had before slots were simulated.)
                    let mut next_token = sim.vol.next_token;
                    for op in sim.nodes[i].ops.values_mut() {
                        if let SlotOp::Locked {
                            journal, generation, ..
                        } = *op
                        {
                            if slot_rng.below(2) == 0 {
                                *op = SlotOp::InTheAir {
                                    journal,
                                    at: generation,
                                    token: next_token,
                                };
                                next_token += 1;
                            }
                        }
                    }
                    sim.vol.next_token = next_token;
                }
                (Run::Down, _) => sim.start(i, &mut rng),
                (Run::Paused { .. }, _) => {}
            }
            sim.last_fault = t;
            next_fault = t + 1 + rng.below(2 * TIMEOUT_MS);
        }
        if t == CHAOS_MS {
            for i in 0..sim.nodes.len() {
                match sim.nodes[i].run {
                    Run::Down => sim.start(i, &mut rng),
                    Run::Paused {
                        keeps_locks,
                        frozen_since,
                        ..
                    } => {
                        if !keeps_locks {
                            let key = (sim.nodes[i].id, sim.nodes[i].incarnation);
                            sim.vol.free_all(key);
                        }
                        sim.thaw(i, frozen_since);
                    }
                    Run::Up => {}
                }
            }
            sim.last_fault = t;
        }
        for i in 0..sim.nodes.len() {
            if sim.nodes[i].run != Run::Up {
                continue;
            }
            let phase = sim.nodes[i].phase_ms;
            sim.write_tick(i, seed);
            sim.slot_tick(i, seed);
            if (t + phase) % PERIOD_MS == 0 {
                sim.lease_tick(i);
            }
            if (t + phase + PERIOD_MS / 2 / TICK_MS * TICK_MS) % PERIOD_MS == 0 {
                sim.sync_tick(i);
            }
        }
        sim.check_writers(seed);
        for j in sim.vol.journals.iter_mut() {
            if !j.holes.is_empty() && sim.disk.below(EVICTION) == 0 {
                j.evict();
            }
        }
        if t % PERIOD_MS == 0 && t >= 5_000 + RECOVERY_MS && t - sim.last_fault >= RECOVERY_MS {
            let left = sim.leaderless();
            if !left.is_empty() {
                let p = left[0];
                eprintln!("owner {:?} lock {:?}", sim.vol.owner(p), sim.vol.locks[p as usize]);
                for n in &sim.nodes {
                    eprintln!(
                        "node {} run {:?} fresh {} live {:?} assigned {} holds {}",
                        n.id,
                        n.run,
                        sim.fresh(n),
                        n.live,
                        owner(&partition_key(TOPIC, p), &n.live).unwrap_or(-1),
                        n.held.contains_key(&p)
                    );
                }
            }
            assert!(
                left.is_empty(),
                "seed {seed}, t={t} ms: {} partitions (e.g. {:?}) without a leader {} ms after the last fault",
                left.len(),
                &left[..left.len().min(5)],
                t - sim.last_fault
            );
            let stalled: Vec<usize> = (0..SLOTS as usize)
                .filter(|s| t - sim.vol.last_ack[*s] > PERIOD_MS)
                .collect();
            assert!(
                stalled.is_empty(),
                "seed {seed}, t={t} ms: {} slots (e.g. {:?}) answered nothing for over a second, {} ms after the last fault",
                stalled.len(),
                &stalled[..stalled.len().min(5)],
                t - sim.last_fault
            );
        }
        sim.t += TICK_MS;
    }
    // Calm at the end: every partition is led by its rendezvous owner over all brokers.
    let all: Vec<i32> = (0..BROKERS).collect();
    let assigned = sim.assignment(&all).clone();
    for n in &sim.nodes {
        for p in n.held.keys() {
            assert_eq!(
                assigned[*p as usize], n.id,
                "seed {seed}: partition {p} not with its owner at the end"
            );
        }
    }
    assert!(
        sim.leaderless().is_empty(),
        "seed {seed}: partitions without a leader at the end"
    );
    // A power cut: every page whose write-back failed is gone.
    sim.vol.journals.iter_mut().for_each(Journal::evict);
    sim.check_slots(seed);
}

#[test]
fn ownership_never_has_two_writers_and_recovers_from_every_fault() {
    // One seed alone (a failure's, with SIM_DEBUG to see its steals).
    if let Some(seed) = std::env::var("KAAS_SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        return run(seed);
    }
    let seeds: u64 = std::env::var("KAAS_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    std::thread::scope(|s| {
        for k in 0..threads {
            s.spawn(move || (k..seeds).step_by(threads as usize).for_each(run));
        }
    });
}
