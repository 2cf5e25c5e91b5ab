//! Broker leases (`__cluster/brokers/<id>.json`): who is alive and where to reach it.

use crate::error::{read_versioned_json, VolumeError};
use crate::layout::Volume;
use serde::{Deserialize, Serialize};

crate::versioned!(BrokerLease, ClusterMeta);

pub const LEASE_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerLease {
    pub version: u32,
    pub broker_id: i32,
    pub host: String,
    pub port: u16,
    /// Changes at every process start, so a restarted broker is told apart.
    pub incarnation: String,
    pub started_ms: i64,
    pub heartbeat_ms: i64,
    /// Set by a broker that stopped cleanly (after letting its partitions go): peers
    /// count it dead at once instead of after the session timeout. Absent in leases
    /// written before it existed, which read as running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_ms: Option<i64>,
    /// Set by a broker that stepped down because it could not renew its lease in time
    /// (half the session timeout): it let its partitions go and coordinates nothing,
    /// so peers count it dead at once, as a stopped one, rather than wait for a
    /// heartbeat that still changes (slow writes) to stand still for the session
    /// timeout. Cleared by its next renewal in time. Absent in leases written before
    /// it existed, and by a broker that has not stepped down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stepped_down_ms: Option<i64>,
    /// Set while a starting broker opens the volume (recovers its partitions, finishes
    /// the transactions its last run left), which can take minutes on big logs; cleared
    /// by its first renewal once it serves. Peers count it alive — a partition it leads
    /// and never let go stays its own, no lock of it is stolen — but route nothing to
    /// it: no group, transaction slot or partition is placed on it and Metadata lists
    /// it nowhere until it serves (docs/cluster.md, "A broker that is opening"). Absent
    /// in leases written before it existed, and once the broker serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening_ms: Option<i64>,
    /// Since when (ms, this broker's clock) it serves but does not coordinate its share
    /// of groups and transaction slots yet: started beside others, or back from a
    /// step-down, it takes them only once every live peer's lease routes to it
    /// ([`Self::routes`]); meanwhile each peer routes that share to it from its first
    /// read of this lease on, and clients sent here are told to retry
    /// (COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR).
    /// Usually two renewals; as long as a peer is slow to renew. Written with each
    /// renewal as things stood before that renewal's check, so it may still be set for
    /// one renewal after the broker began coordinating. For operators (`kaasctl
    /// brokers`, `top`, `doctor`); brokers judge by `routes`. Absent otherwise, and in
    /// leases written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joining_ms: Option<i64>,
    /// Every listener's advertised address, by listener name (docs/security.md): a
    /// client is told the address of the listener it came in on. `host`/`port` above
    /// are a PLAINTEXT-protocol listener's (the one named PLAINTEXT, else the first
    /// such, else the first listener), for brokers from before listeners. Absent in
    /// leases written before listeners existed, which have one, PLAINTEXT.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub listeners: std::collections::BTreeMap<String, ListenerEndpoint>,
    /// The broker's `--authorizer` (`none` or `acls`), so peers and `kaasctl doctor`
    /// see a cluster where one broker lets through what the others refuse. Absent in
    /// leases from before ACLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorizer: Option<String>,
    /// How many times this process renewed its lease (0 until its lease task runs):
    /// peers name it in [`Self::routes`], so a broker tells a peer's view of it read
    /// before a given renewal from one read after. Absent (0) in leases written
    /// before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub renewal: u64,
    /// The brokers this one leaves their share of groups and transaction slots to:
    /// its live set (itself included while fresh) as of its last read of the leases,
    /// each with the incarnation and [`Self::renewal`] of the lease it judged it by. A
    /// broker that joins (started beside others, or back from a step-down) takes its
    /// share only once every live peer's lease names it at a renewal at least its
    /// first saying it serves, so no group or slot ever has two coordinators, however
    /// slowly a peer renews (docs/cluster.md, "A broker that is opening the volume").
    /// Absent in leases written before it existed — the joiner then waits a time
    /// bound instead — and while a starting broker opens the volume (it coordinates
    /// nothing before its lease task runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<RoutedBroker>>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One broker of a lease's [`BrokerLease::routes`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutedBroker {
    pub broker_id: i32,
    pub incarnation: String,
    pub renewal: u64,
}

impl RoutedBroker {
    /// The entry naming `lease` as read.
    pub fn of(lease: &BrokerLease) -> RoutedBroker {
        RoutedBroker {
            broker_id: lease.broker_id,
            incarnation: lease.incarnation.clone(),
            renewal: lease.renewal,
        }
    }
}

/// One listener's advertised address in a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenerEndpoint {
    pub host: String,
    pub port: u16,
}

