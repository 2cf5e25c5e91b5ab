//! What a broker exports to Prometheus (docs/operations.md#metrics).
//!
//! Two kinds of figures:
//! - counters and histograms the request paths update as they go ([`Metrics`], one
//!   per process: a process runs one broker), kept allocation-free on the hot paths
//!   (per-API and per-topic series are looked up by key, their handles cached);
//! - gauges of the broker's state at scrape time ([`render`] of a [`BrokerGauges`]
//!   the broker gathers; this module knows nothing of the broker): partitions led,
//!   offsets and LSO lag per partition, open transactions, the marker queue, the
//!   leases. They are built afresh for each scrape, so a partition this broker no
//!   longer leads, or a broker gone from the volume, leaves no stale series behind.
//!
//! Names follow Prometheus conventions: `kaas_` prefix, base units (seconds, bytes),
//! `_total` on counters (added by the encoder).

use kafka_protocol::messages::{ApiKey, ResponseKind};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, RwLock};
use std::time::Duration;

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// A Kafka API, labelled by its name (`Produce`, `EndTxn`, …).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Api(pub ApiKey);

impl EncodeLabelValue for Api {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        write!(encoder, "{:?}", self.0)
    }
}

/// A Kafka error code, labelled by its protocol name (`NOT_LEADER_OR_FOLLOWER`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct ErrorName(pub i16);

impl EncodeLabelValue for ErrorName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(&error_name(self.0))
    }
}

/// Kafka's name of an error code: `NotLeaderOrFollower` → `NOT_LEADER_OR_FOLLOWER`.
pub fn error_name(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        // Codes the codec does not know come back as `Unknown(code)`.
        Some(e) if !format!("{e:?}").contains('(') => {
            let camel = format!("{e:?}");
            let mut name = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    name.push('_');
                }
                name.push(c.to_ascii_uppercase());
            }
            name
        }
        _ => format!("ERROR_CODE_{code}"),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    api: Api,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    api: Api,
    error: ErrorName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabels {
    topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabels {
    file: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    topic: String,
    partition: i32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    path: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: &'static str,
}

/// What happened to one cluster notice (`kaas_cluster_notices`,
/// docs/cluster.md#cluster-notices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterNoticeEvent {
    /// Sent to a peer, which answered.
    Sent,
    /// Not sent, or not answered: the peer reads the leases and syncs at its next
    /// renewal and sync.
    Lost,
    /// Received from a peer (with CLUSTER_ACTION): the leases read and the volume
    /// synced at once.
    Received,
}

impl ClusterNoticeEvent {
    const ALL: [ClusterNoticeEvent; 3] = [Self::Sent, Self::Lost, Self::Received];
    fn label(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Lost => "lost",
            Self::Received => "received",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BrokerLabels {
    broker: i32,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Latency buckets: 100 µs to about 15 s, each 2.5 times the last.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 14))
}

/// One topic's traffic counters, cached so a request finds them without allocating.
#[derive(Clone)]
pub struct TopicCounters {
    pub bytes_in: Counter,
    pub records_in: Counter,
    pub bytes_out: Counter,
}

pub struct Metrics {
    registry: Registry,
    requests: Family<ApiLabels, Counter>,
    request_errors: Family<ErrorLabels, Counter>,
    request_duration: HistogramFamily<ApiLabels>,
    bytes_in: Family<TopicLabels, Counter>,
    records_in: Family<TopicLabels, Counter>,
    bytes_out: Family<TopicLabels, Counter>,
    topics: RwLock<HashMap<String, TopicCounters>>,
    /// Appending one partition's records under its lock (idempotence checks, the
    /// write, a roll if due).
    pub produce_append: Histogram,
    /// One fdatasync of a partition log.
    pub log_fsync: Histogram,
    /// A transaction state change waiting for its slot journal to be durable
    /// (a shared fdatasync, group commit).
    pub txn_journal_sync: Histogram,
    pub connections: Gauge,
    /// Bytes of `queued.max.request.bytes` charged to frames now.
    pub request_budget_used: Gauge,
    pub connections_accepted: Counter,
    connections_refused: Family<LimitLabels, Counter>,
    transactions_completed: Family<ResultLabels, Counter>,
    pub fence_events_applied: Counter,
    pub reconcile_repairs: Counter,
    pub markers_written: Counter<u64, AtomicU64>,
    marker_delivery: HistogramFamily<PathLabels>,
    marker_notifications: Family<OutcomeLabels, Counter>,
    cluster_notices: Family<EventLabels, Counter>,
    volume_write_errors: Family<FileLabels, Counter>,
    quota_usage: Family<QuotaLabels, Counter<f64, AtomicU64>>,
    quota_limit: Family<QuotaLabels, Gauge<f64, AtomicU64>>,
    quota_throttle_time: Family<QuotaLabels, Counter<f64, AtomicU64>>,
    quota_throttled: Family<QuotaLabels, Counter>,
}

