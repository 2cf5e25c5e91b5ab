//! Client quotas, Kafka's model (KIP-13, KIP-55, KIP-124, KIP-546):
//! `__cluster/client-quotas.json` holds, per entity (a user, a client id, or a user
//! and a client id; each a name or the default), the quotas set on it. Brokers
//! enforce them (kaas-server's `quotas`), AlterClientQuotas and `kaasctl quotas`
//! change them under the file's lock, DescribeClientQuotas reads them
//! (docs/quotas.md).

use crate::error::{read_versioned_json_or, update_locked_json, VolumeError};
use crate::layout::Volume;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub const QUOTAS_FORMAT_VERSION: u32 = 1;

/// Bytes per second a client may produce (Kafka's `producer_byte_rate`).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Bytes per second of records a client may fetch (`consumer_byte_rate`).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Percentage of one request thread's time a client may take (`request_percentage`).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// The quota keys kaas enforces.
pub const KEYS: [&str; 3] = [PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE];

/// Kafka's entity types.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// One component of an entity: a name, or the default for everyone without one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntityName {
    Default,
    Name(String),
}

impl EntityName {
    /// The wire's form: a name, or null for the default.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        name.map_or(EntityName::Default, |n| EntityName::Name(n.to_string()))
    }
    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Name(n) => Some(n),
        }
    }
}

impl fmt::Display for EntityName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntityName::Default => f.write_str("<default>"),
            EntityName::Name(n) => f.write_str(n),
        }
    }
}

/// What a quota is set on: a user, a client id, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<EntityName>,
    #[serde(rename = "client-id", default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<EntityName>,
}

impl Entity {
    /// An entity from the wire's (entity type, name or null) pairs: each type once,
    /// `user` and `client-id` only, at least one.
    pub fn from_components<'a>(
        components: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Entity, String> {
        let mut entity = Entity::default();
        for (entity_type, name) in components {
            let slot = match entity_type {
                USER => &mut entity.user,
                CLIENT_ID => &mut entity.client_id,
                IP => {
                    return Err(
                        "ip quotas (connection_creation_rate) are not supported; kaas limits connections per address with --max-connection-creation-rate-per-ip".into(),
                    )
                }
                other => return Err(format!("unknown quota entity type {other:?} (expected user or client-id)")),
            };
            if slot.is_some() {
                return Err(format!("entity type {entity_type} given twice"));
            }
            *slot = Some(EntityName::from_wire(name));
        }
        if entity.user.is_none() && entity.client_id.is_none() {
            return Err("the quota entity is empty".into());
        }
        Ok(entity)
    }

    /// The component whose name is the empty string, if one is: null is the default,
    /// and an empty name names no principal or client (Apache refuses to set a quota
    /// on it: "Empty user not supported").
    pub fn empty_component(&self) -> Option<&'static str> {
        let empty = |n: &Option<EntityName>| matches!(n, Some(EntityName::Name(s)) if s.is_empty());
        if empty(&self.user) {
            Some(USER)
        } else if empty(&self.client_id) {
            Some(CLIENT_ID)
        } else {
            None
        }
    }

    /// The wire's (entity type, name or null) pairs.
    pub fn components(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut out = Vec::with_capacity(2);
        if let Some(u) = &self.user {
            out.push((USER, u.to_wire()));
        }
        if let Some(c) = &self.client_id {
            out.push((CLIENT_ID, c.to_wire()));
        }
        out
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.user, &self.client_id) {
            (Some(u), Some(c)) => write!(f, "user={u}, client-id={c}"),
            (Some(u), None) => write!(f, "user={u}"),
            (None, Some(c)) => write!(f, "client-id={c}"),
            (None, None) => f.write_str("(none)"),
        }
    }
}

/// The quotas set on one entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaEntry {
    pub entity: Entity,
    pub quotas: BTreeMap<String, f64>,
}

/// `__cluster/client-quotas.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientQuotas {
    pub version: u32,
    #[serde(default)]
    pub entries: Vec<QuotaEntry>,
}

crate::versioned!(ClientQuotas);

