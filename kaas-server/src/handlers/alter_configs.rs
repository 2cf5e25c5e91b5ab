//! AlterConfigs (key 33): replaces every override of a topic, or every dynamic config
//! of a broker resource ("" for the cluster-wide defaults, or a broker id), with the
//! entries given. IncrementalAlterConfigs (incremental_alter_configs.rs) changes
//! single keys instead; both end in [`alter`].

use super::describe_configs::{broker_layers, RESOURCE_BROKER, RESOURCE_TOPIC, SOURCE_DYNAMIC_BROKER};
pub use super::describe_configs::{refused, Refusal};
use super::{sb, RequestContext};
use crate::broker::{Broker, ConfigChange};
use kaas_core::acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 2;

pub fn invalid_request(msg: impl Into<String>) -> Refusal {
    (ResponseError::InvalidRequest.code(), msg.into())
}

/// The outcome of one resource of either call: `change` (or why the request's
/// entries were refused before any) applied, as (error code, message) for the answer.
pub async fn outcome(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    change: Result<Box<ConfigChange<'_>>, Refusal>,
    validate_only: bool,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    let result = match change {
        Ok(change) => alter(broker, resource_type, name, change, validate_only).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => (0, None),
        Err((code, msg)) => (code, Some(sb(msg))),
    }
}

/// Applies `change` to the resource (after checking its type and name).
pub async fn alter(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    change: Box<ConfigChange<'_>>,
    validate_only: bool,
) -> Result<(), Refusal> {
    let refused = |e: crate::broker::TopicError| (e.code(), e.to_string());
    match resource_type {
        RESOURCE_TOPIC => broker
            .alter_topic_configs(name, change, validate_only)
            .await
            .map_err(refused),
        RESOURCE_BROKER => {
            if !name.is_empty() && name.parse::<u32>().is_err() {
                return Err(invalid_request(format!(
                    "broker resource name {name:?}: expected \"\" (cluster-wide default) or a broker id"
                )));
            }
            broker
                .alter_broker_configs(name, change, validate_only)
                .await
                .map_err(refused)
        }
        other => Err(invalid_request(format!(
            "resource type {other} cannot be altered (topics 2 and brokers 4 can)"
        ))),
    }
}

/// The value `key` falls back to when the resource has no override of its own (what
/// APPEND and SUBTRACT start from), as this broker sees it.
pub fn fallback_value(broker: &Broker, resource_type: i8, name: &str, key: &str) -> Option<String> {
    if resource_type == RESOURCE_TOPIC {
        let d = kaas_core::configs::topic_config(key)?;
        return broker_layers(broker, d.broker_name, d.default)
            .into_iter()
            .next()
            .map(|l| l.1);
    }
    let d = kaas_core::configs::topic_config_for_broker_name(key)?;
    // Below the resource's own layer: per-broker falls back to the cluster-wide
    // default, which falls back to the static flag or built-in default.
    let own = if name.is_empty() {
        SOURCE_DYNAMIC_BROKER + 1
    } else {
        SOURCE_DYNAMIC_BROKER
    };
    broker_layers(broker, d.broker_name, d.default)
        .into_iter()
        .find(|l| l.2 > own)
        .map(|l| l.1)
}

/// Config names given twice in one resource are refused (as Apache does).
pub fn check_unique<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), Refusal> {
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(invalid_request(format!("config {n} is given twice")));
        }
    }
    Ok(())
}

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for res in req.resources {
        let name = res.resource_name.to_string();
        let refusal = refused(broker, ctx, res.resource_type, &name, Operation::AlterConfigs);
        let entries: Result<BTreeMap<String, String>, Refusal> = refusal
            .map_or(Ok(()), Err)
            .and_then(|()| check_unique(res.configs.iter().map(|c| c.name.as_str())))
            .and_then(|()| {
                res.configs
                    .iter()
                    .map(|c| match &c.value {
                        Some(v) => Ok((c.name.to_string(), v.to_string())),
                        None => Err(invalid_request(format!("config {} has no value", c.name.as_str()))),
                    })
                    .collect()
            });
        let change =
            entries.map(|entries| Box::new(move |_: &BTreeMap<String, String>| Ok(entries)) as Box<ConfigChange<'_>>);
        let (code, message) = outcome(broker, res.resource_type, &name, change, req.validate_only).await;
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}