impl BrokerLease {
    /// Replaces the lease atomically; on a full volume, where even the temporary file
    /// cannot be written, overwrites it in place instead ([`crate::fsutil::overwrite_in_place`]),
    /// so a full disk does not make every broker step down.
    pub fn write(&self, volume: &Volume) -> Result<(), VolumeError> {
        self.store(volume, true)
    }
    /// [`Self::write`] (`durable`: temporary file fsynced, directory fsynced) or
    /// [`Self::renew`] (renamed in place, no fsync); on a full volume, where even the
    /// temporary file cannot be written, either overwrites the lease in place.
    fn store(&self, volume: &Volume, durable: bool) -> Result<(), VolumeError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        /// Said once per spell of a full volume, not at every renewal.
        static IN_PLACE: AtomicBool = AtomicBool::new(false);
        let path = volume.broker_lease(self.broker_id);
        let bytes = crate::fsutil::json_bytes(self).map_err(|e| VolumeError::io(&path, e))?;
        let replaced = if durable {
            crate::fsutil::atomic_write(&path, &bytes)
        } else {
            crate::fsutil::replace_unsynced(&path, &bytes)
        };
        match replaced {
            Err(e) if crate::fsutil::is_out_of_space(&e) && path.exists() => {
                crate::fsutil::overwrite_in_place(&path, &bytes).map_err(|e| VolumeError::io(&path, e))?;
                if !IN_PLACE.swap(true, Ordering::Relaxed) {
                    tracing::warn!(path = %path.display(), "the volume is full: broker lease renewed in place until space returns");
                }
                Ok(())
            }
            Ok(()) => {
                if IN_PLACE.swap(false, Ordering::Relaxed) {
                    tracing::info!(path = %path.display(), "space returned: broker lease replaced atomically again");
                }
                Ok(())
            }
            Err(e) => Err(VolumeError::io(&path, e)),
        }
    }
    pub fn read(volume: &Volume, id: i32) -> Result<BrokerLease, VolumeError> {
        read_versioned_json(&volume.broker_lease(id), "broker lease", LEASE_FORMAT_VERSION)
    }
    /// Alive when it has not stopped cleanly and the last heartbeat is younger than
    /// `session_timeout_ms` (by the wall clock: for one-shot readers like kaasctl;
    /// brokers use [`LeaseTracker`]).
    pub fn is_alive(&self, now_ms: i64, session_timeout_ms: i64) -> bool {
        !self.stands_down() && now_ms - self.heartbeat_ms < session_timeout_ms
    }
    /// Running (heartbeat younger than `session_timeout_ms`, by the wall clock, for
    /// one-shot readers like kaasctl) but stepped down: it serves nothing until its
    /// renewals are quick again. A lease left marked by a broker that then died is
    /// just dead.
    pub fn is_stepped_down(&self, now_ms: i64, session_timeout_ms: i64) -> bool {
        self.stopped_ms.is_none() && self.stepped_down_ms.is_some() && now_ms - self.heartbeat_ms < session_timeout_ms
    }
    /// What an operator is told about this broker (`kaasctl brokers`, `top`): by the
    /// heartbeat's age on this host's clock, as [`Self::is_alive`]. A broker renews
    /// every second, so a heartbeat unchanged for half the session timeout is
    /// [`Liveness::Stale`] — killed, frozen or cut off, still counted live (the
    /// brokers wait out the whole timeout before taking anything over) — and
    /// [`Liveness::Dead`] after the whole timeout.
    pub fn liveness(&self, now_ms: i64, session_timeout_ms: i64) -> Liveness {
        let age = now_ms - self.heartbeat_ms;
        if self.stopped_ms.is_some() {
            Liveness::Stopped
        } else if age >= session_timeout_ms {
            Liveness::Dead
        } else if self.stepped_down_ms.is_some() {
            Liveness::SteppedDown
        } else if age >= session_timeout_ms / 2 {
            Liveness::Stale
        } else if self.opening_ms.is_some() {
            Liveness::Opening
        } else if self.joining_ms.is_some() {
            Liveness::Joining
        } else {
            Liveness::Alive
        }
    }
    /// Alive but still opening the volume (see `opening_ms`): routed nothing yet.
    pub fn is_opening(&self) -> bool {
        self.opening_ms.is_some() && !self.stands_down()
    }
    /// Whether the lease itself says its broker serves nothing: stopped cleanly, or
    /// stepped down (see `stepped_down_ms`). Peers count it dead at once.
    pub fn stands_down(&self) -> bool {
        self.stopped_ms.is_some() || self.stepped_down_ms.is_some()
    }
    /// A renewal: the lease replaced atomically (a new file renamed in place, so a
    /// reader never sees half of it) but not fsynced — a heartbeat is for other
    /// processes to see change, and one lost in a crash only makes the dead broker look
    /// dead sooner. Two fsyncs a second on a slow volume would make every renewal late
    /// (issue 25 item 5). On a full volume, overwritten in place as [`Self::write`] does.
    pub fn renew(&self, volume: &Volume) -> Result<(), VolumeError> {
        self.store(volume, false)
    }
}

