//! SASL on SASL_PLAINTEXT and SASL_SSL listeners (docs/security.md#sasl): PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512, as Kafka frames them — SaslHandshake v1 then
//! SaslAuthenticate requests (KIP-152), or SaslHandshake v0 then raw length-prefixed
//! tokens (the older framing). Until a connection has authenticated, only ApiVersions
//! and these two are served; anything else closes it, as Kafka does. Credentials are
//! the salted SCRAM verifiers of `__cluster/scram-credentials.json`
//! ([`kaas_core::scram`]), read at each authentication, so `kaasctl users` changes
//! take effect for the next login on every broker. With `connections.max.reauth.ms`
//! a session ends, and the client logs in again on its connection, as the same user
//! (KIP-368; the connection's side is in [`crate::server`]).

use crate::broker::Broker;
use crate::config::SaslMechanism;
use bytes::Bytes;
use kaas_core::scram::{AuthError, Credentials, ScramServer, ScramStep};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

/// The SCRAM credentials file as last read, per volume: read again when its stamp
/// (size, modification time, inode) changes, and at least once a second whatever the
/// stamp says (a stamp can repeat: same size, a coarse clock), so a user deleted or a
/// password changed by another broker or kaasctl counts within a second.
fn credentials(volume: &kaas_core::Volume) -> Result<Arc<Credentials>, kaas_core::VolumeError> {
    type Cache = std::collections::HashMap<
        std::path::PathBuf,
        (kaas_core::fsutil::FileStamp, std::time::Instant, Arc<Credentials>),
    >;
    static CACHE: std::sync::Mutex<Option<Cache>> = std::sync::Mutex::new(None);
    let path = volume.scram_credentials_file();
    let stamp = kaas_core::fsutil::file_stamp(&path);
    {
        let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(stamp), Some((seen, at, creds))) = (stamp, cache.as_ref().and_then(|c| c.get(&path))) {
            if *seen == stamp && at.elapsed() < std::time::Duration::from_secs(1) {
                return Ok(creds.clone());
            }
        }
    }
    let creds = Arc::new(Credentials::read(volume)?);
    if let Some(stamp) = stamp {
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get_or_insert_with(Default::default)
            .insert(path, (stamp, std::time::Instant::now(), creds.clone()));
    }
    Ok(creds)
}

/// The volume's SCRAM decoy secret ([`kaas_core::scram::Decoy`]), read (or made) once
/// (at start, [`warm_up`], so a login never pays for it). One that cannot be read or
/// made does not stop logins: unknown users get a salt made up under a key of this
/// process (the behaviour before the shared key), and the file is tried again a
/// minute later, with an error logged each time.
pub fn decoy(volume: &kaas_core::Volume) -> Arc<kaas_core::scram::Decoy> {
    type Cache =
        std::collections::HashMap<std::path::PathBuf, (Arc<kaas_core::scram::Decoy>, Option<std::time::Instant>)>;
    static CACHE: std::sync::Mutex<Option<Cache>> = std::sync::Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(Default::default);
    if let Some((d, failed_at)) = cache.get(volume.root()) {
        if failed_at.is_none_or(|at| at.elapsed() < std::time::Duration::from_secs(60)) {
            return d.clone();
        }
    }
    let (d, failed_at) = match kaas_core::scram::Decoy::load(volume) {
        Ok(d) => (Arc::new(d), None),
        Err(e) => {
            tracing::error!(error = %e, "cannot read or make the SCRAM decoy key; unknown users get a salt made up by this process until it can (tried again in a minute)");
            let key = kaas_core::scram::random_bytes(32).unwrap_or_else(|_| vec![0x5a; 32]);
            (
                Arc::new(kaas_core::scram::Decoy::with_key(key)),
                Some(std::time::Instant::now()),
            )
        }
    };
    cache.insert(volume.root().to_path_buf(), (d.clone(), failed_at));
    d
}

/// Reads (or makes) the decoy key before the first login (a broker with a SASL
/// listener, at start).
pub fn warm_up(volume: &kaas_core::Volume) {
    decoy(volume);
}

/// PLAIN logins checked at once (each a PBKDF2 of thousands of HMACs).
pub(crate) static PBKDF2_AT_ONCE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// One connection's authentication, from the handshake to a principal.
pub struct Authenticator {
    enabled: Vec<SaslMechanism>,
    state: State,
    /// What SaslAuthenticate v1+ tells a client its session lasts, in ms (KIP-368); 0
    /// for ever.
    session_lifetime_ms: i64,
    /// A re-authentication: the user the connection is, whom the login must name.
    again_as: Option<String>,
}

enum State {
    AwaitingHandshake,
    /// After the handshake: tokens in SaslAuthenticate requests (v1), or raw (v0).
    Exchanging {
        raw: bool,
        mechanism: SaslMechanism,
        scram: Option<ScramServer>,
    },
}