/// Whether `value` may be set for `key`: a known key; a byte rate a whole number of
/// bytes of at least 1; a percentage above 0. Both finite.
pub fn check_value(key: &str, value: f64) -> Result<(), String> {
    match key {
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE => {
            if !(value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= i64::MAX as f64) {
                return Err(format!(
                    "{key} must be a whole number of bytes per second, at least 1 (got {value})"
                ));
            }
        }
        REQUEST_PERCENTAGE => {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("{key} must be a percentage above 0 (got {value})"));
            }
        }
        "controller_mutation_rate" => {
            return Err("controller_mutation_rate is not enforced by kaas, so it is not accepted".into())
        }
        "connection_creation_rate" => {
            return Err("connection_creation_rate is not supported; use --max-connection-creation-rate-per-ip".into())
        }
        other => {
            return Err(format!(
                "unknown quota key {other:?} (expected one of {})",
                KEYS.join(", ")
            ))
        }
    }
    Ok(())
}

/// How a DescribeClientQuotas filter component matches an entity's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    Exact(String),
    Default,
    /// Any name or the default, as long as the entity has this type.
    Any,
}

/// One filter component: an entity type and how its name must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterComponent {
    pub entity_type: String,
    pub matches: Match,
}

impl ClientQuotas {
    /// The quotas on the volume; none stored is empty.
    pub fn read(volume: &Volume) -> Result<ClientQuotas, VolumeError> {
        read_versioned_json_or(
            &volume.client_quotas_file(),
            "client quotas",
            QUOTAS_FORMAT_VERSION,
            || ClientQuotas {
                version: QUOTAS_FORMAT_VERSION,
                ..Default::default()
            },
        )
    }

    /// Read-modify-write under `client-quotas.lock` (brokers and kaasctl alike): `f`
    /// changes the quotas or returns an error, and then nothing is written. Entities
    /// left without a quota are dropped; entries are kept in entity order.
    pub fn update<E: From<VolumeError>>(
        volume: &Volume,
        f: impl FnOnce(&mut ClientQuotas) -> Result<(), E>,
    ) -> Result<ClientQuotas, E> {
        update_locked_json(volume, &volume.client_quotas_file(), Self::read, f, |q| {
            q.entries.retain(|e| !e.quotas.is_empty());
            q.entries.sort_by(|a, b| a.entity.cmp(&b.entity));
        })
    }

    pub fn get(&self, entity: &Entity) -> Option<&BTreeMap<String, f64>> {
        self.entries.iter().find(|e| e.entity == *entity).map(|e| &e.quotas)
    }

    pub fn set(&mut self, entity: &Entity, key: &str, value: f64) {
        match self.entries.iter_mut().find(|e| e.entity == *entity) {
            Some(e) => {
                e.quotas.insert(key.to_string(), value);
            }
            None => self.entries.push(QuotaEntry {
                entity: entity.clone(),
                quotas: BTreeMap::from([(key.to_string(), value)]),
            }),
        }
    }

    /// Removes `key` from `entity`; false when it was not set.
    pub fn remove(&mut self, entity: &Entity, key: &str) -> bool {
        self.entries
            .iter_mut()
            .find(|e| e.entity == *entity)
            .is_some_and(|e| e.quotas.remove(key).is_some())
    }

    /// The quota `key` that applies to a client of `user` with `client_id`, and the
    /// entity it is measured over, as Kafka resolves it: the first entity of this
    /// list with `key` set wins.
    ///
    /// 1. user and client id; 2. user, default client id; 3. user;
    /// 4. default user, client id; 5. default user, default client id; 6. default user;
    /// 7. client id; 8. default client id.
    ///
    /// The measured entity keeps the names of the components the winner has (a
    /// default counts: every user under "default user" is measured on its own), so
    /// all the clients of a user with a user quota share one rate, and every client
    /// id of a user under a per-client-id default has its own.
    pub fn resolve(&self, key: &str, user: &str, client_id: &str) -> Option<(f64, Measured)> {
        // Where each component stands: 0 its name, 1 the default, 2 absent.
        let rank = |c: &Option<EntityName>, name: &str| match c {
            Some(EntityName::Name(n)) if n == name => Some(0),
            Some(EntityName::Name(_)) => None,
            Some(EntityName::Default) => Some(1),
            None => Some(2),
        };
        // The list above, as (user rank, client id rank) -> position.
        let position = |u: u8, c: u8| match (u, c) {
            (2, 2) => None,
            (2, c) => Some(6 + c),
            (u, c) => Some(3 * u + c),
        };
        let (bound, entity, _) = self
            .entries
            .iter()
            .filter_map(|e| {
                let at = position(rank(&e.entity.user, user)?, rank(&e.entity.client_id, client_id)?)?;
                Some((*e.quotas.get(key)?, &e.entity, at))
            })
            .min_by_key(|&(_, _, at)| at)?;
        let measured = Measured {
            user: entity.user.as_ref().map(|_| user.to_string()),
            client_id: entity.client_id.as_ref().map(|_| client_id.to_string()),
        };
        Some((bound, measured))
    }

