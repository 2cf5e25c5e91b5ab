//! DescribeConfigs (key 32): a topic's configs and a broker's, each value with the
//! layer it comes from (topic override, dynamic per-broker, dynamic cluster-wide,
//! static flag, built-in default) and, when asked, the synonyms below it, under
//! Apache's names and source codes.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::configs::{ConfigType, TOPIC_CONFIGS};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 4;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// One layer a value may come from: (name at that layer, value, source code).
type Synonym = (String, String, i8);

pub struct ConfigEntry {
    pub name: String,
    /// Most specific layer first; the first is the value in force.
    pub synonyms: Vec<Synonym>,
    pub read_only: bool,
    pub ty: ConfigType,
    pub doc: &'static str,
}

/// A refusal: error code and message.
pub type Refusal = (i16, String);

/// Kafka's checks for the config APIs: `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on
/// the topic (TOPIC_AUTHORIZATION_FAILED), or on the cluster for a broker resource
/// (CLUSTER_AUTHORIZATION_FAILED). Other resource types are refused later as unknown.
pub fn refused(broker: &Broker, ctx: &RequestContext, resource_type: i8, name: &str, op: Operation) -> Option<Refusal> {
    let (rt, resource, code) = match resource_type {
        RESOURCE_TOPIC => (ResourceType::Topic, name, ResponseError::TopicAuthorizationFailed),
        RESOURCE_BROKER => (
            ResourceType::Cluster,
            crate::authz::CLUSTER,
            ResponseError::ClusterAuthorizationFailed,
        ),
        _ => return None,
    };
    (!broker.authz.authorize(ctx, op, rt, resource)).then(|| {
        (
            code.code(),
            format!(
                "{} may not {} {rt} {resource}",
                ctx.principal,
                op.name().to_lowercase().replace('_', " ")
            ),
        )
    })
}

/// The layers of a broker-level log default `broker_name` as broker `broker_id` sees
/// them, most specific first (never empty: the default is always there).
pub fn broker_layers(broker: &Broker, broker_name: &str, builtin: &str) -> Vec<Synonym> {
    let dynamic = broker.dynamic_configs();
    let mut layers = Vec::new();
    if let Some(v) = dynamic
        .brokers
        .get(&broker.config.broker_id.to_string())
        .and_then(|c| c.get(broker_name))
    {
        layers.push((broker_name.to_string(), v.clone(), SOURCE_DYNAMIC_BROKER));
    }
    if let Some(v) = dynamic.cluster.get(broker_name) {
        layers.push((broker_name.to_string(), v.clone(), SOURCE_DYNAMIC_DEFAULT_BROKER));
    }
    match broker
        .config
        .static_log_defaults()
        .into_iter()
        .find(|(n, _, _)| *n == broker_name)
    {
        Some((_, v, true)) => {
            layers.push((broker_name.to_string(), v, SOURCE_STATIC_BROKER));
            layers.push((broker_name.to_string(), builtin.to_string(), SOURCE_DEFAULT));
        }
        Some((_, v, false)) => layers.push((broker_name.to_string(), v, SOURCE_DEFAULT)),
        None => layers.push((broker_name.to_string(), builtin.to_string(), SOURCE_DEFAULT)),
    }
    layers
}

/// Every topic config of `topic` with its layers.
pub fn topic_entries(broker: &Broker, overrides: &std::collections::BTreeMap<String, String>) -> Vec<ConfigEntry> {
    TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(d.name) {
                synonyms.push((d.name.to_string(), v.clone(), SOURCE_DYNAMIC_TOPIC));
            }
            synonyms.extend(broker_layers(broker, d.broker_name, d.default));
            ConfigEntry {
                name: d.name.to_string(),
                synonyms,
                read_only: false,
                ty: d.ty,
                doc: d.doc,
            }
        })
        .collect()
}