/// One quota's measure (`kaas_quota_*`): the quota (produce, fetch, request) and the
/// user and client id it is measured over, empty where the quota's entity has none.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QuotaLabels {
    pub quota: &'static str,
    pub user: String,
    pub client_id: String,
}

/// An error of a volume write, as `kaas_volume_write_errors` judges it.
pub trait WriteFailure {
    /// The file system failed the operation (EIO, ENOSPC, EROFS...): not a file found
    /// already there or gone (another process took over), not a refusal of ours (a
    /// journal replaced under a lost lock, a file past its size bound, a failure
    /// already reported).
    fn is_io_failure(&self) -> bool;
}

impl WriteFailure for std::io::Error {
    fn is_io_failure(&self) -> bool {
        !matches!(
            self.kind(),
            std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound
        ) && !kaas_core::log::LogFile::is_earlier_failure(self)
    }
}

impl WriteFailure for kaas_core::VolumeError {
    fn is_io_failure(&self) -> bool {
        matches!(self, kaas_core::VolumeError::Io { source, .. } if source.is_io_failure())
    }
}

impl WriteFailure for kaas_core::log::SegmentError {
    fn is_io_failure(&self) -> bool {
        let kaas_core::log::SegmentError::Io { source, .. } = self;
        source.is_io_failure()
    }
}

impl WriteFailure for kaas_core::log::LogError {
    fn is_io_failure(&self) -> bool {
        match self {
            kaas_core::log::LogError::Segment(e) => e.is_io_failure(),
            kaas_core::log::LogError::Volume(e) => e.is_io_failure(),
            _ => false,
        }
    }
}

impl WriteFailure for kaas_core::partition::PartitionError {
    fn is_io_failure(&self) -> bool {
        match self {
            kaas_core::partition::PartitionError::Log(e) => e.is_io_failure(),
            kaas_core::partition::PartitionError::Volume(e) => e.is_io_failure(),
            // Refused by size, not failed by the disk.
            kaas_core::partition::PartitionError::SnapshotTooLarge { .. } => false,
        }
    }
}

impl WriteFailure for kaas_core::partition::AppendError {
    fn is_io_failure(&self) -> bool {
        matches!(self, kaas_core::partition::AppendError::Log(e) if e.is_io_failure())
    }
}

/// The kind of volume file a failed write or fsync was for (`kaas_volume_write_errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeFile {
    /// A partition's segment: an append, a roll or an fsync.
    Log,
    /// A partition's `owner.json`: a take-over recorded, or a release.
    Owner,
    /// This broker's lease under `brokers/`.
    Lease,
    /// A partition's producer-state snapshot.
    Snapshot,
    /// A transaction slot's journal or checkpoint.
    SlotJournal,
    /// A marker queue entry (written, moved or removed).
    MarkerQueue,
    /// A group's committed offsets.
    Offsets,
}

impl VolumeFile {
    pub const ALL: [VolumeFile; 7] = [
        VolumeFile::Log,
        VolumeFile::Owner,
        VolumeFile::Lease,
        VolumeFile::Snapshot,
        VolumeFile::SlotJournal,
        VolumeFile::MarkerQueue,
        VolumeFile::Offsets,
    ];
    fn label(self) -> &'static str {
        match self {
            VolumeFile::Log => "log",
            VolumeFile::Owner => "owner",
            VolumeFile::Lease => "lease",
            VolumeFile::Snapshot => "snapshot",
            VolumeFile::SlotJournal => "slot_journal",
            VolumeFile::MarkerQueue => "marker_queue",
            VolumeFile::Offsets => "offsets",
        }
    }
}

/// How a transaction's markers reached their partitions (`kaas_txn_marker_delivery_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerPath {
    /// Every partition led by the coordinator itself.
    Local,
    /// Queued, and applied by the leaders the coordinator notified (WriteTxnMarkers).
    Notified,
    /// Queued, and found by a leader's poll of the marker queue.
    Poll,
}

impl MarkerPath {
    fn label(self) -> &'static str {
        match self {
            MarkerPath::Local => "local",
            MarkerPath::Notified => "notified",
            MarkerPath::Poll => "poll",
        }
    }
}

