//! The cluster as this broker takes part in it: the volume, the topic registry it
//! serves, and the moving parts that make a broker one of several on one volume, each
//! in its own file — membership (its lease, the live brokers, who owns which slot and
//! group), ownership (placement, take-over, hand-over, step-down), the volume sync,
//! fences and markers, dynamic configs. The coordinators and the handlers reach it
//! through `Broker` (broker.rs), which composes it with them; nothing here knows a
//! coordinator.

use crate::config::{Config, FlushPolicy};
use crate::listeners::Endpoints;
use crate::registry::Registry;
pub use crate::registry::{BrokenTopic, DurableError, Offline, Partition, Topic, TopicError};
use fences::RoundFences;
use kaas_core::log::LogConfig;
use kaas_core::producer_ids::ProducerIdAllocator;
use kaas_core::topic::{list_topics, PartitionOwner, TopicMeta};
use kaas_core::{now_ms, Volume, VolumeError};
pub(crate) use ownership::{lease_confirmed_dead, lease_unchanged_since_seen};
use ownership::{open_topic, take_over_gate};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};
use uuid::Uuid;

mod cleaner;
mod configs;
mod fences;
mod membership;
mod ownership;
mod sync;

pub use configs::ConfigChange;
pub use fences::{apply_peer_fences, MarkerError};

