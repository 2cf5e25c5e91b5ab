//! SASL credentials: SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) verifiers
//! stored in `__cluster/scram-credentials.json`, and the server side of the SCRAM and
//! PLAIN exchanges that check a client against them; and the client side of SCRAM a broker
//! uses towards its peers.
//!
//! Only salted verifiers are stored (salt, iteration count, StoredKey, ServerKey): the
//! file lets a reader check a password offered to it, never learn one. PLAIN is checked
//! against the same verifiers, so there is one set of credentials for both mechanisms
//! (docs/security.md#how-credentials-are-stored).

use crate::error::{read_versioned_json_or, update_locked_json};
use crate::layout::Volume;
use crate::VolumeError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use std::collections::BTreeMap;

/// A SCRAM mechanism, with Kafka's code for it (DescribeUserScramCredentials).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    ScramSha256,
    ScramSha512,
}

/// Kafka's bounds on the iteration count (ScramMechanism.minIterations, and the
/// broker's refusal of more than 16384).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;
/// What `kaasctl users add` uses unless told otherwise; also the cost of the decoy
/// work done for an unknown user.
pub const DEFAULT_ITERATIONS: u32 = 8192;

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::ScramSha256, Mechanism::ScramSha512];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// Kafka's ScramMechanism type code: 1 = SHA-256, 2 = SHA-512.
    pub fn code(self) -> i8 {
        match self {
            Mechanism::ScramSha256 => 1,
            Mechanism::ScramSha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha256 => Sha256::digest(data).to_vec(),
            Mechanism::ScramSha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length: new_from_slice cannot fail.
        match self {
            Mechanism::ScramSha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::ScramSha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// SaltedPassword := Hi(Normalize(password), salt, i), RFC 5802 §3. (No SASLprep:
    /// Kafka's clients and broker use the password's UTF-8 bytes as they are.)
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::ScramSha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            Mechanism::ScramSha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One user's verifier for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    #[serde(with = "b64")]
    pub salt: Vec<u8>,
    pub iterations: u32,
    #[serde(with = "b64")]
    pub stored_key: Vec<u8>,
    #[serde(with = "b64")]
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// The verifier of `salted_password` (what AlterUserScramCredentials carries: the
    /// client salts and hashes, the password never travels).
    pub fn from_salted_password(mechanism: Mechanism, salted_password: &[u8], salt: &[u8], iterations: u32) -> Self {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
        }
    }

    /// A verifier of `password` with a fresh random salt.
    pub fn from_password(mechanism: Mechanism, password: &str, iterations: u32) -> std::io::Result<Self> {
        let salt = random_bytes(32)?;
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Ok(Self::from_salted_password(mechanism, &salted, &salt, iterations))
    }

    /// Whether `password` is the one this verifier was made from (PLAIN). Costs the
    /// iteration count in HMACs, as a SCRAM login does on the client.
    pub fn verify_password(&self, mechanism: Mechanism, password: &[u8]) -> bool {
        let salted = mechanism.salted_password(password, &self.salt, self.iterations);
        let stored_key = mechanism.hash(&mechanism.hmac(&salted, b"Client Key"));
        constant_time_eq(&stored_key, &self.stored_key)
    }
}

pub fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    let mut v = vec![0u8; n];
    getrandom::fill(&mut v).map_err(|e| std::io::Error::other(format!("no randomness from the OS: {e}")))?;
    Ok(v)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Bytes as a base64 string in JSON (`#[serde(with = "crate::scram::b64")]`): the
/// credentials' salts and keys, a classic group's member metadata and assignments.
pub(crate) mod b64 {
    use super::*;
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(v))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        B64.decode(s.as_bytes()).map_err(serde::de::Error::custom)
    }
}

pub const CREDENTIALS_FORMAT_VERSION: u32 = 1;

/// `__cluster/scram-credentials.json`: user -> mechanism name -> verifier.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub version: u32,
    #[serde(default)]
    pub users: BTreeMap<String, BTreeMap<String, ScramCredential>>,
}

crate::versioned!(Credentials);

impl Credentials {
    /// The credentials on the volume; none stored is empty.
    pub fn read(volume: &Volume) -> Result<Credentials, VolumeError> {
        read_versioned_json_or(
            &volume.scram_credentials_file(),
            "SCRAM credentials",
            CREDENTIALS_FORMAT_VERSION,
            || Credentials {
                version: CREDENTIALS_FORMAT_VERSION,
                ..Default::default()
            },
        )
    }