/// A running process's claim on its broker id: an exclusive advisory lock on
/// `__cluster/brokers/<id>.lock`, held for the life of the process and released by the
/// kernel when it dies (on NFS, when its client's lock lease lapses). Two processes
/// can never run as one broker id, whatever the lease file says; and a process that
/// gets the lock knows the previous incarnation is gone, even if it died so recently
/// that its lease still looks fresh.
#[derive(Debug)]
pub struct BrokerIdClaim {
    _lock: std::fs::File,
    /// The lease the previous incarnation left, if any.
    pub previous: Option<BrokerLease>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("broker id {id} is in use by another running process ({holder}); refusing to start as it")]
    InUse { id: i32, holder: String },
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

/// Claims broker id `id` for this process (see [`BrokerIdClaim`]); never blocks.
pub fn claim_broker_id(volume: &Volume, id: i32, now_ms: i64) -> Result<BrokerIdClaim, ClaimError> {
    let dir = volume.brokers_dir();
    crate::fsutil::create_dir_durable(&dir).map_err(|e| VolumeError::io(&dir, e))?;
    let path = dir.join(format!("{id}.lock"));
    let (previous, unreadable) = match BrokerLease::read(volume, id) {
        Ok(l) => (Some(l), None),
        Err(e) if e.is_not_found() => (None, None),
        Err(e) => (None, Some(e)),
    };
    match crate::fsutil::try_lock_exclusive(&path).map_err(|e| VolumeError::io(&path, e))? {
        Some(lock) => {
            // The id lock is the authority: a lease this id's last process left torn
            // (a crash during an in-place renewal on a full volume) is rewritten.
            if let Some(e) = unreadable {
                tracing::warn!(error = %e, "this broker id's lease is unreadable; it is rewritten at start");
            }
            Ok(BrokerIdClaim { _lock: lock, previous })
        }
        None => Err(ClaimError::InUse {
            id,
            holder: match &previous {
                Some(l) => format!(
                    "incarnation {} at {}:{}, last heartbeat {} ms ago",
                    l.incarnation,
                    l.host,
                    l.port,
                    now_ms - l.heartbeat_ms
                ),
                None => format!("it holds {}", path.display()),
            },
        }),
    }
}

/// A lease whose heartbeat is this many session timeouts old by the wall clock is dead
/// at first sight; clocks must agree to within `LONG_DEAD_FACTOR - 1` timeouts.
pub const LONG_DEAD_FACTOR: i64 = 3;

/// The start-up clock check: a peer's heartbeat more than one session timeout ahead
/// of this host's clock means the clocks disagree by more than kaas tolerates for
/// judging leases at first sight (see [`LeaseTracker`]). Err names the peer and the
/// gap. Only heartbeats ahead can be checked: one behind cannot be told from a peer
/// that stopped. A lease that stands down (stopped cleanly, or stepped down) is not
/// judged by its stamp at all ([`LeaseTracker`]: dead at first sight), so it is left
/// out: a broker of a fast host, stopped for good, must not keep every other broker
/// from starting until the clock passes its last heartbeat.
pub fn check_clock_skew(leases: &[BrokerLease], me: i32, now_ms: i64, session_timeout_ms: i64) -> Result<(), String> {
    match leases
        .iter()
        .filter(|l| l.broker_id != me && !l.stands_down())
        .max_by_key(|l| l.heartbeat_ms)
    {
        Some(l) if l.heartbeat_ms - now_ms > session_timeout_ms => Err(format!(
            "broker {}'s last heartbeat ({} at {}:{}) is {} ms ahead of this host's clock; brokers' clocks must agree to \
             within the session timeout ({session_timeout_ms} ms): fix the clocks (NTP) before starting this broker",
            l.broker_id,
            l.heartbeat_ms,
            l.host,
            l.port,
            l.heartbeat_ms - now_ms
        )),
        _ => Ok(()),
    }
}

/// Judges peers' liveness by their heartbeats *changing*, timed by this process's
/// monotonic clock, so clock skew between hosts does not matter: a peer is live while
/// its heartbeat value changed less than the session timeout ago. A lease seen for the
/// first time counts as having just changed — live for a whole timeout unless it
/// changes — unless its wall-clock age is over [`LONG_DEAD_FACTOR`] session timeouts:
/// so a host whose clock runs behind cannot make a live peer look dead (only skew of
/// more than `LONG_DEAD_FACTOR - 1` timeouts could), and one whose clock runs ahead
/// cannot look alive for longer than the timeout after it stops.
///
/// Such a long-dead-looking lease is not live (nothing is placed on it), but it is not
/// *dead* either — no lock it may still hold can be taken from it — until it has
/// been seen unchanged for a whole timeout by this process's own clock: a first
/// sighting never confirms a broker dead, whatever the wall clocks say (a host clock
/// far ahead, a peer's clock behind after a VM thaw).
#[derive(Debug, Default, Clone)]
pub struct LeaseTracker {
    seen: std::collections::HashMap<(i32, String), Seen>,
    dead: std::collections::BTreeSet<i32>,
    /// Brokers whose lease failed to read at every read so far (never read cleanly
    /// by this process), since the first of those reads.
    unread: std::collections::HashMap<i32, std::time::Instant>,
}

