//! Client quotas enforced, as Kafka's quota managers do (docs/quotas.md): produce and
//! fetch byte rates and request-time percentages, per user and client id, from
//! `__cluster/client-quotas.json` ([`kaas_core::quotas`]).
//!
//! Each entity under a quota has a schedule (the generic cell rate algorithm, as in
//! Kafka's token-bucket quotas of KIP-599): what it uses, divided by its quota, is
//! time it has spent, and its schedule runs that far ahead. A request is always served;
//! what it used is recorded, and when that puts the schedule more than one window
//! (`quota.window.size.seconds`) ahead of now, the answer carries the difference as its
//! throttle time (KIP-219), and the connection reads nothing more for that long
//! ([`crate::server`]), as Kafka's brokers do for every request version. A request-time
//! throttle is at most one window (Kafka's bound); the rest stays on the schedule, and
//! the next answers pay it, on any connection. Quotas are per broker, as Kafka's.
//!
//! Kafka measures with a sampled rate instead, which forgets what is older than its
//! windows: a new client may send ten windows' worth at once, is throttled until that
//! window ages out, then sends ten windows' worth again (a sawtooth with an 11 s
//! period), and a request larger than its throttle bound is never paid in full. A
//! schedule forgets nothing (docs/quotas.md#how-kaas-differs-from-kafka). For the same
//! reason a throttled Fetch keeps its records (Kafka empties it and takes back what it
//! counted, so a batch bigger than the quota lets through at once is never delivered).
//!
//! The file is read at start (an unreadable file stops the broker: quotas silently
//! lifted would be worse), then at each volume sync ([`Quotas::reload`]) when its stamp
//! changed, and every tenth sync whatever the stamp says; a file gone or unreadable
//! after it was read keeps the quotas last read. This broker's own changes
//! ([`Quotas::update`]) count at once. A request only reads what is cached.

use crate::metrics::{metrics, QuotaLabels};
use kaas_core::fsutil::{file_stamp, FileStamp};
use kaas_core::quotas::{ClientQuotas, Measured, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// What a quota limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Bytes of Produce requests (`producer_byte_rate`).
    Produce,
    /// Record bytes of Fetch responses (`consumer_byte_rate`).
    Fetch,
    /// Time spent handling requests, in percent of one thread (`request_percentage`).
    Request,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
        }
    }
    fn label(self) -> &'static str {
        match self {
            QuotaKind::Produce => "produce",
            QuotaKind::Fetch => "fetch",
            QuotaKind::Request => "request",
        }
    }
}

/// Every this many volume syncs the file is read whatever its stamp says (a stamp can
/// repeat: same size, a coarse clock, a reused inode).
const FULL_READ_EVERY: u64 = 10;
/// An entity's measure unused this long is dropped, with its metric series.
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);
/// Entities measured at most (a default client-id quota measures every client id it
/// sees). Past it, those unused for a minute and owing nothing are dropped (at most
/// once a second); if that is not enough, a new entity shares one measure per quota
/// kind with every other one past the bound (`Measured::OVERFLOW`).
const MAX_SENSORS: usize = 100_000;

pub struct Quotas {
    volume: kaas_core::Volume,
    window: Duration,
    cache: RwLock<Cached>,
    /// One update of the file at a time from this broker.
    writes: Mutex<()>,
    reloads: AtomicU64,
    missing_logged: AtomicBool,
    sensors: Mutex<Sensors>,
}

#[derive(Default)]
struct Sensors {
    by_entity: HashMap<(QuotaKind, Measured), Sensor>,
    /// When the map was last pruned for room, and when that was last logged.
    pruned: Option<Instant>,
    full_logged: Option<Instant>,
}

struct Cached {
    quotas: Arc<ClientQuotas>,
    stamp: Option<FileStamp>,
    /// Bumped by each of this broker's own updates: a reload that read the file
    /// before one does not replace it.
    generation: u64,
    file_seen: bool,
}

struct Sensor {
    /// The entity's schedule: where what it used so far, at its quota, has brought it
    /// (at least now).
    schedule: Instant,
    /// The quota the schedule is priced at: a changed quota reprices what is still
    /// ahead (Apache gives the sensors of a changed quota the new bound at once).
    bound: f64,
    used: Instant,
    labels: QuotaLabels,
}