    /// Read-modify-write under `scram-credentials.lock` (brokers and kaasctl alike):
    /// `f` changes the credentials or returns an error, and then nothing is written.
    pub fn update<E: From<VolumeError>>(
        volume: &Volume,
        f: impl FnOnce(&mut Credentials) -> Result<(), E>,
    ) -> Result<Credentials, E> {
        update_locked_json(volume, &volume.scram_credentials_file(), Self::read, f, |c| {
            c.users.retain(|_, m| !m.is_empty())
        })
    }

    /// `user`'s verifier for `mechanism`, if it has a usable one. An entry with an
    /// iteration count outside 4096..=16384 or keys of the wrong length (a file
    /// edited by hand) is not used: a login costs the stored count in HMACs, which
    /// must stay bounded. Only that user's login fails; `kaasctl users` still
    /// lists and replaces it.
    pub fn get(&self, user: &str, mechanism: Mechanism) -> Option<&ScramCredential> {
        let c = self.users.get(user)?.get(mechanism.name())?;
        let len = mechanism.hash(b"").len();
        if (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&c.iterations)
            && c.stored_key.len() == len
            && c.server_key.len() == len
        {
            Some(c)
        } else {
            tracing::warn!(user, %mechanism, iterations = c.iterations, "SCRAM credential unusable (iterations out of 4096..=16384 or keys of the wrong length); replace it with kaasctl users add");
            None
        }
    }

    pub fn set(&mut self, user: &str, mechanism: Mechanism, credential: ScramCredential) {
        self.users
            .entry(user.to_string())
            .or_default()
            .insert(mechanism.name().to_string(), credential);
    }

    /// Removes one mechanism's credential; whether there was one.
    pub fn remove(&mut self, user: &str, mechanism: Mechanism) -> bool {
        let removed = self
            .users
            .get_mut(user)
            .is_some_and(|m| m.remove(mechanism.name()).is_some());
        self.users.retain(|_, m| !m.is_empty());
        removed
    }