/// What became of one WriteTxnMarkers notification (`kaas_txn_marker_notifications`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotificationOutcome {
    /// The leader answered without an error (whether it said its markers are applied
    /// is the coordinator's business: docs/cluster.md, "Markers from a notice").
    Delivered,
    /// Not sent, or no answer (no connection, a timeout, a dropped connection).
    Lost,
    /// Answered with an error (authentication, authorization, not the leader, a
    /// marker that failed); the poll still applies the entry.
    Refused,
}

impl NotificationOutcome {
    pub const ALL: [NotificationOutcome; 3] = [
        NotificationOutcome::Delivered,
        NotificationOutcome::Lost,
        NotificationOutcome::Refused,
    ];
    fn label(self) -> &'static str {
        match self {
            NotificationOutcome::Delivered => "delivered",
            NotificationOutcome::Lost => "lost",
            NotificationOutcome::Refused => "refused",
        }
    }
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("kaas");
        let requests = Family::<ApiLabels, Counter>::default();
        registry.register("requests", "Requests answered, per API", requests.clone());
        let request_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "request_errors",
            "Error codes in responses, per API and error (each partition or resource of a response counts)",
            request_errors.clone(),
        );
        let request_duration: HistogramFamily<ApiLabels> = Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "request_duration",
            "Time from a request decoded to its response ready, per API (long polls and rebalance waits included)",
            Unit::Seconds,
            request_duration.clone(),
        );
        let bytes_in = Family::<TopicLabels, Counter>::default();
        registry.register_with_unit(
            "topic_produced",
            "Record batch bytes appended to the topic's partitions led here (duplicates not counted)",
            Unit::Bytes,
            bytes_in.clone(),
        );
        let records_in = Family::<TopicLabels, Counter>::default();
        registry.register(
            "topic_produced_records",
            "Records appended to the topic's partitions led here",
            records_in.clone(),
        );
        let bytes_out = Family::<TopicLabels, Counter>::default();
        registry.register_with_unit(
            "topic_fetched",
            "Record batch bytes returned by Fetch from the topic",
            Unit::Bytes,
            bytes_out.clone(),
        );
        let produce_append = latency_histogram();
        registry.register_with_unit(
            "produce_append_duration",
            "Appending one partition's records of a Produce under the partition lock",
            Unit::Seconds,
            produce_append.clone(),
        );
        let log_fsync = latency_histogram();
        registry.register_with_unit(
            "log_fsync_duration",
            "One fdatasync of a partition log",
            Unit::Seconds,
            log_fsync.clone(),
        );
        let txn_journal_sync = latency_histogram();
        registry.register_with_unit(
            "txn_journal_sync_duration",
            "A transaction state change waiting for its slot journal to be durable (one fdatasync shared by concurrent changes)",
            Unit::Seconds,
            txn_journal_sync.clone(),
        );
        let connections = Gauge::default();
        registry.register("connections", "Open client connections", connections.clone());
        let request_budget_used = Gauge::default();
        registry.register_with_unit(
            "request_budget_used",
            "Bytes of queued.max.request.bytes charged to request frames now (as their bytes arrive, and a decode allowance for requests other than Produce)",
            Unit::Bytes,
            request_budget_used.clone(),
        );
        let connections_accepted = Counter::default();
        registry.register(
            "connections_accepted",
            "Client connections accepted",
            connections_accepted.clone(),
        );
        let connections_refused = Family::<LimitLabels, Counter>::default();
        registry.register(
            "connections_refused",
            "Client connections closed at accept, per limit reached",
            connections_refused.clone(),
        );
        let transactions_completed = Family::<ResultLabels, Counter>::default();
        // Both results from the start, so rates and alerts see 0 rather than nothing.
        for result in ["commit", "abort"] {
            let _ = transactions_completed.get_or_create(&ResultLabels { result });
        }
        registry.register(
            "transactions_completed",
            "Transactions this broker's coordinator completed (every marker written), per result",
            transactions_completed.clone(),
        );
        let fence_events_applied = Counter::default();
        registry.register(
            "fence_events_applied",
            "Other brokers' producer epoch bumps this broker's fence watcher applied, as they arrived (not the backlog read at start)",
            fence_events_applied.clone(),
        );
        let reconcile_repairs = Counter::default();
        registry.register(
            "reconcile_repairs",
            "Hanging transactions the reconcile backstop ended",
            reconcile_repairs.clone(),
        );
        let markers_written = Counter::default();
        registry.register(
            "markers_written",
            "COMMIT/ABORT markers written into partitions led here",
            markers_written.clone(),
        );
        let marker_delivery: HistogramFamily<PathLabels> = Family::new_with_constructor(latency_histogram);
        for path in [MarkerPath::Local, MarkerPath::Notified, MarkerPath::Poll] {
            let _ = marker_delivery.get_or_create(&PathLabels { path: path.label() });
        }
        registry.register_with_unit(
            "txn_marker_delivery",
            "Time from a transaction's PrepareCommit/PrepareAbort durable to its last marker durable, per path: local (every partition led by the coordinator), notified (WriteTxnMarkers to the leaders), poll (found by a leader's marker-queue poll)",
            Unit::Seconds,
            marker_delivery.clone(),
        );
        let marker_notifications = Family::<OutcomeLabels, Counter>::default();
        for outcome in NotificationOutcome::ALL {
            let _ = marker_notifications.get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            });
        }
        registry.register(
            "txn_marker_notifications",
            "WriteTxnMarkers notifications this coordinator sent to partition leaders, per outcome: delivered, lost (not sent or not answered), refused (answered with an error); a lost or refused one is applied by the leader's poll",
            marker_notifications.clone(),
        );
        let cluster_notices = Family::<EventLabels, Counter>::default();
        for event in ClusterNoticeEvent::ALL {
            let _ = cluster_notices.get_or_create(&EventLabels { event: event.label() });
        }
        registry.register(
            "cluster_notices",
            "Cluster notices (a lease or the topics changed: read the leases and sync now), per event: sent to a peer and answered, lost (not sent or not answered: the peer reads them at its next renewal and sync), received from a peer",
            cluster_notices.clone(),
        );
        let volume_write_errors = Family::<FileLabels, Counter>::default();
        for file in VolumeFile::ALL {
            let _ = volume_write_errors.get_or_create(&FileLabels { file: file.label() });
        }
        registry.register(
            "volume_write_errors",
            "Writes, renames and fsyncs of volume files that failed, per kind of file: log, owner (owner.json), lease, snapshot, slot_journal, marker_queue, offsets. Also those no request waited for (a take-over, a release, a lease renewal); a request that waited is answered with an error besides (kaas_request_errors)",
            volume_write_errors.clone(),
        );
        let quota_usage = Family::<QuotaLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "quota_usage",
            "What clients under a quota used, per quota and the user and client id it is measured over: bytes produced (quota=produce), record bytes fetched (fetch), seconds of request-handling time (request). Only entities a quota applies to; series go after an hour unused",
            quota_usage.clone(),
        );
        let quota_limit = Family::<QuotaLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "quota_limit",
            "The quota in force, per quota and measured entity: bytes per second (produce, fetch), percent of one thread (request)",
            quota_limit.clone(),
        );
        let quota_throttle_time = Family::<QuotaLabels, Counter<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "quota_throttle_time",
            "Throttle time given in answers for being over a quota (KIP-219 throttle_time_ms; the connection is muted that long, at most connections.max.idle.ms at a time), per quota and measured entity",
            Unit::Seconds,
            quota_throttle_time.clone(),
        );
        let quota_throttled = Family::<QuotaLabels, Counter>::default();
        registry.register(
            "quota_throttled_requests",
            "Requests answered with a throttle time for being over a quota, per quota and measured entity",
            quota_throttled.clone(),
        );
        registry.register(
            "build",
            "The broker's version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Metrics {
            registry,
            requests,
            request_errors,
            request_duration,
            bytes_in,
            records_in,
            bytes_out,
            topics: RwLock::new(HashMap::new()),
            produce_append,
            log_fsync,
            txn_journal_sync,
            connections,
            request_budget_used,
            connections_accepted,
            connections_refused,
            transactions_completed,
            fence_events_applied,
            reconcile_repairs,
            markers_written,
            marker_delivery,
            marker_notifications,
            cluster_notices,
            volume_write_errors,
            quota_usage,
            quota_limit,
            quota_throttle_time,
            quota_throttled,
        }
    }

    /// A request of an entity under a quota recorded `value` against it (bytes, or
    /// seconds of request time), with `limit` in force.
    pub fn quota_recorded(&self, labels: &QuotaLabels, value: f64, limit: f64) {
        self.quota_usage.get_or_create(labels).inc_by(value.max(0.0));
        self.quota_limit.get_or_create(labels).set(limit);
    }

    /// A request throttled `by` for its entity's quota.
    pub fn quota_throttled(&self, labels: &QuotaLabels, by: Duration) {
        self.quota_throttle_time.get_or_create(labels).inc_by(by.as_secs_f64());
        self.quota_throttled.get_or_create(labels).inc();
    }

    /// An entity's measure expired (unused for an hour): its series go.
    pub fn forget_quota(&self, labels: &QuotaLabels) {
        self.quota_usage.remove(labels);
        self.quota_limit.remove(labels);
        self.quota_throttle_time.remove(labels);
        self.quota_throttled.remove(labels);
    }

    /// A transaction's markers all durable, `elapsed` after its Prepare* was.
    pub fn markers_delivered(&self, path: MarkerPath, elapsed: Duration) {
        self.marker_delivery
            .get_or_create(&PathLabels { path: path.label() })
            .observe(elapsed.as_secs_f64());
    }

    pub fn cluster_notice(&self, event: ClusterNoticeEvent) {
        self.cluster_notices
            .get_or_create(&EventLabels { event: event.label() })
            .inc();
    }

    pub fn marker_notification(&self, outcome: NotificationOutcome) {
        self.marker_notifications
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
            .inc();
    }

    /// Counts one answered request, the error codes in its response and its latency.
    pub fn request_done(&self, api: ApiKey, response: &ResponseKind, elapsed: Duration) {
        let labels = ApiLabels { api: Api(api) };
        self.requests.get_or_create(&labels).inc();
        self.request_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        error_codes(response, &mut |code| {
            if code != 0 {
                self.request_errors
                    .get_or_create(&ErrorLabels {
                        api: Api(api),
                        error: ErrorName(code),
                    })
                    .inc();
            }
        });
    }

    /// The traffic counters of `topic` (created at first use).
    pub fn topic(&self, topic: &str) -> TopicCounters {
        if let Some(c) = self.topics.read().unwrap_or_else(|p| p.into_inner()).get(topic) {
            return c.clone();
        }
        let labels = TopicLabels {
            topic: topic.to_string(),
        };
        let counters = TopicCounters {
            bytes_in: self.bytes_in.get_or_create_owned(&labels),
            records_in: self.records_in.get_or_create_owned(&labels),
            bytes_out: self.bytes_out.get_or_create_owned(&labels),
        };
        self.topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(topic.to_string())
            .or_insert(counters)
            .clone()
    }

    /// Drops the series of topics that no longer `exist` (deleted ones), so they
    /// neither linger in every scrape nor hold memory (the volume sync calls it every
    /// second, whether or not anything scrapes).
    pub fn forget_topics(&self, exists: impl Fn(&str) -> bool) {
        if self
            .topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .all(|name| exists(name))
        {
            return;
        }
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        topics.retain(|name, _| {
            if exists(name) {
                return true;
            }
            let labels = TopicLabels { topic: name.clone() };
            self.bytes_in.remove(&labels);
            self.records_in.remove(&labels);
            self.bytes_out.remove(&labels);
            false
        });
    }

    /// A write, rename or fsync of a volume file failed (the caller logs it). Counted
    /// only when the file system failed it ([`WriteFailure`]), not when the write was
    /// refused for what another process did (a take-over) or a bound.
    pub fn volume_write_failed(&self, file: VolumeFile, error: &dyn WriteFailure) {
        if error.is_io_failure() {
            self.count_write_error(file);
        }
    }

    /// [`Self::volume_write_failed`] of this broker's own lease, where a file or
    /// directory not found counts too: nobody else writes or removes the lease, so
    /// its path gone is the volume gone (unmounted under the broker), not another
    /// process's doing.
    pub fn lease_write_failed(&self, error: &kaas_core::VolumeError) {
        if error.is_not_found() || error.is_io_failure() {
            self.count_write_error(VolumeFile::Lease);
        }
    }

    fn count_write_error(&self, file: VolumeFile) {
        self.volume_write_errors
            .get_or_create(&FileLabels { file: file.label() })
            .inc();
    }

    pub fn connection_refused(&self, limit: &'static str) {
        self.connections_refused.get_or_create(&LimitLabels { limit }).inc();
    }

    pub fn transaction_completed(&self, commit: bool) {
        let result = if commit { "commit" } else { "abort" };
        self.transactions_completed
            .get_or_create(&ResultLabels { result })
            .inc();
    }
}

