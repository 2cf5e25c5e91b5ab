//! IncrementalAlterConfigs (key 44, KIP-339): SET, DELETE, APPEND and SUBTRACT single
//! config keys of a topic or a broker resource; keys not named keep their values.
//! APPEND and SUBTRACT apply to list configs (`cleanup.policy`) and start from the
//! value in force when the resource has no override.

use super::alter_configs::{check_unique, fallback_value, invalid_request, outcome, refused, Refusal};
use super::RequestContext;
use crate::broker::{Broker, ConfigChange};
use kaas_core::acl::Operation;
use kaas_core::configs::{list_items, topic_config, topic_config_for_broker_name, ConfigType};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Set,
    Delete,
    Append,
    Subtract,
}

/// One key's change, checked for shape (op known, value present where needed).
struct KeyChange {
    name: String,
    op: Op,
    value: Option<String>,
    /// What APPEND / SUBTRACT start from without an override.
    fallback: Option<String>,
}

fn parse(
    broker: &Broker,
    resource_type: i8,
    resource: &str,
    name: &str,
    op: i8,
    value: Option<String>,
) -> Result<KeyChange, Refusal> {
    let op = match op {
        0 => Op::Set,
        1 => Op::Delete,
        2 => Op::Append,
        3 => Op::Subtract,
        other => return Err(invalid_request(format!("config {name}: unknown operation {other}"))),
    };
    if op != Op::Delete && value.is_none() {
        return Err(invalid_request(format!("config {name}: {op:?} needs a value")));
    }
    if matches!(op, Op::Append | Op::Subtract) {
        let ty = topic_config(name)
            .or_else(|| topic_config_for_broker_name(name))
            .map(|d| d.ty);
        if ty != Some(ConfigType::List) {
            return Err((
                kafka_protocol::error::ResponseError::InvalidConfig.code(),
                format!("config {name}: {op:?} applies only to list configs"),
            ));
        }
    }
    Ok(KeyChange {
        name: name.to_string(),
        op,
        value,
        fallback: fallback_value(broker, resource_type, resource, name),
    })
}

/// The overrides after `changes`.
fn apply(
    current: &std::collections::BTreeMap<String, String>,
    changes: Vec<KeyChange>,
) -> std::collections::BTreeMap<String, String> {
    let mut next = current.clone();
    for c in changes {
        let value = c.value.unwrap_or_default();
        match c.op {
            Op::Set => {
                next.insert(c.name, value);
            }
            Op::Delete => {
                next.remove(&c.name);
            }
            Op::Append | Op::Subtract => {
                let base = next.get(&c.name).cloned().or(c.fallback).unwrap_or_default();
                let mut items: Vec<String> = list_items(&base).into_iter().map(str::to_string).collect();
                for item in list_items(&value) {
                    if c.op == Op::Append && !items.iter().any(|i| i == item) {
                        items.push(item.to_string());
                    } else if c.op == Op::Subtract {
                        items.retain(|i| i != item);
                    }
                }
                next.insert(c.name, items.join(","));
            }
        }
    }
    next
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for res in req.resources {
        let name = res.resource_name.to_string();
        let refusal = refused(broker, ctx, res.resource_type, &name, Operation::AlterConfigs);
        let changes: Result<Vec<KeyChange>, Refusal> = refusal
            .map_or(Ok(()), Err)
            .and_then(|()| check_unique(res.configs.iter().map(|c| c.name.as_str())))
            .and_then(|()| {
                res.configs
                    .iter()
                    .map(|c| {
                        parse(
                            broker,
                            res.resource_type,
                            &name,
                            c.name.as_str(),
                            c.config_operation,
                            c.value.as_ref().map(|v| v.to_string()),
                        )
                    })
                    .collect()
            });
        let change = changes.map(|changes| {
            Box::new(move |current: &std::collections::BTreeMap<String, String>| Ok(apply(current, changes)))
                as Box<ConfigChange<'_>>
        });
        let (code, message) = outcome(broker, res.resource_type, &name, change, req.validate_only).await;
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
