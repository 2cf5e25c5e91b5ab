//! Config names, types, defaults and validation (docs/configuration.md#topic-configs):
//! the topic configs a topic may override, the broker-level config each one falls
//! back to (its synonym, as Apache names it), and the dynamic broker configs that
//! IncrementalAlterConfigs / AlterConfigs store on the volume
//! (`__cluster/broker-configs.json`) for every broker to apply.

use crate::error::{read_versioned_json_or, update_locked_json};
use crate::layout::Volume;
use crate::log::LogConfig;
use crate::VolumeError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A config's type as DescribeConfigs v3+ reports it (Apache's `ConfigType` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Long,
    Double,
    List,
}

impl ConfigType {
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }
}

/// One topic config: its name, the broker config it falls back to, its type and
/// Apache's default.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    pub name: &'static str,
    /// The broker-level default (`log.*`), settable statically (flags) or dynamically.
    pub broker_name: &'static str,
    pub ty: ConfigType,
    pub default: &'static str,
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    broker_name: &'static str,
    ty: ConfigType,
    default: &'static str,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        broker_name,
        ty,
        default,
        doc,
    }
}

/// Every topic config kaas knows, in name order.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        "log.cleanup.policy",
        ConfigType::List,
        "delete",
        "delete (retention deletes old segments), compact (the log cleaner keeps the latest record per key), or both",
    ),
    def(
        "compression.type",
        "compression.type",
        ConfigType::String,
        "producer",
        "recorded and reported; batches are always stored as the producer compressed them",
    ),
    def(
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        ConfigType::Long,
        "86400000",
        "how long tombstones and transaction markers stay in a compacted log after cleaning reached them",
    ),
    def(
        "index.interval.bytes",
        "log.index.interval.bytes",
        ConfigType::Int,
        "4096",
        "bytes of log between two offset-index entries",
    ),
    def(
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        ConfigType::Long,
        "9223372036854775807",
        "a record older than this is cleaned whatever the dirty ratio",
    ),
    def(
        "max.message.bytes",
        "message.max.bytes",
        ConfigType::Int,
        "1048588",
        "largest record batch accepted",
    ),
    def(
        "message.timestamp.type",
        "log.message.timestamp.type",
        ConfigType::String,
        "CreateTime",
        "only CreateTime: timestamps are the producer's",
    ),
    def(
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        ConfigType::Double,
        "0.5",
        "clean a compacted log once this share of it has not been cleaned yet",
    ),
    def(
        "min.compaction.lag.ms",
        "log.cleaner.min.compaction.lag.ms",
        ConfigType::Long,
        "0",
        "a record stays uncompacted at least this long",
    ),
    def(
        "min.insync.replicas",
        "min.insync.replicas",
        ConfigType::Int,
        "1",
        "accepted for compatibility: the one copy is the shared volume",
    ),
    def(
        "retention.bytes",
        "log.retention.bytes",
        ConfigType::Long,
        "-1",
        "delete the oldest segments while the partition is larger (-1: no limit)",
    ),
    def(
        "retention.ms",
        "log.retention.ms",
        ConfigType::Long,
        "604800000",
        "delete segments whose newest record is older (-1: keep forever)",
    ),
    def(
        "segment.bytes",
        "log.segment.bytes",
        ConfigType::Int,
        "1073741824",
        "roll the active segment past this size",
    ),
    def(
        "segment.ms",
        "log.roll.ms",
        ConfigType::Long,
        "604800000",
        "roll the active segment after this long",
    ),
];

pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The topic config a broker-level name is the default of.
pub fn topic_config_for_broker_name(broker_name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.broker_name == broker_name)
}

/// Applies topic-level overrides onto defaults, checking every value; the first bad
/// or unknown key is the error (a message naming it and what is expected).
pub fn log_config_for(defaults: &LogConfig, configs: &BTreeMap<String, String>) -> Result<LogConfig, String> {
    let mut c = defaults.clone();
    for (key, value) in configs {
        apply_one(&mut c, key, value)?;
    }
    if c.min_compaction_lag_ms > c.max_compaction_lag_ms {
        return Err(format!(
            "min.compaction.lag.ms={} is greater than max.compaction.lag.ms={}",
            c.min_compaction_lag_ms, c.max_compaction_lag_ms
        ));
    }
    Ok(c)
}