    /// The mechanisms a user has, with iteration counts, as kaasctl and
    /// DescribeUserScramCredentials show them.
    pub fn mechanisms_of(&self, user: &str) -> Vec<(Mechanism, u32)> {
        self.users
            .get(user)
            .map(|m| {
                m.iter()
                    .filter_map(|(name, c)| Mechanism::from_name(name).map(|mech| (mech, c.iterations)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `user`'s `mechanism` verifier, or Err(`decoy`'s made-up one) when it has none
    /// ([`ScramServer::step`]'s lookup). The decoy is made for a known user too and
    /// thrown away: it walks every user (for their most common shape), and the first
    /// step of a login, answered before any failure delay, took that much longer for
    /// an unknown user only — a difference that grows with the users stored, enough to
    /// tell which exist with thousands.
    pub fn lookup(&self, user: &str, mechanism: Mechanism, decoy: &Decoy) -> Result<ScramCredential, ScramCredential> {
        let made_up = decoy.credential(self, mechanism, user);
        self.get(user, mechanism).cloned().ok_or(made_up)
    }

    /// The salt length and iteration count most of the users' `mechanism` verifiers
    /// have (ties: the smaller); 32 bytes and [`DEFAULT_ITERATIONS`] with none.
    pub fn most_common_shape(&self, mechanism: Mechanism) -> (usize, u32) {
        let mut counts: BTreeMap<(usize, u32), usize> = BTreeMap::new();
        for c in self.users.values().filter_map(|m| m.get(mechanism.name())) {
            *counts.entry((c.salt.len(), c.iterations)).or_insert(0) += 1;
        }
        counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map_or((32, DEFAULT_ITERATIONS), |(shape, _)| shape)
    }

    /// The verifier PLAIN checks a password of `user` with: its strongest.
    fn plain_verifier(&self, user: &str) -> Option<(Mechanism, &ScramCredential)> {
        [Mechanism::ScramSha512, Mechanism::ScramSha256]
            .into_iter()
            .find_map(|m| self.get(user, m).map(|c| (m, c)))
    }

    /// What PLAIN checks an unknown user's password with: a verifier of the
    /// mechanism, salt length and iteration count most users' PLAIN checks have (ties:
    /// the cheaper), so an unknown user costs what a typical user costs and timing
    /// does not tell which users exist. Before, it always cost SCRAM-SHA-512 at 8192
    /// iterations: with users made by Kafka's tools (4096 iterations), a known user
    /// was answered a millisecond or two sooner
    /// (`plain_checks_an_unknown_user_like_the_users_there_are`). Walks every user, for
    /// a known user's check too, so the walk itself tells nothing either.
    fn plain_decoy(&self) -> (Mechanism, ScramCredential) {
        let mut counts: BTreeMap<(u32, usize, u8), usize> = BTreeMap::new();
        for user in self.users.keys() {
            if let Some((m, c)) = self.plain_verifier(user) {
                let rank = u8::from(m == Mechanism::ScramSha512);
                *counts.entry((c.iterations, c.salt.len(), rank)).or_insert(0) += 1;
            }
        }
        let (iterations, salt_len, rank) = counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map_or((DEFAULT_ITERATIONS, 32, 1), |(shape, _)| shape);
        let m = if rank == 1 {
            Mechanism::ScramSha512
        } else {
            Mechanism::ScramSha256
        };
        let key_len = m.hmac(b"", b"").len();
        let decoy = ScramCredential {
            salt: vec![0; salt_len],
            iterations,
            stored_key: vec![0; key_len],
            server_key: vec![0; key_len],
        };
        (m, decoy)
    }

    /// PLAIN: whether `password` is `user`'s, by its strongest verifier; None when the
    /// user has no usable verifier, after the work a typical user's check costs
    /// ([`Self::plain_decoy`]).
    pub fn check_password(&self, user: &str, password: &[u8]) -> Option<bool> {
        let (decoy_mechanism, decoy) = self.plain_decoy();
        // (An unusable entry reads as no user: PLAIN's check falls to the decoy.)
        match self.plain_verifier(user) {
            Some((m, c)) => Some(c.verify_password(m, password)),
            None => {
                let _ = decoy.verify_password(decoy_mechanism, password);
                None
            }
        }
    }
}

/// Why an authentication failed. The message a client gets is the same for an unknown
/// user and a wrong password ([`AuthError::client_message`]); the log line says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("malformed {mechanism} message: {detail}")]
    Malformed { mechanism: &'static str, detail: String },
    #[error("unknown user {user:?}")]
    UnknownUser { user: String },
    #[error("wrong password for user {user:?}")]
    WrongPassword { user: String },
    #[error("{0}")]
    Unsupported(String),
}

impl AuthError {
    /// What the client is told (Kafka's wording for bad credentials).
    pub fn client_message(&self) -> String {
        match self {
            AuthError::UnknownUser { .. } | AuthError::WrongPassword { .. } => {
                "Authentication failed: Invalid username or password".into()
            }
            other => format!("Authentication failed: {other}"),
        }
    }
}

/// PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`. Returns the user name.
pub fn authenticate_plain(token: &[u8], creds: &Credentials) -> Result<String, AuthError> {
    let malformed = |detail: &str| AuthError::Malformed {
        mechanism: "PLAIN",
        detail: detail.into(),
    };
    let mut parts = token.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("expected authzid NUL username NUL password"));
    };
    let user = std::str::from_utf8(user).map_err(|_| malformed("username is not UTF-8"))?;
    if user.is_empty() {
        return Err(malformed("empty username"));
    }
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(AuthError::Unsupported(
            "an authorization id other than the username is not supported".into(),
        ));
    }
    match creds.check_password(user, password) {
        Some(true) => Ok(user.to_string()),
        Some(false) => Err(AuthError::WrongPassword { user: user.into() }),
        None => Err(AuthError::UnknownUser { user: user.into() }),
    }
}

/// The server side of one SCRAM exchange: client-first → server-first, client-final →
/// server-final (RFC 5802 §5).
#[derive(Debug)]
pub struct ScramServer {
    mechanism: Mechanism,
    state: ScramState,
}

#[derive(Debug)]
enum ScramState {
    AwaitingClientFirst,
    AwaitingClientFinal {
        user: String,
        /// No such user: the exchange goes on with a made-up verifier (RFC 5802
        /// §5.1), so a client learns nothing before its proof fails.
        unknown: bool,
        credential: ScramCredential,
        /// client-first-bare "," server-first
        auth_prefix: String,
        nonce: String,
        gs2_header: String,
    },
    Done,
}

/// What one step of a SCRAM exchange answers.
pub enum ScramStep {
    /// Send this and wait for the next client message.
    Continue(Vec<u8>),
    /// Send this; `user` is authenticated.
    Done { response: Vec<u8>, user: String },
}

impl ScramServer {
    pub fn new(mechanism: Mechanism) -> Self {
        ScramServer {
            mechanism,
            state: ScramState::AwaitingClientFirst,
        }
    }

    /// Whether the next step is the client's first message (the one that looks the
    /// user up).
    pub fn awaiting_first(&self) -> bool {
        matches!(self.state, ScramState::AwaitingClientFirst)
    }