    /// The entries a DescribeClientQuotas filter selects: every component matches,
    /// and with `strict` the entity has no other types.
    pub fn matching(&self, filter: &[FilterComponent], strict: bool) -> Vec<&QuotaEntry> {
        self.entries
            .iter()
            .filter(|e| {
                let components = e.entity.components();
                let all_match = filter.iter().all(|f| {
                    components.iter().any(|(t, name)| {
                        *t == f.entity_type
                            && match &f.matches {
                                Match::Exact(want) => *name == Some(want.as_str()),
                                Match::Default => name.is_none(),
                                Match::Any => true,
                            }
                    })
                });
                all_match && (!strict || components.len() == filter.len())
            })
            .collect()
    }
}

/// Whose usage a quota is measured over (the tags of Kafka's quota sensors): the
/// user, the client id, or both; a component the quota's entity does not have is
/// None, and clients differing only there share the measure.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Measured {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

impl Measured {
    /// The one measure entities past a broker's bound on measures share: neither a
    /// user nor a client id, which no quota's entity is, so no real measure is this.
    pub const OVERFLOW: Measured = Measured {
        user: None,
        client_id: None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client: Option<&str>) -> Entity {
        let name = |s: &str| {
            if s == "<default>" {
                EntityName::Default
            } else {
                EntityName::Name(s.into())
            }
        };
        Entity {
            user: user.map(name),
            client_id: client.map(name),
        }
    }

    #[test]
    fn the_most_specific_entity_with_the_key_wins_in_kafkas_order() {
        let mut q = ClientQuotas::default();
        // Set from least to most specific; check after each that the new one wins.
        let levels = [
            (None, Some("<default>")),
            (None, Some("app")),
            (Some("<default>"), None),
            (Some("<default>"), Some("<default>")),
            (Some("<default>"), Some("app")),
            (Some("alice"), None),
            (Some("alice"), Some("<default>")),
            (Some("alice"), Some("app")),
        ];
        for (i, (u, c)) in levels.iter().enumerate() {
            q.set(&entity(*u, *c), PRODUCER_BYTE_RATE, (i + 1) as f64 * 100.0);
            let (bound, measured) = q.resolve(PRODUCER_BYTE_RATE, "alice", "app").expect("a quota applies");
            assert_eq!(bound, (i + 1) as f64 * 100.0, "level {u:?}/{c:?}");
            assert_eq!(measured.user.is_some(), u.is_some(), "level {u:?}/{c:?}");
            assert_eq!(measured.client_id.is_some(), c.is_some(), "level {u:?}/{c:?}");
        }
        // Another key set nowhere applies to no one; another user falls to the defaults.
        assert!(q.resolve(CONSUMER_BYTE_RATE, "alice", "app").is_none());
        assert_eq!(q.resolve(PRODUCER_BYTE_RATE, "bob", "app").map(|(b, _)| b), Some(500.0));
        assert_eq!(
            q.resolve(PRODUCER_BYTE_RATE, "bob", "other").map(|(b, _)| b),
            Some(400.0)
        );
    }