impl Quotas {
    /// The quotas on `volume`, a client allowed `window`'s worth at once. Fails when
    /// the file cannot be read.
    pub fn load(volume: &kaas_core::Volume, window: Duration) -> Result<Quotas, kaas_core::VolumeError> {
        let stamp = file_stamp(&volume.client_quotas_file());
        let quotas = usable(ClientQuotas::read(volume)?);
        if !quotas.entries.is_empty() {
            info!(entities = quotas.entries.len(), "client quotas in force");
        }
        Ok(Quotas {
            volume: volume.clone(),
            window,
            cache: RwLock::new(Cached {
                quotas: Arc::new(quotas),
                stamp,
                generation: 0,
                file_seen: stamp.is_some(),
            }),
            writes: Mutex::new(()),
            reloads: AtomicU64::new(1),
            missing_logged: AtomicBool::new(false),
            sensors: Mutex::new(Sensors::default()),
        })
    }

    /// The quotas in force (no I/O).
    pub fn current(&self) -> Arc<ClientQuotas> {
        self.cache.read().unwrap_or_else(|p| p.into_inner()).quotas.clone()
    }

    /// At a volume sync (blocking work): re-reads the file if its stamp changed (and
    /// every [`FULL_READ_EVERY`]th time regardless), and drops measures gone stale.
    pub fn reload(&self) {
        let full = self
            .reloads
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(FULL_READ_EVERY);
        // The stamp before the content: a file replaced in between is read again.
        let path = self.volume.client_quotas_file();
        let stamp = file_stamp(&path);
        let read = {
            let c = self.cache.read().unwrap_or_else(|p| p.into_inner());
            if stamp.is_none() && c.file_seen {
                if !self.missing_logged.swap(true, Ordering::Relaxed) {
                    error!(path = %path.display(), "the client quotas file is gone or cannot be opened; enforcing the quotas last read");
                }
                None
            } else if stamp == c.stamp && !full {
                None
            } else {
                Some(c.generation)
            }
        };
        if stamp.is_some() {
            self.missing_logged.store(false, Ordering::Relaxed);
        }
        if let Some(generation) = read {
            match ClientQuotas::read(&self.volume).map(usable) {
                Ok(quotas) => {
                    let mut c = self.cache.write().unwrap_or_else(|p| p.into_inner());
                    if c.generation == generation {
                        if *c.quotas != quotas {
                            info!(entities = quotas.entries.len(), "client quotas changed on the volume");
                        }
                        c.quotas = Arc::new(quotas);
                        c.stamp = stamp;
                        c.file_seen |= stamp.is_some();
                    }
                }
                Err(e) => error!(error = %e, "cannot read the client quotas; enforcing the ones last read"),
            }
        }
        self.sweep(Instant::now());
    }

    /// A read-modify-write of the file (AlterClientQuotas; [`ClientQuotas::update`],
    /// under its lock), in force on this broker at once. Blocking file work.
    pub fn update(
        &self,
        f: impl FnOnce(&mut ClientQuotas) -> Result<(), kaas_core::VolumeError>,
    ) -> Result<ClientQuotas, kaas_core::VolumeError> {
        let _one_at_a_time = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let quotas = ClientQuotas::update(&self.volume, f)?;
        let mut c = self.cache.write().unwrap_or_else(|p| p.into_inner());
        c.quotas = Arc::new(usable(quotas.clone()));
        // Read again at the next sync: a writer between the write and here counts.
        c.stamp = None;
        c.generation += 1;
        c.file_seen = true;
        Ok(quotas)
    }

    /// Drops the measures unused for an hour, and those the quotas in force no longer
    /// measure (a quota removed or moved to another entity), with their series.
    fn sweep(&self, now: Instant) {
        let quotas = self.current();
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        sensors.by_entity.retain(|(kind, measured), s| {
            let user = measured.user.as_deref().unwrap_or("");
            let client = measured.client_id.as_deref().unwrap_or("");
            // An entity that still owes time is kept however long it stays away: what
            // it owes is not forgiven.
            let keep = (now.saturating_duration_since(s.used) < SENSOR_EXPIRY || s.schedule > now)
                && (*measured == Measured::OVERFLOW
                    || quotas.resolve(kind.key(), user, client).map(|(_, m)| m).as_ref() == Some(measured));
            if !keep {
                metrics().forget_quota(&s.labels);
            }
            keep
        });
    }

