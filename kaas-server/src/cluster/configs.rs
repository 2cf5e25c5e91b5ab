//! Config changes at run time: topic overrides (the topic file) and dynamic broker
//! configs (`__cluster/broker-configs.json`), each a read-modify-write under a lock
//! file every broker takes, applied here at once and by the other brokers at their
//! next volume sync (about a second).

use super::{Cluster, Topic, TopicError};
use kaas_core::configs::{log_config_for, stored_log_config, validate_dynamic_broker_config, DynamicBrokerConfigs};
use kaas_core::fsutil::{file_stamp, FileStamp};
use kaas_core::log::LogConfig;
use kaas_core::topic::TopicMeta;
use kaas_core::VolumeError;
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::{error, info, warn};

/// The dynamic broker configs as last read, and the log defaults they give this broker.
pub(crate) struct DynamicState {
    pub configs: DynamicBrokerConfigs,
    stamp: Option<FileStamp>,
    pub defaults: LogConfig,
}

impl DynamicState {
    /// Reads the dynamic configs at start. An unreadable file stops the broker: its
    /// log defaults (retention above all) would silently be the static ones.
    pub fn load(volume: &kaas_core::Volume, config: &crate::config::Config) -> Result<DynamicState, VolumeError> {
        let path = volume.broker_configs_file();
        let stamp = file_stamp(&path);
        let configs = DynamicBrokerConfigs::read(volume)?;
        let defaults = defaults_from(&configs, config);
        Ok(DynamicState {
            configs,
            stamp,
            defaults,
        })
    }
}

fn defaults_from(configs: &DynamicBrokerConfigs, config: &crate::config::Config) -> LogConfig {
    let (defaults, problems) = configs.log_defaults(&config.default_log_config(), config.broker_id);
    for problem in problems {
        warn!(problem = %problem, "a dynamic broker config stored on the volume does not apply as written");
    }
    defaults
}

/// The change a request makes to a set of overrides: the overrides after it, or why
/// it is refused.
pub type ConfigChange<'a> =
    dyn FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> + Send + 'a;

impl Cluster {
    /// The log defaults of this broker: static flags, then the dynamic cluster-wide
    /// and per-broker configs on the volume.
    pub fn log_defaults(&self) -> LogConfig {
        self.dynamic().defaults.clone()
    }

    /// The dynamic broker configs as this broker last read them.
    pub fn dynamic_configs(&self) -> DynamicBrokerConfigs {
        self.dynamic().configs.clone()
    }

