//! The broker's shared state: configuration, the volume, the topic registry with each
//! partition's log, and the wake-up signal long-polling fetches wait on. Handlers reach
//! everything through an `Arc<Broker>`.

use crate::config::{Config, FlushPolicy};
use crate::groups::GroupCoordinator;
use crate::listeners::Endpoints;
use crate::txn_coordinator::TransactionCoordinator;
use kaas_core::log::{LogConfig, LogError};
use kaas_core::partition::{AppendError, AppendOutcome, PartitionState};
use kaas_core::producer_ids::ProducerIdAllocator;
use kaas_core::topic::{list_topics, PartitionOwner, TopicMeta};
use kaas_core::txn::TxnError;
use kaas_core::{now_ms, Volume, VolumeError};
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};
use uuid::Uuid;

mod configs;
pub use configs::ConfigChange;

pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    pub leader_epoch: i32,
    state: Mutex<PartitionState>,
    /// Highest log end offset known to be fsynced.
    durable: AtomicI64,
    flush_lock: tokio::sync::Mutex<()>,
    /// Set, under the partition lock, when this broker lets the partition go (hand-over,
    /// step-down, shutdown): nothing is appended after the final snapshot, even by a
    /// request that looked the partition up before.
    retired: AtomicBool,
    /// `owner.lock`, held for as long as this broker may append here: no other
    /// process (another broker, kaasctl) writes this log meanwhile. Declared last, so
    /// it is dropped after the log files are closed.
    _owner_lock: std::fs::File,
}

impl Partition {
    /// The partition's log and producer state, under the partition lock.
    pub fn state(&self) -> std::sync::MutexGuard<'_, PartitionState> {
        // A panic while holding the lock cannot leave the log half-written in memory
        // in a way later appends would trust (recovery re-checks on restart), so a
        // poisoned lock is taken over rather than propagated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this broker let the partition go.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// The partition lock for a write: None once this broker let the partition go.
    pub fn writable(&self) -> Option<std::sync::MutexGuard<'_, PartitionState>> {
        let state = self.state();
        (!self.retired.load(Ordering::Acquire)).then_some(state)
    }

    /// Lets the partition go: under the partition lock, no more writes, the producer
    /// state written to `producer-state.snapshot` and the log fsynced; then
    /// `owner.json` marked released so the next owner need not wait for this
    /// broker's lease. `owner.lock` itself is dropped with the last reference.
    /// Failures are logged: the next owner then replays more of the log (from an
    /// older snapshot) or waits for this broker's lease to expire, never less safe.
    ///
    /// With `write` false (a broker stepping down because its lease went stale) it
    /// only stops writing: such a broker may already have been declared dead and the
    /// partition taken over (on NFS its lock may have lapsed meanwhile), so it must
    /// not touch the partition's files; the next owner waits for its lease instead.
    ///
    /// `fresh` is asked under the partition lock, right before the first write: a
    /// broker whose lease went stale meanwhile writes nothing. `owner.json` is marked
    /// released only if it still names this broker at this leader epoch, and only if
    /// the log reached the disk (a next owner taking over at once must find it whole).
    fn retire(&self, volume: &Volume, broker_id: i32, reason: &str, fresh: &dyn Fn() -> bool) {
        let now = now_ms();
        {
            let mut state = self.state();
            if self.retired.swap(true, Ordering::AcqRel) || !fresh() {
                return;
            }
            if let Err(e) = state.write_snapshot(now) {
                error!(topic = %self.topic, partition = self.index, error = %e, "cannot write producer-state snapshot; the next owner replays the log instead");
            }
            if let Err(e) = state
                .log
                .sync_handle()
                .map_err(std::io::Error::other)
                .and_then(|(file, _)| file.sync_data())
            {
                error!(topic = %self.topic, partition = self.index, error = %e, "cannot fsync the log while letting the partition go; not marking it released (others take it over once this lease expires)");
                return;
            }
        }
        let path = PartitionOwner::path(volume, &self.topic, self.index);
        match PartitionOwner::read(&path) {
            Ok(o) if o.broker == broker_id && o.leader_epoch == self.leader_epoch && !o.released => {}
            other => {
                warn!(topic = %self.topic, partition = self.index, leader_epoch = self.leader_epoch, found = ?other.ok(), "owner.json no longer names this leadership; leaving it alone");
                return;
            }
        }
        let owner = PartitionOwner {
            version: kaas_core::topic::OWNER_FORMAT_VERSION,
            broker: broker_id,
            leader_epoch: self.leader_epoch,
            released: true,
            updated_ms: now,
            topic_id: Some(self.topic_id),
        };
        if let Err(e) = owner.write(&path) {
            warn!(topic = %self.topic, partition = self.index, error = %e, "cannot mark the partition released; others take it over once this lease expires");
        }
        debug!(topic = %self.topic, partition = self.index, leader_epoch = self.leader_epoch, reason, "partition let go");
    }

    /// Waits until everything up to `offset` (exclusive) is fsynced. Concurrent
    /// callers share one fsync: whoever gets the lock syncs up to the current log end,
    /// and the others find their offset already covered (group commit).
    pub async fn wait_durable(&self, offset: i64) -> std::io::Result<()> {
        if self.durable.load(Ordering::Acquire) >= offset {
            return Ok(());
        }
        let _turn = self.flush_lock.lock().await;
        if self.durable.load(Ordering::Acquire) >= offset {
            return Ok(());
        }
        let (file, end) = self.state().log.sync_handle().map_err(std::io::Error::other)?;
        let started = std::time::Instant::now();
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(std::io::Error::other)??;
        crate::metrics::metrics()
            .log_fsync
            .observe(started.elapsed().as_secs_f64());
        self.durable.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }

    pub fn high_watermark(&self) -> i64 {
        self.state().log.log_end_offset()
    }
}

pub struct Topic {
    pub meta: TopicMeta,
    pub log_config: LogConfig,
    /// One entry per partition; an Err is a partition whose log could not be opened
    /// (it is reported, never served empty).
    pub partitions: Vec<Result<Arc<Partition>, Offline>>,
}

impl Topic {
    pub fn partition(&self, index: i32) -> Option<&Result<Arc<Partition>, Offline>> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }
}

/// Why a batch was not appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendRejected {
    /// Transaction verification refused a transactional batch.
    #[error(transparent)]
    Txn(crate::txn_coordinator::CoordError),
    #[error(transparent)]
    Append(AppendError),
    /// This broker could not renew its lease for half the session timeout: it no
    /// longer appends (another broker may soon be entitled to).
    #[error("this broker's lease is not renewed; it does not append")]
    LeaseExpired,
    /// This broker let the partition go (hand-over or step-down) after the request
    /// looked it up.
    #[error("this broker no longer leads the partition")]
    NotLeader,
}

/// A transaction marker that could not be written durably.
#[derive(Debug, thiserror::Error)]
#[error("marker for {topic}-{partition} not written: {detail}")]
pub struct MarkerError {
    pub topic: String,
    pub partition: i32,
    pub detail: String,
}

/// Whether this broker may open partition (topic, index), last led by the given owner
/// (None: never led); Err says why not.
type PlaceRule<'a> = dyn Fn(&str, i32, Option<&PartitionOwner>) -> Result<(), String> + 'a;

/// The take-over rule over one view of the live brokers.
struct Gate<'a> {
    place: Box<PlaceRule<'a>>,
    /// Whether broker `id`'s lease, re-read now, is confirmed dead (only then may a
    /// lock it holds be stolen).
    confirm_dead: Box<dyn Fn(i32) -> bool + 'a>,
}