fn apply_one(c: &mut LogConfig, key: &str, value: &str) -> Result<(), String> {
    let num = |range: std::ops::RangeInclusive<i64>| {
        let v = value
            .trim()
            .parse::<i64>()
            .map_err(|_| format!("{key}={value:?} is not a number"))?;
        if !range.contains(&v) {
            let hi = if *range.end() == i64::MAX {
                String::new()
            } else {
                format!(" to {}", range.end())
            };
            let from = if hi.is_empty() { " at least" } else { "" };
            return Err(format!("{key}={value:?}: expected{from} {}{hi}", range.start()));
        }
        Ok(v)
    };
    let int_max = i32::MAX as i64;
    match key {
        // An int in Kafka; index positions are 32-bit here, so never past 2 GiB.
        "segment.bytes" => c.segment_bytes = num(14..=int_max)? as u64,
        "segment.ms" => c.segment_ms = num(1..=i64::MAX)?,
        "retention.ms" => c.retention_ms = num(-1..=i64::MAX)?,
        "retention.bytes" => c.retention_bytes = num(-1..=i64::MAX)?,
        "max.message.bytes" => c.max_message_bytes = num(0..=int_max)? as usize,
        "index.interval.bytes" => c.index_interval_bytes = num(0..=int_max)?.max(1) as u32,
        "delete.retention.ms" => c.delete_retention_ms = num(0..=i64::MAX)?,
        "min.compaction.lag.ms" => c.min_compaction_lag_ms = num(0..=i64::MAX)?,
        "max.compaction.lag.ms" => c.max_compaction_lag_ms = num(1..=i64::MAX)?,
        "min.insync.replicas" => {
            num(1..=int_max)?;
        }
        "min.cleanable.dirty.ratio" => {
            let v = value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..=1.0).contains(v))
                .ok_or_else(|| format!("{key}={value:?}: expected a number from 0 to 1"))?;
            c.min_cleanable_dirty_ratio = v;
        }
        "message.timestamp.type" => {
            if value != "CreateTime" {
                return Err(format!("{key}={value:?}: only CreateTime is supported"));
            }
        }
        "compression.type" => {
            if !["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"].contains(&value) {
                return Err(format!(
                    "{key}={value:?}: expected producer, uncompressed, gzip, snappy, lz4 or zstd"
                ));
            }
        }
        "cleanup.policy" => {
            let policies = list_items(value);
            if policies.is_empty() || policies.iter().any(|p| *p != "delete" && *p != "compact") {
                return Err(format!("{key}={value:?}: expected delete and/or compact"));
            }
            c.cleanup_delete = policies.contains(&"delete");
            c.compact = policies.contains(&"compact");
        }
        other => return Err(format!("unknown topic config {other:?}")),
    }
    Ok(())
}

/// The items of a list-typed value (comma separated, blanks ignored).
pub fn list_items(value: &str) -> Vec<&str> {
    value.split(',').map(str::trim).filter(|p| !p.is_empty()).collect()
}

/// The log config of a topic as stored on the volume, which may predate today's
/// validation: each key is applied on its own, a `segment.bytes` outside today's range
/// is clamped into it, and any other key that does not apply is left out (the rest
/// still apply). Returns the config and what was clamped or left out.
pub fn stored_log_config(defaults: &LogConfig, configs: &BTreeMap<String, String>) -> (LogConfig, Vec<String>) {
    // As a whole first: keys checked together (min and max compaction lag) must not be
    // judged one at a time against defaults they were set to override.
    if let Ok(c) = log_config_for(defaults, configs) {
        return (c, Vec::new());
    }
    let mut c = defaults.clone();
    let mut problems = Vec::new();
    for (key, value) in configs {
        let one = BTreeMap::from([(key.clone(), value.clone())]);
        match log_config_for(&c, &one) {
            Ok(next) => c = next,
            Err(e) => match (key.as_str(), value.parse::<i64>()) {
                ("segment.bytes", Ok(v)) => {
                    c.segment_bytes = v.clamp(14, i32::MAX as i64) as u64;
                    problems.push(format!("{e}; using {}", c.segment_bytes));
                }
                // A retention setting that does not apply must not let the defaults
                // delete what it meant to keep: nothing is deleted by time or size.
                ("retention.ms" | "retention.bytes" | "cleanup.policy", _) => {
                    c.cleanup_delete = false;
                    problems.push(format!("{e}; retention is off for this topic until it is fixed"));
                }
                _ => problems.push(format!("{e}; ignored")),
            },
        }
    }
    (c, problems)
}

/// Broker-level defaults named as brokers name them (`log.retention.ms`), applied onto
/// `base` as the topic configs they are the defaults of. Keys that are not topic
/// defaults are skipped; values that do not apply are returned as problems.
pub fn apply_broker_defaults(base: &LogConfig, broker_configs: &BTreeMap<String, String>) -> (LogConfig, Vec<String>) {
    stored_log_config(base, &as_topic_configs(broker_configs))
}