/// What a [`LeaseTracker`] knows of one lease incarnation.
#[derive(Debug, Clone, Copy)]
struct Seen {
    heartbeat_ms: i64,
    /// When this process last saw the heartbeat change (or first saw it), by its
    /// monotonic clock. Never back-dated.
    changed: std::time::Instant,
    /// Its wall-clock age at first sight was past [`LONG_DEAD_FACTOR`] timeouts and it
    /// has not changed since: not live, not yet confirmed dead.
    presumed_dead: bool,
}

impl LeaseTracker {
    /// The live leases among `leases`, as of `now_ms` (wall) and `now` (monotonic).
    pub fn observe<'a>(
        &mut self,
        leases: impl IntoIterator<Item = &'a BrokerLease>,
        now_ms: i64,
        now: std::time::Instant,
        session_timeout_ms: i64,
    ) -> Vec<&'a BrokerLease> {
        self.observe_partial(leases, &[], now_ms, now, session_timeout_ms)
    }

    /// Brokers whose current lease the last observation judged dead: seen, and
    /// unchanged for the session timeout by this process's clock (or stopped).
    /// Unlike "not live", never a broker merely not seen yet — only these may have a
    /// lock they still hold taken from them.
    pub fn dead(&self) -> &std::collections::BTreeSet<i32> {
        &self.dead
    }

    /// Whether `lease`, as read just now, is the one this tracker saw at its last
    /// observation (the same incarnation and heartbeat): nothing renewed it since. A
    /// lease renewed since, or of an incarnation never seen, says a live set built
    /// from that observation is stale — this process was frozen, say — for judging
    /// its broker gone.
    pub fn unchanged_since_seen(&self, lease: &BrokerLease) -> bool {
        self.seen
            .get(&(lease.broker_id, lease.incarnation.clone()))
            .is_some_and(|seen| seen.heartbeat_ms == lease.heartbeat_ms)
    }

    /// How long this process has seen `lease`'s heartbeat unchanged, by its own clock
    /// (None for a lease incarnation it has not seen).
    pub fn unchanged_for(&self, lease: &BrokerLease, now: std::time::Instant) -> Option<std::time::Duration> {
        self.seen
            .get(&(lease.broker_id, lease.incarnation.clone()))
            .filter(|seen| seen.heartbeat_ms == lease.heartbeat_ms)
            .map(|seen| now.duration_since(seen.changed))
    }

    /// When this process last saw broker `id`'s heartbeat change (or first saw it),
    /// over every incarnation of it seen; None for a broker never seen.
    pub fn last_changed(&self, id: i32) -> Option<std::time::Instant> {
        self.seen
            .iter()
            .filter(|((broker, _), _)| *broker == id)
            .map(|(_, seen)| seen.changed)
            .max()
    }

    /// Whether `lease`, as read just now, is still the one this tracker judged dead:
    /// the same incarnation and heartbeat, unchanged for the session timeout by `now`
    /// (or stopped cleanly). A broker restarted or renewed since is not.
    pub fn confirms_dead(&self, lease: &BrokerLease, now: std::time::Instant, session_timeout_ms: i64) -> bool {
        if lease.stands_down() {
            return true;
        }
        let timeout = std::time::Duration::from_millis(session_timeout_ms.max(0) as u64);
        self.seen
            .get(&(lease.broker_id, lease.incarnation.clone()))
            .is_some_and(|seen| seen.heartbeat_ms == lease.heartbeat_ms && now.duration_since(seen.changed) >= timeout)
    }

    /// [`LeaseTracker::observe`] when the lease files of the brokers in `unreadable`
    /// could not be read this time: they are not live now, but what was seen of them
    /// is kept, so the next successful read is no first sighting (a lease that fails
    /// to read now and then must not restart its timeout each time).
    pub fn observe_partial<'a>(
        &mut self,
        leases: impl IntoIterator<Item = &'a BrokerLease>,
        unreadable: &[i32],
        now_ms: i64,
        now: std::time::Instant,
        session_timeout_ms: i64,
    ) -> Vec<&'a BrokerLease> {
        let timeout = std::time::Duration::from_millis(session_timeout_ms.max(0) as u64);
        let mut live = Vec::new();
        let mut present = std::collections::HashSet::new();
        self.dead.clear();
        for lease in leases {
            let key = (lease.broker_id, lease.incarnation.clone());
            present.insert(key.clone());
            let seen = match self.seen.get_mut(&key) {
                Some(seen) => {
                    if seen.heartbeat_ms != lease.heartbeat_ms {
                        seen.heartbeat_ms = lease.heartbeat_ms;
                        seen.changed = now;
                        seen.presumed_dead = false;
                    }
                    *seen
                }
                None => {
                    // First sight: live for a whole timeout from now, unless the
                    // heartbeat is so old by the wall clock that no tolerated skew
                    // explains it (then not live, but dead only once it stays
                    // unchanged for a timeout from now).
                    let seen = Seen {
                        heartbeat_ms: lease.heartbeat_ms,
                        changed: now,
                        presumed_dead: now_ms - lease.heartbeat_ms >= LONG_DEAD_FACTOR * session_timeout_ms.max(0),
                    };
                    self.seen.insert(key, seen);
                    seen
                }
            };
            let unchanged_for_timeout = now.duration_since(seen.changed) >= timeout;
            if lease.stands_down() || unchanged_for_timeout {
                self.dead.insert(lease.broker_id);
            } else if !seen.presumed_dead {
                live.push(lease);
            }
        }
        self.seen
            .retain(|k, _| present.contains(k) || unreadable.contains(&k.0));
        let seen = &self.seen;
        let never_read = |id: &i32| !seen.keys().any(|(b, _)| b == id);
        self.unread.retain(|id, _| unreadable.contains(id) && never_read(id));
        for id in unreadable.iter().filter(|id| never_read(id)) {
            self.unread.entry(*id).or_insert(now);
        }
        live
    }

    /// How long broker `id`'s lease has failed to read at every read by this process
    /// (None once it read cleanly, or if it never failed).
    pub fn never_read_for(&self, id: i32, now: std::time::Instant) -> Option<std::time::Duration> {
        self.unread.get(&id).map(|since| now.saturating_duration_since(*since))
    }
}