/// The placement rule (`kaas_core::ownership::place`) over one view of the live
/// brokers: this broker is the partition's rendezvous owner, and the last owner let
/// it go, or is this broker id (an earlier incarnation), or is not live.
/// The lock of the last owner may be stolen only if it did not let go and its lease
/// is positively dead — `confirm_dead` re-reads it and asks the lease tracker (seen,
/// same incarnation and heartbeat, unchanged for the session timeout) — never merely
/// because this broker has not seen it yet, or saw it dead before it restarted.
fn take_over_gate<'a>(me: i32, live: &BTreeMap<i32, Endpoints>, confirm_dead: impl Fn(i32) -> bool + 'a) -> Gate<'a> {
    let live: Vec<i32> = live.keys().copied().collect();
    Gate {
        place: Box::new(move |topic, index, last| {
            match kaas_core::ownership::place(me, &live, topic, index, false, last) {
                kaas_core::ownership::Placement::Wait(why) => Err(why),
                _ => Ok(()),
            }
        }),
        confirm_dead: Box::new(confirm_dead),
    }
}

/// Reads broker `id`'s lease now and asks `tracker` whether it is still the one it
/// judged dead.
fn lease_confirmed_dead(volume: &Volume, tracker: &kaas_core::broker::LeaseTracker, id: i32, timeout_ms: i64) -> bool {
    kaas_core::broker::BrokerLease::read(volume, id)
        .is_ok_and(|l| tracker.confirms_dead(&l, std::time::Instant::now(), timeout_ms))
}

/// Why a partition is not served by this broker.
#[derive(Debug, Clone)]
pub struct Offline {
    pub reason: String,
    /// Another process holds the partition's `owner.lock`: it leads the partition
    /// (clients get NOT_LEADER_OR_FOLLOWER and are pointed at it). Otherwise the
    /// partition is broken here (KAFKA_STORAGE_ERROR until repaired).
    pub elsewhere: bool,
}

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl Offline {
    fn broken(reason: impl ToString) -> Offline {
        Offline {
            reason: reason.to_string(),
            elsewhere: false,
        }
    }
    /// The error code for a request that needs this partition's leader.
    pub fn code(&self) -> i16 {
        if self.elsewhere {
            ResponseError::NotLeaderOrFollower.code()
        } else {
            ResponseError::KafkaStorageError.code()
        }
    }
}

/// A topic file that could not be read: the topic is refused, not recreated.
#[derive(Debug, Clone)]
pub struct BrokenTopic {
    pub error: String,
}

#[derive(Default)]
struct Registry {
    topics: BTreeMap<String, Arc<Topic>>,
    by_id: HashMap<Uuid, String>,
    broken: BTreeMap<String, BrokenTopic>,
}

pub struct Broker {
    pub config: Config,
    pub volume: Volume,
    pub cluster_id: String,
    /// This broker's advertised address on each of its listeners.
    pub advertised: Endpoints,
    registry: RwLock<Registry>,
    /// Topic creation and deletion are serialised so two requests cannot race on files.
    admin_lock: tokio::sync::Mutex<()>,
    /// Bumped after every append; long-polling fetches wait on it.
    appended: watch::Sender<u64>,
    pub groups: GroupCoordinator,
    pub txn: TransactionCoordinator,
    producer_ids: Mutex<ProducerIdAllocator>,
    /// Brokers whose lease is fresh, with their advertised address, refreshed by the
    /// lease task; ownership of transaction slots and groups is computed from it.
    live_brokers: RwLock<BTreeMap<i32, Endpoints>>,
    /// When this broker last renewed its own lease, by the monotonic clock; None
    /// while no lease task runs (a broker embedded in tests).
    lease_renewed_at: Mutex<Option<std::time::Instant>>,
    /// Peers' heartbeats as last seen, for judging liveness by change.
    pub lease_tracker: Mutex<kaas_core::broker::LeaseTracker>,
    /// Times this broker stepped down (its lease went stale): a write that saw a
    /// different count before and after may have been made while another broker took
    /// the partition, and is not acknowledged.
    stepdowns: std::sync::atomic::AtomicU64,
    /// Volume syncs run so far (broken partitions are retried every
    /// [`BROKEN_RETRY_ROUNDS`]).
    sync_rounds: std::sync::atomic::AtomicU64,
    /// Dynamic broker configs and the log defaults they give (broker/configs.rs).
    dynamic: RwLock<configs::DynamicState>,
    /// Who may do what (`--authorizer`), over the ACLs on the volume.
    pub authz: crate::authz::Authorizer,
}

/// Every this many volume syncs (seconds), partitions that failed to open are tried again.
const BROKEN_RETRY_ROUNDS: u64 = 10;

#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    #[error("invalid topic name {0:?}: 1-249 characters of [A-Za-z0-9._-], not . or ..")]
    InvalidName(String),
    #[error("number of partitions must be 1 to {max}, got {0}", max = kaas_core::layout::MAX_PARTITIONS_PER_TOPIC)]
    InvalidPartitions(i32),
    #[error("{0}")]
    PartitionLimit(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("topic {0} is unreadable on the volume: {1}")]
    Broken(String, String),
    #[error("unknown topic {0}")]
    Unknown(String),
    #[error("topic {0} does not exist, and the client may not create it")]
    CreateDenied(String),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error(transparent)]
    Log(#[from] LogError),
}

impl TopicError {
    pub fn code(&self) -> i16 {
        match self {
            TopicError::AlreadyExists(_) => ResponseError::TopicAlreadyExists.code(),
            TopicError::InvalidName(_) => ResponseError::InvalidTopicException.code(),
            TopicError::InvalidPartitions(_) => ResponseError::InvalidPartitions.code(),
            TopicError::InvalidConfig(_) => ResponseError::InvalidConfig.code(),
            TopicError::PartitionLimit(_) => ResponseError::PolicyViolation.code(),
            TopicError::Unknown(_) => ResponseError::UnknownTopicOrPartition.code(),
            TopicError::CreateDenied(_) => ResponseError::TopicAuthorizationFailed.code(),
            TopicError::Broken(..) | TopicError::Volume(_) | TopicError::Log(_) => {
                ResponseError::KafkaStorageError.code()
            }
        }
    }
}

