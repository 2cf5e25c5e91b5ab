//! DescribeConfigs (key 32): topic configs (overrides and the defaults they fall back
//! to) and this broker's settings, under Apache's config names.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 4;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_BOOLEAN: i8 = 1;

struct ConfigEntry {
    name: String,
    value: String,
    source: i8,
    ty: i8,
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
        let entries: Result<Vec<ConfigEntry>, (i16, String)> = match res.resource_type {
            RESOURCE_TOPIC => match broker.topic(&res.resource_name) {
                Err(e) => Err((e.code(), e.to_string())),
                Ok(t) => {
                    let d = broker.config.default_log_config();
                    let defaults: Vec<(&str, String, i8)> = vec![
                        ("cleanup.policy", "delete".into(), TYPE_STRING),
                        ("compression.type", "producer".into(), TYPE_STRING),
                        ("index.interval.bytes", d.index_interval_bytes.to_string(), TYPE_INT),
                        ("max.message.bytes", d.max_message_bytes.to_string(), TYPE_INT),
                        ("message.timestamp.type", "CreateTime".into(), TYPE_STRING),
                        ("min.insync.replicas", "1".into(), TYPE_INT),
                        ("retention.bytes", d.retention_bytes.to_string(), TYPE_LONG),
                        ("retention.ms", d.retention_ms.to_string(), TYPE_LONG),
                        ("segment.bytes", d.segment_bytes.to_string(), TYPE_INT),
                        ("segment.ms", d.segment_ms.to_string(), TYPE_LONG),
                    ];
                    Ok(defaults
                        .into_iter()
                        .map(|(name, default, ty)| match t.meta.configs.get(name) {
                            Some(v) => (name.to_string(), v.clone(), SOURCE_DYNAMIC_TOPIC, ty),
                            None => (name.to_string(), default, SOURCE_DEFAULT, ty),
                        })
                        .map(|(name, value, source, ty)| ConfigEntry {
                            name,
                            value,
                            source,
                            ty,
                        })
                        .collect())
                }
            },
            RESOURCE_BROKER => {
                if res.resource_name.is_empty() || res.resource_name.as_str() == broker.config.broker_id.to_string() {
                    let c = &broker.config;
                    Ok(vec![
                        (
                            "auto.create.topics.enable",
                            c.auto_create_topics.to_string(),
                            TYPE_BOOLEAN,
                        ),
                        ("broker.id", c.broker_id.to_string(), TYPE_INT),
                        (
                            "group.initial.rebalance.delay.ms",
                            c.group_initial_rebalance_delay_ms.to_string(),
                            TYPE_INT,
                        ),
                        (
                            "group.max.session.timeout.ms",
                            c.group_max_session_timeout_ms.to_string(),
                            TYPE_INT,
                        ),
                        (
                            "group.min.session.timeout.ms",
                            c.group_min_session_timeout_ms.to_string(),
                            TYPE_INT,
                        ),
                        ("log.dirs", c.data_dir.display().to_string(), TYPE_STRING),
                        ("log.retention.bytes", c.retention_bytes.to_string(), TYPE_LONG),
                        ("log.retention.ms", c.retention_ms.to_string(), TYPE_LONG),
                        ("log.segment.bytes", c.segment_bytes.to_string(), TYPE_INT),
                        ("message.max.bytes", c.message_max_bytes.to_string(), TYPE_INT),
                        ("num.partitions", c.default_partitions.to_string(), TYPE_INT),
                        ("socket.request.max.bytes", c.max_request_bytes.to_string(), TYPE_INT),
                    ]
                    .into_iter()
                    .map(|(n, v, t)| ConfigEntry {
                        name: n.to_string(),
                        value: v,
                        source: SOURCE_STATIC_BROKER,
                        ty: t,
                    })
                    .collect())
                } else {
                    Err((
                        ResponseError::InvalidRequest.code(),
                        format!("broker {} is not this broker", res.resource_name.as_str()),
                    ))
                }
            }
            other => Err((
                ResponseError::InvalidRequest.code(),
                format!("resource type {other} is not supported"),
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
                        let mut c = DescribeConfigsResourceResult::default()
                            .with_name(sb(e.name))
                            .with_value(Some(sb(e.value)))
                            .with_config_source(e.source);
                        if ctx.version >= 3 {
                            c.config_type = e.ty;
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
}