/// The broker id of the lease file an error is about (`<id>.json`), if it names one.
pub fn lease_id_of(e: &VolumeError) -> Option<i32> {
    e.path().file_stem()?.to_str()?.parse().ok()
}

/// Every lease file on the volume, unreadable ones as errors.
pub fn list_brokers(volume: &Volume) -> Result<Vec<Result<BrokerLease, VolumeError>>, VolumeError> {
    Ok(crate::error::json_files(&volume.brokers_dir())?
        .iter()
        .map(|p| read_versioned_json(p, "broker lease", LEASE_FORMAT_VERSION))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: i32, hb: i64) -> BrokerLease {
        BrokerLease {
            version: LEASE_FORMAT_VERSION,
            broker_id: id,
            host: "h".into(),
            port: 1,
            incarnation: format!("i{id}"),
            started_ms: 0,
            heartbeat_ms: hb,
            stopped_ms: None,
            stepped_down_ms: None,
            opening_ms: None,
            joining_ms: None,
            listeners: Default::default(),
            authorizer: None,
            renewal: 0,
            routes: None,
        }
    }

    #[test]
    fn a_heartbeat_unchanged_for_half_the_timeout_is_stale_and_for_all_of_it_dead() {
        let (now, timeout) = (1_000_000, 10_000);
        let state = |age: i64, f: fn(&mut BrokerLease)| {
            let mut l = lease(1, now - age);
            f(&mut l);
            (l.liveness(now, timeout), l.is_alive(now, timeout))
        };
        let plain = |_: &mut BrokerLease| {};
        assert_eq!(state(1_000, plain), (Liveness::Alive, true));
        assert_eq!(state(4_999, plain), (Liveness::Alive, true));
        assert_eq!(
            state(5_000, plain),
            (Liveness::Stale, true),
            "still live: nothing is taken yet"
        );
        assert_eq!(state(10_000, plain), (Liveness::Dead, false));
        let stepped = |l: &mut BrokerLease| l.stepped_down_ms = Some(l.heartbeat_ms);
        assert_eq!(state(6_000, stepped), (Liveness::SteppedDown, false));
        assert_eq!(
            state(20_000, stepped),
            (Liveness::Dead, false),
            "a marked lease whose broker died"
        );
        let stopped = |l: &mut BrokerLease| l.stopped_ms = Some(l.heartbeat_ms);
        assert_eq!(state(1_000, stopped), (Liveness::Stopped, false));
        assert_eq!(state(60_000, stopped), (Liveness::Stopped, false));
        let opening = |l: &mut BrokerLease| l.opening_ms = Some(l.heartbeat_ms);
        assert_eq!(
            state(1_000, opening),
            (Liveness::Opening, true),
            "alive, serving nothing yet"
        );
        assert_eq!(state(5_000, opening), (Liveness::Stale, true));
        assert_eq!(
            state(10_000, opening),
            (Liveness::Dead, false),
            "a broker that died opening"
        );
        for age in [0, 4_999, 5_000, 9_999, 10_000] {
            for f in [plain, stepped, stopped, opening] {
                let (l, alive) = state(age, f);
                assert_eq!(l.is_live(), alive, "age {age}: {l:?}");
            }
        }
    }

    /// A lease that never read cleanly is told apart from one that did and then
    /// failed: the first is counted from its first failed read, the second by its
    /// last seen renewal (`last_changed`).
    #[test]
    fn a_lease_never_read_cleanly_is_timed_from_its_first_failed_read() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let mut t = LeaseTracker::default();
        t.observe_partial([], &[1], 1_000, t0, 10_000);
        t.observe_partial([], &[1], 2_000, t0 + Duration::from_secs(1), 10_000);
        assert_eq!(
            t.never_read_for(1, t0 + Duration::from_secs(3)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(t.last_changed(1), None);
        // Read at last: timed by its renewals from then on.
        let peer = lease(1, 3_000);
        t.observe_partial([&peer], &[], 3_000, t0 + Duration::from_secs(2), 10_000);
        assert_eq!(t.never_read_for(1, t0 + Duration::from_secs(3)), None);
        assert_eq!(t.last_changed(1), Some(t0 + Duration::from_secs(2)));
        t.observe_partial([], &[1], 4_000, t0 + Duration::from_secs(4), 10_000);
        assert_eq!(t.never_read_for(1, t0 + Duration::from_secs(5)), None, "it read once");
        assert_eq!(t.last_changed(1), Some(t0 + Duration::from_secs(2)));
        // Gone from the volume: forgotten.
        t.observe_partial([], &[], 5_000, t0 + Duration::from_secs(5), 10_000);
        assert_eq!((t.never_read_for(1, t0), t.last_changed(1)), (None, None));
    }

    #[test]
    fn a_first_sighting_never_confirms_a_broker_dead() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let timeout = 10_000;
        // This host's clock runs 40 s ahead of a live peer's (a VM thawed with its clock
        // behind, or this host's clock far ahead): the peer's fresh heartbeat looks four
        // timeouts old at this broker's first look.
        let now_ms = 1_000_000;
        let peer = lease(1, now_ms - 40_000);
        let mut t = LeaseTracker::default();
        assert!(
            t.observe([&peer], now_ms, t0, timeout).is_empty(),
            "not live: nothing placed on it"
        );
        assert!(t.dead().is_empty(), "not dead either");
        assert!(
            !t.confirms_dead(&peer, t0, timeout),
            "a lock it holds may not be taken on a first sighting"
        );
        // Its next renewal shows it alive.
        let renewed = lease(1, now_ms - 39_000);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(t.observe([&renewed], now_ms + 1_000, t1, timeout).len(), 1);
        assert!(!t.confirms_dead(&renewed, t1, timeout));
        // A peer that really stopped long ago is confirmed dead once its lease stayed
        // unchanged for a timeout by this process's clock, and not before.
        let gone = lease(2, now_ms - 60_000);
        let mut t = LeaseTracker::default();
        assert!(t.observe([&gone], now_ms, t0, timeout).is_empty());
        let almost = t0 + Duration::from_millis(9_999);
        assert!(t.observe([&gone], now_ms + 9_999, almost, timeout).is_empty());
        assert!(!t.confirms_dead(&gone, almost, timeout));
        let after = t0 + Duration::from_secs(10);
        assert!(t.observe([&gone], now_ms + 10_000, after, timeout).is_empty());
        assert_eq!(t.dead().iter().copied().collect::<Vec<_>>(), vec![2]);
        assert!(t.confirms_dead(&gone, after, timeout));
    }

    /// Issue 25 item 5: a broker too slow to renew its lease in time steps down and
    /// says so in its lease; its heartbeat still changes (slow renewals), yet peers
    /// count it dead at once — not live, its locks may be taken — until a renewal in
    /// time clears the mark. (Before, such a broker stayed live to its peers while it
    /// served nothing: its partitions stranded.)
    #[test]
    fn a_broker_that_stepped_down_is_dead_to_its_peers_at_once_until_it_renews_in_time() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let timeout = 10_000;
        let mut t = LeaseTracker::default();
        let mut slow = lease(1, 1_000);
        assert_eq!(t.observe([&slow], 1_000, t0, timeout).len(), 1);
        // Its renewals keep coming, 3.5 s apart: never unchanged for the timeout.
        slow.heartbeat_ms = 4_500;
        slow.stepped_down_ms = Some(4_500);
        let t1 = t0 + Duration::from_millis(3_500);
        assert!(t.observe([&slow], 4_500, t1, timeout).is_empty(), "not live");
        assert_eq!(t.dead().iter().copied().collect::<Vec<_>>(), vec![1]);
        assert!(t.confirms_dead(&slow, t1, timeout), "its locks may be taken at once");
        assert!(!slow.is_alive(4_500, timeout));
        // A renewal in time clears the mark: live again.
        slow.heartbeat_ms = 5_500;
        slow.stepped_down_ms = None;
        let t2 = t0 + Duration::from_millis(4_500);
        assert_eq!(t.observe([&slow], 5_500, t2, timeout).len(), 1);
        assert!(!t.confirms_dead(&slow, t2, timeout));
        // The mark round-trips through the file, and a lease without it reads as before.
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        std::fs::create_dir_all(volume.brokers_dir()).unwrap();
        slow.stepped_down_ms = Some(7);
        slow.renew(&volume).unwrap();
        assert_eq!(BrokerLease::read(&volume, 1).unwrap().stepped_down_ms, Some(7));
        slow.stepped_down_ms = None;
        slow.renew(&volume).unwrap();
        let text = std::fs::read_to_string(volume.broker_lease(1)).unwrap();
        assert!(!text.contains("stepped_down_ms"), "{text}");
    }

    #[test]
    fn liveness_follows_heartbeat_changes_on_the_local_monotonic_clock() {
        use std::time::{Duration, Instant};
        let mut t = LeaseTracker::default();
        let t0 = Instant::now();
        let ids = |v: Vec<&BrokerLease>| v.iter().map(|l| l.broker_id).collect::<Vec<_>>();
        // Broker 1 is current; broker 2's clock runs an hour ahead; broker 3 died long
        // ago; broker 4's clock runs 15 s behind (its fresh heartbeat looks 15 s old).
        let now_ms = 1_000_000;
        let (b1, b2, b3, b4) = (
            lease(1, now_ms),
            lease(2, now_ms + 3_600_000),
            lease(3, now_ms - 60_000),
            lease(4, now_ms - 15_000),
        );
        assert_eq!(ids(t.observe([&b1, &b2, &b3, &b4], now_ms, t0, 10_000)), vec![1, 2, 4]);
        // Unchanged for a whole timeout after first sight: dead.
        let b1_ = lease(1, now_ms + 10_000);
        assert_eq!(
            ids(t.observe(
                [&b1_, &b2, &b3, &b4],
                now_ms + 10_000,
                t0 + Duration::from_secs(10),
                10_000
            )),
            vec![1]
        );
        let mut t = LeaseTracker::default();
        assert_eq!(ids(t.observe([&b1, &b2, &b3], now_ms, t0, 10_000)), vec![1, 2]);
        // 11 s later broker 1 renewed, broker 2 stopped: its future heartbeat no
        // longer keeps it alive.
        let b1 = lease(1, now_ms + 11_000);
        let later = t0 + Duration::from_secs(11);
        assert_eq!(ids(t.observe([&b1, &b2, &b3], now_ms + 11_000, later, 10_000)), vec![1]);
        // A new incarnation of broker 2 is tracked afresh.
        let mut b2 = lease(2, now_ms + 3_600_000 + 11_000);
        b2.incarnation = "again".into();
        assert_eq!(ids(t.observe([&b1, &b2], now_ms + 11_000, later, 10_000)), vec![1, 2]);
        // A broker that stopped cleanly is dead at once, to the tracker and to kaasctl.
        let mut t = LeaseTracker::default();
        let mut stopped = lease(1, now_ms + 1);
        stopped.stopped_ms = Some(now_ms + 1);
        assert!(t.observe([&stopped], now_ms + 1, t0, 10_000).is_empty());
        assert!(!stopped.is_alive(now_ms + 1, 10_000));
        // A lease that could not be read for a while is remembered, not seen afresh:
        // broker 5's heartbeat stops changing, its file fails to read for a while, then reads again.
        let mut t = LeaseTracker::default();
        let b5 = lease(5, now_ms);
        assert_eq!(ids(t.observe([&b5], now_ms, t0, 10_000)), vec![5]);
        assert!(t
            .observe_partial([], &[5], now_ms + 5_000, t0 + Duration::from_secs(5), 10_000)
            .is_empty());
        assert!(
            t.observe([&b5], now_ms + 11_000, t0 + Duration::from_secs(11), 10_000)
                .is_empty(),
            "unchanged for 11 s across the unreadable spell: dead"
        );
    }

    #[test]
    fn a_peer_heartbeat_from_beyond_the_tolerated_skew_refuses_the_start() {
        let now = 1_000_000;
        assert!(check_clock_skew(&[lease(1, now + 9_000), lease(2, now - 500_000)], 0, now, 10_000).is_ok());
        let err = check_clock_skew(&[lease(1, now + 11_000)], 0, now, 10_000).unwrap_err();
        assert!(err.contains("broker 1") && err.contains("11000 ms ahead"), "{err}");
        assert!(
            check_clock_skew(&[lease(0, now + 60_000)], 0, now, 10_000).is_ok(),
            "its own old lease is not a peer"
        );
        // A broker of a host an hour fast, stopped cleanly for good: not judged by its
        // stamp, so it keeps no other broker from starting (it did, for the hour).
        let mut stopped = lease(2, now + 3_600_000);
        stopped.stopped_ms = Some(stopped.heartbeat_ms);
        assert!(check_clock_skew(&[stopped], 0, now, 10_000).is_ok());
    }

    #[test]
    fn a_broker_id_is_claimed_by_one_process_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let lease = BrokerLease {
            version: LEASE_FORMAT_VERSION,
            broker_id: 3,
            host: "10.0.0.1".into(),
            port: 9092,
            incarnation: "first".into(),
            started_ms: 0,
            heartbeat_ms: 1_000,
            stopped_ms: None,
            stepped_down_ms: None,
            opening_ms: None,
            joining_ms: None,
            listeners: Default::default(),
            authorizer: None,
            renewal: 0,
            routes: None,
        };
        lease.write(&v).unwrap();
        let claim = claim_broker_id(&v, 3, 1_500).unwrap();
        assert_eq!(claim.previous.as_ref().unwrap().incarnation, "first");
        // A second claim (flock conflicts between open files, also in one process).
        let err = claim_broker_id(&v, 3, 1_500).unwrap_err().to_string();
        assert!(err.contains("broker id 3 is in use"), "{err}");
        assert!(
            err.contains("incarnation first at 10.0.0.1:9092, last heartbeat 500 ms ago"),
            "{err}"
        );
        assert!(claim_broker_id(&v, 4, 1_500).is_ok(), "other ids are free");
        // Once the holder is gone (here: dropped; a dead process's lock is freed by
        // the kernel) the id can be claimed at once, fresh lease or not.
        drop(claim);
        assert!(claim_broker_id(&v, 3, 1_500).is_ok());
        // A lease torn by a crash during an in-place renewal does not keep the id
        // from starting again.
        std::fs::write(v.broker_lease(3), b"{\"version\": 1, \"broker_id\": 3, \"host\": \"10.").unwrap();
        let claim = claim_broker_id(&v, 3, 1_500).unwrap();
        assert!(claim.previous.is_none());
    }
}