/// The broker's state at one scrape, as the gauges show it: the broker gathers it
/// ([`crate::broker::Broker::gauges`]), this module only turns it into series, so
/// metrics knows nothing of the broker.
#[derive(Debug, Clone, Default)]
pub struct BrokerGauges {
    pub now_ms: i64,
    /// Every partition this broker leads.
    pub partitions: Vec<PartitionGauges>,
    /// Open transactions of the slots this broker coordinates, per open state.
    pub open_transactions: Vec<(&'static str, i64)>,
    /// When the oldest of them began.
    pub oldest_open_start_ms: Option<i64>,
    /// Slots this broker coordinates that could not be read.
    pub slots_unreadable: i64,
    /// Entries in this broker's marker queue; None when it could not be read.
    pub marker_queue_entries: Option<i64>,
    /// When its oldest entry was queued.
    pub marker_queue_oldest_ms: Option<i64>,
    /// Every lease on the volume.
    pub leases: Vec<LeaseGauges>,
    /// This broker's own lease renewed within half the session timeout.
    pub lease_fresh: bool,
    /// Times this broker stepped down since it started.
    pub stepdowns: u64,
}

#[derive(Debug, Clone)]
pub struct PartitionGauges {
    pub topic: String,
    pub partition: i32,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

#[derive(Debug, Clone)]
pub struct LeaseGauges {
    pub broker: i32,
    pub heartbeat_ms: i64,
    /// The broker stopped cleanly: not expected to renew.
    pub stopped: bool,
    /// This broker counts it live.
    pub live: bool,
}

/// The exposition of one scrape (OpenMetrics text): the process's counters, then the
/// broker's state as of now (None while the volume is still being opened).
///
/// The counters are read before `gauges` gathers the broker's state, so a scrape
/// never counts an event its gauges do not show yet: a transaction counted in
/// `kaas_transactions_completed_total` is no longer in `kaas_transactions_open`
/// (the state changes before the counter moves).
pub fn render(gauges: Option<impl FnOnce() -> BrokerGauges>) -> Result<String, std::fmt::Error> {
    render_from(&metrics().registry, gauges)
}

fn render_from(counters: &Registry, gauges: Option<impl FnOnce() -> BrokerGauges>) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(16 << 10);
    prometheus_client::encoding::text::encode_registry(&mut out, counters)?;
    if let Some(gather) = gauges {
        prometheus_client::encoding::text::encode_registry(&mut out, &broker_state(&gather()))?;
    }
    prometheus_client::encoding::text::encode_eof(&mut out)?;
    Ok(out)
}

/// The gauges of one scrape.
fn broker_state(g: &BrokerGauges) -> Registry {
    let mut r = Registry::with_prefix("kaas");
    let now = g.now_ms;
    let secs = |ms: i64| ms.max(0) as f64 / 1000.0;

    let hw = Family::<PartitionLabels, Gauge>::default();
    let lso = Family::<PartitionLabels, Gauge>::default();
    let lag = Family::<PartitionLabels, Gauge>::default();
    let start = Family::<PartitionLabels, Gauge>::default();
    for p in &g.partitions {
        let labels = PartitionLabels {
            topic: p.topic.clone(),
            partition: p.partition,
        };
        hw.get_or_create(&labels).set(p.high_watermark);
        lso.get_or_create(&labels).set(p.last_stable_offset);
        lag.get_or_create(&labels).set(p.high_watermark - p.last_stable_offset);
        start.get_or_create(&labels).set(p.log_start_offset);
    }
    let partitions_led = Gauge::<i64>::default();
    partitions_led.set(g.partitions.len() as i64);
    r.register("partitions_led", "Partitions this broker leads", partitions_led);
    r.register(
        "partition_high_watermark",
        "High watermark (log end offset) of each partition led here",
        hw,
    );
    r.register(
        "partition_last_stable_offset",
        "Last stable offset of each partition led here: read_committed consumers see up to it",
        lso,
    );
    r.register(
        "partition_lso_lag",
        "High watermark minus last stable offset: offsets held back by open transactions",
        lag,
    );
    r.register(
        "partition_log_start_offset",
        "First offset of each partition led here",
        start,
    );

    // Transactions of the slots this broker coordinates.
    let open = Family::<StateLabels, Gauge>::default();
    for &(state, n) in &g.open_transactions {
        open.get_or_create(&StateLabels { state }).set(n);
    }
    r.register(
        "transactions_open",
        "Open transactions of the slots this broker coordinates, per state",
        open,
    );
    let oldest_age = Gauge::<f64, AtomicU64>::default();
    oldest_age.set(g.oldest_open_start_ms.map_or(0.0, |t| secs(now - t)));
    r.register_with_unit(
        "transaction_oldest_open_age",
        "Age of the oldest open transaction of the slots this broker coordinates (0 when none)",
        Unit::Seconds,
        oldest_age,
    );
    let slots_unreadable = Gauge::<i64>::default();
    slots_unreadable.set(g.slots_unreadable);
    r.register(
        "transaction_slots_unreadable",
        "Transaction slots this broker coordinates that could not be read at this scrape",
        slots_unreadable,
    );

    // The marker queue this broker applies.
    let depth = Gauge::<i64>::default();
    let queue_age = Gauge::<f64, AtomicU64>::default();
    depth.set(g.marker_queue_entries.unwrap_or(-1));
    queue_age.set(g.marker_queue_oldest_ms.map_or(0.0, |t| secs(now - t)));
    r.register(
        "marker_queue_entries",
        "Entries in this broker's marker queue (markers other coordinators asked it to write; -1 when unreadable)",
        depth,
    );
    r.register_with_unit(
        "marker_queue_oldest_entry_age",
        "Age of the oldest entry in this broker's marker queue (0 when empty)",
        Unit::Seconds,
        queue_age,
    );

    // Every broker's lease as this broker reads it.
    let lease_age = Family::<BrokerLabels, Gauge<f64, AtomicU64>>::default();
    let live = Family::<BrokerLabels, Gauge>::default();
    for lease in &g.leases {
        let labels = BrokerLabels { broker: lease.broker };
        // A broker that stopped cleanly (or was scaled away) has no lease age to
        // alert on: it is not expected to renew.
        if !lease.stopped {
            lease_age.get_or_create(&labels).set(secs(now - lease.heartbeat_ms));
        }
        live.get_or_create(&labels).set(lease.live as i64);
    }
    r.register_with_unit(
        "broker_lease_age",
        "Time since each running broker's last heartbeat on the volume, by this broker's clock (brokers that stopped cleanly are left out)",
        Unit::Seconds,
        lease_age,
    );
    r.register(
        "broker_live",
        "Whether this broker counts each broker live (1) or not (0)",
        live,
    );
    let fresh = Gauge::<i64>::default();
    fresh.set(g.lease_fresh as i64);
    r.register(
        "lease_fresh",
        "Whether this broker's own lease was renewed within half the session timeout (1): it may write",
        fresh,
    );
    let stepdowns = Counter::<u64>::default();
    stepdowns.inc_by(g.stepdowns);
    r.register(
        "lease_stepdowns",
        "Times this broker stepped down since it started: it could not renew its lease within half the session timeout, let its partitions go and served nothing until its renewals were quick again",
        stepdowns,
    );
    r
}

/// Calls `f` with every error code in `response` (Kafka's `errorCounts`): the
/// top-level code where there is one, and each partition's, resource's or member's.
pub fn error_codes(response: &ResponseKind, f: &mut impl FnMut(i16)) {
    match response {
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .for_each(|p| f(p.error_code)),
        ResponseKind::Fetch(r) => {
            f(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
        }
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::Metadata(r) => {
            f(r.error_code);
            for t in &r.topics {
                f(t.error_code);
                t.partitions.iter().for_each(|p| f(p.error_code));
            }
        }
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::OffsetFetch(r) => {
            f(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
            for g in &r.groups {
                f(g.error_code);
                g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .for_each(|p| f(p.error_code));
            }
        }
        ResponseKind::FindCoordinator(r) => {
            f(r.error_code);
            r.coordinators.iter().for_each(|c| f(c.error_code));
        }
        ResponseKind::JoinGroup(r) => f(r.error_code),
        ResponseKind::Heartbeat(r) => f(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            f(r.error_code);
            r.members.iter().for_each(|m| f(m.error_code));
        }
        ResponseKind::SyncGroup(r) => f(r.error_code),
        ResponseKind::DescribeGroups(r) => r.groups.iter().for_each(|g| f(g.error_code)),
        ResponseKind::ListGroups(r) => f(r.error_code),
        ResponseKind::ApiVersions(r) => f(r.error_code),
        ResponseKind::CreateTopics(r) => r.topics.iter().for_each(|t| f(t.error_code)),
        ResponseKind::DeleteTopics(r) => r.responses.iter().for_each(|t| f(t.error_code)),
        ResponseKind::DescribeConfigs(r) => r.results.iter().for_each(|x| f(x.error_code)),
        ResponseKind::AlterConfigs(r) => r.responses.iter().for_each(|x| f(x.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => r.responses.iter().for_each(|x| f(x.error_code)),
        ResponseKind::CreatePartitions(r) => r.results.iter().for_each(|x| f(x.error_code)),
        ResponseKind::DeleteGroups(r) => r.results.iter().for_each(|x| f(x.error_code)),
        ResponseKind::DeleteRecords(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::OffsetDelete(r) => {
            f(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
        }
        ResponseKind::DescribeCluster(r) => f(r.error_code),
        ResponseKind::DescribeLogDirs(r) => {
            f(r.error_code);
            r.results.iter().for_each(|d| f(d.error_code));
        }
        ResponseKind::InitProducerId(r) => f(r.error_code),
        ResponseKind::AddPartitionsToTxn(r) => {
            f(r.error_code);
            r.results_by_transaction
                .iter()
                .flat_map(|t| &t.topic_results)
                .chain(&r.results_by_topic_v3_and_below)
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| f(p.partition_error_code));
        }
        ResponseKind::AddOffsetsToTxn(r) => f(r.error_code),
        ResponseKind::EndTxn(r) => f(r.error_code),
        ResponseKind::WriteTxnMarkers(r) => r
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::DescribeProducers(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::DescribeTransactions(r) => r.transaction_states.iter().for_each(|t| f(t.error_code)),
        ResponseKind::ListTransactions(r) => f(r.error_code),
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::DescribeAcls(r) => f(r.error_code),
        ResponseKind::CreateAcls(r) => r.results.iter().for_each(|x| f(x.error_code)),
        ResponseKind::DeleteAcls(r) => {
            for x in &r.filter_results {
                f(x.error_code);
                x.matching_acls.iter().for_each(|m| f(m.error_code));
            }
        }
        ResponseKind::SaslHandshake(r) => f(r.error_code),
        ResponseKind::SaslAuthenticate(r) => f(r.error_code),
        ResponseKind::DescribeClientQuotas(r) => f(r.error_code),
        ResponseKind::AlterClientQuotas(r) => r.entries.iter().for_each(|x| f(x.error_code)),
        ResponseKind::DescribeUserScramCredentials(r) => {
            f(r.error_code);
            r.results.iter().for_each(|x| f(x.error_code));
        }
        ResponseKind::AlterUserScramCredentials(r) => r.results.iter().for_each(|x| f(x.error_code)),
        ResponseKind::ConsumerGroupHeartbeat(r) => f(r.error_code),
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.iter().for_each(|g| f(g.error_code)),
        // APIs this broker does not answer: no response of theirs is ever built.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_file_system_failed_counts_as_a_volume_write_error() {
        use std::io::{Error, ErrorKind};
        let eio = Error::from_raw_os_error(5);
        assert!(eio.is_io_failure());
        assert!(Error::from_raw_os_error(28).is_io_failure(), "ENOSPC");
        assert!(
            !Error::from(ErrorKind::AlreadyExists).is_io_failure(),
            "a take-over's file"
        );
        assert!(!Error::from(ErrorKind::NotFound).is_io_failure());
        let invalid = kaas_core::VolumeError::Invalid {
            path: "j".into(),
            detail: "the lock was taken over".into(),
        };
        assert!(!invalid.is_io_failure());
        assert!(kaas_core::VolumeError::io("j", eio).is_io_failure());
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(48), "INVALID_TXN_STATE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(30_000), "ERROR_CODE_30000");
    }

    /// CI saw a scrape counting an abort in `kaas_transactions_completed_total`
    /// while `kaas_transactions_open` still showed it PrepareAbort: the gauges were
    /// gathered before the counters were read, and the transaction completed in
    /// between. The counters are read first now. (A registry of its own: the
    /// process's counters move with the other tests.)
    #[test]
    fn a_scrape_reads_its_counters_before_it_gathers_its_gauges() {
        let mut registry = Registry::with_prefix("kaas");
        let completed = Counter::<u64>::default();
        registry.register("completions", "test", completed.clone());
        // A transaction completes while the scrape gathers the broker's state: its
        // state changed first, so the gauges show it done; the counter, read
        // before, does not count it yet (the next scrape does).
        let text = render_from(
            &registry,
            Some(|| {
                completed.inc();
                BrokerGauges {
                    open_transactions: vec![("PrepareAbort", 0)],
                    ..Default::default()
                }
            }),
        )
        .unwrap();
        assert!(
            text.contains("kaas_transactions_open{state=\"PrepareAbort\"} 0"),
            "{text}"
        );
        assert!(text.contains("kaas_completions_total 0\n"), "{text}");
        let next = render_from(&registry, None::<fn() -> BrokerGauges>).unwrap();
        assert!(next.contains("kaas_completions_total 1\n"), "{next}");
    }

    #[test]
    fn every_partition_error_of_a_produce_response_counts() {
        use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
        use kafka_protocol::messages::ProduceResponse;
        let response = ResponseKind::Produce(ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default().with_partition_responses(vec![
                PartitionProduceResponse::default().with_error_code(6),
                PartitionProduceResponse::default(),
                PartitionProduceResponse::default().with_error_code(6),
            ]),
        ]));
        let mut codes = Vec::new();
        error_codes(&response, &mut |c| codes.push(c));
        assert_eq!(codes, vec![6, 0, 6]);
    }
}