/// What a step leaves the connection with.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answer and read the next frame.
    Continue,
    /// Answer; the connection is `user`'s from now on.
    Authenticated(String),
    /// Answer (if there is an answer) and close: why, for the log.
    Failed(String),
}

/// One step's answer (a whole response frame, or a raw token for v0 framing) and its
/// outcome.
pub struct Step {
    pub response: Option<Bytes>,
    pub outcome: Outcome,
}

impl Authenticator {
    pub fn new(enabled: &[SaslMechanism], session_lifetime_ms: u64) -> Self {
        Authenticator {
            enabled: enabled.to_vec(),
            state: State::AwaitingHandshake,
            session_lifetime_ms: i64::try_from(session_lifetime_ms).unwrap_or(i64::MAX),
            again_as: None,
        }
    }

    /// A re-authentication (KIP-368) of a connection that is `user`'s: a login as
    /// anyone else fails, and the connection is closed (a connection keeps its
    /// principal, as in Kafka).
    pub fn again_as(mut self, user: &str) -> Self {
        self.again_as = Some(user.to_string());
        self
    }

    /// The mechanism the handshake chose, once it has.
    pub fn mechanism(&self) -> Option<SaslMechanism> {
        match self.state {
            State::Exchanging { mechanism, .. } => Some(mechanism),
            State::AwaitingHandshake => None,
        }
    }

    /// After a v0 handshake, the next frames are raw tokens, without a request header.
    pub fn raw_tokens(&self) -> bool {
        matches!(self.state, State::Exchanging { raw: true, .. })
    }

    /// A SaslHandshake or SaslAuthenticate request, decoded.
    pub async fn request(
        &mut self,
        broker: &Arc<Broker>,
        version: i16,
        request: RequestKind,
    ) -> (ResponseKind, Outcome) {
        match request {
            RequestKind::SaslHandshake(req) => {
                let asked = req.mechanism.to_string();
                let enabled: Vec<StrBytes> = self
                    .enabled
                    .iter()
                    .map(|m| StrBytes::from_static_str(m.name()))
                    .collect();
                let response = SaslHandshakeResponse::default().with_mechanisms(enabled);
                if !matches!(self.state, State::AwaitingHandshake) {
                    return (
                        ResponseKind::SaslHandshake(response.with_error_code(ResponseError::IllegalSaslState.code())),
                        Outcome::Failed("a second SaslHandshake".into()),
                    );
                }
                match self.enabled.iter().find(|m| m.name().eq_ignore_ascii_case(&asked)) {
                    Some(&mechanism) => {
                        self.state = State::Exchanging {
                            raw: version == 0,
                            mechanism,
                            scram: match mechanism {
                                SaslMechanism::Scram(m) => Some(ScramServer::new(m)),
                                SaslMechanism::Plain => None,
                            },
                        };
                        (ResponseKind::SaslHandshake(response), Outcome::Continue)
                    }
                    None => (
                        ResponseKind::SaslHandshake(
                            response.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
                        ),
                        Outcome::Failed(format!("SASL mechanism {asked:?} is not enabled")),
                    ),
                }
            }
            RequestKind::SaslAuthenticate(req) => {
                let response = SaslAuthenticateResponse::default();
                if !matches!(self.state, State::Exchanging { raw: false, .. }) {
                    return (
                        ResponseKind::SaslAuthenticate(
                            response
                                .with_error_code(ResponseError::IllegalSaslState.code())
                                .with_error_message(Some(StrBytes::from_static_str(
                                    "SaslAuthenticate before a SaslHandshake v1",
                                ))),
                        ),
                        Outcome::Failed("SaslAuthenticate out of order".into()),
                    );
                }
                let (token, outcome) = self.token(broker, req.auth_bytes).await;
                let response = match &outcome {
                    Outcome::Failed(_) => response
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(Some(StrBytes::from_string(token.client_message.clone()))),
                    Outcome::Authenticated(_) => response
                        .with_auth_bytes(token.bytes)
                        .with_session_lifetime_ms(self.session_lifetime_ms),
                    Outcome::Continue => response.with_auth_bytes(token.bytes),
                };
                (ResponseKind::SaslAuthenticate(response), outcome)
            }
            other => unreachable!("{other:?} is not a SASL request"),
        }
    }

    /// A raw token (after a v0 handshake): the raw answer, or none on failure (the
    /// connection is then closed without one, as Kafka does).
    pub async fn raw(&mut self, broker: &Arc<Broker>, token: Bytes) -> Step {
        let (answer, outcome) = self.token(broker, token).await;
        let response = match outcome {
            Outcome::Failed(_) => None,
            _ => {
                let mut framed = Vec::with_capacity(4 + answer.bytes.len());
                framed.extend_from_slice(&(answer.bytes.len() as i32).to_be_bytes());
                framed.extend_from_slice(&answer.bytes);
                Some(Bytes::from(framed))
            }
        };
        Step { response, outcome }
    }