pub struct Cluster {
    pub config: Config,
    pub volume: Volume,
    pub cluster_id: String,
    /// This broker's advertised address on each of its listeners.
    pub advertised: Endpoints,
    pub(crate) registry: RwLock<Registry>,
    /// Topic creation and deletion are serialised so two requests cannot race on files.
    pub(crate) admin_lock: tokio::sync::Mutex<()>,
    /// Bumped after every append; long-polling fetches wait on it.
    pub(crate) appended: watch::Sender<u64>,
    /// Bumped with `appended` when the topics change (see [`Cluster::wake_readers`]).
    topic_changes: std::sync::atomic::AtomicU64,
    /// The log defaults changed (dynamic broker configs) and not every topic has been
    /// reconfigured with them yet: set when they are read, cleared by the first volume
    /// sync that reconfigured every topic on the volume.
    pub(crate) defaults_pending: std::sync::atomic::AtomicBool,
    pub(crate) producer_ids: Mutex<ProducerIdAllocator>,
    /// Brokers whose lease is fresh and that serve, with their advertised address,
    /// refreshed by the lease task; ownership of transaction slots, groups and
    /// partitions is computed from it.
    pub(crate) live_brokers: RwLock<BTreeMap<i32, Endpoints>>,
    /// Peers whose lease is fresh but says they are still opening the volume
    /// (`BrokerLease::opening_ms`): left out of `live_brokers`, yet alive — a partition
    /// one of them leads and never let go is not taken from it. Written under
    /// `live_brokers`' write lock, with it.
    pub(crate) opening_brokers: RwLock<Vec<i32>>,
    /// Goes up, under `live_brokers`' write lock, before a changed live set is
    /// published: whoever keeps state valid only while ownership stands still (the
    /// consumer groups' session deadlines) sees the change no later than the new set.
    pub live_generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// When this broker last renewed its own lease, by the monotonic clock; None
    /// while no lease task runs (a broker embedded in tests).
    pub(crate) lease_renewed_at: Mutex<Option<std::time::Instant>>,
    /// Peers' heartbeats as last seen, for judging liveness by change.
    /// Shared with the transaction coordinator's judge of dead slot lock holders.
    pub lease_tracker: Arc<Mutex<kaas_core::broker::LeaseTracker>>,
    /// Times this broker stepped down (its lease went stale): a write that saw a
    /// different count before and after may have been made while another broker took
    /// the partition, and is not acknowledged.
    pub(crate) stepdowns: std::sync::atomic::AtomicU64,
    /// Whether this broker coordinates groups and transaction slots (counts itself in
    /// [`Cluster::owner_of`]). True from open, except for a broker started beside
    /// others: it coordinates only once its peers have seen its lease say it serves
    /// (`runtime`: the lease task's `joining`), so no group or slot ever has two
    /// coordinators while they still count it opening.
    pub(crate) coordinating: std::sync::atomic::AtomicBool,
    /// Volume syncs run so far (broken partitions are retried every
    /// [`BROKEN_RETRY_ROUNDS`]).
    pub(crate) sync_rounds: std::sync::atomic::AtomicU64,
    /// Partitions this process let go (or lost) whose `owner.json` may still name a
    /// leadership of this broker id that did not let go: the volume sync tries them
    /// every round, as the placement rule gives them back to this broker wherever
    /// they are assigned, until they are taken or `owner.json` names another.
    pub(crate) revisit: Mutex<std::collections::HashSet<(Uuid, i32)>>,
    /// Partitions led elsewhere the volume sync tried to take (tests).
    pub(crate) take_over_attempts: std::sync::atomic::AtomicU64,
    /// When the volume sync last re-read the `owner.json` of every partition led
    /// here, and the stamp this broker's [`kaas_core::topic::DeposedNotice`] had just
    /// before: it does so again only when the note changed, or after
    /// [`LEADERSHIP_RECHECK`].
    pub(crate) deposed_watch: Mutex<DeposedWatch>,
    /// `owner.json` files of partitions led here re-read by the volume sync (tests).
    pub(crate) leadership_rechecks: std::sync::atomic::AtomicU64,
    /// The topic files as the volume sync last read them (re-read when replaced).
    pub(crate) topic_files: Mutex<kaas_core::topic::TopicFiles>,
    /// `owner.json` of partitions led elsewhere as last read for Metadata, with the
    /// stamp the file had (read again when replaced).
    pub(crate) foreign_owners: Mutex<std::collections::HashMap<(String, i32), ForeignOwner>>,
    /// Dynamic broker configs and the log defaults they give (cluster/configs.rs).
    pub(crate) dynamic: RwLock<configs::DynamicState>,
    /// Rung by a peer's fence notice: the fence watcher reads the fence logs now
    /// instead of at its next poll.
    pub fence_doorbell: tokio::sync::Notify,
    /// Rung by a peer's cluster notice, and by this broker's own lease task when its
    /// view of the live set changed: the lease task renews and reads the leases now
    /// instead of at its next period.
    pub lease_doorbell: tokio::sync::Notify,
    /// Rung by a peer's cluster notice, and by this broker's lease task when the
    /// leases it read changed where it routes: the volume sync (topics, partition
    /// ownership) runs now instead of at its next second.
    pub sync_doorbell: tokio::sync::Notify,
    /// Partitions this broker handed over to their rendezvous owners (a broker
    /// joined) since start: a sync that hands some over tells the peers, so the new
    /// owner takes them at once rather than at its next sync.
    pub handed_over: std::sync::atomic::AtomicU64,
}

/// Every this many volume syncs (seconds), partitions that failed to open are tried again.
pub(crate) const BROKEN_RETRY_ROUNDS: u64 = 10;

/// How long a partition directory no topic names is left untouched before
/// [`Cluster::sweep_orphan_partition_dirs`] removes it.
pub(crate) const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Every how many volume syncs (one a second) [`Cluster::sweep_orphan_partition_dirs`]
/// runs, the first included.
pub(crate) const SWEEP_ROUNDS: u64 = 60;

/// Whether `dir` was last modified [`ORPHAN_AGE`] ago or more (the sweep's test that
/// nobody is making or removing it right now).
fn untouched_for_orphan_age(dir: &std::path::Path) -> bool {
    std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| at.elapsed().ok())
        .is_some_and(|age| age >= ORPHAN_AGE)
}