    #[test]
    fn values_are_checked_per_key() {
        assert!(check_value(PRODUCER_BYTE_RATE, 1024.0).is_ok());
        assert!(check_value(PRODUCER_BYTE_RATE, 0.0).is_err());
        assert!(check_value(CONSUMER_BYTE_RATE, 10.5).is_err());
        assert!(check_value(CONSUMER_BYTE_RATE, f64::INFINITY).is_err());
        assert!(check_value(REQUEST_PERCENTAGE, 12.5).is_ok());
        assert!(check_value(REQUEST_PERCENTAGE, -1.0).is_err());
        assert!(check_value(REQUEST_PERCENTAGE, f64::NAN).is_err());
        assert!(check_value("controller_mutation_rate", 10.0).is_err());
        assert!(check_value("producer_byte_rates", 10.0).is_err());
    }

    #[test]
    fn entities_from_the_wire_name_each_type_once() {
        assert_eq!(
            Entity::from_components([(USER, Some("alice")), (CLIENT_ID, None)]),
            Ok(entity(Some("alice"), Some("<default>")))
        );
        assert!(Entity::from_components([(USER, Some("a")), (USER, Some("b"))]).is_err());
        assert!(Entity::from_components([(IP, Some("10.0.0.1"))]).is_err());
        assert!(Entity::from_components([("group", Some("g"))]).is_err());
        assert!(Entity::from_components([]).is_err());
        // An empty name is not the default (null) and names no client.
        let empty = |c: &[(&'static str, Option<&'static str>)]| {
            Entity::from_components(c.iter().copied()).unwrap().empty_component()
        };
        assert_eq!(empty(&[(USER, Some(""))]), Some(USER));
        assert_eq!(empty(&[(USER, Some("a")), (CLIENT_ID, Some(""))]), Some(CLIENT_ID));
        assert_eq!(empty(&[(USER, None), (CLIENT_ID, Some("c"))]), None);
    }

    #[test]
    fn filters_match_by_name_default_or_any_and_strictly() {
        let mut q = ClientQuotas::default();
        for (u, c) in [
            (Some("alice"), None),
            (Some("alice"), Some("app")),
            (Some("<default>"), None),
            (None, Some("app")),
        ] {
            q.set(&entity(u, c), REQUEST_PERCENTAGE, 50.0);
        }
        let f = |t: &str, m: Match| FilterComponent {
            entity_type: t.into(),
            matches: m,
        };
        let found = |filter: &[FilterComponent], strict| {
            q.matching(filter, strict)
                .into_iter()
                .map(|e| e.entity.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            found(&[f(USER, Match::Exact("alice".into()))], false),
            ["user=alice", "user=alice, client-id=app"]
        );
        assert_eq!(found(&[f(USER, Match::Exact("alice".into()))], true), ["user=alice"]);
        assert_eq!(found(&[f(USER, Match::Default)], false), ["user=<default>"]);
        assert_eq!(found(&[f(USER, Match::Any)], true), ["user=alice", "user=<default>"]);
        assert_eq!(
            found(&[f(CLIENT_ID, Match::Any)], false),
            ["user=alice, client-id=app", "client-id=app"]
        );
        assert_eq!(found(&[], false).len(), 4);
    }

    #[test]
    fn the_file_round_trips_and_drops_entities_left_without_quotas() {
        let dir = tempfile::tempdir().expect("tempdir");
        let volume = Volume::new(dir.path());
        let alice = entity(Some("alice"), None);
        let every_client = entity(None, Some("<default>"));
        ClientQuotas::update::<VolumeError>(&volume, |q| {
            q.set(&alice, PRODUCER_BYTE_RATE, 1_048_576.0);
            q.set(&every_client, REQUEST_PERCENTAGE, 25.0);
            Ok(())
        })
        .expect("written");
        let read = ClientQuotas::read(&volume).expect("read");
        assert_eq!(
            read.get(&alice).and_then(|q| q.get(PRODUCER_BYTE_RATE)),
            Some(&1_048_576.0)
        );
        assert_eq!(
            read.get(&every_client).and_then(|q| q.get(REQUEST_PERCENTAGE)),
            Some(&25.0)
        );
        ClientQuotas::update::<VolumeError>(&volume, |q| {
            assert!(q.remove(&alice, PRODUCER_BYTE_RATE));
            assert!(!q.remove(&alice, PRODUCER_BYTE_RATE));
            Ok(())
        })
        .expect("written");
        let read = ClientQuotas::read(&volume).expect("read");
        assert_eq!(read.entries.len(), 1, "{read:?}");
        assert!(read.get(&alice).is_none());
    }
}