/// A broker's state as its lease shows it ([`BrokerLease::liveness`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    Alive,
    /// Starting: it opens the volume (recovers its partitions) and serves nothing yet;
    /// peers keep its partitions for it but route no group, slot or partition to it.
    Opening,
    /// Serving, but not yet coordinating its share of groups and transaction slots: it
    /// waits for every live peer's lease to route to it (`BrokerLease::joining_ms`).
    Joining,
    /// Its heartbeat has not changed for half the session timeout: still counted
    /// live, about to be judged dead unless it renews.
    Stale,
    /// Running, but it could not renew its lease in time: it serves nothing.
    SteppedDown,
    /// No heartbeat for the session timeout: its partitions, slots and groups are
    /// taken over.
    Dead,
    /// It stopped cleanly and let everything go.
    Stopped,
}

impl Liveness {
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Opening => "opening",
            Liveness::Joining => "joining",
            Liveness::Stale => "stale",
            Liveness::SteppedDown => "stepped down",
            Liveness::Dead => "dead",
            Liveness::Stopped => "stopped",
        }
    }
    /// Alive, as [`BrokerLease::is_alive`] says: its partitions are its own. One
    /// still opening the volume is, though it coordinates no group or slot yet
    /// (`kaas_core::admin::serving_brokers`).
    pub fn is_live(self) -> bool {
        matches!(
            self,
            Liveness::Alive | Liveness::Opening | Liveness::Joining | Liveness::Stale
        )
    }
}

