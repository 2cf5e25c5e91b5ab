//! Client quotas enforced, as Kafka's quota managers do (docs/quotas.md): produce and
//! fetch byte rates and request-time percentages, per user and client id, from
//! `__cluster/client-quotas.json` ([`kaas_core::quotas`]).
//!
//! Each quota an entity is under is measured by a sampled rate (Kafka's `Rate` over
//! `quota.window.num` samples of `quota.window.size.seconds`). A request is always
//! served; what it used is recorded, and if that puts the rate over the quota the
//! answer carries a throttle time (KIP-219): `(rate - quota) / quota × the measured
//! span`, at most the span of all samples. The connection then reads nothing more for
//! that long ([`crate::server`]), or, for request versions older than KIP-219, the
//! answer itself waits that long. Quotas are per broker, as Kafka's.
//!
//! Two choices differ from Kafka's, both so that a client held to its quota moves at
//! its quota, evenly (docs/quotas.md#how-kaas-differs-from-kafka):
//! - A new client's rate is measured over its time so far, at least one window.
//!   Kafka counts at least all windows but one, so a new client may send ten
//!   windows' worth at once; then nothing until that window ages out, then ten
//!   windows' worth again: a sawtooth with an 11 s period.
//! - A throttled Fetch keeps its records. Kafka empties it and takes back what it
//!   counted, so a batch bigger than what the quota lets through at once (a Fetch
//!   returns at least one batch) is never delivered.
//!
//! The file is looked at (its stamp) at most once a second and read again when it
//! changed, or every 10 s whatever the stamp says; this broker's own changes count at
//! once. An unreadable file stops a starting broker (quotas silently lifted would be
//! worse) and, later, leaves the last good quotas in force with an error logged.

use crate::metrics::{metrics, QuotaLabels};
use kaas_core::fsutil::FileStamp;
use kaas_core::quotas::{ClientQuotas, Measured, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{error, info};

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

/// How often the file's stamp is looked at, and how often it is read whatever the
/// stamp says (a stamp can repeat: same size, a coarse clock, a reused inode).
const STAMP_CHECK: Duration = Duration::from_secs(1);
const REREAD: Duration = Duration::from_secs(10);
/// An entity's measure unused this long is dropped, with its metric series.
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);
/// How often expired measures are looked for.
const SWEEP: Duration = Duration::from_secs(60);
/// How often a file that stays unreadable is logged again.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(60);

pub struct Quotas {
    volume: kaas_core::Volume,
    window: Duration,
    samples: u32,
    loaded: Mutex<Loaded>,
    sensors: Mutex<Sensors>,
}

struct Loaded {
    quotas: Arc<ClientQuotas>,
    stamp: Option<FileStamp>,
    checked: Instant,
    read: Instant,
    /// When a failed read was last logged.
    failure_logged: Option<Instant>,
}

struct Sensors {
    by_entity: HashMap<(QuotaKind, Measured), Sensor>,
    swept: Instant,
}

struct Sensor {
    rate: Rate,
    used: Instant,
    labels: QuotaLabels,
}

impl Quotas {
    /// The quotas on `volume`, measured over `samples` windows of `window`. Fails when
    /// the file cannot be read.
    pub fn load(volume: &kaas_core::Volume, window: Duration, samples: u32) -> Result<Quotas, kaas_core::VolumeError> {
        let stamp = kaas_core::fsutil::file_stamp(&volume.client_quotas_file());
        let quotas = ClientQuotas::read(volume)?;
        if !quotas.entries.is_empty() {
            info!(entities = quotas.entries.len(), "client quotas in force");
        }
        let now = Instant::now();
        Ok(Quotas {
            volume: volume.clone(),
            window,
            samples: samples.max(2),
            loaded: Mutex::new(Loaded {
                quotas: Arc::new(quotas),
                stamp,
                checked: now,
                read: now,
                failure_logged: None,
            }),
            sensors: Mutex::new(Sensors {
                by_entity: HashMap::new(),
                swept: now,
            }),
        })
    }