    /// Takes the next client message; `lookup` finds a user's verifier: Ok(it), or
    /// Err(a made-up one, [`Decoy::credential`]) for a user who does not exist, whose
    /// exchange goes on alike and fails at the proof (RFC 5802 §5.1).
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Result<ScramCredential, ScramCredential>,
    ) -> Result<ScramStep, AuthError> {
        let mechanism = self.mechanism.name();
        let malformed = |detail: &str| AuthError::Malformed {
            mechanism,
            detail: detail.into(),
        };
        let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        match std::mem::replace(&mut self.state, ScramState::Done) {
            ScramState::AwaitingClientFirst => {
                // gs2-header: "n,," or "n,a=authzid," (no channel binding: "y"/"p" refused)
                let (cbind, rest) = text.split_once(',').ok_or_else(|| malformed("no GS2 header"))?;
                if cbind != "n" && cbind != "y" {
                    return Err(AuthError::Unsupported("channel binding is not supported".into()));
                }
                let (authzid, bare) = rest.split_once(',').ok_or_else(|| malformed("no GS2 header"))?;
                if !authzid.is_empty() && !authzid.starts_with("a=") {
                    return Err(malformed("GS2 authzid must be empty or a=name"));
                }
                let gs2_header = format!("{cbind},{authzid},");
                let mut user = None;
                let mut client_nonce = None;
                for attr in bare.split(',') {
                    match attr.split_once('=') {
                        Some(("n", v)) => user = Some(sasl_name(v).ok_or_else(|| malformed("bad username escape"))?),
                        Some(("r", v)) => client_nonce = Some(v.to_string()),
                        Some(("m", _)) => return Err(malformed("mandatory extension not supported")),
                        Some(("tokenauth", _)) => {
                            return Err(AuthError::Unsupported("delegation tokens are not supported".into()))
                        }
                        _ => {}
                    }
                }
                let user = user.filter(|u| !u.is_empty()).ok_or_else(|| malformed("no username"))?;
                let client_nonce = client_nonce
                    .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic() && b != b','))
                    .ok_or_else(|| malformed("no client nonce"))?;
                if let Some(a) = authzid.strip_prefix("a=") {
                    if sasl_name(a).as_deref() != Some(user.as_str()) {
                        return Err(AuthError::Unsupported(
                            "an authorization id other than the username is not supported".into(),
                        ));
                    }
                }
                let found = lookup(&user);
                let unknown = found.is_err();
                let credential = found.unwrap_or_else(|decoy| decoy);
                let server_nonce = B64.encode(random_bytes(18).map_err(|e| AuthError::Unsupported(e.to_string()))?);
                let nonce = format!("{client_nonce}{server_nonce}");
                let server_first = format!(
                    "r={nonce},s={},i={}",
                    B64.encode(&credential.salt),
                    credential.iterations
                );
                let auth_prefix = format!("{bare},{server_first}");
                self.state = ScramState::AwaitingClientFinal {
                    user,
                    unknown,
                    credential,
                    auth_prefix,
                    nonce,
                    gs2_header,
                };
                Ok(ScramStep::Continue(server_first.into_bytes()))
            }
            ScramState::AwaitingClientFinal {
                user,
                unknown,
                credential,
                auth_prefix,
                nonce,
                gs2_header,
            } => {
                let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| malformed("no proof"))?;
                let mut channel = None;
                let mut final_nonce = None;
                for attr in without_proof.split(',') {
                    match attr.split_once('=') {
                        Some(("c", v)) => channel = Some(v),
                        Some(("r", v)) => final_nonce = Some(v),
                        _ => {}
                    }
                }
                if channel != Some(B64.encode(gs2_header.as_bytes()).as_str()) {
                    return Err(malformed("channel binding does not match the GS2 header"));
                }
                if final_nonce != Some(nonce.as_str()) {
                    return Err(malformed("nonce does not match"));
                }
                let proof = B64.decode(proof).map_err(|_| malformed("proof is not base64"))?;
                if unknown {
                    return Err(AuthError::UnknownUser { user });
                }
                let m = self.mechanism;
                let auth_message = format!("{auth_prefix},{without_proof}");
                let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
                if proof.len() != client_signature.len() {
                    return Err(AuthError::WrongPassword { user });
                }
                let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(a, b)| a ^ b).collect();
                if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
                    return Err(AuthError::WrongPassword { user });
                }
                let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
                Ok(ScramStep::Done {
                    response: format!("v={}", B64.encode(server_signature)).into_bytes(),
                    user,
                })
            }
            ScramState::Done => Err(malformed("exchange already finished")),
        }
    }
}