pub const CLUSTER_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMeta {
    pub version: u32,
    pub cluster_id: String,
    pub created_ms: i64,
}

/// The cluster id in `__cluster/cluster.json`, created on first start. Creation links a
/// fully written temporary file into place, so two brokers starting at once cannot
/// both win: the loser reads the winner's id.
pub fn cluster_id(volume: &Volume) -> Result<String, VolumeError> {
    cluster_id_or_create(volume).map(|(id, _)| id)
}

/// [`cluster_id`], and whether this call created it: true for exactly one of the
/// brokers starting at once on a new volume (the one whose file was linked into place).
pub fn cluster_id_or_create(volume: &Volume) -> Result<(String, bool), VolumeError> {
    let path = volume.cluster_dir().join("cluster.json");
    match read_versioned_json::<ClusterMeta>(&path, "cluster metadata", CLUSTER_FORMAT_VERSION) {
        Ok(m) => return Ok((m.cluster_id, false)),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    let meta = ClusterMeta {
        version: CLUSTER_FORMAT_VERSION,
        cluster_id: uuid::Uuid::new_v4().simple().to_string(),
        created_ms: crate::now_ms(),
    };
    let bytes = crate::fsutil::json_bytes(&meta).map_err(|e| VolumeError::io(&path, e))?;
    // A unique temporary name per writer: two brokers (even with equal pids on two
    // hosts) starting at once cannot link each other's file.
    if crate::fsutil::atomic_create(&path, &bytes).map_err(|e| VolumeError::io(&path, e))? {
        Ok((meta.cluster_id, true))
    } else {
        read_versioned_json::<ClusterMeta>(&path, "cluster metadata", CLUSTER_FORMAT_VERSION)
            .map(|m| (m.cluster_id, false))
    }
}