/// The partitions of `topic` led elsewhere, as (topic id, index).
fn elsewhere(topic: &Topic) -> impl Iterator<Item = (Uuid, i32)> + '_ {
    topic.partitions.iter().enumerate().filter_map(|(i, p)| match p {
        Err(o) if o.elsewhere => Some((topic.meta.topic_id, i as i32)),
        _ => None,
    })
}

/// A partition led elsewhere: the stamp its `owner.json` had, and what it said.
pub(crate) type ForeignOwner = (kaas_core::fsutil::FileStamp, PartitionOwner);

/// How many partitions a volume sync takes over side by side.
const TAKE_OVER_WORKERS: usize = 8;

/// The volume sync re-reads the `owner.json` of every partition led here at least
/// this often, whatever the deposed notice says: the backstop for a note lost (its
/// taker crashed between recording its leadership and leaving it, or a host crash
/// took the unsynced file). Until then an idle deposed leader serves reads of what it
/// had confirmed, and refuses every write at its check after the fsync.
pub(crate) const LEADERSHIP_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// See [`Cluster::deposed_watch`].
#[derive(Debug, Default)]
pub(crate) struct DeposedWatch {
    pub(crate) seen: Option<kaas_core::fsutil::FileStamp>,
    pub(crate) full_at: Option<std::time::Instant>,
    /// Partitions whose `owner.json` the last re-read could not read: read again at
    /// the next sync.
    pub(crate) retry: std::collections::HashSet<(Uuid, i32)>,
}