    /// One client token through the chosen mechanism. Credential reads and the PBKDF2
    /// of PLAIN are blocking work, done off the async worker ([`crate::blocking`]).
    async fn token(&mut self, broker: &Arc<Broker>, token: Bytes) -> (Answer, Outcome) {
        let State::Exchanging { mechanism, scram, .. } = &mut self.state else {
            return (
                Answer::failed("no mechanism chosen"),
                Outcome::Failed("token before handshake".into()),
            );
        };
        let mechanism = *mechanism;
        // PLAIN costs a PBKDF2 per attempt, asked for by clients not yet known: a few
        // at a time, whatever the number of connections trying.
        let _permit = match mechanism {
            SaslMechanism::Plain => PBKDF2_AT_ONCE.acquire().await.ok(),
            SaslMechanism::Scram(_) => None,
        };
        // SCRAM's last step checks the proof against what its first step looked up.
        let lookup = mechanism == SaslMechanism::Plain || scram.as_ref().is_some_and(|s| s.awaiting_first());
        let worked = crate::blocking::off_worker(|| {
            let unavailable = |e: kaas_core::VolumeError| {
                tracing::error!(error = %e, "cannot read SCRAM credentials; logins fail until they read again");
                AuthError::Unsupported("credentials unavailable".into())
            };
            let creds = if lookup {
                credentials(&broker.volume).map_err(unavailable)?
            } else {
                Arc::new(Credentials::default())
            };
            match (mechanism, scram.as_mut()) {
                (SaslMechanism::Plain, _) => {
                    kaas_core::scram::authenticate_plain(&token, &creds).map(|user| ScramStep::Done {
                        response: Vec::new(),
                        user,
                    })
                }
                (SaslMechanism::Scram(m), Some(s)) => {
                    let decoy = if lookup {
                        decoy(&broker.volume)
                    } else {
                        Arc::new(kaas_core::scram::Decoy::with_key(Vec::new()))
                    };
                    s.step(&token, |u| creds.lookup(u, m, &decoy))
                }
                (SaslMechanism::Scram(_), None) => Err(AuthError::Unsupported("exchange already finished".into())),
            }
        });
        match worked {
            Ok(ScramStep::Continue(bytes)) => (Answer::ok(bytes), Outcome::Continue),
            Ok(ScramStep::Done { user, .. }) if self.again_as.as_ref().is_some_and(|u| *u != user) => {
                let was = self.again_as.as_deref().unwrap_or_default();
                (
                    Answer::failed("a re-authentication must name the connection's user"),
                    Outcome::Failed(format!("re-authentication as {user} on a connection of {was}")),
                )
            }
            Ok(ScramStep::Done { response, user }) => (Answer::ok(response), Outcome::Authenticated(user)),
            Err(e) => (
                Answer {
                    bytes: Bytes::new(),
                    client_message: e.client_message(),
                },
                Outcome::Failed(format!("{} authentication failed: {e}", mechanism.name())),
            ),
        }
    }
}

struct Answer {
    bytes: Bytes,
    client_message: String,
}

impl Answer {
    fn ok(bytes: Vec<u8>) -> Answer {
        Answer {
            bytes: Bytes::from(bytes),
            client_message: String::new(),
        }
    }
    fn failed(why: &str) -> Answer {
        Answer {
            bytes: Bytes::new(),
            client_message: format!("Authentication failed: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The credentials file is read once while it stays the same, and again as soon as
    /// its stamp changes (a user added elsewhere logs in at once).
    #[test]
    fn credentials_are_cached_by_stamp_and_read_again_when_the_file_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let volume = kaas_core::Volume::new(dir.path());
        let add = |user: &str| {
            let credential =
                kaas_core::scram::ScramCredential::from_password(kaas_core::scram::Mechanism::ScramSha256, "pw", 4096)
                    .expect("a credential");
            Credentials::update::<kaas_core::VolumeError>(&volume, |c| {
                c.set(user, kaas_core::scram::Mechanism::ScramSha256, credential);
                Ok(())
            })
            .expect("written");
        };
        add("alice");
        let first = credentials(&volume).expect("read");
        assert!(
            Arc::ptr_eq(&first, &credentials(&volume).expect("read")),
            "not read again"
        );
        add("bob");
        let second = credentials(&volume).expect("read");
        assert!(second.get("bob", kaas_core::scram::Mechanism::ScramSha256).is_some());
    }
}