    /// The quotas in force: the file as last read, read again if due.
    pub fn current(&self) -> Arc<ClientQuotas> {
        let now = Instant::now();
        let reread = {
            let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            if now.duration_since(loaded.checked) < STAMP_CHECK {
                return loaded.quotas.clone();
            }
            // This request looks; the others meanwhile use what is loaded.
            loaded.checked = now;
            let stamp = kaas_core::fsutil::file_stamp(&self.volume.client_quotas_file());
            if stamp == loaded.stamp && now.duration_since(loaded.read) < REREAD {
                return loaded.quotas.clone();
            }
            stamp
        };
        let read = crate::blocking::off_worker(|| ClientQuotas::read(&self.volume));
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        match read {
            Ok(quotas) => {
                loaded.quotas = Arc::new(quotas);
                loaded.stamp = reread;
                loaded.read = now;
                if loaded.failure_logged.take().is_some() {
                    info!("client quotas readable again; the file's quotas are in force");
                }
            }
            Err(e) => {
                if loaded
                    .failure_logged
                    .is_none_or(|at| now.duration_since(at) >= ERROR_LOG_EVERY)
                {
                    error!(error = %e, "client quotas unreadable; the last quotas read stay in force");
                    loaded.failure_logged = Some(now);
                }
            }
        }
        loaded.quotas.clone()
    }

    /// This broker changed the file: the next request reads it.
    pub fn changed(&self) {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        loaded.stamp = None;
        loaded.checked = Instant::now() - STAMP_CHECK;
    }

    /// Records `value` (bytes, or percent-seconds of request time) used by a client of
    /// `user` with `client_id` against its `kind` quota in `quotas` ([`Self::current`]),
    /// if it has one; how long it is to be throttled for.
    pub fn record(&self, quotas: &ClientQuotas, kind: QuotaKind, user: &str, client_id: &str, value: f64) -> Duration {
        self.record_at(quotas, kind, user, client_id, value, Instant::now())
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
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if now.duration_since(sensors.swept) >= SWEEP {
            sensors.swept = now;
            sensors.by_entity.retain(|_, s| {
                let keep = now.duration_since(s.used) < SENSOR_EXPIRY;
                if !keep {
                    metrics().forget_quota(&s.labels);
                }
                keep
            });
        }
        let sensor = sensors
            .by_entity
            .entry((kind, measured))
            .or_insert_with_key(|(_, m)| Sensor {
                rate: Rate::default(),
                used: now,
                labels: QuotaLabels {
                    quota: kind.label(),
                    user: m.user.clone().unwrap_or_default(),
                    client_id: m.client_id.clone().unwrap_or_default(),
                },
            });
        sensor.used = now;
        sensor.rate.record(value, now, self.window, self.samples);
        let (rate, span) = sensor.rate.measure(now, self.window, self.samples);
        let used = if kind == QuotaKind::Request {
            value / 100.0
        } else {
            value
        };
        metrics().quota_recorded(&sensor.labels, used, bound);
        let throttle = throttle_time(rate, bound, span, self.window * self.samples);
        if !throttle.is_zero() {
            metrics().quota_throttled(&sensor.labels, throttle);
        }
        throttle
    }
}

/// Kafka's throttle time: how long a client whose rate is `rate` must stay idle for
/// its rate over `span` to come down to `bound`, at most `max`.
fn throttle_time(rate: f64, bound: f64, span: Duration, max: Duration) -> Duration {
    if rate <= bound || bound <= 0.0 {
        return Duration::ZERO;
    }
    let ms = (rate - bound) / bound * span.as_millis() as f64;
    Duration::from_millis(ms.round() as u64).min(max)
}

/// Kafka's sampled rate: `samples` windows of `window` each, the oldest dropped when
/// a new one starts or when it is older than all of them together; the rate is their
/// sum over the time since the oldest began, counted as at least one window (Kafka:
/// all but one; see the module's comment).
#[derive(Debug, Default)]
struct Rate {
    /// (start, value) per window, oldest first.
    windows: VecDeque<(Instant, f64)>,
}

impl Rate {
    fn purge(&mut self, now: Instant, window: Duration, samples: u32) {
        while self
            .windows
            .front()
            .is_some_and(|&(start, _)| now.duration_since(start) >= window * samples)
        {
            self.windows.pop_front();
        }
    }

    fn record(&mut self, value: f64, now: Instant, window: Duration, samples: u32) {
        self.purge(now, window, samples);
        match self.windows.back_mut() {
            Some((start, sum)) if now.duration_since(*start) < window => *sum += value,
            _ => {
                self.windows.push_back((now, value));
                if self.windows.len() > samples as usize {
                    self.windows.pop_front();
                }
            }
        }
    }