impl Cluster {
    /// Opens the volume: reads the cluster id, every topic file and every partition log
    /// (recovering torn tails), under the take-over rule over the live brokers as their
    /// leases say now. Unreadable topics are kept aside and reported.
    pub fn open(config: Config, advertised: Endpoints) -> anyhow::Result<Cluster> {
        let volume = Volume::new(&config.data_dir);
        // A seal this process put on the path before (an earlier open) says nothing
        // of the directory there now.
        kaas_core::fsutil::unseal_root(&config.data_dir);
        kaas_core::fsutil::create_dir_durable(&volume.topics_dir())?;
        kaas_core::fsutil::create_dir_durable(&volume.brokers_dir())?;
        kaas_core::fsutil::create_dir_durable(&volume.groups_dir())?;
        // From here on nothing recreates the data directory: a volume unmounted under
        // this broker fails its writes rather than taking them onto the bare path.
        kaas_core::fsutil::seal_root(&config.data_dir)?;
        let (cluster_id, created) = kaas_core::broker::cluster_id_or_create(&volume)?;
        if created {
            // Kafka formats a storage directory as a step of its own; kaas formats on
            // first start (the README's one command must work on a fresh machine), so a
            // mistyped --data-dir must at least be impossible to miss.
            let path = std::path::absolute(&config.data_dir).unwrap_or_else(|_| config.data_dir.clone());
            warn!(
                cluster_id = %cluster_id,
                data_dir = %path.display(),
                "NEW CLUSTER: there was no kaas volume at {}; this broker created one, with cluster id {cluster_id}. If it should have joined an existing cluster, stop it and check --data-dir (KAAS_DATA_DIR): the existing volume's brokers, topics and transactions are not here",
                path.display()
            );
        }
        let dynamic = configs::DynamicState::load(&volume, &config)?;
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
        // Peers still opening the volume (starting like this one) keep what they led,
        // and are assigned nothing until they serve.
        let opening_at_start: Vec<i32> = leases
            .iter()
            .filter(|l| l.is_opening() && live_at_start.contains_key(&l.broker_id))
            .map(|l| l.broker_id)
            .collect();
        for id in &opening_at_start {
            live_at_start.remove(id);
        }
        let timeout = config.broker_session_timeout_ms;
        let gate = take_over_gate(
            config.broker_id,
            &live_at_start,
            &opening_at_start,
            |id| lease_unchanged_since_seen(&volume, &lease_tracker, id),
            |id| lease_confirmed_dead(&volume, &lease_tracker, id, timeout),
        );
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
        // Each partition led elsewhere is tried once more by the first volume sync,
        // which keeps trying those whose owner.json names a leadership of this broker
        // id that did not let go (an earlier incarnation's, whose lock was still held).
        let revisit = registry.topics.values().flat_map(|t| elsewhere(t)).collect();
        info!(
            topics = registry.topics.len(),
            broken = registry.broken.len(),
            "volume opened"
        );
        let volume_for_ids = volume.clone();
        let config_broker_id = config.broker_id;
        Ok(Cluster {
            config,
            volume,
            cluster_id,
            advertised,
            registry: RwLock::new(registry),
            admin_lock: tokio::sync::Mutex::new(()),
            appended: watch::channel(0).0,
            topic_changes: std::sync::atomic::AtomicU64::new(0),
            defaults_pending: std::sync::atomic::AtomicBool::new(false),
            fence_doorbell: tokio::sync::Notify::new(),
            lease_doorbell: tokio::sync::Notify::new(),
            sync_doorbell: tokio::sync::Notify::new(),
            handed_over: std::sync::atomic::AtomicU64::new(0),
            producer_ids: Mutex::new(ProducerIdAllocator::new(volume_for_ids, config_broker_id)),
            live_brokers: RwLock::new(live_at_start),
            opening_brokers: RwLock::new(opening_at_start),
            live_generation: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1)),
            lease_renewed_at: Mutex::new(None),
            lease_tracker: Arc::new(Mutex::new(lease_tracker)),
            sync_rounds: std::sync::atomic::AtomicU64::new(1),
            revisit: Mutex::new(revisit),
            take_over_attempts: Default::default(),
            deposed_watch: Mutex::new(DeposedWatch::default()),
            leadership_rechecks: Default::default(),
            foreign_owners: Mutex::new(Default::default()),
            topic_files: Mutex::new(Default::default()),
            stepdowns: std::sync::atomic::AtomicU64::new(0),
            coordinating: std::sync::atomic::AtomicBool::new(true),
            dynamic: RwLock::new(dynamic),
        })
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
        // Peers still opening the volume will lead their share too.
        let live = (self.live_brokers().len() + self.opening_brokers().len()).max(1) as i64;
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
        if self.adopt_from_volume(name)? {
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
            // Served from the next volume sync if it cannot be read now.
            if let Err(e) = self.adopt_from_volume(name) {
                warn!(topic = name, error = %e, "a topic created by another broker could not be read yet");
            }
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        let topic = Arc::new(topic);
        let mut reg = self.registry_mut();
        reg.by_id.insert(topic.meta.topic_id, name.to_string());
        reg.topics.insert(name.to_string(), topic.clone());
        Ok(topic)
    }

    /// Loads a topic another broker created into the registry, if its file exists.
    /// A file that exists but cannot be read (damaged, of a newer format, an I/O
    /// error) is an error, never "no topic": a create over it would open the
    /// partitions under a fresh id and clear what it took for another topic's files,
    /// the unreadable topic's records.
    fn adopt_from_volume(&self, name: &str) -> Result<bool, TopicError> {
        let path = self.volume.topic_file(name);
        let meta = match TopicMeta::read(&path) {
            Ok(meta) => meta,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(TopicError::Broken(name.to_string(), e.to_string())),
        };
        let topic = Arc::new(self.open_topic_here(meta));
        let mut reg = self.registry_mut();
        reg.by_id.insert(topic.meta.topic_id, name.to_string());
        reg.topics.insert(name.to_string(), topic);
        Ok(true)
    }

    /// Deletes the topic: `on_deleted` first (`Broker::delete_topic` drops the groups'
    /// committed offsets of it there), then the topic's file, durably, then the
    /// partition directories this broker may remove. All under the admin lock, so no
    /// topic of the same name is created here meanwhile; the file's removal under
    /// the volume's topic-files lock, which every rewriter of a topic file takes, so
    /// none writes back a file it read before the removal (the offsets are dropped
    /// before the lock is taken: it is not held across the groups' locks). Returns the
    /// id of the topic whose file was removed. `id`: asked for by topic id
    /// — only a file of that id is removed (this broker may not have seen yet that
    /// the topic was deleted and created again through another broker:
    /// `a_stale_delete_by_id_leaves_a_topic_created_again_elsewhere`).
    ///
    /// The order is what a power cut at any point needs. The offsets go before the
    /// topic file: once its removal is durable nothing would drop them any more, and a
    /// topic created again under the name would inherit them
    /// (`test_a_crash_right_after_a_topics_file_is_removed_leaves_no_offsets_of_it`).
    /// The answer waits for the file's removal to be durable
    /// (`test_a_deleted_topic_stays_deleted_after_a_power_cut`). A failure before the
    /// file is removed leaves the topic as it was (offsets may be gone), and is the
    /// answer; a failed sync after it, too, the topic being gone for every reader.
    pub async fn delete_topic(
        &self,
        name: &str,
        id: Option<Uuid>,
        on_deleted: &(dyn Fn(&str) -> Result<(), VolumeError> + Sync),
    ) -> Result<Uuid, TopicError> {
        let _admin = self.admin_lock.lock().await;
        let topic = {
            let mut reg = self.registry_mut();
            let known = reg
                .topics
                .get(name)
                .map(|t| t.meta.topic_id)
                .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
            if let Some(id) = id.filter(|id| *id != known) {
                return Err(TopicError::UnknownId(id));
            }
            let topic = reg.topics.remove(name).expect("looked up under the same guard");
            reg.by_id.remove(&topic.meta.topic_id);
            topic
        };
        let path = self.volume.topic_file(name);
        // The file as it is now: the topic's (or, by name, whatever topic has the name
        // now, this broker's copy being stale); gone or replaced, nothing is done.
        let on_volume = || -> Result<Uuid, TopicError> {
            match TopicMeta::read(&path) {
                Ok(on_disk) if id.is_some() && on_disk.topic_id != topic.meta.topic_id => {
                    Err(TopicError::UnknownId(topic.meta.topic_id))
                }
                Ok(on_disk) => Ok(on_disk.topic_id),
                // Deleted through another broker meanwhile: the volume sync lets it go here.
                Err(e) if e.is_not_found() => Err(match id {
                    Some(id) => TopicError::UnknownId(id),
                    None => TopicError::Unknown(name.to_string()),
                }),
                Err(e) => Err(e.into()),
            }
        };
        let removed = crate::blocking::off_worker(|| {
            // The lock first: a removal refused after the groups' offsets were dropped
            // (the lock held elsewhere past its wait) left the topic with its readers'
            // offsets gone (`a_delete_refused_for_the_topic_files_lock_keeps_the_offsets`).
            // Every rewriter of the file takes it, so the file checked is the one
            // removed; the groups' locks are taken in turn under it.
            let _lock = self.lock_topic_files()?;
            let removed_id = on_volume()?;
            on_deleted(name)?;
            std::fs::remove_file(&path).map_err(|e| VolumeError::io(&path, e))?;
            let topics = self.volume.topics_dir();
            Ok((
                removed_id,
                kaas_core::fsutil::sync_dir(&topics).map_err(|e| VolumeError::io(&topics, e)),
            ))
        });
        let (removed_id, synced) = match removed {
            Ok(removed) => removed,
            Err(e) => {
                // Still there (or gone through another broker, which the volume sync
                // handles): the topic goes on here as before.
                let mut reg = self.registry_mut();
                reg.by_id.insert(topic.meta.topic_id, name.to_string());
                reg.topics.insert(name.to_string(), topic);
                return Err(e);
            }
        };
        crate::blocking::off_worker(|| {
            let synced = synced.and_then(|()| {
                kaas_core::failpoint::check(kaas_core::failpoint::TOPIC_FILE_REMOVED)
                    .map_err(|e| VolumeError::io(&path, e))
            });
            self.remove_partition_dirs(&topic);
            synced
        })?;
        Ok(removed_id)
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
                // Held here: retired under its lock first, so a write that looked it up
                // before the delete (a produce, a roll that creates its new segment by
                // path) is over, in this directory, before it is cleared, and none comes
                // after — nothing of it reaches a directory created again under the name
                // (`test_a_write_in_flight_when_its_topic_is_deleted_never_lands_in_a_topic_created_again`).
                // And removed only while this broker still leads it, under its gate
                // (cluster.md, rule 1): a leader frozen meanwhile, never told of a
                // take-over, may find its topic gone because the topic was created
                // again and the new one's partition taken here, whose files are the
                // successor's.
                Ok(partition) => {
                    partition.retire(&self.volume, self.config.broker_id, "its topic was deleted", &|| false);
                    match partition.while_led(|| ownership::remove_deleted_partition_dir(&self.volume, &dir)) {
                        Ok(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => {
                            warn!(dir = %dir.display(), error = %e, "could not remove partition directory of deleted topic")
                        }
                        Ok(_) | Err(DurableError::Deposed { .. }) => {}
                        Err(e) => {
                            warn!(dir = %dir.display(), error = %e, "partition directory of deleted topic left in place: this broker's leadership could not be confirmed")
                        }
                    }
                    continue;
                }
                // Led elsewhere, or broken here (its `owner.json` unreadable when this
                // broker opened the topic: another broker's partition stays so here):
                // removed only under its lock and while its `owner.json` is this
                // topic's. A broken one was removed by path, with neither: the topic
                // of the same name created again meanwhile lost its partition,
                // acknowledged records with it
                // (`a_broken_partition_of_a_deleted_topic_never_removes_the_directory_a_topic_created_again_took`).
                Err(_) => match PartitionOwner::lock(&self.volume, name, p as i32) {
                    Ok(lock) => {
                        match PartitionOwner::read(&PartitionOwner::path(&self.volume, name, p as i32)) {
                            Ok(o) if o.topic_id != Some(topic.meta.topic_id) => continue,
                            // Unreadable as JSON: whose it is cannot be told. Removed
                            // only while no topic of the name is on the volume — a
                            // creator opens its partitions under this lock, so none
                            // can have written here meanwhile.
                            Err(VolumeError::Parse { .. } | VolumeError::Invalid { .. })
                                if TopicMeta::read(&self.volume.topic_file(name)).is_err_and(|e| e.is_not_found()) => {}
                            Err(e) if !e.is_not_found() => continue,
                            _ => {}
                        }
                        Some(lock)
                    }
                    // Held: its holder removes it when it sees the topic gone.
                    Err(_) => continue,
                },
            };
            if let Err(e) = ownership::remove_deleted_partition_dir(&self.volume, &dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    warn!(dir = %dir.display(), error = %e, "could not remove partition directory of deleted topic");
                }
            }
        }
    }

    /// Removes the partition directories (with a partition's lock files) that no topic
    /// on the volume names — a delete
    /// cut by a crash between the removal of the topic's file and of its directories,
    /// a holder that died before its sync saw the topic gone, a topic created again
    /// with fewer partitions. Nothing else ever looked for them: a deleted topic's
    /// records stayed on the volume, readable with `kaasctl log dump`, until a topic
    /// of the same name came. Each is removed under its `owner.lock` (one held is
    /// left to its holder) after its topic is read again there — a topic or a
    /// partition created meanwhile takes that lock before it writes a file there —
    /// and only once untouched for [`ORPHAN_AGE`] (a creator makes the directory a
    /// moment before it takes the lock). Run by the volume sync at its first round and
    /// every [`SWEEP_ROUNDS`] (blocking file work; each topic file read once, and again
    /// under the lock); returns how many were removed.
    pub fn sweep_orphan_partition_dirs(&self) -> usize {
        let entries = match std::fs::read_dir(self.volume.root()) {
            Ok(entries) => entries,
            Err(e) => {
                warn!(error = %e, "cannot list the volume for partition directories of deleted topics");
                return 0;
            }
        };
        // Some(true): a topic of the volume names it; None: cannot tell.
        let named = |topic: &str, index: i32| match TopicMeta::read(&self.volume.topic_file(topic)) {
            Ok(meta) => Some(index < meta.partitions),
            Err(e) if e.is_not_found() => Some(false),
            Err(_) => None,
        };
        let mut partitions_of: std::collections::HashMap<String, Option<i32>> = Default::default();
        let mut removed = 0;
        for entry in entries.flatten() {
            let dir = entry.path();
            let Some((topic, index)) = entry.file_name().to_str().and_then(|n| {
                let (topic, index) = n.rsplit_once('-')?;
                Some((topic.to_string(), index.parse::<i32>().ok()?))
            }) else {
                continue;
            };
            // Only what a partition leaves (its lock files): a directory of the same
            // shape put there by anything else is not this broker's to remove.
            let a_partitions = || ["owner.lock", "owner.json"].iter().any(|f| dir.join(f).exists());
            if index < 0
                || topic.starts_with("__")
                || !kaas_core::layout::valid_topic_name(&topic)
                || !entry.file_type().is_ok_and(|t| t.is_dir())
                || !a_partitions()
            {
                continue;
            }
            // Read once per topic name here (a topic of N partitions has N
            // directories); again under the lock below.
            let count = *partitions_of.entry(topic.clone()).or_insert_with(|| {
                match TopicMeta::read(&self.volume.topic_file(&topic)) {
                    Ok(meta) => Some(meta.partitions),
                    Err(e) if e.is_not_found() => Some(0),
                    Err(_) => None,
                }
            });
            if count.is_none_or(|count| index < count) {
                continue;
            }
            if !untouched_for_orphan_age(&dir) {
                continue;
            }
            let Ok(_lock) = PartitionOwner::lock(&self.volume, &topic, index) else {
                continue;
            };
            if named(&topic, index) != Some(false) {
                continue;
            }
            match ownership::remove_deleted_partition_dir(&self.volume, &dir) {
                Ok(()) => {
                    removed += 1;
                    info!(dir = %dir.display(), "removed the directory of a partition no topic names (a delete cut short)");
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(dir = %dir.display(), error = %e, "could not remove the directory of a partition no topic names")
                }
            }
        }
        removed + self.sweep_deleted_dirs()
    }

    /// Removes what a crash left in [`kaas_core::layout::Volume::deleted_dir`]: a
    /// deleted partition's directory renamed there whose removal was cut short. Nobody
    /// opens anything there; one renamed there less than [`ORPHAN_AGE`] ago (its
    /// remover dates it as it renames it) is left to its remover.
    fn sweep_deleted_dirs(&self) -> usize {
        let deleted = self.volume.deleted_dir();
        let entries = match std::fs::read_dir(&deleted) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
            Err(e) => {
                warn!(dir = %deleted.display(), error = %e, "cannot list the directories of deleted partitions");
                return 0;
            }
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if !untouched_for_orphan_age(&path) {
                continue;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    removed += 1;
                    info!(dir = %path.display(), "removed a deleted partition's directory whose removal was cut short");
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => warn!(dir = %path.display(), error = %e, "could not remove a deleted partition's directory"),
            }
        }
        if removed > 0 {
            if let Err(e) = kaas_core::fsutil::sync_dir(&deleted) {
                warn!(dir = %deleted.display(), error = %e, "cannot make the removal of deleted partitions' directories durable");
            }
        }
        removed
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
            let _lock = self.lock_topic_files()?;
            let mut meta = match TopicMeta::read(&self.volume.topic_file(name)) {
                Ok(on_disk) if on_disk.topic_id == old.meta.topic_id && on_disk.partitions == old.meta.partitions => {
                    on_disk
                }
                Ok(_) => return Err(TopicError::ChangedElsewhere(name.to_string())),
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

    /// `topic-files.lock`, which every rewriter of a topic file takes, waited for at
    /// most [`kaas_core::error::STATE_FILE_LOCK_WAIT`]: its waiter holds this
    /// broker's admin lock, which the volume sync takes too, so a holder paused (a
    /// frozen VM, a dead NFS client's lock) stalled this broker's syncs — and the
    /// take-over of the paused broker's partitions — for as long as it stayed
    /// paused (`a_topic_files_lock_held_elsewhere_stalls_nothing_for_long`). Busy
    /// after the wait: NOT_CONTROLLER, which Java's admin client retries (after a
    /// metadata refresh) and which no client takes for "done" (REQUEST_TIMED_OUT is,
    /// to librdkafka with `operation_timeout` 0).
    pub(crate) fn lock_topic_files(&self) -> Result<std::fs::File, VolumeError> {
        let path = self.volume.topic_files_lock();
        let wait = kaas_core::error::STATE_FILE_LOCK_WAIT;
        kaas_core::fsutil::lock_exclusive_within(&path, wait)
            .map_err(|e| VolumeError::io(&path, e))?
            .ok_or_else(|| VolumeError::Busy {
                path: path.clone(),
                waited_ms: wait.as_millis() as u64,
            })
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

    /// Wakes the long polls: what readers of `p` get may have changed (None: the
    /// topics did). The change is counted before the wake-up, so a poll that marks
    /// the wake-up seen and then reads the counts never misses it.
    pub(crate) fn wake_readers(&self, p: Option<&Partition>) {
        match p {
            Some(p) => p.note_reader_change(),
            None => {
                self.topic_changes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// How many times the topics changed for readers ([`Self::wake_readers`]).
    pub(crate) fn topic_changes(&self) -> u64 {
        self.topic_changes.load(std::sync::atomic::Ordering::SeqCst)
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
            self.retain(&p, now);
        }
    }

    /// Retention of one partition: the segments past `retention.ms` /
    /// `retention.bytes`, and those below a log start DeleteRecords moved. A partition
    /// being cleaned is left alone: deleting a segment under a pass dropped the pass;
    /// the cleaner calls this as its pass ends (its mark let go), so passes back to
    /// back do not put retention off (as Apache's cleaner thread deletes after each
    /// pass).
    pub(crate) fn retain(&self, p: &Partition, now: i64) {
        // Only while owner.json, read under the partition's gate, names this
        // leadership: a broker frozen with its clock deletes nothing in its
        // successor's files (docs/cluster.md, safety rule 1). The partition's
        // state first, then the gate, as every holder of both takes them (a roll,
        // the cleaner's swap, a cut back): a roll holding the state while retention
        // held the gate and waited for the state found the gate busy and failed.
        let Some(mut state) = p.writable() else {
            return;
        };
        if p.being_cleaned() {
            // The cleaner runs it as its pass ends; deleting now would drop the pass
            // (every pass rewrites from the log start).
            debug!(topic = %p.topic, partition = p.index, "retention waits for the cleaning pass under way");
            return;
        }
        // The high watermark before the deletion: it only grows, so a segment
        // deleted below it holds no record a reader has not been allowed to read.
        let high_watermark = p.confirmed_end();
        match p.while_led(|| state.enforce_retention(now, high_watermark)) {
            Ok(Ok(deleted)) if !deleted.is_empty() => {
                info!(topic = %p.topic, partition = p.index, segments = ?deleted, "retention deleted segments")
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                error!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
            }
            Err(e) => {
                warn!(topic = %p.topic, partition = p.index, error = %e, "retention deleted nothing: this broker's leadership is not confirmed")
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