    /// Records `value` (bytes, or percent-seconds of request time) used by a client of
    /// `user` with `client_id` against its `kind` quota as in force now, if it has
    /// one; how long it is to be throttled for. Never against the quotas a request saw
    /// when it began: the entity's schedule is shared by all its clients, and a long
    /// poll begun before a quota change re-priced it back to the old quota — right
    /// after a raise, a second's debt became fifteen minutes of throttle (found by a
    /// review of quotas).
    pub fn record(&self, kind: QuotaKind, user: &str, client_id: &str, value: f64) -> Duration {
        self.record_at(&self.current(), kind, user, client_id, value, Instant::now())
    }

    /// The most record bytes one Fetch of this client asks for: one window of its
    /// fetch quota (Kafka's getMaxValueInQuotaWindow allows all windows but one), so
    /// an answer comes in steps the quota can follow. At least one batch is still
    /// returned (KIP-74), whatever its size.
    pub fn fetch_cap(&self, quotas: &ClientQuotas, user: &str, client_id: &str) -> Option<i32> {
        let (bound, _) = quotas.resolve(CONSUMER_BYTE_RATE, user, client_id)?;
        let cap = bound * self.window.as_secs_f64();
        Some(cap.min(i32::MAX as f64) as i32)
    }

    fn record_at(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now: Instant,
    ) -> Duration {
        let Some((bound, measured)) = quotas.resolve(kind.key(), user, client_id) else {
            return Duration::ZERO;
        };
        let mut guard = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        let sensors = &mut *guard;
        let mut measured = measured;
        if sensors.by_entity.len() >= MAX_SENSORS && !sensors.by_entity.contains_key(&(kind, measured.clone())) {
            if sensors
                .pruned
                .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1))
            {
                sensors.pruned = Some(now);
                sensors.by_entity.retain(|_, s| {
                    let keep = now.saturating_duration_since(s.used) < Duration::from_secs(60) || s.schedule > now;
                    if !keep {
                        metrics().forget_quota(&s.labels);
                    }
                    keep
                });
            }
            if sensors.by_entity.len() >= MAX_SENSORS {
                measured = Measured::OVERFLOW;
                if sensors
                    .full_logged
                    .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(60))
                {
                    sensors.full_logged = Some(now);
                    warn!(
                        measures = sensors.by_entity.len(),
                        "over {MAX_SENSORS} client quota measures in use this minute; new entities share one"
                    );
                }
            }
        }
        let sensor = sensors
            .by_entity
            .entry((kind, measured))
            .or_insert_with_key(|(_, m)| Sensor {
                schedule: now,
                bound,
                used: now,
                labels: QuotaLabels {
                    quota: kind.label(),
                    user: m.user.clone().unwrap_or_default(),
                    client_id: m.client_id.clone().unwrap_or_default(),
                },
            });
        sensor.used = now;
        if sensor.bound != bound {
            // The quota changed: what the entity used is owed at the new rate, so a
            // raised quota lifts a throttle at once instead of after the old debt.
            let owed = sensor.schedule.saturating_duration_since(now).as_secs_f64() * sensor.bound / bound;
            let owed = Duration::try_from_secs_f64(owed)
                .unwrap_or(Duration::MAX)
                .min(Duration::from_secs(10 * 365 * 86_400));
            sensor.schedule = now.checked_add(owed).unwrap_or(sensor.schedule);
            sensor.bound = bound;
        }
        let spent = Duration::try_from_secs_f64(value.max(0.0) / bound).unwrap_or(Duration::MAX);
        // At most ten years ahead: beyond that an Instant may overflow.
        let spent = spent.min(Duration::from_secs(10 * 365 * 86_400));
        sensor.schedule = sensor.schedule.max(now).checked_add(spent).unwrap_or(sensor.schedule);
        if kind == QuotaKind::Request {
            // Request time is throttled at most a window at a time (below), so what
            // lies further ahead would never be collected, only keep the entity
            // throttled long after its load stopped: it is forgiven, as Apache's
            // sampled windows forget it.
            let furthest = now + 2 * self.window;
            if sensor.schedule > furthest {
                sensor.schedule = furthest;
            }
        }
        let used = if kind == QuotaKind::Request {
            value / 100.0
        } else {
            value
        };
        metrics().quota_recorded(&sensor.labels, used, bound);
        let ahead = sensor
            .schedule
            .saturating_duration_since(now)
            .saturating_sub(self.window);
        // Request time: at most one window at a time (Kafka's bound); the rest of the
        // schedule is paid by the next answers.
        let throttle = if kind == QuotaKind::Request {
            ahead.min(self.window)
        } else {
            ahead
        };
        if !throttle.is_zero() {
            metrics().quota_throttled(&sensor.labels, throttle);
        }
        throttle
    }
}