/// Broker-level log defaults renamed to the topic configs they are the defaults of.
pub fn as_topic_configs(broker_configs: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    broker_configs
        .iter()
        .filter_map(|(k, v)| topic_config_for_broker_name(k).map(|d| (d.name.to_string(), v.clone())))
        .collect()
}

/// Checks a dynamic broker config (`name` as brokers name it) before it is stored.
/// Only the broker-level defaults of topic configs may be changed at run time.
pub fn validate_dynamic_broker_config(name: &str, value: &str) -> Result<(), String> {
    match topic_config_for_broker_name(name) {
        Some(d) => log_config_for(
            &LogConfig::default(),
            &BTreeMap::from([(d.name.to_string(), value.to_string())]),
        )
        .map(|_| ())
        .map_err(|e| e.replacen(d.name, name, 1)),
        None => Err(format!(
            "{name} cannot be changed at run time (dynamic broker configs are the log defaults: {})",
            TOPIC_CONFIGS
                .iter()
                .map(|d| d.broker_name)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub const BROKER_CONFIGS_FORMAT_VERSION: u32 = 1;

/// `__cluster/broker-configs.json`: dynamic broker configs, cluster-wide defaults and
/// per broker id, as AlterConfigs / IncrementalAlterConfigs on a BROKER resource set
/// them (resource name "" for the cluster, a broker id for one broker).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicBrokerConfigs {
    pub version: u32,
    #[serde(default)]
    pub cluster: BTreeMap<String, String>,
    /// Broker id (decimal) -> its own overrides, which win over `cluster`.
    #[serde(default)]
    pub brokers: BTreeMap<String, BTreeMap<String, String>>,
}

crate::versioned!(DynamicBrokerConfigs);

impl DynamicBrokerConfigs {
    /// The configs on the volume; none stored is empty.
    pub fn read(volume: &Volume) -> Result<DynamicBrokerConfigs, VolumeError> {
        read_versioned_json_or(
            &volume.broker_configs_file(),
            "dynamic broker configs",
            BROKER_CONFIGS_FORMAT_VERSION,
            || DynamicBrokerConfigs {
                version: BROKER_CONFIGS_FORMAT_VERSION,
                ..Default::default()
            },
        )
    }

    /// Read-modify-write under `broker-configs.lock` (every writer, broker or kaasctl,
    /// takes it): `f` changes the configs or returns an error, in which case nothing is
    /// written. The file is replaced atomically.
    pub fn update<E: From<VolumeError>>(
        volume: &Volume,
        f: impl FnOnce(&mut DynamicBrokerConfigs) -> Result<(), E>,
    ) -> Result<DynamicBrokerConfigs, E> {
        update_locked_json(volume, &volume.broker_configs_file(), Self::read, f, |c| {
            c.brokers.retain(|_, c| !c.is_empty())
        })
    }

    /// The overrides of `resource` ("" for the cluster, else a broker id).
    pub fn of(&self, resource: &str) -> Option<&BTreeMap<String, String>> {
        if resource.is_empty() {
            Some(&self.cluster)
        } else {
            self.brokers.get(resource)
        }
    }

    /// The overrides of `resource`, to change.
    pub fn of_mut(&mut self, resource: &str) -> &mut BTreeMap<String, String> {
        if resource.is_empty() {
            &mut self.cluster
        } else {
            self.brokers.entry(resource.to_string()).or_default()
        }
    }

    /// The log defaults broker `broker_id` applies: `base` (its static config), then
    /// the cluster-wide dynamic defaults, then its own. Returns what did not apply.
    pub fn log_defaults(&self, base: &LogConfig, broker_id: i32) -> (LogConfig, Vec<String>) {
        let (c, mut problems) = apply_broker_defaults(base, &self.cluster);
        match self.brokers.get(&broker_id.to_string()) {
            Some(own) => {
                let (c, more) = apply_broker_defaults(&c, own);
                problems.extend(more);
                (c, problems)
            }
            None => (c, problems),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_topic_config_has_a_default_that_validates_and_a_broker_synonym() {
        for d in TOPIC_CONFIGS {
            let one = BTreeMap::from([(d.name.to_string(), d.default.to_string())]);
            log_config_for(&LogConfig::default(), &one).unwrap_or_else(|e| panic!("{}: {e}", d.name));
            validate_dynamic_broker_config(d.broker_name, d.default).unwrap();
            assert_eq!(
                topic_config_for_broker_name(d.broker_name).map(|x| x.name),
                Some(d.name)
            );
        }
        let names: Vec<&str> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        // The built-in defaults are Apache's.
        let all: BTreeMap<String, String> = TOPIC_CONFIGS
            .iter()
            .map(|d| (d.name.to_string(), d.default.to_string()))
            .collect();
        assert_eq!(
            log_config_for(&LogConfig::default(), &all).unwrap(),
            LogConfig::default()
        );
    }

    #[test]
    fn bad_values_are_refused_with_the_key_and_what_is_expected() {
        for (key, value, words) in [
            ("cleanup.policy", "shred", "expected delete and/or compact"),
            ("cleanup.policy", "", "expected delete and/or compact"),
            ("min.cleanable.dirty.ratio", "1.5", "from 0 to 1"),
            ("min.cleanable.dirty.ratio", "NaN", "from 0 to 1"),
            ("delete.retention.ms", "-1", "expected at least 0"),
            ("segment.ms", "0", "expected at least 1"),
            ("max.compaction.lag.ms", "0", "at least 1"),
            ("retention.ms", "-2", "at least -1"),
            ("compression.type", "brotli", "expected producer"),
            ("retention.bytes", "lots", "not a number"),
            ("flush.ms", "1", "unknown topic config"),
        ] {
            let e = log_config_for(
                &LogConfig::default(),
                &BTreeMap::from([(key.to_string(), value.to_string())]),
            )
            .unwrap_err();
            assert!(e.contains(words) && (e.contains(key)), "{key}={value}: {e}");
        }
        let e = log_config_for(
            &LogConfig::default(),
            &BTreeMap::from([
                ("min.compaction.lag.ms".to_string(), "10".to_string()),
                ("max.compaction.lag.ms".to_string(), "5".to_string()),
            ]),
        )
        .unwrap_err();
        assert!(e.contains("greater than max.compaction.lag.ms"), "{e}");
        let c = log_config_for(
            &LogConfig::default(),
            &BTreeMap::from([("cleanup.policy".to_string(), "compact, delete".to_string())]),
        )
        .unwrap();
        assert!(c.compact && c.cleanup_delete);
        let e = validate_dynamic_broker_config("broker.id", "3").unwrap_err();
        assert!(e.contains("cannot be changed at run time"), "{e}");
        let e = validate_dynamic_broker_config("log.retention.ms", "soon").unwrap_err();
        assert!(e.starts_with("log.retention.ms="), "{e}");
    }

    #[test]
    fn stored_overrides_checked_together_apply_together() {
        // Over a default min.compaction.lag.ms of 1 h, a topic setting max to 1 min and
        // min to 0 is valid as a whole, though max alone would not be.
        let defaults = LogConfig {
            min_compaction_lag_ms: 3_600_000,
            ..LogConfig::default()
        };
        let stored = BTreeMap::from([
            ("max.compaction.lag.ms".to_string(), "60000".to_string()),
            ("min.compaction.lag.ms".to_string(), "0".to_string()),
        ]);
        let (c, problems) = stored_log_config(&defaults, &stored);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!((c.min_compaction_lag_ms, c.max_compaction_lag_ms), (0, 60_000));
    }

    #[test]
    fn dynamic_defaults_apply_cluster_then_broker_and_survive_a_reread() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        assert_eq!(DynamicBrokerConfigs::read(&volume).unwrap().cluster.len(), 0);
        DynamicBrokerConfigs::update::<VolumeError>(&volume, |c| {
            c.of_mut("").insert("log.retention.ms".into(), "1000".into());
            c.of_mut("").insert("log.segment.bytes".into(), "5000".into());
            c.of_mut("2").insert("log.retention.ms".into(), "2000".into());
            Ok(())
        })
        .unwrap();
        let read = DynamicBrokerConfigs::read(&volume).unwrap();
        let base = LogConfig::default();
        let (one, p1) = read.log_defaults(&base, 1);
        let (two, p2) = read.log_defaults(&base, 2);
        assert!(p1.is_empty() && p2.is_empty());
        assert_eq!((one.retention_ms, one.segment_bytes), (1000, 5000));
        assert_eq!((two.retention_ms, two.segment_bytes), (2000, 5000));
        // A failed change writes nothing; an emptied broker entry is dropped.
        let r = DynamicBrokerConfigs::update::<VolumeError>(&volume, |c| {
            c.cluster.clear();
            Err(VolumeError::Invalid {
                path: "x".into(),
                detail: "no".into(),
            })
        });
        assert!(r.is_err());
        assert_eq!(DynamicBrokerConfigs::read(&volume).unwrap(), read);
        let after = DynamicBrokerConfigs::update::<VolumeError>(&volume, |c| {
            c.of_mut("2").clear();
            Ok(())
        })
        .unwrap();
        assert!(after.brokers.is_empty());
        std::fs::write(volume.broker_configs_file(), b"{\"version\":7}").unwrap();
        let e = DynamicBrokerConfigs::read(&volume).unwrap_err().to_string();
        assert!(
            e.contains("broker-configs.json") && e.contains("unknown format version 7"),
            "{e}"
        );
    }
}
