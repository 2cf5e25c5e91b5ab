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
use kaas_core::quotas::{check_value, Entity};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

/// One entity's changes: (key, Some(value) to set or None to remove).
type Changes = Vec<(String, Option<f64>)>;
/// One entry checked: its entity and changes, or its error code and message.
type Checked = Result<(Entity, Changes), (i16, String)>;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let may_alter = broker
        .authz
        .authorize(ctx, Operation::AlterConfigs, ResourceType::Cluster, CLUSTER);
    // Per entry, in the request's order: its entity or the error it gets.
    let mut checked: Vec<Checked> = Vec::with_capacity(req.entries.len());
    // Every entity named so far, valid or not: one named twice is refused the second
    // time, whatever became of the first.
    let mut seen: Vec<Entity> = Vec::with_capacity(req.entries.len());
    for entry in &req.entries {
        let result = if may_alter {
            check_entry(entry, &mut seen)
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
            broker.quotas.update(|q| {
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
    seen: &mut Vec<Entity>,
) -> Checked {
    let invalid = |message: String| (ResponseError::InvalidRequest.code(), message);
    let entity = Entity::from_components(
        entry
            .entity
            .iter()
            .map(|e| (e.entity_type.as_str(), e.entity_name.as_deref())),
    )
    .map_err(invalid)?;
    if seen.contains(&entity) {
        return Err(invalid(format!("entity {entity} altered twice in one request")));
    }
    seen.push(entity.clone());
    let mut changes: Changes = Vec::with_capacity(entry.ops.len());
    for op in &entry.ops {
        let key = op.key.to_string();
        if changes.iter().any(|(k, _)| *k == key) {
            return Err(invalid(format!("{key} altered twice for {entity}")));
        }
        if op.remove {
            // Any key may be removed: one set by an older version stays removable
            // (on an entity with an empty name too).
            changes.push((key, None));
        } else if let Some(empty) = entity.empty_component() {
            // As Apache's `validateEntity`: null is the default; an empty name
            // names no principal or client.
            return Err(invalid(format!("Empty {empty} not supported")));
        } else {
            check_value(&key, op.value).map_err(|m| invalid(format!("{entity}: {m}")))?;
            changes.push((key, Some(op.value)));
        }
    }
    Ok((entity, changes))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{broker, ctx};
    use super::super::{dispatch, sb};
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    use kafka_protocol::messages::*;

    fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, f64, bool)]) -> EntryData {
        EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(sb(*t))
                            .with_entity_name(n.map(sb))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v, remove)| OpData::default().with_key(sb(*k)).with_value(*v).with_remove(*remove))
                    .collect(),
            )
    }

    async fn alter(
        b: &std::sync::Arc<crate::broker::Broker>,
        entries: Vec<EntryData>,
        validate_only: bool,
    ) -> Vec<i16> {
        let request = AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only);
        let ResponseKind::AlterClientQuotas(r) = dispatch(
            b,
            &ctx(ApiKey::AlterClientQuotas, 1),
            RequestKind::AlterClientQuotas(request),
        )
        .await
        else {
            panic!("an AlterClientQuotas answer")
        };
        r.entries.iter().map(|e| e.error_code).collect()
    }

    async fn describe(
        b: &std::sync::Arc<crate::broker::Broker>,
        components: Vec<ComponentData>,
        strict: bool,
    ) -> DescribeClientQuotasResponse {
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let ResponseKind::DescribeClientQuotas(r) = dispatch(
            b,
            &ctx(ApiKey::DescribeClientQuotas, 1),
            RequestKind::DescribeClientQuotas(request),
        )
        .await
        else {
            panic!("a DescribeClientQuotas answer")
        };
        r
    }

    /// A quota on an empty user or client id is refused, as Apache ("Empty user not
    /// supported"): null is the default, and an empty name names no principal or
    /// client. One an older version stored stays removable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quota_on_an_empty_name_is_refused_but_an_old_one_stays_removable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker(dir.path());
        let set = |entity: &[(&str, Option<&str>)]| entry(entity, &[("producer_byte_rate", 1024.0, false)]);
        let codes = alter(
            &b,
            vec![set(&[("user", Some(""))]), set(&[("client-id", Some(""))])],
            false,
        )
        .await;
        assert_eq!(codes, vec![42, 42]);
        let empty = kaas_core::quotas::Entity::from_components([("client-id", Some(""))]).unwrap();
        kaas_core::quotas::ClientQuotas::update::<kaas_core::VolumeError>(&b.volume, |q| {
            q.set(&empty, "producer_byte_rate", 1024.0);
            Ok(())
        })
        .unwrap();
        let removed = alter(
            &b,
            vec![entry(&[("client-id", Some(""))], &[("producer_byte_rate", 0.0, true)])],
            false,
        )
        .await;
        assert_eq!(removed, vec![0]);
    }

    /// Set, described, changed, removed; bad entries refused one by one while the
    /// good ones of the same request are applied; validate_only writes nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn quotas_are_set_described_and_removed_and_bad_entries_refused_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker(dir.path());
        let codes = alter(
            &b,
            vec![
                entry(
                    &[("user", Some("alice"))],
                    &[("producer_byte_rate", 1_048_576.0, false)],
                ),
                entry(
                    &[("user", None), ("client-id", None)],
                    &[("request_percentage", 25.0, false)],
                ),
                entry(&[("ip", Some("10.0.0.1"))], &[("connection_creation_rate", 5.0, false)]),
                entry(&[("user", Some("bob"))], &[("producer_byte_rate", 10.5, false)]),
                entry(&[("user", Some("carol"))], &[("controller_mutation_rate", 10.0, false)]),
                entry(
                    &[("user", Some("dave")), ("user", Some("eve"))],
                    &[("producer_byte_rate", 1.0, false)],
                ),
                entry(&[("user", Some("alice"))], &[("consumer_byte_rate", 1.0, false)]),
                entry(&[("user", Some("bob"))], &[("producer_byte_rate", 10.0, false)]),
            ],
            false,
        )
        .await;
        // The second alice and the second bob are refused, though the first bob was too.
        assert_eq!(codes, vec![0, 0, 42, 42, 42, 42, 42, 42]);
        let all = describe(&b, vec![], false).await;
        assert_eq!(all.error_code, 0);
        let entries = all.entries.expect("entries");
        assert_eq!(entries.len(), 2, "{entries:?}");
        let alice = describe(
            &b,
            vec![ComponentData::default()
                .with_entity_type(sb("user"))
                .with_match_type(0)
                .with_match(Some(sb("alice")))],
            true,
        )
        .await
        .entries
        .expect("entries");
        assert_eq!(alice.len(), 1);
        assert_eq!(alice[0].values[0].key.as_str(), "producer_byte_rate");
        assert_eq!(alice[0].values[0].value, 1_048_576.0);
        // The broker enforces what was just written.
        let current = b.quotas.current();
        assert_eq!(
            current
                .resolve("producer_byte_rate", "alice", "any")
                .map(|(bound, _)| bound),
            Some(1_048_576.0)
        );
        // validate_only: checked, not written.
        let codes = alter(
            &b,
            vec![entry(&[("user", Some("alice"))], &[("producer_byte_rate", 5.0, false)])],
            true,
        )
        .await;
        assert_eq!(codes, vec![0]);
        let defaults = describe(
            &b,
            vec![ComponentData::default().with_entity_type(sb("user")).with_match_type(1)],
            false,
        )
        .await
        .entries
        .expect("entries");
        assert_eq!(
            defaults.len(),
            1,
            "the default user's entry (with the default client id)"
        );
        assert_eq!(
            describe(&b, vec![], false).await.entries.expect("entries")[1].values[0].value,
            1_048_576.0,
            "validate_only changed nothing"
        );
        // Removing the only key removes the entity.
        let codes = alter(
            &b,
            vec![entry(&[("user", Some("alice"))], &[("producer_byte_rate", 0.0, true)])],
            false,
        )
        .await;
        assert_eq!(codes, vec![0]);
        assert_eq!(describe(&b, vec![], false).await.entries.expect("entries").len(), 1);
        // A filter that cannot be answered.
        let bad = describe(
            &b,
            vec![ComponentData::default()
                .with_entity_type(sb("user"))
                .with_match_type(0)
                .with_match(None)],
            false,
        )
        .await;
        assert_eq!(bad.error_code, 42);
        assert!(bad.entries.is_none());
    }
}