    fn dynamic(&self) -> std::sync::RwLockReadGuard<'_, DynamicState> {
        self.dynamic.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads `broker-configs.json` if it changed; true when the log defaults did.
    /// An unreadable file keeps the configs last read (logged).
    pub(super) fn reload_dynamic_configs(&self) -> bool {
        let path = self.volume.broker_configs_file();
        let stamp = file_stamp(&path);
        if stamp.is_some() && stamp == self.dynamic().stamp {
            return false;
        }
        let configs = match DynamicBrokerConfigs::read(&self.volume) {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "cannot read the dynamic broker configs; keeping the ones last read");
                return false;
            }
        };
        let defaults = defaults_from(&configs, &self.config);
        let mut state = self.dynamic.write().unwrap_or_else(|p| p.into_inner());
        let changed = state.defaults != defaults;
        *state = DynamicState {
            configs,
            stamp,
            defaults,
        };
        changed
    }

    /// The log config of a topic over this broker's current defaults (stored values
    /// that no longer validate are clamped or left out, and logged).
    pub(super) fn topic_log_config(&self, meta: &TopicMeta) -> LogConfig {
        let (log_config, problems) = stored_log_config(&self.log_defaults(), &meta.configs);
        for problem in problems {
            warn!(topic = %meta.name, problem = %problem, "a topic config stored on the volume does not apply as written");
        }
        log_config
    }

    /// Serves `topic` with `meta` (new configs) from now on: every partition it leads
    /// here takes the new log config under its lock.
    pub(super) fn reconfigure(&self, topic: &Topic, meta: TopicMeta) -> Arc<Topic> {
        let log_config = self.topic_log_config(&meta);
        for p in topic.partitions.iter().flatten() {
            p.state().log.set_config(log_config.clone());
        }
        let topic = Arc::new(Topic {
            meta,
            log_config,
            partitions: topic.partitions.clone(),
        });
        let mut reg = self.registry_mut();
        if reg
            .topics
            .get(&topic.meta.name)
            .is_some_and(|t| t.meta.topic_id == topic.meta.topic_id)
        {
            reg.topics.insert(topic.meta.name.clone(), topic.clone());
        }
        topic
    }

    /// Every topic over new log defaults.
    fn reconfigure_all(&self) {
        for topic in self.topics() {
            self.reconfigure(&topic, topic.meta.clone());
        }
    }

    /// IncrementalAlterConfigs / AlterConfigs on a topic: `change` maps the topic's
    /// overrides as stored to the new ones, which must validate over this broker's
    /// defaults. With `validate_only`, nothing is written. The topic file is rewritten
    /// under `topic-files.lock` and only if it is still the topic this broker serves.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        change: Box<ConfigChange<'_>>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _admin = self.admin_lock.lock().await;
        let topic = self.topic(name)?;
        crate::blocking::off_worker(|| {
            let _lock = self.lock_topic_files()?;
            let mut meta = match TopicMeta::read(&self.volume.topic_file(name)) {
                Ok(m) if m.topic_id == topic.meta.topic_id => m,
                Ok(_) => return Err(TopicError::Unknown(name.to_string())),
                Err(e) if e.is_not_found() => return Err(TopicError::Unknown(name.to_string())),
                Err(e) => return Err(e.into()),
            };
            let configs = change(&meta.configs).map_err(TopicError::InvalidConfig)?;
            log_config_for(&self.log_defaults(), &configs).map_err(TopicError::InvalidConfig)?;
            if validate_only || configs == meta.configs {
                return Ok(());
            }
            meta.configs = configs;
            meta.write(&self.volume)?;
            info!(topic = name, configs = ?meta.configs, "topic configs changed");
            // The new configs over the topic as this broker serves it: the file may
            // already count partitions another broker added, which this one opens at
            // its next volume sync only while its own view has fewer.
            let mut served = topic.meta.clone();
            served.configs = meta.configs;
            self.reconfigure(&topic, served);
            Ok(())
        })
    }

    /// IncrementalAlterConfigs / AlterConfigs on a broker resource: `resource` is ""
    /// (cluster-wide defaults) or a broker id. Every key must be a dynamic broker
    /// config with a valid value. Applied here at once, by other brokers at their next
    /// volume sync.
    pub async fn alter_broker_configs(
        &self,
        resource: &str,
        change: Box<ConfigChange<'_>>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _admin = self.admin_lock.lock().await;
        let check = |current: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, TopicError> {
            let next = change(current).map_err(TopicError::InvalidConfig)?;
            for (k, v) in &next {
                if current.get(k) != Some(v) {
                    validate_dynamic_broker_config(k, v).map_err(TopicError::InvalidConfig)?;
                }
            }
            // Together, over this broker's static defaults (min.compaction.lag.ms
            // above max.compaction.lag.ms, say, is refused, not stored and ignored).
            log_config_for(
                &self.config.default_log_config(),
                &kaas_core::configs::as_topic_configs(&next),
            )
            .map_err(TopicError::InvalidConfig)?;
            Ok(next)
        };
        crate::blocking::off_worker(|| {
            if validate_only {
                let stored = DynamicBrokerConfigs::read(&self.volume)?;
                check(stored.of(resource).unwrap_or(&BTreeMap::new()))?;
                return Ok(());
            }
            DynamicBrokerConfigs::update(&self.volume, |all| {
                let next = check(all.of(resource).unwrap_or(&BTreeMap::new()))?;
                *all.of_mut(resource) = next;
                Ok::<(), TopicError>(())
            })?;
            info!(
                resource = if resource.is_empty() {
                    "cluster default"
                } else {
                    resource
                },
                "dynamic broker configs changed"
            );
            if self.reload_dynamic_configs() {
                self.reconfigure_all();
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::handlers::test_support::broker;
    use std::collections::BTreeMap;

    /// `topic-files.lock` was waited for without end, under the admin lock the volume
    /// sync takes too: a broker paused while holding it (a frozen VM in the middle of
    /// a CreatePartitions or a config change) stalled every other broker's config
    /// changes and volume syncs — and so the take-over of its partitions — for as
    /// long as it stayed paused. Waited for a bounded time now, then refused with a
    /// retriable error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_topic_files_lock_held_elsewhere_stalls_nothing_for_long() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, BTreeMap::new()).await.unwrap();
        let held = kaas_core::fsutil::lock_exclusive(&kaas_core::Volume::new(dir.path()).topic_files_lock()).unwrap();
        let set = Box::new(|c: &BTreeMap<String, String>| {
            let mut c = c.clone();
            c.insert("retention.ms".into(), "5".into());
            Ok(c)
        }) as Box<super::ConfigChange<'_>>;
        let (b2, b3) = (b.clone(), b.clone());
        let alter = tokio::spawn(async move { b2.alter_topic_configs("t", set, false).await });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let sync = tokio::task::spawn_blocking(move || b3.sync_with_volume());
        let synced = tokio::time::timeout(std::time::Duration::from_secs(15), sync)
            .await
            .is_ok();
        let altered = tokio::time::timeout(std::time::Duration::from_secs(15), alter).await;
        drop(held);
        assert!(synced, "the volume sync waited behind the topic-files lock");
        let code = match altered {
            Ok(Ok(Err(e))) => e.code(),
            other => panic!("the config change waited for good or went through: {other:?}"),
        };
        assert_eq!(code, kafka_protocol::error::ResponseError::NotController.code());
    }

    /// A change of the dynamic broker defaults reached the existing topics of another
    /// broker only at the first sync that saw it: one whose topic listing failed that
    /// round (EMFILE, an NFS hiccup) kept the old defaults for every topic until
    /// restart, while DescribeConfigs showed the new ones. It stays due until a round
    /// has applied it to every topic.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_changed_broker_default_reaches_the_topics_after_a_sync_that_failed() {
        let dir = tempfile::tempdir().unwrap();
        let b0 = broker(dir.path());
        b0.create_topic("t", 1, BTreeMap::new()).await.unwrap();
        let b1 = crate::handlers::test_support::second_broker(dir.path(), "1");
        let sync = |b: &std::sync::Arc<crate::broker::Broker>| {
            let b = b.clone();
            tokio::task::spawn_blocking(move || b.sync_with_volume())
        };
        sync(&b1).await.unwrap();
        let set = Box::new(|c: &BTreeMap<String, String>| {
            let mut c = c.clone();
            c.insert("log.retention.ms".into(), "1234".into());
            Ok(c)
        }) as Box<super::ConfigChange<'_>>;
        b0.alter_broker_configs("", set, false).await.unwrap();
        // b1's next round cannot list the topics.
        let topics = kaas_core::Volume::new(dir.path()).topics_dir();
        let away = topics.with_extension("away");
        std::fs::rename(&topics, &away).unwrap();
        std::fs::write(&topics, b"").unwrap();
        sync(&b1).await.unwrap();
        std::fs::remove_file(&topics).unwrap();
        std::fs::rename(&away, &topics).unwrap();
        // And a topic file that stays unreadable keeps the change due, without
        // reconfiguring the topics already on it at every round.
        std::fs::write(topics.join("bad.json"), b"{").unwrap();
        sync(&b1).await.unwrap();
        assert_eq!(b1.topic("t").unwrap().log_config.retention_ms, 1234);
        let t = b1.topic("t").unwrap();
        sync(&b1).await.unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&t, &b1.topic("t").unwrap()),
            "reconfigured again"
        );
    }

    #[tokio::test]
    async fn a_dynamic_default_reaches_the_running_partitions_and_a_topic_override_wins() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        b.create_topic("t", 1, BTreeMap::new()).await.unwrap();
        let set = |k: &str, v: &str| {
            let (k, v) = (k.to_string(), v.to_string());
            Box::new(move |c: &BTreeMap<String, String>| {
                let mut c = c.clone();
                c.insert(k, v);
                Ok(c)
            }) as Box<super::ConfigChange<'_>>
        };
        b.alter_broker_configs("", set("log.retention.ms", "1234"), false)
            .await
            .unwrap();
        let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
        assert_eq!(p.state().log.config().retention_ms, 1234);
        b.alter_broker_configs("0", set("log.retention.ms", "999"), false)
            .await
            .unwrap();
        assert_eq!(p.state().log.config().retention_ms, 999);
        b.alter_topic_configs("t", set("retention.ms", "5"), false)
            .await
            .unwrap();
        assert_eq!(p.state().log.config().retention_ms, 5);
        assert_eq!(b.topic("t").unwrap().log_config.retention_ms, 5);
        // validate_only changes nothing; a bad value changes nothing either.
        b.alter_topic_configs("t", set("retention.ms", "6"), true)
            .await
            .unwrap();
        assert!(b
            .alter_topic_configs("t", set("retention.ms", "x"), false)
            .await
            .is_err());
        assert_eq!(p.state().log.config().retention_ms, 5);
    }

    /// A config change through a broker that has not yet seen partitions another broker
    /// added: the new count, read with the configs from the topic's file, went into
    /// this broker's view over its old partition list, so its volume sync found nothing
    /// new to open (those partitions had no leader here for good) and a later
    /// CreatePartitions here put partition 3 in the place of partition 1.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_config_change_before_the_sync_leaves_partitions_added_elsewhere_to_the_sync() {
        let dir = tempfile::tempdir().unwrap();
        let b0 = broker(dir.path());
        b0.create_topic("t", 1, BTreeMap::new()).await.unwrap();
        let b1 = crate::handlers::test_support::second_broker(dir.path(), "1");
        b1.create_partitions("t", 3).await.unwrap();
        let set = Box::new(|c: &BTreeMap<String, String>| {
            let mut c = c.clone();
            c.insert("retention.ms".into(), "5".into());
            Ok(c)
        }) as Box<super::ConfigChange<'_>>;
        b0.alter_topic_configs("t", set, false).await.unwrap();
        let b = b0.clone();
        tokio::task::spawn_blocking(move || b.sync_with_volume()).await.unwrap();
        let t = b0.topic("t").unwrap();
        assert_eq!(
            (t.meta.partitions, t.partitions.len()),
            (3, 3),
            "the sync opened the partitions added elsewhere"
        );
        assert_eq!(t.log_config.retention_ms, 5);
        b0.create_partitions("t", 4).await.unwrap();
        let t = b0.topic("t").unwrap();
        for (i, p) in t.partitions.iter().enumerate() {
            let index = match p {
                Ok(p) => p.index,
                Err(_) => continue,
            };
            assert_eq!(index, i as i32, "partition {i} holds partition {index}");
        }
        assert_eq!(t.partitions.len(), 4);
    }
}
