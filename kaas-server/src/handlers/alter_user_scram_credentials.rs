//! AlterUserScramCredentials (key 51): adds, replaces and deletes SCRAM credentials in
//! `__cluster/scram-credentials.json`, under its lock, as `kaasctl users` does. An
//! upsertion carries the salted password (the client salts and hashes; the password
//! never travels); the broker keeps only StoredKey and ServerKey. Errors are per user,
//! as Kafka's: UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL (iterations out of
//! 4096..=16384, empty salt or password or name), RESOURCE_NOT_FOUND (deleting what
//! does not exist), DUPLICATE_RESOURCE (a user and mechanism twice in one request). A
//! user with any error has none of its changes applied.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::scram::{Credentials, Mechanism, ScramCredential, MAX_ITERATIONS, MIN_ITERATIONS};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 0;

/// The longest salt and user name accepted (Kafka's clients send 32-64 byte salts).
const MAX_SALT: usize = 1024;
const MAX_USER: usize = 1024;

enum Change {
    Delete,
    Upsert(ScramCredential),
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // user -> first error, or its changes by mechanism
    let mut errors: BTreeMap<String, (i16, String)> = BTreeMap::new();
    let mut changes: BTreeMap<String, Vec<(Mechanism, Change)>> = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    let requested = req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism, None))
        .chain(
            req.upsertions
                .iter()
                .map(|u| (u.name.to_string(), u.mechanism, Some(u))),
        );
    // Kafka's check: ALTER on the cluster, else every user is refused; without an
    // authorizer, only a super user (or anyone, when the operator opted in).
    let may_alter = broker.authz.may_change_credentials(ctx);
    for (user, code, upsert) in requested {
        changes.entry(user.clone()).or_default();
        if errors.contains_key(&user) {
            continue;
        }
        if !may_alter {
            errors.insert(
                user,
                (
                    ResponseError::ClusterAuthorizationFailed.code(),
                    format!("{} may not alter SCRAM credentials", ctx.principal),
                ),
            );
            continue;
        }
        let fail = |code: ResponseError, message: String| (code.code(), message);
        let checked = (|| {
            if user.is_empty() {
                return Err(fail(
                    ResponseError::UnacceptableCredential,
                    "username must not be empty".into(),
                ));
            }
            let mechanism = Mechanism::from_code(code).ok_or_else(|| {
                fail(
                    ResponseError::UnsupportedSaslMechanism,
                    format!("unknown SCRAM mechanism type {code}"),
                )
            })?;
            if !seen.insert((user.clone(), code)) {
                return Err(fail(
                    ResponseError::DuplicateResource,
                    format!("credential for user {user} and mechanism {mechanism} is altered twice in one request"),
                ));
            }
            let change = match upsert {
                None => Change::Delete,
                Some(u) => {
                    let iterations = u32::try_from(u.iterations).unwrap_or(0);
                    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
                        return Err(fail(
                            ResponseError::UnacceptableCredential,
                            format!("iterations {} not in {MIN_ITERATIONS}..={MAX_ITERATIONS}", u.iterations),
                        ));
                    }
                    if u.salt.is_empty() || u.salted_password.is_empty() {
                        return Err(fail(
                            ResponseError::UnacceptableCredential,
                            "salt and salted password must not be empty".into(),
                        ));
                    }
                    // Every login reads the whole file: no entry may make it big.
                    if u.salt.len() > MAX_SALT || user.len() > MAX_USER {
                        return Err(fail(
                            ResponseError::UnacceptableCredential,
                            format!("salt at most {MAX_SALT} bytes, user name at most {MAX_USER}"),
                        ));
                    }
                    Change::Upsert(ScramCredential::from_salted_password(
                        mechanism,
                        &u.salted_password,
                        &u.salt,
                        iterations,
                    ))
                }
            };
            Ok((mechanism, change))
        })();
        match checked {
            Ok(c) => changes.entry(user).or_default().push(c),
            Err(e) => {
                errors.insert(user, e);
            }
        }
    }
    let written = crate::blocking::off_worker(|| {
        Credentials::update::<kaas_core::VolumeError>(&broker.volume, |creds| {
            for (user, list) in &changes {
                if errors.contains_key(user) {
                    continue;
                }
                // A deletion of what is not there fails the user's whole change.
                // (An entry present but unusable can be deleted: `users`, not `get`.)
                let missing = list.iter().find_map(|(m, c)| {
                    let present = creds.users.get(user).is_some_and(|by| by.contains_key(m.name()));
                    (matches!(c, Change::Delete) && !present).then_some(*m)
                });
                if let Some(m) = missing {
                    errors.insert(
                        user.clone(),
                        (
                            ResponseError::ResourceNotFound.code(),
                            format!("attempt to delete a user credential that does not exist: {user} {m}"),
                        ),
                    );
                    continue;
                }
                for (m, c) in list {
                    match c {
                        Change::Delete => {
                            creds.remove(user, *m);
                        }
                        Change::Upsert(v) => creds.set(user, *m, v.clone()),
                    }
                }
            }
            Ok(())
        })
    });
    let storage_error = written.err().map(|e| {
        tracing::error!(error = %e, "cannot write SCRAM credentials");
        e.to_string()
    });
    let results = changes
        .keys()
        .map(|user| {
            let r = AlterUserScramCredentialsResult::default().with_user(sb(user.clone()));
            match (errors.get(user), &storage_error) {
                (Some((code, message)), _) => r.with_error_code(*code).with_error_message(Some(sb(message.clone()))),
                (None, Some(e)) => r
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_error_message(Some(sb(e.clone()))),
                (None, None) => r,
            }
        })
        .collect();
    if storage_error.is_none() {
        // Who changed which credentials goes in the audit journal, as kaasctl's
        // changes do (`kaasctl audit`).
        let changed: Vec<&String> = changes.keys().filter(|u| !errors.contains_key(*u)).collect();
        for user in &changed {
            tracing::info!(user = %user, principal = %ctx.principal, peer = %ctx.peer, "SCRAM credentials altered");
        }
        super::journal(
            broker,
            ctx,
            "AlterUserScramCredentials",
            changed.into_iter().map(|u| format!("user {u}")),
        );
    }
    AlterUserScramCredentialsResponse::default().with_results(results)
}