/// The quotas of a file as read, without the values no broker would accept (a file
/// edited by hand: a rate of 0 would throttle every request for ten years), each
/// logged.
fn usable(mut quotas: ClientQuotas) -> ClientQuotas {
    for entry in &mut quotas.entries {
        entry
            .quotas
            .retain(|key, value| match kaas_core::quotas::check_value(key, *value) {
                Ok(()) => true,
                Err(why) => {
                    error!(entity = %entry.entity, key, why, "client quota ignored");
                    false
                }
            });
    }
    quotas.entries.retain(|e| !e.quotas.is_empty());
    quotas
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_core::quotas::{Entity, EntityName};

    const WINDOW: Duration = Duration::from_secs(1);

    fn quotas_with(entries: &[(Option<&str>, Option<&str>, &str, f64)]) -> (tempfile::TempDir, Quotas) {
        let dir = tempfile::tempdir().expect("tempdir");
        let volume = kaas_core::Volume::new(dir.path());
        let name = |s: &str| {
            if s == "<default>" {
                EntityName::Default
            } else {
                EntityName::Name(s.into())
            }
        };
        ClientQuotas::update::<kaas_core::VolumeError>(&volume, |q| {
            for &(user, client, key, value) in entries {
                let entity = Entity {
                    user: user.map(name),
                    client_id: client.map(name),
                };
                q.set(&entity, key, value);
            }
            Ok(())
        })
        .expect("quotas written");
        let quotas = Quotas::load(&volume, WINDOW).expect("quotas load");
        (dir, quotas)
    }

    /// The amount a throttled client owed was priced at the quota in force when it
    /// used it: raising the quota (an operator relieving a throttled tenant) changed
    /// nothing until the old debt was paid, minutes or hours later. It is repriced at
    /// the new quota.
    #[test]
    fn a_raised_quota_lifts_a_throttle_at_once() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000.0)]);
        let (_dir2, raised) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000_000.0)]);
        let now = Instant::now();
        let throttle = q.record_at(&q.current(), QuotaKind::Produce, "alice", "a", 1_001_000.0, now);
        assert_eq!(throttle, Duration::from_secs(1_000));
        let after = q.record_at(
            &raised.current(),
            QuotaKind::Produce,
            "alice",
            "a",
            0.0,
            now + Duration::from_secs(1),
        );
        assert!(after.is_zero(), "{after:?}");
    }

    /// A request records what it used at the quota in force when it ends. Consumer A's
    /// long poll began at 1,000 B/s; the operator raised the quota to 1,000,000; B's
    /// fetch took a window at the new quota; A's poll then ended and recorded against
    /// the snapshot it began with, which re-priced the entity's shared schedule back to
    /// the old quota: 0.9 s still owed became 900 s, and A's connection was muted for
    /// ten minutes right after the raise (found by a review of quotas). `record` now
    /// takes no snapshot.
    #[test]
    fn a_request_that_ends_after_a_raise_records_at_the_raised_quota() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, CONSUMER_BYTE_RATE, 1_000.0)]);
        let began = q.current();
        assert_eq!(
            q.fetch_cap(&began, "alice", "a"),
            Some(1_000),
            "A's poll capped at the old quota"
        );
        q.update(|quotas| {
            quotas.set(
                &Entity {
                    user: Some(EntityName::Name("alice".into())),
                    client_id: None,
                },
                CONSUMER_BYTE_RATE,
                1_000_000.0,
            );
            Ok(())
        })
        .expect("raised");
        assert!(q.record(QuotaKind::Fetch, "alice", "b", 1_000_000.0) <= Duration::from_secs(1));
        let a = q.record(QuotaKind::Fetch, "alice", "a", 1_000.0);
        assert!(a <= Duration::from_secs(2), "A throttled {a:?} after the raise");
    }

    /// Request time is throttled at most a window at a time, but what was used beyond
    /// that piled up: a client that once kept threads busy went on being throttled a
    /// whole window at every request for many minutes after its load stopped.
    #[test]
    fn request_time_owed_past_what_a_throttle_collects_is_forgiven() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, REQUEST_PERCENTAGE, 10.0)]);
        let quotas = q.current();
        let start = Instant::now();
        let mut now = start;
        while now < start + Duration::from_secs(600) {
            now += q.record_at(&quotas, QuotaKind::Request, "alice", "a", 50.0, now) + Duration::from_millis(500);
        }
        let later = q.record_at(
            &quotas,
            QuotaKind::Request,
            "alice",
            "a",
            0.1,
            now + Duration::from_secs(15),
        );
        assert!(later.is_zero(), "{later:?}");
    }

    /// A client producing as fast as its throttles let it (each request sent when the
    /// last one's throttle time is over) moves at its quota: over every 10 s once
    /// past its first seconds when its requests are small against the quota, and on
    /// average whatever their size, twenty times the quota included.
    #[test]
    fn a_client_that_obeys_its_throttle_times_produces_at_its_quota() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 100_000.0)]);
        let quotas = q.current();
        for (i, request) in [1_000.0, 10_000.0, 64_000.0, 500_000.0, 2_000_000.0]
            .into_iter()
            .enumerate()
        {
            // Each size on its own, long after the last.
            let start = Instant::now() + Duration::from_secs(10_000) * i as u32;
            let mut now = start;
            let mut sent = Vec::new();
            while now < start + Duration::from_secs(600) {
                let throttle = q.record_at(&quotas, QuotaKind::Produce, "alice", "app", request, now);
                sent.push((now.duration_since(start).as_secs_f64(), request));
                // A request takes 1 ms besides its throttle.
                now += throttle + Duration::from_millis(1);
            }
            let rate = |from: f64, to: f64| {
                sent.iter()
                    .filter(|(t, _)| (from..to).contains(t))
                    .map(|(_, b)| b)
                    .sum::<f64>()
                    / (to - from)
            };
            let average = rate(60.0, 600.0);
            assert!(
                (average - 100_000.0).abs() / 100_000.0 < 0.1,
                "{request}-byte requests: {average:.0} B/s from 60 s to 600 s"
            );
            if request <= 10_000.0 {
                for from in (2..590).map(f64::from) {
                    let r = rate(from, from + 10.0);
                    assert!(
                        (r - 100_000.0).abs() / 100_000.0 < 0.1,
                        "{request}-byte requests: {r:.0} B/s from {from} s to {} s",
                        from + 10.0
                    );
                }
            }
        }
    }

    #[test]
    fn clients_without_a_quota_are_not_measured_and_a_user_quota_is_shared_by_its_clients() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000.0)]);
        let quotas = q.current();
        let now = Instant::now();
        // Nobody else is measured, however much they send.
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "bob", "app", 1e9, now),
            Duration::ZERO
        );
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Fetch, "alice", "app", 1e9, now),
            Duration::ZERO
        );
        // Alice's two client ids share her first second's 1,000 bytes.
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "alice", "one", 600.0, now),
            Duration::ZERO
        );
        let throttle = q.record_at(&quotas, QuotaKind::Produce, "alice", "two", 600.0, now);
        // 1,200 B over the first second is 20 % over: 200 ms.
        assert_eq!(throttle, Duration::from_millis(200));
        assert_eq!(q.sensors.lock().expect("sensors").by_entity.len(), 1);
    }

    #[test]
    fn a_default_client_id_quota_measures_each_client_id_on_its_own() {
        let (_dir, q) = quotas_with(&[(None, Some("<default>"), PRODUCER_BYTE_RATE, 1_000.0)]);
        let quotas = q.current();
        let now = Instant::now();
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "a", "one", 900.0, now),
            Duration::ZERO
        );
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "b", "two", 900.0, now),
            Duration::ZERO
        );
        // Another user with client id "one" is the same measured entity.
        assert!(!q
            .record_at(&quotas, QuotaKind::Produce, "c", "one", 900.0, now)
            .is_zero());
    }

    #[test]
    fn a_fetch_asks_for_one_window_of_its_quota() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, CONSUMER_BYTE_RATE, 10.0)]);
        let quotas = q.current();
        assert_eq!(q.fetch_cap(&quotas, "alice", "c"), Some(10));
        assert_eq!(q.fetch_cap(&quotas, "bob", "c"), None);
    }

    #[test]
    fn a_change_on_the_volume_counts_at_the_next_sync_and_a_broken_or_missing_file_keeps_the_last_quotas() {
        let (dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000.0)]);
        let volume = kaas_core::Volume::new(dir.path());
        let alice = Entity {
            user: Some(EntityName::Name("alice".into())),
            client_id: None,
        };
        let bound = |q: &Quotas| q.current().resolve(PRODUCER_BYTE_RATE, "alice", "x").map(|(b, _)| b);
        // Another writer (kaasctl, another broker): seen at the next sync.
        ClientQuotas::update::<kaas_core::VolumeError>(&volume, |f| {
            f.set(&alice, PRODUCER_BYTE_RATE, 2_000.0);
            Ok(())
        })
        .expect("changed");
        assert_eq!(bound(&q), Some(1_000.0), "a request reads only the cache");
        q.reload();
        assert_eq!(bound(&q), Some(2_000.0));
        // This broker's own change: at once.
        q.update(|f| {
            f.set(&alice, PRODUCER_BYTE_RATE, 3_000.0);
            Ok(())
        })
        .expect("updated");
        assert_eq!(bound(&q), Some(3_000.0));
        std::fs::write(volume.client_quotas_file(), b"{ not json").expect("corrupted");
        q.reload();
        assert_eq!(bound(&q), Some(3_000.0), "the last good quotas stay");
        assert!(
            Quotas::load(&volume, WINDOW).is_err(),
            "and a broker cannot start on it"
        );
        std::fs::remove_file(volume.client_quotas_file()).expect("removed");
        for _ in 0..FULL_READ_EVERY {
            q.reload();
        }
        assert_eq!(bound(&q), Some(3_000.0), "a file gone lifts no quota");
    }

    #[test]
    fn measures_the_quotas_no_longer_take_are_dropped_at_the_next_sync() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000.0)]);
        let quotas = q.current();
        q.record_at(&quotas, QuotaKind::Produce, "alice", "a", 10.0, Instant::now());
        q.reload();
        assert_eq!(q.sensors.lock().expect("sensors").by_entity.len(), 1);
        q.update(|f| {
            f.entries.clear();
            Ok(())
        })
        .expect("updated");
        q.reload();
        assert_eq!(q.sensors.lock().expect("sensors").by_entity.len(), 0);
    }

    #[test]
    fn a_new_client_may_send_one_window_at_once_and_pays_the_rest_in_full() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000.0)]);
        let quotas = q.current();
        let now = Instant::now();
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "alice", "a", 1_000.0, now),
            Duration::ZERO
        );
        // 20 s of quota at once, beyond the first second's: 20 s.
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "alice", "a", 20_000.0, now),
            Duration::from_secs(20)
        );
        let later = now + Duration::from_secs(11);
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Produce, "alice", "b", 0.0, later),
            Duration::from_secs(9),
            "what is owed follows the entity to any connection"
        );
        // Request time is held back at most one window at a time.
        let (_dir, q) = quotas_with(&[(Some("alice"), None, REQUEST_PERCENTAGE, 10.0)]);
        let quotas = q.current();
        assert_eq!(
            q.record_at(&quotas, QuotaKind::Request, "alice", "a", 100.0, now),
            WINDOW,
            "a whole second of a thread is ten seconds of a 10 % quota"
        );
    }
}
