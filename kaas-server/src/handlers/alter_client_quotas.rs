//! AlterClientQuotas (key 49): sets and removes quotas in
//! `__cluster/client-quotas.json`, under its lock, as `kaasctl quotas` does
//! (docs/quotas.md). Errors are per entity, as Kafka's: CLUSTER_AUTHORIZATION_FAILED
//! without ALTER_CONFIGS on the cluster; INVALID_REQUEST for an entity that is not a
//! user, a client id or both (ip quotas are not supported), an entity or a key given
//! twice, an unknown key or a value out of range; KAFKA_STORAGE_ERROR when the file
//! cannot be written. An entity with an error has none of its changes applied; the
//! others are written together. `validate_only` checks and writes nothing. Removing
//! a quota that is not set is no error.

use super::{sb, RequestContext};
use crate::authz::CLUSTER;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::quotas::{check_value, ClientQuotas, Entity};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

/// One entity's changes: (key, Some(value) to set or None to remove).
type Changes = Vec<(String, Option<f64>)>;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let may_alter = broker
        .authz
        .authorize(ctx, Operation::AlterConfigs, ResourceType::Cluster, CLUSTER);
    // Per entry, in the request's order: its entity or the error it gets.
    let mut checked: Vec<Result<(Entity, Changes), (i16, String)>> = Vec::with_capacity(req.entries.len());
    for entry in &req.entries {
        let result = if may_alter {
            check_entry(entry, &checked)
        } else {
            Err((
                ResponseError::ClusterAuthorizationFailed.code(),
                format!("{} may not alter client quotas", ctx.principal),
            ))
        };
        checked.push(result);
    }
    let changes: Vec<&(Entity, Changes)> = checked.iter().filter_map(|c| c.as_ref().ok()).collect();
    let mut write_error = None;
    if !req.validate_only && !changes.is_empty() {
        let written = crate::blocking::off_worker(|| {
            ClientQuotas::update::<kaas_core::VolumeError>(&broker.volume, |q| {
                for (entity, ops) in &changes {
                    for (key, value) in ops {
                        match value {
                            Some(v) => q.set(entity, key, *v),
                            None => {
                                q.remove(entity, key);
                            }
                        }
                    }
                }
                Ok(())
            })
        });
        broker.quotas.changed();
        match written {
            Ok(_) => super::journal(
                broker,
                ctx,
                "AlterClientQuotas",
                changes.iter().map(|(entity, ops)| {
                    let ops: Vec<String> = ops
                        .iter()
                        .map(|(k, v)| match v {
                            Some(v) => format!("{k}={v}"),
                            None => format!("-{k}"),
                        })
                        .collect();
                    format!("quota {entity}: {}", ops.join(" "))
                }),
            ),
            Err(e) => {
                tracing::error!(error = %e, "client quotas not changed: the file could not be written");
                write_error = Some(e.to_string());
            }
        }
    }
    let entries = req
        .entries
        .iter()
        .zip(&checked)
        .map(|(entry, result)| {
            let (code, message) = match (result, &write_error) {
                (Err((code, message)), _) => (*code, Some(message.clone())),
                (Ok(_), Some(e)) => (ResponseError::KafkaStorageError.code(), Some(e.clone())),
                (Ok(_), None) => (0, None),
            };
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message.map(sb))
                .with_entity(
                    entry
                        .entity
                        .iter()
                        .map(|e| {
                            EntityData::default()
                                .with_entity_type(e.entity_type.clone())
                                .with_entity_name(e.entity_name.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

fn check_entry(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
    earlier: &[Result<(Entity, Changes), (i16, String)>],
) -> Result<(Entity, Changes), (i16, String)> {
    let invalid = |message: String| (ResponseError::InvalidRequest.code(), message);
    let entity = Entity::from_components(
        entry
            .entity
            .iter()
            .map(|e| (e.entity_type.as_str(), e.entity_name.as_deref())),
    )
    .map_err(invalid)?;
    if earlier.iter().any(|e| matches!(e, Ok((other, _)) if *other == entity)) {
        return Err(invalid(format!("entity {entity} altered twice in one request")));
    }
    let mut changes: Changes = Vec::with_capacity(entry.ops.len());
    for op in &entry.ops {
        let key = op.key.to_string();
        if changes.iter().any(|(k, _)| *k == key) {
            return Err(invalid(format!("{key} altered twice for {entity}")));
        }
        if op.remove {
            // Any key may be removed: one set by an older version stays removable.
            changes.push((key, None));
        } else {
            check_value(&key, op.value).map_err(|m| invalid(format!("{entity}: {m}")))?;
            changes.push((key, Some(op.value)));
        }
    }
    Ok((entity, changes))
}