/// This broker's configs: the log defaults (dynamic) and its other settings (read-only).
fn broker_entries(broker: &Broker) -> Vec<ConfigEntry> {
    let c = &broker.config;
    let mut entries: Vec<ConfigEntry> = TOPIC_CONFIGS
        .iter()
        .map(|d| ConfigEntry {
            name: d.broker_name.to_string(),
            synonyms: broker_layers(broker, d.broker_name, d.default),
            read_only: false,
            ty: d.ty,
            doc: d.doc,
        })
        .collect();
    let fixed: Vec<(&str, &str, String, ConfigType)> = vec![
        (
            "auto.create.topics.enable",
            "auto_create_topics",
            c.auto_create_topics.to_string(),
            ConfigType::Boolean,
        ),
        ("broker.id", "broker_id", c.broker_id.to_string(), ConfigType::Int),
        (
            "connections.max.idle.ms",
            "connections_max_idle_ms",
            c.connections_max_idle_ms.to_string(),
            ConfigType::Long,
        ),
        (
            "fetch.max.bytes",
            "fetch_max_bytes",
            c.fetch_max_bytes.to_string(),
            ConfigType::Int,
        ),
        (
            "group.initial.rebalance.delay.ms",
            "group_initial_rebalance_delay_ms",
            c.group_initial_rebalance_delay_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "group.max.session.timeout.ms",
            "group_max_session_timeout_ms",
            c.group_max_session_timeout_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "group.min.session.timeout.ms",
            "group_min_session_timeout_ms",
            c.group_min_session_timeout_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "log.dirs",
            "data_dir",
            c.data_dir.display().to_string(),
            ConfigType::String,
        ),
        (
            "log.cleaner.backoff.ms",
            "log_cleaner_backoff_ms",
            c.log_cleaner_backoff_ms.to_string(),
            ConfigType::Long,
        ),
        (
            "log.cleaner.dedupe.buffer.size",
            "log_cleaner_dedupe_buffer_size",
            c.log_cleaner_dedupe_buffer_size.to_string(),
            ConfigType::Long,
        ),
        (
            "log.cleaner.enable",
            "log_cleaner_enable",
            c.log_cleaner_enable.to_string(),
            ConfigType::Boolean,
        ),
        (
            "log.cleaner.io.max.bytes.per.second",
            "log_cleaner_io_max_bytes_per_second",
            c.log_cleaner_io_max_bytes_per_second
                .map_or_else(|| f64::MAX.to_string(), |v| v.to_string()),
            ConfigType::Double,
        ),
        (
            "log.retention.check.interval.ms",
            "retention_check_interval_ms",
            c.retention_check_interval_ms.to_string(),
            ConfigType::Long,
        ),
        (
            "max.broker.partitions",
            "max_broker_partitions",
            c.max_broker_partitions.to_string(),
            ConfigType::Int,
        ),
        (
            "max.connections",
            "max_connections",
            c.max_connections.to_string(),
            ConfigType::Int,
        ),
        (
            "max.connections.per.ip",
            "max_connections_per_ip",
            c.max_connections_per_ip.to_string(),
            ConfigType::Int,
        ),
        (
            "max.partitions",
            "max_partitions",
            c.max_partitions.to_string(),
            ConfigType::Int,
        ),
        (
            "num.partitions",
            "default_partitions",
            c.default_partitions.to_string(),
            ConfigType::Int,
        ),
        (
            "offsets.retention.check.interval.ms",
            "offsets_retention_check_interval_ms",
            c.offsets_retention_check_interval_ms.to_string(),
            ConfigType::Long,
        ),
        (
            // Kafka's setting is in minutes; the flag in ms (rounded up here).
            "offsets.retention.minutes",
            "offsets_retention_ms",
            (c.offsets_retention_ms as u64).div_ceil(60_000).to_string(),
            ConfigType::Int,
        ),
        (
            "producer.id.expiration.ms",
            "producer_id_expiration_ms",
            c.producer_id_expiration_ms.to_string(),
            ConfigType::Int,
        ),
        (
            "queued.max.request.bytes",
            "queued_max_request_bytes",
            c.queued_max_request_bytes.to_string(),
            ConfigType::Long,
        ),
        (
            "socket.request.max.bytes",
            "max_request_bytes",
            c.max_request_bytes.to_string(),
            ConfigType::Int,
        ),
        (
            "transactional.id.expiration.ms",
            "transactional_id_expiration_ms",
            c.transactional_id_expiration_ms.to_string(),
            ConfigType::Int,
        ),
    ];
    entries.extend(fixed.into_iter().map(|(name, id, value, ty)| {
        let source = if c.given(id) {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        };
        ConfigEntry {
            name: name.to_string(),
            synonyms: vec![(name.to_string(), value, source)],
            read_only: true,
            ty,
            doc: "set by a kaas-server flag (docs/configuration.md); not changeable at run time",
        }
    }));
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// The cluster-wide dynamic defaults (resource name ""), as Apache lists them: only
/// those set.
fn cluster_default_entries(broker: &Broker) -> Vec<ConfigEntry> {
    broker
        .dynamic_configs()
        .cluster
        .into_iter()
        .map(|(name, value)| {
            let def = kaas_core::configs::topic_config_for_broker_name(&name);
            ConfigEntry {
                synonyms: vec![(name.clone(), value, SOURCE_DYNAMIC_DEFAULT_BROKER)],
                name,
                read_only: false,
                ty: def.map_or(ConfigType::String, |d| d.ty),
                doc: def.map_or("", |d| d.doc),
            }
        })
        .collect()
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut results = Vec::with_capacity(req.resources.len());
    for res in req.resources {
        let mut r = DescribeConfigsResult::default()
            .with_resource_type(res.resource_type)
            .with_resource_name(res.resource_name.clone());
        let name = res.resource_name.as_str();
        let refusal = refused(broker, ctx, res.resource_type, name, Operation::DescribeConfigs);
        let entries: Result<Vec<ConfigEntry>, (i16, String)> = match res.resource_type {
            _ if let Some(refusal) = refusal => Err(refusal),
            RESOURCE_TOPIC => match broker.topic(name) {
                Err(e) => Err((e.code(), e.to_string())),
                Ok(t) => Ok(topic_entries(broker, &t.meta.configs)),
            },
            RESOURCE_BROKER if name.is_empty() => Ok(cluster_default_entries(broker)),
            RESOURCE_BROKER if name == broker.config.broker_id.to_string() => Ok(broker_entries(broker)),
            RESOURCE_BROKER => Err((
                ResponseError::InvalidRequest.code(),
                format!("broker {name} is not this broker (ask broker {name} itself)"),
            )),
            other => Err((
                ResponseError::InvalidRequest.code(),
                format!("resource type {other} is not supported (topics 2 and brokers 4 are)"),
            )),
        };
        match entries {
            Err((code, msg)) => {
                r.error_code = code;
                r.error_message = Some(sb(msg));
            }
            Ok(entries) => {
                let keys = res.configuration_keys.as_ref().filter(|k| !k.is_empty());
                r.configs = entries
                    .into_iter()
                    .filter(|e| keys.is_none_or(|k| k.iter().any(|k| k.as_str() == e.name)))
                    .map(|e| {
                        let (_, value, source) = e.synonyms[0].clone();
                        let mut c = DescribeConfigsResourceResult::default()
                            .with_name(sb(e.name))
                            .with_value(Some(sb(value)))
                            .with_read_only(e.read_only)
                            .with_config_source(source);
                        if req.include_synonyms {
                            c.synonyms = e
                                .synonyms
                                .into_iter()
                                .map(|(n, v, s)| {
                                    DescribeConfigsSynonym::default()
                                        .with_name(sb(n))
                                        .with_value(Some(sb(v)))
                                        .with_source(s)
                                })
                                .collect();
                        }
                        if ctx.version >= 3 {
                            c.config_type = e.ty.code();
                            if req.include_documentation {
                                c.documentation = Some(sb(e.doc));
                            }
                        }
                        c
                    })
                    .collect();
            }
        }
        results.push(r);
    }
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_support::{broker, ctx};
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::ApiKey;

    #[tokio::test]
    async fn describe_configs_reports_the_topics_real_cleanup_policy() {
        let dir = tempfile::tempdir().unwrap();
        let b = broker(dir.path());
        let configs = [("cleanup.policy".to_string(), "compact".to_string())].into();
        b.create_topic("changelog", 1, configs).await.unwrap();
        b.create_topic("plain", 1, Default::default()).await.unwrap();
        let req = DescribeConfigsRequest::default().with_resources(
            ["changelog", "plain"]
                .iter()
                .map(|t| {
                    DescribeConfigsResource::default()
                        .with_resource_type(RESOURCE_TOPIC)
                        .with_resource_name(super::super::sb(*t))
                })
                .collect(),
        );
        let resp = handle(&b, &ctx(ApiKey::DescribeConfigs, 4), req).await;
        let policy = |i: usize| {
            let c = resp.results[i]
                .configs
                .iter()
                .find(|c| c.name.as_str() == "cleanup.policy")
                .unwrap();
            (c.value.as_deref().map(|v| v.to_string()), c.config_source)
        };
        assert_eq!(policy(0), (Some("compact".into()), SOURCE_DYNAMIC_TOPIC));
        assert_eq!(policy(1), (Some("delete".into()), SOURCE_DEFAULT));
        let partition = b.topic("changelog").unwrap().partition(0).unwrap().clone().unwrap();
        assert!(!partition.state().log.config().cleanup_delete);
    }

    #[tokio::test]
    async fn synonyms_list_every_layer_most_specific_first() {
        let dir = tempfile::tempdir().unwrap();
        // Parsed as the binary does, so --retention-ms is recorded as given.
        let config = crate::config::Config::load_from([
            "kaas-server",
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--retention-ms",
            "500",
        ])
        .unwrap();
        let b = Broker::open(config, crate::listeners::Endpoints::plaintext("127.0.0.1", 9092)).unwrap();
        let configs = [("retention.ms".to_string(), "7".to_string())].into();
        b.create_topic("t", 1, configs).await.unwrap();
        let set = |k: &'static str, v: &'static str| {
            Box::new(move |c: &std::collections::BTreeMap<String, String>| {
                let mut c = c.clone();
                c.insert(k.to_string(), v.to_string());
                Ok(c)
            }) as Box<crate::broker::ConfigChange<'_>>
        };
        b.alter_broker_configs("", set("log.retention.ms", "300"), false)
            .await
            .unwrap();
        b.alter_broker_configs("0", set("log.retention.ms", "200"), false)
            .await
            .unwrap();
        let layers: Vec<(String, String, i8)> = topic_entries(&b, &b.topic("t").unwrap().meta.configs)
            .into_iter()
            .find(|e| e.name == "retention.ms")
            .unwrap()
            .synonyms;
        let expect = |n: &str, v: &str, s: i8| (n.to_string(), v.to_string(), s);
        assert_eq!(
            layers,
            vec![
                expect("retention.ms", "7", SOURCE_DYNAMIC_TOPIC),
                expect("log.retention.ms", "200", SOURCE_DYNAMIC_BROKER),
                expect("log.retention.ms", "300", SOURCE_DYNAMIC_DEFAULT_BROKER),
                expect("log.retention.ms", "500", SOURCE_STATIC_BROKER),
                expect("log.retention.ms", "604800000", SOURCE_DEFAULT),
            ]
        );
        // The cluster-wide resource lists what is set there.
        let cluster = cluster_default_entries(&b);
        assert_eq!(cluster.len(), 1);
        assert_eq!(
            cluster[0].synonyms[0],
            expect("log.retention.ms", "300", SOURCE_DYNAMIC_DEFAULT_BROKER)
        );
        // The effective config follows the most specific layer.
        let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
        assert_eq!(p.state().log.config().retention_ms, 7);
    }
}