/// What an unknown user's SCRAM exchange is answered with, so that it looks like a
/// real user's: a salt derived from the name under a secret every broker shares
/// (`__cluster/scram-decoy.key`, made once: the same answer from every broker and
/// after every restart, as a real user's), of the length and with the iteration count
/// most of the stored users have.
pub struct Decoy {
    key: Vec<u8>,
}

/// The secret's file under `__cluster/`.
pub const DECOY_KEY_FILE: &str = "scram-decoy.key";

#[cfg(test)]
thread_local! {
    /// Decoy verifiers made on this thread (tests of what a lookup costs).
    static DECOYS_MADE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Decoy {
    /// The volume's decoy secret, made (32 random bytes, durably, never replaced)
    /// by the first broker that needs it; another broker making it at the same moment
    /// finds the first one's.
    pub fn load(volume: &Volume) -> Result<Decoy, VolumeError> {
        let path = volume.cluster_dir().join(DECOY_KEY_FILE);
        let io = |e| VolumeError::io(&path, e);
        match crate::fsutil::read_capped(&path, 1024) {
            Ok(key) if key.len() >= 32 => return Ok(Decoy { key }),
            Ok(_) => {
                return Err(VolumeError::Invalid {
                    path,
                    detail: "shorter than the 32 bytes a decoy key is".into(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let key = random_bytes(32).map_err(io)?;
        // Fails over to the first broker's key if another made one meanwhile.
        if crate::fsutil::atomic_create(&path, &key).map_err(io)? {
            Ok(Decoy { key })
        } else {
            Self::load(volume)
        }
    }

    /// A decoy of a given key (tests; tools that have the key in hand).
    pub fn with_key(key: Vec<u8>) -> Decoy {
        Decoy { key }
    }

    /// The made-up verifier for `user`: a salt shaped as `credentials`' users' most
    /// common one for `mechanism`, their most common iteration count (32 bytes and
    /// [`DEFAULT_ITERATIONS`] with none), keys nobody has.
    pub fn credential(&self, credentials: &Credentials, mechanism: Mechanism, user: &str) -> ScramCredential {
        #[cfg(test)]
        DECOYS_MADE.with(|d| d.set(d.get() + 1));
        let m = mechanism;
        let (salt_len, iterations) = credentials.most_common_shape(m);
        let mut salt = Vec::with_capacity(salt_len);
        let mut block = 0u32;
        while salt.len() < salt_len {
            let more = m.hmac(&self.key, format!("{}\0{block}\0{user}", m.name()).as_bytes());
            salt.extend_from_slice(&more[..more.len().min(salt_len - salt.len())]);
            block += 1;
        }
        ScramCredential {
            stored_key: m.hmac(&self.key, b"no such user"),
            server_key: m.hmac(&self.key, b"no such user either"),
            salt,
            iterations,
        }
    }
}

/// The client side of one SCRAM exchange (RFC 5802 §3), for a broker authenticating
/// to its peers (`--inter-broker-sasl-*`): [`ScramClient::first`] → server-first →
/// [`ScramClient::answer`] → server-final → [`ScramClient::verify_server`], which
/// refuses a server that does not know the user's verifier.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: Mechanism,
    /// client-first-bare
    bare: String,
    client_nonce: String,
    /// HMAC(ServerKey, AuthMessage), once the server-first is answered.
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange for `user`: returns the client and its client-first message.
    pub fn first(mechanism: Mechanism, user: &str) -> std::io::Result<(ScramClient, Vec<u8>)> {
        let client_nonce = B64.encode(random_bytes(18)?);
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        let bare = format!("n={escaped},r={client_nonce}");
        let message = format!("n,,{bare}").into_bytes();
        Ok((
            ScramClient {
                mechanism,
                bare,
                client_nonce,
                server_signature: None,
            },
            message,
        ))
    }

    /// The client-final message (with its proof) for the server-first `message`.
    pub fn answer(&mut self, message: &[u8], password: &str) -> Result<Vec<u8>, AuthError> {
        let mechanism = self.mechanism.name();
        let malformed = |detail: &str| AuthError::Malformed {
            mechanism,
            detail: detail.into(),
        };
        let server_first = std::str::from_utf8(message).map_err(|_| malformed("server-first is not UTF-8"))?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|_| malformed("salt is not base64"))?),
                Some(("i", v)) => iterations = Some(v.parse::<u32>().map_err(|_| malformed("bad iteration count"))?),
                Some(("m", _)) => return Err(malformed("mandatory extension not supported")),
                _ => {}
            }
        }
        let nonce = nonce
            .filter(|n| n.starts_with(&self.client_nonce) && n.len() > self.client_nonce.len())
            .ok_or_else(|| malformed("server nonce does not extend the client's"))?;
        let salt = salt.ok_or_else(|| malformed("no salt"))?;
        let iterations = iterations
            .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(i))
            .ok_or_else(|| malformed("iteration count missing or outside 4096..=16384"))?;
        let m = self.mechanism;
        let salted = m.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", B64.encode("n,,"));
        let auth_message = format!("{},{server_first},{without_proof}", self.bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = m.hmac(&salted, b"Server Key");
        self.server_signature = Some(m.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it holds the verifier.
    pub fn verify_server(&self, message: &[u8]) -> Result<(), AuthError> {
        let mechanism = self.mechanism.name();
        let text = std::str::from_utf8(message).map_err(|_| AuthError::Malformed {
            mechanism,
            detail: "server-final is not UTF-8".into(),
        })?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(AuthError::Unsupported(format!("the server refused: {e}")));
        }
        let expected = self.server_signature.as_ref().ok_or_else(|| AuthError::Malformed {
            mechanism,
            detail: "server-final before server-first".into(),
        })?;
        let given = text
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| AuthError::Malformed {
                mechanism,
                detail: "server-final has no signature".into(),
            })?;
        if constant_time_eq(&given, expected) {
            Ok(())
        } else {
            Err(AuthError::Unsupported(
                "the server's signature is wrong: it does not hold this user's verifier".into(),
            ))
        }
    }
}

/// saslname: "=2C" is ',', "=3D" is '='; any other '=' is malformed.
fn sasl_name(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i + 1..i + 3) {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_decoy() -> Decoy {
        Decoy::with_key(vec![7; 32])
    }

    /// An unknown user's made-up salt and iteration count look like the stored
    /// users' (their most common shape), and every broker of the volume (every
    /// `Decoy::load`) makes up the same one.
    #[test]
    fn an_unknown_users_answer_is_shaped_as_the_users_and_the_same_on_every_broker() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let (a, b) = (Decoy::load(&volume).unwrap(), Decoy::load(&volume).unwrap());
        let mut creds = Credentials::default();
        for (user, salt, iterations) in [("u1", 16, 4096), ("u2", 16, 4096), ("u3", 32, 8192)] {
            creds.users.entry(user.into()).or_default().insert(
                Mechanism::ScramSha256.name().into(),
                ScramCredential {
                    salt: vec![1; salt],
                    iterations,
                    stored_key: vec![0; 32],
                    server_key: vec![0; 32],
                },
            );
        }
        let (x, y) = (
            a.credential(&creds, Mechanism::ScramSha256, "nobody"),
            b.credential(&creds, Mechanism::ScramSha256, "nobody"),
        );
        assert_eq!(x.salt, y.salt, "the same on every broker and after a restart");
        assert_eq!((x.salt.len(), x.iterations), (16, 4096), "the users' most common shape");
        let z = a.credential(&creds, Mechanism::ScramSha512, "nobody");
        assert_eq!(
            (z.salt.len(), z.iterations),
            (32, DEFAULT_ITERATIONS),
            "no SHA-512 users: the defaults"
        );
        assert_ne!(x.salt, a.credential(&creds, Mechanism::ScramSha256, "somebody").salt);
    }

    /// A client side written from RFC 5802, to drive the server.
    fn client_exchange(
        m: Mechanism,
        user: &str,
        password: &str,
        server: &mut ScramServer,
        creds: &Credentials,
    ) -> Result<String, AuthError> {
        let cnonce = "fyko+d2lbbFgONRv9qkxdawL";
        let bare = format!("n={user},r={cnonce}");
        let first = format!("n,,{bare}");
        let ScramStep::Continue(server_first) = server.step(first.as_bytes(), |u| creds.lookup(u, m, &test_decoy()))?
        else {
            panic!("finished after one step")
        };
        let server_first = String::from_utf8(server_first).unwrap();
        let attrs: BTreeMap<&str, &str> = server_first.split(',').filter_map(|a| a.split_once('=')).collect();
        let salt = B64.decode(attrs["s"]).unwrap();
        let iterations: u32 = attrs["i"].parse().unwrap();
        let salted = m.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={}", B64.encode("n,,"), attrs["r"]);
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let last = format!("{without_proof},p={}", B64.encode(proof));
        match server.step(last.as_bytes(), |_| unreachable!())? {
            ScramStep::Done { response, user } => {
                let server_key = m.hmac(&salted, b"Server Key");
                let expected = format!("v={}", B64.encode(m.hmac(&server_key, auth_message.as_bytes())));
                assert_eq!(
                    String::from_utf8(response).unwrap(),
                    expected,
                    "server proves it knows the verifier"
                );
                Ok(user)
            }
            ScramStep::Continue(_) => panic!("no end"),
        }
    }

    fn with_user(user: &str, password: &str) -> Credentials {
        let mut c = Credentials::default();
        for m in Mechanism::ALL {
            c.set(
                user,
                m,
                ScramCredential::from_password(m, password, MIN_ITERATIONS).unwrap(),
            );
        }
        c
    }

    #[test]
    fn scram_accepts_the_right_password_and_refuses_others() {
        let creds = with_user("alice", "s3cret");
        for m in Mechanism::ALL {
            assert_eq!(
                client_exchange(m, "alice", "s3cret", &mut ScramServer::new(m), &creds),
                Ok("alice".into())
            );
            assert_eq!(
                client_exchange(m, "alice", "wrong", &mut ScramServer::new(m), &creds),
                Err(AuthError::WrongPassword { user: "alice".into() })
            );
            assert_eq!(
                client_exchange(m, "bob", "s3cret", &mut ScramServer::new(m), &creds),
                Err(AuthError::UnknownUser { user: "bob".into() })
            );
        }
    }

    /// RFC 7677 §3's SCRAM-SHA-256 example: the verifier made from its password, salt
    /// and iteration count proves the RFC's client proof.
    /// The client side against the server side: the right password in, a wrong one
    /// refused, and a server without the verifier caught by the client.
    #[test]
    fn the_scram_client_authenticates_against_the_server() {
        let creds = with_user("a=b,c", "s3cret");
        for m in Mechanism::ALL {
            let run = |password: &str| {
                let mut server = ScramServer::new(m);
                let (mut client, first) = ScramClient::first(m, "a=b,c").unwrap();
                let ScramStep::Continue(server_first) = server.step(&first, |u| creds.lookup(u, m, &test_decoy()))?
                else {
                    panic!("finished after one step")
                };
                let last = client.answer(&server_first, password)?;
                match server.step(&last, |_| unreachable!())? {
                    ScramStep::Done { response, user } => {
                        client.verify_server(&response)?;
                        Ok(user)
                    }
                    ScramStep::Continue(_) => panic!("no end"),
                }
            };
            assert_eq!(run("s3cret"), Ok("a=b,c".to_string()));
            assert!(matches!(run("wrong"), Err(AuthError::WrongPassword { .. })));
            let (mut client, _) = ScramClient::first(m, "u").unwrap();
            let forged = format!("r={}xyz,s={},i=4096", client.client_nonce, B64.encode(b"salt"));
            client.answer(forged.as_bytes(), "pw").unwrap();
            assert!(client
                .verify_server(format!("v={}", B64.encode([0u8; 32])).as_bytes())
                .is_err());
            let (mut client, _) = ScramClient::first(m, "u").unwrap();
            assert!(
                client.answer(b"r=other,s=c2FsdA==,i=4096", "pw").is_err(),
                "a nonce not extending ours"
            );
        }
    }

    #[test]
    fn scram_sha_256_matches_the_rfc_7677_example() {
        let m = Mechanism::ScramSha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = ScramCredential::from_salted_password(m, &m.salted_password(b"pencil", &salt, 4096), &salt, 4096);
        let bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth = format!("{bare},{server_first},{without_proof}");
        let proof = B64.decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=").unwrap();
        let sig = m.hmac(&cred.stored_key, auth.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        assert_eq!(m.hash(&client_key), cred.stored_key);
        assert_eq!(
            B64.encode(m.hmac(&cred.server_key, auth.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    /// An unknown user gets a server-first like anyone's (a stable salt for the name,
    /// the users' iteration count) and fails only at the proof.
    #[test]
    fn an_unknown_user_is_told_apart_only_in_the_log() {
        let creds = with_user("alice", "s3cret");
        let first = |user: &str| {
            let mut s = ScramServer::new(Mechanism::ScramSha512);
            match s.step(format!("n,,n={user},r=abc").as_bytes(), |u| {
                creds.lookup(u, Mechanism::ScramSha512, &test_decoy())
            }) {
                Ok(ScramStep::Continue(b)) => String::from_utf8(b).unwrap(),
                _ => panic!("no server-first for {user}"),
            }
        };
        let salt = |m: &str| m.split(',').find_map(|a| a.strip_prefix("s=")).unwrap().to_string();
        let (a, b) = (first("nobody"), first("nobody"));
        assert_eq!(salt(&a), salt(&b), "the same made-up salt each time");
        let alices = creds.get("alice", Mechanism::ScramSha512).unwrap().iterations;
        assert!(
            a.ends_with(&format!(",i={alices}")),
            "the iteration count the users have"
        );
        assert_ne!(salt(&a), salt(&first("somebody")));
    }

    #[test]
    fn plain_checks_the_password_against_the_scram_verifier() {
        let creds = with_user("alice", "s3cret");
        assert_eq!(authenticate_plain(b"\0alice\0s3cret", &creds), Ok("alice".into()));
        assert_eq!(authenticate_plain(b"alice\0alice\0s3cret", &creds), Ok("alice".into()));
        assert!(matches!(
            authenticate_plain(b"\0alice\0nope", &creds),
            Err(AuthError::WrongPassword { .. })
        ));
        assert!(matches!(
            authenticate_plain(b"\0bob\0s3cret", &creds),
            Err(AuthError::UnknownUser { .. })
        ));
        assert!(matches!(
            authenticate_plain(b"bob\0alice\0s3cret", &creds),
            Err(AuthError::Unsupported(_))
        ));
        assert!(matches!(
            authenticate_plain(b"alice s3cret", &creds),
            Err(AuthError::Malformed { .. })
        ));
    }

    #[test]
    fn sasl_names_unescape_comma_and_equals() {
        assert_eq!(sasl_name("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(sasl_name("a=b"), None);
        assert_eq!(sasl_name("a="), None);
    }

    #[test]
    fn the_file_holds_no_password() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        Credentials::update::<VolumeError>(&volume, |c| {
            c.set(
                "alice",
                Mechanism::ScramSha512,
                ScramCredential::from_password(Mechanism::ScramSha512, "hunter2-very-secret", 8192).unwrap(),
            );
            Ok(())
        })
        .unwrap();
        let text = std::fs::read_to_string(volume.scram_credentials_file()).unwrap();
        assert!(!text.contains("hunter2"));
        let back = Credentials::read(&volume).unwrap();
        assert_eq!(back.mechanisms_of("alice"), vec![(Mechanism::ScramSha512, 8192)]);
        assert_eq!(back.check_password("alice", b"hunter2-very-secret"), Some(true));
    }

    /// A SCRAM lookup does the same work for a known user as for an unknown one: the
    /// decoy, whose shape walks every stored user, is made for both. Before, only an
    /// unknown user's first step paid for it, answered before any failure delay: a
    /// difference growing with the users stored, enough to tell which exist.
    #[test]
    fn a_scram_lookup_costs_a_known_user_what_it_costs_an_unknown_one() {
        let mut c = Credentials::default();
        let cred = ScramCredential::from_password(Mechanism::ScramSha512, "pw-of-some-length", 4096).unwrap();
        c.set("alice", Mechanism::ScramSha512, cred);
        let made = || DECOYS_MADE.with(|d| d.get());
        for user in ["alice", "nobody"] {
            let before = made();
            let _ = c.lookup(user, Mechanism::ScramSha512, &test_decoy());
            assert_eq!(made() - before, 1, "{user}");
        }
    }

    /// PLAIN checks an unknown user's password at the cost of the verifiers most users
    /// have: users made by Kafka's tools (4096 iterations, SHA-256 only) make the decoy
    /// the same, where it was always SHA-512 at 8192 iterations.
    #[test]
    fn plain_checks_an_unknown_user_like_the_users_there_are() {
        let mut c = Credentials::default();
        assert_eq!(
            c.plain_decoy().1.iterations,
            DEFAULT_ITERATIONS,
            "no users: the defaults"
        );
        for (i, user) in ["a", "b", "c"].iter().enumerate() {
            let iterations = if i == 2 { 8192 } else { 4096 };
            let cred = ScramCredential::from_password(Mechanism::ScramSha256, "pw-of-some-length", iterations).unwrap();
            c.set(user, Mechanism::ScramSha256, cred);
        }
        let (m, decoy) = c.plain_decoy();
        assert_eq!((m, decoy.iterations), (Mechanism::ScramSha256, 4096));
        let shape = c.plain_verifier("a").map(|(_, v)| (v.salt.len(), v.stored_key.len()));
        assert_eq!(Some((decoy.salt.len(), decoy.stored_key.len())), shape);
        assert_eq!(c.check_password("nobody", b"x"), None);
        assert_eq!(c.check_password("a", b"pw-of-some-length"), Some(true));
    }
}
