//! `kaasctl quotas`: the client quotas brokers enforce (`__cluster/client-quotas.json`,
//! docs/quotas.md), listed, set and deleted on the volume under the file's lock, as
//! AlterClientQuotas does. Brokers see a change within a second or so.

use super::{audit, Status};
use crate::cli::QuotaEntityArgs;
use crate::cluster::Cluster;
use crate::out::{Out, Tone};
use kaas_core::quotas::{check_value, ClientQuotas, Entity, EntityName};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub struct QuotaRow {
    /// `null` where the entity has no such component; `"default"` for the default,
    /// `{"name": …}` for a name (as the file writes them: a user may be called
    /// `<default>`).
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub quotas: BTreeMap<String, f64>,
}

impl QuotaEntityArgs {
    /// The entity named, if any component was.
    fn entity(&self) -> Option<Entity> {
        let name = |named: &Option<String>, default: bool| match (named, default) {
            (Some(n), _) => Some(EntityName::Name(n.clone())),
            (None, true) => Some(EntityName::Default),
            (None, false) => None,
        };
        let entity = Entity {
            user: name(&self.user, self.default_user),
            client_id: name(&self.client_id, self.default_client_id),
        };
        (entity.user.is_some() || entity.client_id.is_some()).then_some(entity)
    }
}

pub fn list(c: &Cluster, out: &Out, filter: &QuotaEntityArgs) -> anyhow::Result<Status> {
    let quotas = ClientQuotas::read(&c.volume)?;
    let wanted = filter.entity();
    // A component named in the filter must match; one not named may be anything.
    let selected = |e: &Entity| {
        wanted.as_ref().is_none_or(|w| {
            (w.user.is_none() || w.user == e.user) && (w.client_id.is_none() || w.client_id == e.client_id)
        })
    };
    let rows: Vec<QuotaRow> = quotas
        .entries
        .iter()
        .filter(|e| selected(&e.entity))
        .map(|e| QuotaRow {
            user: e.entity.user.clone(),
            client_id: e.entity.client_id.clone(),
            quotas: e.quotas.clone(),
        })
        .collect();
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&["USER", "CLIENT ID", "QUOTAS"]);
        for r in &rows {
            let name = |n: &Option<EntityName>| n.as_ref().map_or("-".to_string(), |n| n.to_string());
            t.add_row(vec![
                out.cell(name(&r.user), Tone::Plain),
                out.cell(name(&r.client_id), Tone::Plain),
                out.text(
                    r.quotas
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    Tone::Plain,
                ),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::Ok)
}

pub fn set(c: &Cluster, entity: &QuotaEntityArgs, values: &[String]) -> anyhow::Result<Status> {
    let entity = named(entity)?;
    if let Some(empty) = entity.empty_component() {
        // As AlterClientQuotas: an empty name names no principal or client (the
        // default is --default-user / --default-client-id).
        anyhow::bail!(
            "an empty {empty} names no principal or client; for the default give --default-{}",
            if empty == "user" { "user" } else { "client-id" }
        );
    }
    if values.is_empty() {
        anyhow::bail!("nothing to set: give KEY=VALUE (producer_byte_rate, consumer_byte_rate, request_percentage)");
    }
    let mut parsed = Vec::with_capacity(values.len());
    for v in values {
        let (key, value) = v
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("{v:?} is not KEY=VALUE"))?;
        let value: f64 = value
            .parse()
            .map_err(|_| anyhow::anyhow!("{key}: {value:?} is not a number"))?;
        check_value(key, value).map_err(anyhow::Error::msg)?;
        if parsed.iter().any(|(k, _)| k == key) {
            anyhow::bail!("{key} given twice");
        }
        parsed.push((key.to_string(), value));
    }
    ClientQuotas::update::<anyhow::Error>(&c.volume, |q| {
        for (key, value) in &parsed {
            q.set(&entity, key, *value);
        }
        Ok(())
    })?;
    audit(c, &format!("quota {entity}"))?;
    outln!("quota {entity}: {} set", values.join(", "));
    Ok(Status::Ok)
}

pub fn delete(c: &Cluster, entity: &QuotaEntityArgs, keys: &[String]) -> anyhow::Result<Status> {
    let entity = named(entity)?;
    let mut removed = Vec::new();
    ClientQuotas::update::<anyhow::Error>(&c.volume, |q| {
        let keys: Vec<String> = if keys.is_empty() {
            q.get(&entity).map(|m| m.keys().cloned().collect()).unwrap_or_default()
        } else {
            keys.to_vec()
        };
        for key in keys {
            if q.remove(&entity, &key) {
                removed.push(key);
            }
        }
        Ok(())
    })?;
    if removed.is_empty() {
        anyhow::bail!("{entity} has no such quota");
    }
    audit(c, &format!("quota {entity}"))?;
    outln!("quota {entity}: {} deleted", removed.join(", "));
    Ok(Status::Ok)
}

fn named(args: &QuotaEntityArgs) -> anyhow::Result<Entity> {
    args.entity().ok_or_else(|| {
        anyhow::anyhow!(
            "name the entity: --user NAME or --default-user, and/or --client-id NAME or --default-client-id"
        )
    })
}