    /// (the rate per second, the span it is measured over).
    fn measure(&mut self, now: Instant, window: Duration, samples: u32) -> (f64, Duration) {
        self.purge(now, window, samples);
        let total: f64 = self.windows.iter().map(|&(_, v)| v).sum();
        let oldest = self.windows.front().map_or(now, |&(start, _)| start);
        let span = now.duration_since(oldest).max(window);
        (total / span.as_secs_f64(), span)
    }
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
        let quotas = Quotas::load(&volume, WINDOW, 11).expect("quotas load");
        (dir, quotas)
    }

    /// A client producing as fast as its throttles let it (each request sent when the
    /// last one's throttle time is over) moves at its quota: over every 10 s once
    /// past its first seconds when its requests are small against the quota (no
    /// sawtooth), and on average whatever their size.
    #[test]
    fn a_client_that_obeys_its_throttle_times_produces_at_its_quota() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 100_000.0)]);
        let quotas = q.current();
        for (i, request) in [1_000.0, 10_000.0, 64_000.0, 500_000.0].into_iter().enumerate() {
            // Each size on its own, long after the last.
            let start = Instant::now() + Duration::from_secs(10_000) * i as u32;
            let mut now = start;
            let mut sent = Vec::new();
            while now < start + Duration::from_secs(90) {
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
            let average = rate(30.0, 90.0);
            assert!(
                (average - 100_000.0).abs() / 100_000.0 < 0.1,
                "{request}-byte requests: {average:.0} B/s from 30 s to 90 s"
            );
            if request <= 10_000.0 {
                for from in (2..80).map(f64::from) {
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
    fn a_throttle_is_at_most_the_span_of_all_samples_and_a_fetch_asks_for_one_window() {
        let (_dir, q) = quotas_with(&[(Some("alice"), None, CONSUMER_BYTE_RATE, 10.0)]);
        let quotas = q.current();
        let now = Instant::now();
        let throttle = q.record_at(&quotas, QuotaKind::Fetch, "alice", "c", 1e9, now);
        assert_eq!(throttle, WINDOW * 11);
        assert_eq!(q.fetch_cap(&quotas, "alice", "c"), Some(10));
        assert_eq!(q.fetch_cap(&quotas, "bob", "c"), None);
    }

    #[test]
    fn a_change_to_the_file_counts_within_seconds_and_an_unreadable_file_keeps_the_last_quotas() {
        let (dir, q) = quotas_with(&[(Some("alice"), None, PRODUCER_BYTE_RATE, 1_000.0)]);
        let volume = kaas_core::Volume::new(dir.path());
        ClientQuotas::update::<kaas_core::VolumeError>(&volume, |f| {
            f.set(
                &Entity {
                    user: Some(EntityName::Name("alice".into())),
                    client_id: None,
                },
                PRODUCER_BYTE_RATE,
                2_000.0,
            );
            Ok(())
        })
        .expect("changed");
        q.changed();
        let bound = |q: &Quotas| q.current().resolve(PRODUCER_BYTE_RATE, "alice", "x").map(|(b, _)| b);
        assert_eq!(bound(&q), Some(2_000.0));
        std::fs::write(volume.client_quotas_file(), b"{ not json").expect("corrupted");
        q.changed();
        assert_eq!(bound(&q), Some(2_000.0), "the last good quotas stay");
        // And a broker cannot start on it.
        assert!(Quotas::load(&volume, WINDOW, 11).is_err());
    }

    #[test]
    fn the_rate_of_a_new_client_counts_at_least_one_window() {
        let mut rate = Rate::default();
        let now = Instant::now();
        rate.record(1_000.0, now, WINDOW, 11);
        let (r, span) = rate.measure(now, WINDOW, 11);
        assert_eq!(span, WINDOW);
        assert_eq!(r, 1_000.0);
        let (r, span) = rate.measure(now + Duration::from_secs(4), WINDOW, 11);
        assert_eq!(span, Duration::from_secs(4));
        assert_eq!(r, 250.0);
        // Past all 11 windows, what was recorded is gone.
        let (r, _) = rate.measure(now + Duration::from_secs(12), WINDOW, 11);
        assert_eq!(r, 0.0);
    }
}