impl Broker {
    /// Opens the volume: reads the cluster id, every topic file and every partition log
    /// (recovering torn tails). Unreadable topics are kept aside and reported.
    pub fn open(config: Config, advertised: Endpoints) -> anyhow::Result<Arc<Broker>> {
        let volume = Volume::new(&config.data_dir);
        std::fs::create_dir_all(volume.topics_dir())?;
        std::fs::create_dir_all(volume.brokers_dir())?;
        std::fs::create_dir_all(volume.groups_dir())?;
        let cluster_id = kaas_core::broker::cluster_id(&volume)?;
        let dynamic = configs::DynamicState::load(&volume, &config)?;
        let authz = crate::authz::Authorizer::load(&volume, &config)?;
        let defaults = dynamic.defaults.clone();
        let mut registry = Registry::default();
        let now = now_ms();
        // The live brokers as their leases say now (a first sighting is judged by the
        // heartbeat's age), this one included: partitions are opened only where this
        // broker is their rendezvous owner, and those of live brokers stay theirs even
        // if their lock is free (see take_over_gate).
        let leases: Vec<kaas_core::broker::BrokerLease> = kaas_core::broker::list_brokers(&volume)?
            .into_iter()
            .filter_map(|l| l.ok())
            .filter(|l| l.broker_id != config.broker_id)
            .collect();
        let mut lease_tracker = kaas_core::broker::LeaseTracker::default();
        let mut live_at_start: BTreeMap<i32, Endpoints> = lease_tracker
            .observe(
                &leases,
                now,
                std::time::Instant::now(),
                config.broker_session_timeout_ms,
            )
            .into_iter()
            .map(|l| (l.broker_id, Endpoints::of_lease(l)))
            .collect();
        live_at_start.insert(config.broker_id, advertised.clone());
        let timeout = config.broker_session_timeout_ms;
        let gate = take_over_gate(config.broker_id, &live_at_start, |id| {
            lease_confirmed_dead(&volume, &lease_tracker, id, timeout)
        });
        for entry in list_topics(&volume)? {
            match entry {
                Ok(meta) => {
                    let topic = open_topic(&volume, &defaults, meta, config.broker_id, now, &gate);
                    registry.by_id.insert(topic.meta.topic_id, topic.meta.name.clone());
                    registry.topics.insert(topic.meta.name.clone(), Arc::new(topic));
                }
                Err(e) => {
                    let name = topic_name_of(&e);
                    error!(error = %e, "topic file unreadable; the topic is refused until the file is repaired");
                    registry.broken.insert(name, BrokenTopic { error: e.to_string() });
                }
            }
        }
        drop(gate);
        info!(
            topics = registry.topics.len(),
            broken = registry.broken.len(),
            "volume opened"
        );
        let groups = GroupCoordinator::new(volume.clone(), &config);
        let volume_for_ids = volume.clone();
        let txn = TransactionCoordinator::new(&volume, config.broker_id);
        let config_broker_id = config.broker_id;
        let broker = Arc::new(Broker {
            config,
            volume,
            cluster_id,
            advertised,
            registry: RwLock::new(registry),
            admin_lock: tokio::sync::Mutex::new(()),
            appended: watch::channel(0).0,
            groups,
            txn,
            producer_ids: Mutex::new(ProducerIdAllocator::new(volume_for_ids, config_broker_id)),
            live_brokers: RwLock::new(live_at_start),
            lease_renewed_at: Mutex::new(None),
            lease_tracker: Mutex::new(lease_tracker),
            sync_rounds: std::sync::atomic::AtomicU64::new(1),
            stepdowns: std::sync::atomic::AtomicU64::new(0),
            dynamic: RwLock::new(dynamic),
            authz,
        });
        let fences = broker.apply_fence_logs()?;
        info!(raised = fences, "fence logs applied to the partitions' producers");
        Ok(broker)
    }

    fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }
    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn topic(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let reg = self.registry();
        if let Some(t) = reg.topics.get(name) {
            return Ok(t.clone());
        }
        if let Some(b) = reg.broken.get(name) {
            return Err(TopicError::Broken(name.to_string(), b.error.clone()));
        }
        Err(TopicError::Unknown(name.to_string()))
    }

    /// The topic, for a client that may do `op` on it; TOPIC_AUTHORIZATION_FAILED
    /// otherwise, whether or not it exists (Kafka's answer: no probing for names).
    pub fn topic_as(
        &self,
        ctx: &crate::handlers::RequestContext,
        op: kaas_core::acl::Operation,
        name: &str,
    ) -> Result<Arc<Topic>, i16> {
        if !self.authz.authorize(ctx, op, kaas_core::acl::ResourceType::Topic, name) {
            return Err(kafka_protocol::error::ResponseError::TopicAuthorizationFailed.code());
        }
        self.topic(name).map_err(|e| e.code())
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<Arc<Topic>> {
        let reg = self.registry();
        reg.by_id.get(id).and_then(|n| reg.topics.get(n)).cloned()
    }

    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.registry().topics.values().cloned().collect()
    }

    pub fn broken_topics(&self) -> Vec<(String, BrokenTopic)> {
        self.registry()
            .broken
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// [`Broker::topic_or_create`] on a client's behalf: creating the topic needs
    /// CREATE on the cluster or on the topic (Kafka's rule for auto-creation); without
    /// it a missing topic is TOPIC_AUTHORIZATION_FAILED, as Kafka answers (a client
    /// then fails at once instead of waiting for a topic that will not come).
    pub async fn topic_or_create_for(
        &self,
        ctx: &crate::handlers::RequestContext,
        name: &str,
    ) -> Result<Arc<Topic>, TopicError> {
        // One lookup on the produce path; only a missing topic (rare) goes on to
        // topic_or_create.
        match self.topic(name) {
            Err(TopicError::Unknown(_)) if self.config.auto_create_topics => {
                if self.may_create_topic(ctx, name) {
                    self.topic_or_create(name).await
                } else {
                    Err(TopicError::CreateDenied(name.to_string()))
                }
            }
            found => found,
        }
    }

    /// READ on the group: what JoinGroup, SyncGroup, Heartbeat and LeaveGroup need.
    pub fn may_read_group(&self, ctx: &crate::handlers::RequestContext, group: &str) -> bool {
        self.authz.authorize(
            ctx,
            kaas_core::acl::Operation::Read,
            kaas_core::acl::ResourceType::Group,
            group,
        )
    }

    /// WRITE on the transactional id: what every transactional API needs.
    pub fn may_write_txn(&self, ctx: &crate::handlers::RequestContext, transactional_id: &str) -> bool {
        self.authz.authorize(
            ctx,
            kaas_core::acl::Operation::Write,
            kaas_core::acl::ResourceType::TransactionalId,
            transactional_id,
        )
    }

    /// CREATE on the cluster or on the topic.
    pub fn may_create_topic(&self, ctx: &crate::handlers::RequestContext, name: &str) -> bool {
        use kaas_core::acl::{Operation, ResourceType};
        self.authz
            .authorize(ctx, Operation::Create, ResourceType::Cluster, crate::authz::CLUSTER)
            || self.authz.authorize(ctx, Operation::Create, ResourceType::Topic, name)
    }

    /// The topic, created with broker defaults if auto-creation is on and it is missing.
    pub async fn topic_or_create(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        match self.topic(name) {
            Err(TopicError::Unknown(_)) if self.config.auto_create_topics => {
                match self
                    .create_topic(name, self.config.default_partitions, BTreeMap::new())
                    .await
                {
                    Ok(t) => {
                        info!(topic = name, partitions = t.meta.partitions, "auto-created topic");
                        Ok(t)
                    }
                    Err(TopicError::AlreadyExists(_)) => self.topic(name),
                    Err(e) => Err(e),
                }
            }
            other => other,
        }
    }

    pub fn validate_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<LogConfig, TopicError> {
        if !kaas_core::layout::valid_topic_name(name) {
            return Err(TopicError::InvalidName(name.to_string()));
        }
        if !(1..=kaas_core::layout::MAX_PARTITIONS_PER_TOPIC).contains(&partitions) {
            return Err(TopicError::InvalidPartitions(partitions));
        }
        let log_config =
            kaas_core::topic::log_config_for(&self.log_defaults(), configs).map_err(TopicError::InvalidConfig)?;
        let reg = self.registry();
        if reg.topics.contains_key(name) {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        if let Some(b) = reg.broken.get(name) {
            return Err(TopicError::Broken(name.to_string(), b.error.clone()));
        }
        drop(reg);
        self.check_partition_limits(partitions as i64)?;
        Ok(log_config)
    }

    /// Whether `topic` may grow to `count` partitions.
    pub fn validate_partitions(&self, topic: &Topic, count: i32) -> Result<(), TopicError> {
        if count <= topic.meta.partitions || count > kaas_core::layout::MAX_PARTITIONS_PER_TOPIC {
            return Err(TopicError::InvalidPartitions(count));
        }
        self.check_partition_limits((count - topic.meta.partitions) as i64)
    }

    /// Refuses `more` new partitions when the volume would then hold more than
    /// `max.partitions`, or more than `max.broker.partitions` per live broker.
    fn check_partition_limits(&self, more: i64) -> Result<(), TopicError> {
        let total: i64 = self
            .registry()
            .topics
            .values()
            .map(|t| t.meta.partitions as i64)
            .sum::<i64>()
            + more;
        let live = self.live_brokers().len().max(1) as i64;
        let per_broker = self.config.max_broker_partitions as i64 * live;
        if total > self.config.max_partitions as i64 {
            return Err(TopicError::PartitionLimit(format!(
                "the volume would hold {total} partitions, more than max.partitions={}",
                self.config.max_partitions
            )));
        }
        if total > per_broker {
            return Err(TopicError::PartitionLimit(format!(
                "the volume would hold {total} partitions, more than max.broker.partitions={} times {live} live broker(s)",
                self.config.max_broker_partitions
            )));
        }
        Ok(())
    }

    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, TopicError> {
        let _admin = self.admin_lock.lock().await;
        // Directory creation and fsyncs, off the runtime's workers.
        crate::blocking::off_worker(|| self.create_topic_blocking(name, partitions, configs))
    }

    fn create_topic_blocking(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, TopicError> {
        self.validate_topic(name, partitions, &configs)?;
        if self.adopt_from_volume(name) {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        let meta = TopicMeta::new(name, partitions, configs, now_ms());
        // Partition directories first, the topic file last: a crash in between leaves
        // directories no topic file names, never a topic file naming missing logs.
        let topic = self.open_topic_here(meta);
        if !topic.meta.create(&self.volume)? {
            // Another broker created it meanwhile: ours is dropped (its partition
            // locks with it) and theirs is served.
            drop(topic);
            self.adopt_from_volume(name);
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        let topic = Arc::new(topic);
        let mut reg = self.registry_mut();
        reg.by_id.insert(topic.meta.topic_id, name.to_string());
        reg.topics.insert(name.to_string(), topic.clone());
        Ok(topic)
    }

    /// Opens a topic's partitions here, under the take-over rule.
    fn open_topic_here(&self, meta: TopicMeta) -> Topic {
        open_topic(
            &self.volume,
            &self.log_defaults(),
            meta,
            self.config.broker_id,
            now_ms(),
            &self.gate(),
        )
    }

    /// Opens one partition here, under the take-over rule.
    fn open_partition_here(
        &self,
        config: &LogConfig,
        topic: &str,
        topic_id: Uuid,
        index: i32,
    ) -> Result<Arc<Partition>, Offline> {
        open_partition(
            &self.volume,
            config,
            topic,
            topic_id,
            index,
            self.config.broker_id,
            now_ms(),
            &self.gate(),
        )
    }

    /// The take-over rule over this broker's current view of the live brokers.
    fn gate(&self) -> Gate<'_> {
        take_over_gate(self.config.broker_id, &self.live_brokers(), |id| {
            let tracker = self.lease_tracker.lock().unwrap_or_else(|p| p.into_inner());
            lease_confirmed_dead(&self.volume, &tracker, id, self.config.broker_session_timeout_ms)
        })
    }

    /// Applies the latest recorded fences to a partition this broker just took over
    /// (the fence watcher reports each fence once, before this broker held it).
    fn apply_fences_to(&self, partition: &Partition) {
        let Ok(logs) = kaas_core::fence_log::list_fence_logs(&self.volume) else {
            return;
        };
        let now = now_ms();
        let mut state = partition.state();
        for log in logs.into_iter().filter_map(|(_, l)| l.ok()) {
            for (pid, rec) in log.fences {
                if state.producers.get(pid).is_some() {
                    state.producers.fence_at(pid, rec.epoch, now);
                }
            }
        }
    }

    /// Lets every partition go (see [`Partition::retire`]): clean shutdown, and a
    /// broker stepping down because it could not renew its lease (which lets them go
    /// without writing anything: see `retire`).
    pub fn release_partitions(&self, reason: &str) {
        let _admin = self.admin_lock.blocking_lock();
        let released = self.let_go(reason, |_, _| true);
        if released > 0 {
            info!(partitions = released, reason, "released partitions");
        }
    }

    /// Hands every partition this broker leads but is no longer the rendezvous owner
    /// of (a broker joined, or came back) to its owner: the partition is let go
    /// cleanly, and the owner takes it over at its next volume sync. Caller holds
    /// the admin lock.
    fn hand_over_misplaced(&self) -> usize {
        let live: Vec<i32> = self.live_brokers().into_keys().collect();
        let me = self.config.broker_id;
        let moved = self.let_go("handed over to its rendezvous owner", |topic, index| {
            matches!(
                kaas_core::ownership::place(me, &live, topic, index, true, None),
                kaas_core::ownership::Placement::HandOver(_)
            )
        });
        if moved > 0 {
            info!(
                partitions = moved,
                "handed partitions over to the brokers that own them now"
            );
        }
        moved
    }

    /// Lets one partition go so that the next volume sync opens it again (recovery
    /// from its files, at a new leader epoch): for a partition whose state in memory
    /// no longer matches its files.
    pub fn reopen_partition(&self, topic: &str, index: i32, reason: &str) {
        // As every registry rewrite of partitions: under the admin lock, so no sync or
        // admin call puts back a copy that still holds the retired partition.
        let _admin = self.admin_lock.blocking_lock();
        self.let_go(reason, |t, i| t == topic && i == index);
    }

    /// Retires the partitions this broker leads that `pick` selects, and marks them
    /// led elsewhere in the registry. Returns how many.
    fn let_go(&self, reason: &str, pick: impl Fn(&str, i32) -> bool) -> usize {
        let mut count = 0;
        for t in self.topics() {
            let mut partitions = t.partitions.clone();
            let mut changed = false;
            for slot in partitions.iter_mut() {
                let Ok(p) = slot else { continue };
                if !pick(&p.topic, p.index) {
                    continue;
                }
                p.retire(&self.volume, self.config.broker_id, reason, &|| self.lease_fresh());
                *slot = Err(Offline {
                    reason: format!("partition {}-{} was let go by this broker: {reason}", p.topic, p.index),
                    elsewhere: true,
                });
                changed = true;
                count += 1;
            }
            if changed {
                let topic = Arc::new(Topic {
                    meta: t.meta.clone(),
                    log_config: t.log_config.clone(),
                    partitions,
                });
                self.registry_mut().topics.insert(t.meta.name.clone(), topic);
            }
        }
        count
    }

    /// Loads a topic another broker created into the registry, if its file exists.
    fn adopt_from_volume(&self, name: &str) -> bool {
        let path = self.volume.topic_file(name);
        let Ok(meta) = TopicMeta::read(&path) else {
            return false;
        };
        let topic = Arc::new(self.open_topic_here(meta));
        let mut reg = self.registry_mut();
        reg.by_id.insert(topic.meta.topic_id, name.to_string());
        reg.topics.insert(name.to_string(), topic);
        true
    }

    pub async fn delete_topic(&self, name: &str) -> Result<Uuid, TopicError> {
        let _admin = self.admin_lock.lock().await;
        let topic = {
            let mut reg = self.registry_mut();
            let topic = reg
                .topics
                .remove(name)
                .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
            reg.by_id.remove(&topic.meta.topic_id);
            topic
        };
        let path = self.volume.topic_file(name);
        crate::blocking::off_worker(|| {
            std::fs::remove_file(&path).map_err(|e| VolumeError::io(&path, e))?;
            self.remove_partition_dirs(&topic);
            self.groups.forget_topic(name);
            Ok::<_, TopicError>(())
        })?;
        Ok(topic.meta.topic_id)
    }

    /// Removes the directories of a deleted topic's partitions — only those this
    /// broker holds (or that nobody holds): a partition another process still writes
    /// is removed by that process when it sees the topic file gone.
    ///
    /// A partition nobody holds (between a hand-over and the take-over, or after its
    /// leader died) is removed by whoever gets its `owner.lock`, if its `owner.json`
    /// still belongs to this topic id: never a new topic's partition of the same name.
    fn remove_partition_dirs(&self, topic: &Topic) {
        let name = &topic.meta.name;
        for (p, slot) in topic.partitions.iter().enumerate() {
            let dir = self.volume.partition_dir(name, p as i32);
            let _lock = match slot {
                Err(o) if o.elsewhere => match PartitionOwner::lock(&self.volume, name, p as i32) {
                    Ok(lock) => {
                        match PartitionOwner::read(&PartitionOwner::path(&self.volume, name, p as i32)) {
                            Ok(o) if o.topic_id != Some(topic.meta.topic_id) => continue,
                            Err(e) if !e.is_not_found() => continue,
                            _ => {}
                        }
                        Some(lock)
                    }
                    // Held: its holder removes it when it sees the topic gone.
                    Err(_) => continue,
                },
                _ => None,
            };
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    warn!(dir = %dir.display(), error = %e, "could not remove partition directory of deleted topic");
                }
            }
        }
    }

    pub async fn create_partitions(&self, name: &str, count: i32) -> Result<(), TopicError> {
        let _admin = self.admin_lock.lock().await;
        let old = self.topic(name)?;
        self.validate_partitions(&old, count)?;
        let mut partitions = old.partitions.clone();
        let meta = crate::blocking::off_worker(|| {
            // Under the lock every rewriter of a topic file takes, and only over the
            // topic as this broker knows it: not a topic another broker deleted,
            // recreated or grew meanwhile. Configs changed meanwhile are kept.
            let lock_path = self.volume.topic_files_lock();
            let _lock = kaas_core::fsutil::lock_exclusive(&lock_path).map_err(|e| VolumeError::io(&lock_path, e))?;
            let mut meta = match TopicMeta::read(&self.volume.topic_file(name)) {
                Ok(on_disk) if on_disk.topic_id == old.meta.topic_id && on_disk.partitions == old.meta.partitions => {
                    on_disk
                }
                Ok(_) => {
                    return Err(TopicError::InvalidConfig(format!(
                        "topic {name} changed on another broker; retry"
                    )))
                }
                Err(e) if e.is_not_found() => return Err(TopicError::Unknown(name.to_string())),
                Err(e) => return Err(e.into()),
            };
            meta.partitions = count;
            let log_config = self.topic_log_config(&meta);
            for p in old.meta.partitions..count {
                partitions.push(self.open_partition_here(&log_config, name, old.meta.topic_id, p));
            }
            meta.write(&self.volume)?;
            Ok::<_, TopicError>(meta)
        })?;
        let grown = Topic {
            meta: old.meta.clone(),
            log_config: old.log_config.clone(),
            partitions,
        };
        // With the configs as they are on the volume (another broker may have
        // changed them since this one last looked).
        self.reconfigure(&grown, meta);
        Ok(())
    }

    /// Picks up what other processes changed on the volume — topics another broker
    /// created or grew, and partitions whose `owner.lock` was freed because their
    /// writer died or let go, which this broker then takes over (recovery from the
    /// snapshot and the log tail, leader epoch + 1). Blocking file work: run it off the
    /// runtime threads, every second, and only while this broker's lease is fresh.
    pub fn sync_with_volume(&self) {
        // ACL changes first, whatever the lease and the admin lock: a broker that
        // still answers requests must not go on enforcing revoked ACLs.
        self.authz.reload(&self.volume);
        if !self.lease_fresh() {
            return;
        }
        let _admin = self.admin_lock.blocking_lock();
        let retry_broken = self
            .sync_rounds
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(BROKEN_RETRY_ROUNDS);
        self.hand_over_misplaced();
        let defaults_changed = self.reload_dynamic_configs();
        let listed = match list_topics(&self.volume) {
            Ok(l) => l,
            Err(e) => {
                error!(error = %e, "cannot list topics on the volume");
                return;
            }
        };
        // Topics another broker deleted: let their partitions go (locks released with
        // the last reference) and remove the directories this broker held.
        // A topic deleted and created again under the same name (another topic id) is
        // let go too, so its old logs never come back under the new id.
        let on_volume: BTreeMap<String, Option<Uuid>> = listed
            .iter()
            .map(|t| match t {
                Ok(meta) => (meta.name.clone(), Some(meta.topic_id)),
                Err(e) => (topic_name_of(e), None),
            })
            .collect();
        crate::metrics::metrics().forget_topics(|name| on_volume.contains_key(name));
        let gone: Vec<Arc<Topic>> = {
            let mut reg = self.registry_mut();
            let names: Vec<String> = reg
                .topics
                .iter()
                .filter(|(n, t)| match on_volume.get(*n) {
                    None => true,
                    Some(Some(id)) => *id != t.meta.topic_id,
                    Some(None) => false,
                })
                .map(|(n, _)| n.clone())
                .collect();
            let mut gone = Vec::new();
            for n in names {
                if let Some(t) = reg.topics.remove(&n) {
                    reg.by_id.remove(&t.meta.topic_id);
                    gone.push(t);
                }
            }
            gone
        };
        for topic in gone {
            info!(topic = %topic.meta.name, "topic deleted by another broker; its partitions are let go");
            self.remove_partition_dirs(&topic);
            self.groups.forget_topic(&topic.meta.name);
        }
        for meta in listed.into_iter().flatten() {
            let current = self.registry().topics.get(&meta.name).cloned();
            let topic = match current {
                Some(t) if t.meta.topic_id == meta.topic_id => {
                    // Configs changed by another broker (or new log defaults).
                    let t = if defaults_changed || meta.configs != t.meta.configs {
                        let mut m = t.meta.clone();
                        m.configs = meta.configs.clone();
                        self.reconfigure(&t, m)
                    } else {
                        t
                    };
                    let mut partitions = t.partitions.clone();
                    let mut changed = false;
                    for (i, slot) in partitions.iter_mut().enumerate() {
                        // Broken ones too, now and then: the cause may have been
                        // transient (an unreadable owner.json, a failed write), and
                        // only this broker may take the partition while it owns it.
                        // A partition retired but still in the registry (let go by a path
                        // that lost a race with this copy) is opened again too.
                        if matches!(slot, Err(o) if o.elsewhere || retry_broken)
                            || matches!(slot, Ok(p) if p.is_retired())
                        {
                            // A broker that went stale meanwhile takes nothing more.
                            if !self.lease_fresh() {
                                break;
                            }
                            if let Ok(p) = self.open_partition_here(&t.log_config, &meta.name, meta.topic_id, i as i32)
                            {
                                info!(topic = %meta.name, partition = i, leader_epoch = p.leader_epoch, "took over a partition whose writer is gone");
                                self.apply_fences_to(&p);
                                *slot = Ok(p);
                                changed = true;
                            }
                        }
                    }
                    for p in t.meta.partitions..meta.partitions {
                        partitions.push(self.open_partition_here(&t.log_config, &meta.name, meta.topic_id, p));
                        changed = true;
                    }
                    if !changed {
                        continue;
                    }
                    Topic {
                        meta: if meta.partitions > t.meta.partitions {
                            meta
                        } else {
                            t.meta.clone()
                        },
                        log_config: t.log_config.clone(),
                        partitions,
                    }
                }
                // New here (created by another broker), or deleted and created again.
                _ => {
                    info!(topic = %meta.name, partitions = meta.partitions, "picked up a topic from the volume");
                    self.open_topic_here(meta)
                }
            };
            let topic = Arc::new(topic);
            let mut reg = self.registry_mut();
            reg.by_id.insert(topic.meta.topic_id, topic.meta.name.clone());
            reg.topics.insert(topic.meta.name.clone(), topic);
            if self.appended.receiver_count() > 0 {
                self.appended.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Classifies and appends validated records to a partition (idempotence checks
    /// under the partition lock) and wakes long-polling fetches.
    /// Returns the outcome and the log start offset, read under the same lock.
    ///
    /// Transactional batches are verified under the same lock, against the
    /// coordinator's current entry (KIP-890 part 1): their (producer id, epoch) must
    /// have an Ongoing transaction that includes this partition. Because markers are
    /// written under this lock too, a batch verified here lands before the marker of
    /// its transaction, and a batch arriving after the transaction moved on is refused
    /// — it can never open a transaction nobody will finish.
    pub fn append(
        &self,
        partition: &Partition,
        records: &mut [u8],
        headers: &[kaas_core::batch::BatchHeader],
        transactional_id: Option<&str>,
    ) -> Result<(AppendOutcome, i64), AppendRejected> {
        if !self.lease_fresh() {
            return Err(AppendRejected::LeaseExpired);
        }
        let (outcome, log_start) = {
            let mut state = partition.writable().ok_or(AppendRejected::NotLeader)?;
            // Every transactional batch, not just the first: a records set may carry
            // batches of several producers.
            let mut verified: Option<(i64, i16)> = None;
            for h in headers.iter().filter(|h| h.is_transactional()) {
                if verified == Some((h.producer_id, h.producer_epoch)) {
                    continue;
                }
                let tp = kaas_core::txn::TopicPartition {
                    topic: partition.topic.clone(),
                    partition: partition.index,
                };
                match transactional_id {
                    Some(tid) => self
                        .txn
                        .verify_produce(tid, h.producer_id, h.producer_epoch, &tp)
                        .map_err(AppendRejected::Txn)?,
                    None => return Err(AppendRejected::Txn(TxnError::InvalidTxnState.into())),
                }
                verified = Some((h.producer_id, h.producer_epoch));
            }
            // Again under the partition lock, right before the write: verification
            // may have waited on the volume, and a stale broker must not write.
            let stepdowns = self.stepdowns.load(Ordering::Acquire);
            if !self.lease_fresh() {
                return Err(AppendRejected::LeaseExpired);
            }
            let now = now_ms();
            let started = std::time::Instant::now();
            let outcome = if state.log.would_roll(records.len() as u64, now) {
                // A roll seals (fsyncs) a segment and creates files.
                crate::blocking::off_worker(|| state.append(records, headers, partition.leader_epoch, now))
            } else {
                state.append(records, headers, partition.leader_epoch, now)
            }
            .map_err(AppendRejected::Append)?;
            crate::metrics::metrics()
                .produce_append
                .observe(started.elapsed().as_secs_f64());
            // And after it: a process paused between the check and the write (SIGSTOP)
            // may have lost the partition meanwhile, its batch landing where the new
            // leader never reads. Not acknowledged; a retry goes to the new leader.
            if !self.still_fresh_since(stepdowns) {
                warn!(topic = %partition.topic, partition = partition.index, "the lease went stale during an append; not acknowledging it");
                return Err(AppendRejected::LeaseExpired);
            }
            (outcome, state.log.log_start_offset())
        };
        if matches!(outcome, AppendOutcome::Appended(_)) {
            self.appended.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok((outcome, log_start))
    }

    /// Records a successful renewal of this broker's lease (the lease task).
    pub fn lease_renewed(&self) {
        self.renewed_at(std::time::Instant::now());
    }

    /// Records a renewal at `at` (tests use a past instant).
    pub fn renewed_at(&self, at: std::time::Instant) {
        *self.lease_renewed_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
    }

    /// Records that this broker is stepping down (the lease task, before it lets its
    /// partitions go).
    pub fn stepping_down(&self) {
        self.stepdowns.fetch_add(1, Ordering::AcqRel);
    }

    /// How many times this broker stepped down so far; with
    /// [`Broker::still_fresh_since`], a request tells whether the broker may have lost
    /// its partitions while it was being served.
    pub fn stepdown_count(&self) -> u64 {
        self.stepdowns.load(Ordering::Acquire)
    }

    /// Whether the lease is fresh now and this broker did not step down since it
    /// read `stepdowns`.
    pub fn still_fresh_since(&self, stepdowns: u64) -> bool {
        self.lease_fresh() && self.stepdowns.load(Ordering::Acquire) == stepdowns
    }

    /// Whether this broker may append: its own lease was renewed less than half the
    /// session timeout ago by its monotonic clock. Peers declare it dead after the
    /// whole timeout by theirs, so it stops writing well before anyone may take over.
    pub fn lease_fresh(&self) -> bool {
        let half = std::time::Duration::from_millis((self.config.broker_session_timeout_ms.max(0) / 2) as u64);
        self.lease_renewed_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none_or(|at| at.elapsed() < half)
    }

    /// Whether this broker coordinates transaction slot `slot` (rendezvous hashing
    /// over the live brokers).
    pub fn owns_txn_slot(&self, slot: u32) -> bool {
        self.owner_of(&kaas_core::ownership::txn_slot_key(slot)) == Some(self.config.broker_id)
    }

    /// Whether this broker coordinates consumer group `group`.
    pub fn owns_group(&self, group: &str) -> bool {
        self.owner_of(&kaas_core::ownership::group_key(group)) == Some(self.config.broker_id)
    }

    /// The live broker that owns an ownership key (rendezvous hashing).
    pub fn owner_of(&self, key: &str) -> Option<i32> {
        let live: Vec<i32> = self.live_brokers().into_keys().collect();
        kaas_core::ownership::owner(key, &live)
    }

    /// Live brokers and their advertised addresses by listener; this broker is in it while its
    /// lease is fresh.
    pub fn live_brokers(&self) -> BTreeMap<i32, Endpoints> {
        self.live_brokers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the live-broker list (from the lease files). This broker is in it
    /// exactly while its own lease is fresh: one that stepped down owns nothing.
    pub fn set_live_brokers(&self, mut live: BTreeMap<i32, Endpoints>) {
        if self.lease_fresh() {
            live.insert(self.config.broker_id, self.advertised.clone());
        } else {
            live.remove(&self.config.broker_id);
        }
        let changed = {
            let mut current = self.live_brokers.write().unwrap_or_else(|p| p.into_inner());
            let changed = current.keys().ne(live.keys());
            *current = live;
            changed
        };
        if changed {
            let dropped = self.groups.forget_unowned(|g| self.owns_group(g));
            if dropped > 0 {
                info!(
                    groups = dropped,
                    "live brokers changed: forgot groups now coordinated elsewhere"
                );
            }
        }
    }

    /// The broker leading a partition: this one when it holds the partition's
    /// `owner.lock`; else the live broker `owner.json` names, when another process
    /// holds the lock. None when the partition does not exist or has no live leader.
    pub fn partition_leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.partition_leadership(topic, partition).map(|(b, _)| b)
    }

    /// [`Broker::partition_leader`] with the leader epoch.
    pub fn partition_leadership(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        let t = self.topic(topic).ok()?;
        match t.partition(partition)? {
            Ok(p) => Some((self.config.broker_id, p.leader_epoch)),
            Err(o) if o.elsewhere => {
                let owner = PartitionOwner::read(&PartitionOwner::path(&self.volume, topic, partition)).ok()?;
                (owner.broker != self.config.broker_id
                    && !owner.released
                    && self.live_brokers().contains_key(&owner.broker))
                .then_some((owner.broker, owner.leader_epoch))
            }
            Err(_) => None,
        }
    }

    /// Raises a producer's epoch and clears its dedupe window on every partition this
    /// broker leads, so a zombie's batches are rejected even where the new session has
    /// not written yet.
    pub fn fence_producer_epoch(&self, producer_id: i64, epoch: i16) {
        let now = now_ms();
        for p in self.partitions() {
            p.state().producers.fence_at(producer_id, epoch, now);
        }
    }

    /// Applies every fence log on the volume — this broker's own, its peers' and the
    /// admin tool's — to every partition. Run at open, before serving: a fence raised
    /// an epoch on partitions that may never have seen a batch of the new epoch, and
    /// nothing in their logs or snapshots remembers it after a kill -9.
    fn apply_fence_logs(&self) -> Result<usize, VolumeError> {
        let mut latest: BTreeMap<i64, i16> = BTreeMap::new();
        for (writer, log) in kaas_core::fence_log::list_fence_logs(&self.volume)? {
            match log {
                Ok(log) => {
                    for (pid, rec) in log.fences {
                        let e = latest.entry(pid).or_insert(rec.epoch);
                        *e = (*e).max(rec.epoch);
                    }
                }
                // Refusing to start would take every partition down for one file;
                // the watcher keeps reporting it until it is repaired.
                Err(e) => {
                    error!(writer, error = %e, "fence log unreadable at start; its fences are not applied until it is repaired")
                }
            }
        }
        // Only producers a partition knows: a partition that never saw a producer
        // takes no state for it (its transactional batches are refused by produce-time
        // verification anyway), so fences recorded long ago do not pile up in every
        // partition at every start.
        let now = now_ms();
        let mut applied = 0;
        for p in self.partitions() {
            let mut state = p.state();
            for (pid, epoch) in &latest {
                if state.producers.get(*pid).is_some() && state.producers.fence_at(*pid, *epoch, now) {
                    applied += 1;
                }
            }
        }
        Ok(applied)
    }

    /// Writes a transaction marker to a partition this broker leads and waits until
    /// it is durable. Ok(false) when there was nothing to write: the topic or
    /// partition was deleted since, or the producer has no open transaction there
    /// (the marker landed before: markers are idempotent). Any failure is returned —
    /// the caller leaves the transaction in its Prepare state and retries.
    pub async fn write_marker(
        &self,
        tp: &kaas_core::txn::TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<bool, MarkerError> {
        let fail = |detail: String| MarkerError {
            topic: tp.topic.clone(),
            partition: tp.partition,
            detail,
        };
        if !self.lease_fresh() {
            return Err(fail("this broker's lease is not renewed; it does not append".into()));
        }
        let partition = match self.topic(&tp.topic) {
            Ok(t) => match t.partition(tp.partition) {
                Some(Ok(p)) => p.clone(),
                Some(Err(e)) => return Err(fail(format!("partition offline: {e}"))),
                None => {
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, "marker for a partition that no longer exists; nothing to end");
                    return Ok(false);
                }
            },
            Err(TopicError::Unknown(_)) => {
                warn!(topic = %tp.topic, partition = tp.partition, producer_id, "marker for a deleted topic; nothing to end");
                return Ok(false);
            }
            Err(e) => return Err(fail(e.to_string())),
        };
        let stepdowns = self.stepdowns.load(Ordering::Acquire);
        let written = {
            let mut state = partition
                .writable()
                .ok_or_else(|| fail("this broker let the partition go".into()))?;
            // Again under the partition lock, right before the write, and after it.
            if !self.lease_fresh() {
                return Err(fail("this broker's lease is not renewed; it does not append".into()));
            }
            let written = state
                .write_marker(producer_id, epoch, commit, 0, partition.leader_epoch, now_ms())
                .map_err(|e| fail(e.to_string()))?;
            if !self.still_fresh_since(stepdowns) {
                return Err(fail(
                    "the lease went stale while the marker was written; it may not count".into(),
                ));
            }
            written
        };
        match written {
            Some(info) => {
                crate::metrics::metrics().markers_written.inc();
                partition
                    .wait_durable(info.next_offset)
                    .await
                    .map_err(|e| fail(format!("fsync: {e}")))?;
                self.appended.send_modify(|n| *n = n.wrapping_add(1));
                // Durable only counts if this broker still led the partition when the
                // fsync finished (on NFS, unflushed pages are not seen by a successor).
                if !self.still_fresh_since(stepdowns) {
                    return Err(fail(
                        "the lease went stale before the marker was durable; it may not count".into(),
                    ));
                }
                Ok(true)
            }
            None => {
                // Nothing open here now; but an earlier attempt may have appended the
                // marker and failed its fsync: make sure the log end is durable.
                let end = partition.high_watermark();
                partition
                    .wait_durable(end)
                    .await
                    .map_err(|e| fail(format!("fsync: {e}")))?;
                Ok(false)
            }
        }
    }

    /// A fresh producer id from this broker's claimed block.
    pub fn next_producer_id(&self) -> Result<i64, VolumeError> {
        self.producer_ids.lock().unwrap_or_else(|p| p.into_inner()).next_id()
    }

    /// A fresh transactional producer id (kaas_core::producer_ids::TRANSACTIONAL_BASE
    /// and up: partitions refuse plain batches under it).
    pub fn next_transactional_producer_id(&self) -> Result<i64, VolumeError> {
        self.producer_ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_transactional_id()
    }

    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    pub fn must_fsync(&self, acks: i16) -> bool {
        acks == -1 || self.config.flush_policy == FlushPolicy::Always
    }

    /// Every open partition, for the flusher and retention.
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.topics()
            .iter()
            .flat_map(|t| t.partitions.iter().filter_map(|p| p.as_ref().ok().cloned()))
            .collect()
    }

    /// fsyncs every partition up to its current end.
    pub async fn flush_all(&self) {
        for p in self.partitions() {
            let end = p.high_watermark();
            if let Err(e) = p.wait_durable(end).await {
                error!(topic = %p.topic, partition = p.index, error = %e, "fsync failed");
            }
        }
        // Transitions the coordinator did not wait for (Complete*, expiries).
        if let Err(e) = self.txn.flush().await {
            error!(error = %e, "syncing transaction slot journals failed; retried at the next flush");
        }
    }

    pub fn enforce_retention(&self) {
        // A stale broker (resumed from a pause, say) may have lost its partitions:
        // it deletes nothing.
        if !self.lease_fresh() {
            return;
        }
        let now = now_ms();
        for p in self.partitions() {
            let expired = p.state().producers.expire(now, self.config.producer_id_expiration_ms);
            if expired > 0 {
                debug!(topic = %p.topic, partition = p.index, producers = expired, "expired idle producers");
            }
            let Some(mut state) = p.writable() else { continue };
            match state.enforce_retention(now) {
                Ok(deleted) if !deleted.is_empty() => {
                    info!(topic = %p.topic, partition = p.index, segments = ?deleted, "retention deleted segments")
                }
                Ok(_) => {}
                Err(e) => {
                    error!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
                }
            }
        }
    }
}

fn topic_name_of(e: &VolumeError) -> String {
    e.path()
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn open_topic(
    volume: &Volume,
    defaults: &LogConfig,
    meta: TopicMeta,
    broker_id: i32,
    now: i64,
    gate: &Gate<'_>,
) -> Topic {
    let (log_config, problems) = kaas_core::topic::stored_log_config(defaults, &meta.configs);
    for problem in problems {
        warn!(topic = %meta.name, problem = %problem, "a topic config stored on the volume does not apply as written");
    }
    let partitions = (0..meta.partitions)
        .map(|p| open_partition(volume, &log_config, &meta.name, meta.topic_id, p, broker_id, now, gate))
        .collect();
    Topic {
        meta,
        log_config,
        partitions,
    }
}

/// Whether `owner.json` describes a partition of another topic of the same name (one
/// that was deleted): its leadership means nothing to this topic.
fn of_other_topic(owner: &PartitionOwner, topic_id: Uuid) -> bool {
    owner.topic_id.is_some_and(|id| id != topic_id)
}

/// Removes what a deleted topic left in a partition directory (everything but
/// `owner.lock` and `owner.gate`, which the caller holds, and `owner.json`, which it
/// has just rewritten), so a new topic of the same name starts empty.
fn clear_leftovers(dir: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if ["owner.lock", "owner.gate", "owner.json"]
            .iter()
            .any(|keep| entry.file_name() == *keep)
        {
            continue;
        }
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn open_partition(
    volume: &Volume,
    config: &LogConfig,
    topic: &str,
    topic_id: Uuid,
    index: i32,
    broker_id: i32,
    now: i64,
    gate: &Gate<'_>,
) -> Result<Arc<Partition>, Offline> {
    let dir = volume.partition_dir(topic, index);
    // A partition another broker led is taken only once that broker let it go or
    // its lease expired: a free lock alone is not enough (on NFS it can be freed
    // before a dead writer's last pages reach the server). The leadership of a
    // deleted topic's partition of the same name does not count.
    let owner_path = PartitionOwner::path(volume, topic, index);
    let read_owner = || match PartitionOwner::read(&owner_path) {
        Ok(o) => Ok(Some(o)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => {
            error!(topic, partition = index, error = %e, "partition owner file unreadable; partition is offline");
            Err(Offline::broken(e))
        }
    };
    let last = read_owner()?.filter(|o| !of_other_topic(o, topic_id));
    (gate.place)(topic, index, last.as_ref()).map_err(|reason| Offline {
        reason,
        elsewhere: true,
    })?;
    // The lock first: recovery itself writes (truncates torn tails, re-indexes). A
    // lock whose holder is paused is stolen only if, read under the partition's gate,
    // `owner.json` names a leadership that did not let go and whose broker's lease is
    // confirmed dead now.
    let steal_from = |o: Option<&PartitionOwner>| {
        o.is_some_and(|o| {
            !of_other_topic(o, topic_id) && !o.released && o.broker != broker_id && (gate.confirm_dead)(o.broker)
        })
    };
    let mut owner_lock = PartitionOwner::acquire(volume, topic, index, Some(&steal_from)).map_err(|e| match e {
        kaas_core::topic::OwnerLockError::Held { .. } => Offline {
            reason: e.to_string(),
            elsewhere: true,
        },
        e => {
            error!(topic, partition = index, error = %e, "cannot lock partition; it is offline");
            Offline::broken(e)
        }
    })?;
    // Again with the lock in hand: another broker may have taken the partition (and
    // died, freeing the lock) between the first read and the lock.
    let current = read_owner()?;
    let leftovers = current.as_ref().is_some_and(|o| of_other_topic(o, topic_id));
    match current.clone() {
        Some(o) if of_other_topic(&o, topic_id) => {}
        Some(o) if last.as_ref() != Some(&o) => {
            (gate.place)(topic, index, Some(&o)).map_err(|reason| Offline {
                reason,
                elsewhere: true,
            })?;
        }
        _ => {}
    }
    if owner_lock.stolen {
        warn!(topic, partition = index, last_owner = ?current.as_ref().map(|o| o.broker), "took the owner.lock of a partition whose holder's lease expired while it held the lock (paused or cut off); it no longer writes");
    }
    // Every take-over (another broker's, or this id's after a restart) is a new
    // leadership: the leader epoch goes up. Recorded before the gate opens, so no
    // other process judges the lock's holder by the previous leadership.
    let same_topic = current.as_ref().filter(|o| !of_other_topic(o, topic_id));
    let leader_epoch = same_topic.map_or(0, |o| o.leader_epoch + 1);
    let owner = PartitionOwner {
        version: kaas_core::topic::OWNER_FORMAT_VERSION,
        broker: broker_id,
        leader_epoch,
        released: false,
        updated_ms: now,
        topic_id: Some(topic_id),
    };
    owner.write(&owner_path).map_err(Offline::broken)?;
    owner_lock.open_gate();
    if leftovers {
        warn!(topic, partition = index, old_topic_id = ?current.as_ref().and_then(|o| o.topic_id), "removing what a deleted topic of the same name left in the partition directory");
        clear_leftovers(&dir).map_err(|e| {
            error!(topic, partition = index, error = %e, "cannot clear a deleted topic's files; partition is offline");
            Offline::broken(VolumeError::io(&dir, e))
        })?;
    }
    // A leader that did not let go may still be writing (paused): start a segment of
    // our own, so nothing it appends through its open file is ever read.
    let deposed = same_topic.is_some_and(|o| !o.released);
    let mut state = PartitionState::open(&dir, config.clone(), now).map_err(|e| {
        error!(topic, partition = index, error = %e, "cannot open partition; it is offline until the file is repaired");
        Offline::broken(e)
    })?;
    if deposed {
        state.log.start_fresh_segment(now).map_err(|e| {
            error!(topic, partition = index, error = %e, "cannot start a fresh segment after a take-over; partition is offline");
            Offline::broken(e)
        })?;
    }
    for cut in &state.log.truncations {
        warn!(
            topic,
            partition = index,
            path = %cut.path.display(),
            valid_bytes = cut.valid_bytes,
            cut_bytes = cut.cut_bytes,
            reason = %cut.reason,
            "recovery truncated a corrupt or torn log tail"
        );
    }
    let end = state.log.log_end_offset();
    Ok(Arc::new(Partition {
        topic: topic.to_string(),
        topic_id,
        index,
        leader_epoch,
        state: Mutex::new(state),
        durable: AtomicI64::new(end),
        flush_lock: tokio::sync::Mutex::new(()),
        retired: AtomicBool::new(false),
        _owner_lock: owner_lock.lock,
    }))
}
