//! The network layer: accepts connections, reads length-prefixed request frames,
//! checks them before any decoder sees them, dispatches, and writes responses in
//! request order. A bad frame closes only its own connection, with a log line that
//! says what was wrong; nothing here can take the process down.

use crate::broker::Broker;
use crate::handlers::{self, RequestContext};
use crate::listeners::{ListenerSpec, SecurityProtocol};
use crate::sasl::{Authenticator, Outcome};
use crate::tls::Tls;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

mod budget;
mod frames;
mod throttle;
use budget::{frame_deadline, Charge, Expired, Payer, RequestBudget};
use frames::*;

/// Smallest request: api key, api version, correlation id, client id length.
const MIN_REQUEST_LEN: usize = 10;

/// The largest frame of any request but Produce. Only Produce carries bulk data (record
/// batches, kept as bytes); every other request is decoded into structures that can
/// take many times the bytes they came in (an empty string on the wire is two bytes,
/// decoded it is tens), so their frames are bounded far below --max-request-bytes.
/// 8 MiB is room for a Metadata request naming 100,000 topics or a SyncGroup
/// assignment of thousands of members.
pub const MAX_NON_PRODUCE_FRAME: usize = 8 << 20;

/// What a decoded non-Produce request may take per byte of its frame, charged to the
/// request memory budget.
const DECODE_INFLATION: u64 = 32;

/// Why a connection was closed by the broker.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds --max-request-bytes {max}")]
    TooLarge { size: i64, max: usize },
    #[error("a request other than Produce of {size} bytes exceeds {max} bytes")]
    TooLargeForApi { size: usize, max: usize },
    #[error("frame of {size} bytes is shorter than a request header ({MIN_REQUEST_LEN} bytes)")]
    TooShort { size: i64 },
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("{api:?} v{version} is not supported (supported: v{min}..=v{max})")]
    UnsupportedVersion {
        api: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("undecodable {api:?} v{version} request header: {detail}")]
    BadHeader { api: ApiKey, version: i16, detail: String },
    #[error("undecodable {api:?} v{version} request body: {detail}")]
    BadBody { api: ApiKey, version: i16, detail: String },
    #[error("frame of {size} bytes before SASL authentication exceeds {max} bytes")]
    TooLargeBeforeAuthentication { size: i64, max: usize },
    #[error("{api} request before SASL authentication (until then only ApiVersions, SaslHandshake and SaslAuthenticate are served)")]
    Unauthenticated { api: String },
    #[error("idle for connections.max.idle.ms ({0} ms)")]
    Idle(u64),
    #[error("frame of {size} bytes did not arrive whole within {secs} s")]
    Deadline { size: usize, secs: u64 },
    #[error("frame of {size} bytes found no room in queued.max.request.bytes within its {secs} s")]
    NoRoom { size: usize, secs: u64 },
    #[error("an acks=0 produce failed (error {0}): closing the connection so the client notices, as Kafka does")]
    SilentProduceFailed(i16),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The address a connection counts against in `max.connections.per.ip`: an IPv4
/// address (also one mapped into IPv6), or an IPv6 address's /64 — the block one
/// host or one customer is usually given, where picking a fresh address costs
/// nothing.
fn counted_address(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// Open connections, in total, per listener and per address, against
/// `max.connections`, `listener.name.X.max.connections` and `max.connections.per.ip`,
/// and the rate at which each address opens them (KIP-612). A slot is freed when its
/// connection task ends.
struct ConnectionSlots {
    counts: Mutex<Counts>,
    max_total: u32,
    max_per_ip: u32,
    max_per_listener: HashMap<String, u32>,
    /// New connections a second one address may open; 0: no limit.
    rate_per_ip: u32,
    refused: AtomicU64,
    /// When a refusal was last logged, per limit.
    last_warned_ms: Mutex<HashMap<&'static str, i64>>,
}

#[derive(Default)]
struct Counts {
    total: u32,
    per_ip: HashMap<IpAddr, u32>,
    per_listener: HashMap<Arc<str>, u32>,
    /// Per address: connections it may still open now, and when that was reckoned
    /// (a token bucket of `rate_per_ip` tokens, refilled at that rate).
    opened: HashMap<IpAddr, (f64, std::time::Instant)>,
    /// When `opened` was last pruned.
    pruned: Option<std::time::Instant>,
}

/// One open connection's place in [`ConnectionSlots`].
struct Slot {
    slots: Arc<ConnectionSlots>,
    ip: IpAddr,
    listener: Arc<str>,
}

/// Buckets of addresses kept at most; past it, the full ones (addresses that opened
/// nothing for a second) are forgotten.
const RATE_BUCKETS: usize = 10_000;

impl ConnectionSlots {
    #[cfg(test)]
    fn new(max_total: u32, max_per_ip: u32) -> Arc<Self> {
        Self::with(max_total, max_per_ip, HashMap::new(), 0)
    }

    fn with(max_total: u32, max_per_ip: u32, max_per_listener: HashMap<String, u32>, rate_per_ip: u32) -> Arc<Self> {
        Arc::new(ConnectionSlots {
            counts: Mutex::new(Counts::default()),
            max_total,
            max_per_ip,
            max_per_listener,
            rate_per_ip,
            refused: AtomicU64::new(0),
            last_warned_ms: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a connection from `ip` on `listener`, or which limit (name, value)
    /// it would break.
    fn acquire(self: &Arc<Self>, ip: IpAddr, listener: &Arc<str>) -> Result<Slot, (&'static str, u32)> {
        let ip = counted_address(ip);
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let counts = &mut *counts;
        if counts.total >= self.max_total {
            return Err(("max.connections", self.max_total));
        }
        if let Some(&max) = self.max_per_listener.get(&**listener) {
            if counts.per_listener.get(listener).copied().unwrap_or(0) >= max {
                return Err(("listener.name.max.connections", max));
            }
        }
        if counts.per_ip.get(&ip).copied().unwrap_or(0) >= self.max_per_ip {
            return Err(("max.connections.per.ip", self.max_per_ip));
        }
        if self.rate_per_ip > 0 {
            let rate = f64::from(self.rate_per_ip);
            let now = std::time::Instant::now();
            // Pruned at most once a second: with more busy addresses than
            // RATE_BUCKETS, a scan at every accept would find nothing to drop.
            if counts.opened.len() >= RATE_BUCKETS && counts.pruned.is_none_or(|p| now.duration_since(p).as_secs() >= 1)
            {
                counts.pruned = Some(now);
                counts
                    .opened
                    .retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * rate < rate);
            }
            let (tokens, at) = counts.opened.entry(ip).or_insert((rate, now));
            *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(rate);
            *at = now;
            if *tokens < 1.0 {
                return Err(("connection.creation.rate", self.rate_per_ip));
            }
            *tokens -= 1.0;
        }
        *counts.per_ip.entry(ip).or_insert(0) += 1;
        *counts.per_listener.entry(listener.clone()).or_insert(0) += 1;
        counts.total += 1;
        let m = crate::metrics::metrics();
        m.connections.inc();
        m.connections_accepted.inc();
        Ok(Slot {
            slots: self.clone(),
            ip,
            listener: listener.clone(),
        })
    }

    /// Logs a refusal, at most once a second per limit (a flood must not flood the
    /// log too, nor hide that another limit was reached).
    fn refused(&self, peer: SocketAddr, limit: &'static str, max: u32) {
        crate::metrics::metrics().connection_refused(limit);
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let now = kaas_core::now_ms();
        let due = {
            let mut last = self.last_warned_ms.lock().unwrap_or_else(|p| p.into_inner());
            let at = last.entry(limit).or_insert(i64::MIN / 2);
            let due = now - *at >= 1000;
            if due {
                *at = now;
            }
            due
        };
        if due {
            warn!(%peer, limit, max, refused_so_far = refused, "connection refused: {limit} reached");
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        crate::metrics::metrics().connections.dec();
        let mut counts = self.slots.counts.lock().unwrap_or_else(|p| p.into_inner());
        let counts = &mut *counts;
        counts.total -= 1;
        if let Some(n) = counts.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.per_ip.remove(&self.ip);
            }
        }
        if let Some(n) = counts.per_listener.get_mut(&self.listener) {
            *n -= 1;
            if *n == 0 {
                counts.per_listener.remove(&self.listener);
            }
        }
    }
}

/// What every connection shares: the limits of docs/limits.md.
struct Limits {
    slots: Arc<ConnectionSlots>,
    /// `queued.max.request.bytes`, charged as frames arrive.
    budget: Arc<RequestBudget>,
    idle: Duration,
    max_frame: usize,
}

/// A bound listener, ready to serve: its name and protocol, its socket, and its TLS
/// configuration when the protocol has TLS.
pub struct BoundListener {
    pub spec: ListenerSpec,
    pub socket: TcpListener,
    pub tls: Option<Arc<Tls>>,
    /// The SASL mechanisms it offers (a SASL listener's).
    pub sasl_mechanisms: Arc<[crate::config::SaslMechanism]>,
}

/// How long a client has for its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest frame (or raw SASL token) of a connection that has not authenticated:
/// ApiVersions, SaslHandshake and SCRAM/PLAIN tokens are well under 1 KiB. (Kafka's
/// sasl.server.max.receive.size is 512 KiB; this is tighter, as unauthenticated
/// memory is the first thing a flood spends. Decoded, a frame this size packed with
/// tagged fields takes some 20 times it, still small.)
const MAX_PRE_AUTH_FRAME: usize = 8 * 1024;

/// A SASL listener's connection must have authenticated this long after it opened
/// (after its TLS handshake), or it is closed.
const AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts connections on every listener until `shutdown` flips, then waits (bounded)
/// for connections to finish their in-flight request. The connection limits are
/// shared by all listeners.
pub async fn serve(broker: Arc<Broker>, listeners: Vec<BoundListener>, shutdown: watch::Receiver<bool>) {
    let config = &broker.config;
    let limits = Arc::new(Limits {
        slots: ConnectionSlots::with(
            config.max_connections,
            config.max_connections_per_ip,
            config.listener_max_connections.iter().cloned().collect(),
            config.max_connection_creation_rate_per_ip,
        ),
        budget: RequestBudget::new(config.queued_max_request_bytes),
        idle: Duration::from_millis(config.connections_max_idle_ms),
        max_frame: config.max_request_bytes,
    });
    let mut loops = JoinSet::new();
    for listener in listeners {
        loops.spawn(accept_loop(broker.clone(), listener, shutdown.clone(), limits.clone()));
    }
    while loops.join_next().await.is_some() {}
}

async fn accept_loop(
    broker: Arc<Broker>,
    listener: BoundListener,
    mut shutdown: watch::Receiver<bool>,
    limits: Arc<Limits>,
) {
    let BoundListener {
        spec,
        socket,
        tls,
        sasl_mechanisms,
    } = listener;
    let name: Arc<str> = spec.name.as_str().into();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = socket.accept() => match accepted {
                Ok((stream, peer)) => match limits.slots.acquire(peer.ip(), &name) {
                    Ok(slot) => {
                        let on = Listening {
                            name: name.clone(),
                            protocol: spec.protocol,
                            tls: tls.clone(),
                            sasl_mechanisms: sasl_mechanisms.clone(),
                        };
                        conns.spawn(connection(broker.clone(), stream, peer, on, shutdown.clone(), limits.clone(), slot));
                    }
                    Err((limit, max)) => {
                        limits.slots.refused(peer, limit, max);
                        drop(stream);
                    }
                },
                Err(e) => {
                    // Usually EMFILE: back off instead of spinning.
                    warn!(listener = %name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(socket);
    info!(
        listener = %name,
        connections = conns.len(),
        "stopped accepting; waiting for in-flight requests"
    );
    let grace = Duration::from_millis(broker.config.shutdown_timeout_ms);
    if tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        warn!(
            listener = %name,
            connections = conns.len(),
            "shutdown grace period over; closing remaining connections"
        );
        conns.abort_all();
    }
}

/// The listener a connection came in on.
struct Listening {
    name: Arc<str>,
    protocol: SecurityProtocol,
    tls: Option<Arc<Tls>>,
    sasl_mechanisms: Arc<[crate::config::SaslMechanism]>,
}

/// Who a connection is and where it came in: what its requests are judged by.
pub struct Session {
    pub listener: Arc<str>,
    pub principal: Arc<str>,
    /// Some until a SASL listener's connection has authenticated, and again while it
    /// re-authenticates (KIP-368).
    sasl: Option<Authenticator>,
    /// A SASL listener's connection that has authenticated: the mechanism it used and
    /// when. It may log in again (KIP-368) with that mechanism, as the same principal.
    sasl_login: Option<(crate::config::SaslMechanism, tokio::time::Instant)>,
    /// When an authenticated session ends (`connections.max.reauth.ms`): the first
    /// request after it, other than a re-authentication, closes the connection.
    expires_at: Option<tokio::time::Instant>,
    /// The SASL mechanisms its listener offers.
    sasl_mechanisms: Arc<[crate::config::SaslMechanism]>,
}

impl Session {
    /// A connection on `listener` that has not authenticated (yet): User:ANONYMOUS.
    fn anonymous(listener: &str, sasl_mechanisms: Arc<[crate::config::SaslMechanism]>) -> Session {
        Session {
            listener: listener.into(),
            principal: ANONYMOUS.into(),
            sasl: None,
            sasl_login: None,
            expires_at: None,
            sasl_mechanisms,
        }
    }
}

/// Kafka's principal for a client that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

async fn connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    on: Listening,
    shutdown: watch::Receiver<bool>,
    limits: Arc<Limits>,
    _slot: Slot,
) {
    let _ = stream.set_nodelay(true);
    let mut session = Session::anonymous(&on.name, on.sasl_mechanisms.clone());
    if on.protocol.sasl() {
        session.sasl = Some(Authenticator::new(
            &session.sasl_mechanisms,
            broker.config.connections_max_reauth_ms,
        ));
    }
    debug!(%peer, listener = %on.name, "connection opened");
    match &on.tls {
        Some(tls) => {
            let acceptor = if tls.check_due() {
                crate::blocking::off_worker(|| tls.acceptor())
            } else {
                tls.acceptor()
            };
            let accepted = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            let stream = match accepted {
                Ok(Ok(stream)) => stream,
                // A connection closed before a handshake began (a TCP probe) is no news.
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    debug!(%peer, listener = %on.name, error = %e, "connection closed during the TLS handshake");
                    return;
                }
                Ok(Err(e)) => {
                    info!(%peer, listener = %on.name, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    info!(%peer, listener = %on.name, "no TLS handshake within {TLS_HANDSHAKE_TIMEOUT:?}; closing");
                    return;
                }
            };
            // On an SSL listener a client certificate names the principal; on SASL_SSL
            // SASL does.
            if on.protocol == SecurityProtocol::Ssl {
                if let Some(cert) = stream.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                    // A verified certificate names its holder: one whose name cannot
                    // be read, or that no mapping rule takes, is refused rather than
                    // served as User:ANONYMOUS (whom ACLs may allow more).
                    let Some(subject) = crate::tls::subject_principal(cert) else {
                        warn!(%peer, listener = %on.name, "client certificate subject unreadable; closing the connection");
                        return;
                    };
                    let Some(name) = broker.config.ssl_principal_mapping_rules.apply(&subject) else {
                        warn!(%peer, listener = %on.name, subject, "no ssl.principal.mapping.rules rule applies to the client certificate's subject; closing the connection");
                        return;
                    };
                    session.principal = format!("User:{name}").into();
                    // No re-authentication over TLS: the session ends, and the client
                    // connects again, through a handshake that checks its certificate
                    // against the trust of the day.
                    session.expires_at = session_end(broker.config.connections_max_reauth_ms);
                    info!(%peer, listener = %on.name, principal = ?session.principal, "TLS client certificate accepted");
                }
            }
            let (reader, writer) = tokio::io::split(stream);
            serve_connection(&broker, reader, writer, peer, session, shutdown, &limits).await;
        }
        None => {
            let (reader, writer) = stream.into_split();
            serve_connection(&broker, reader, writer, peer, session, shutdown, &limits).await;
        }
    }
    debug!(%peer, listener = %on.name, "connection closed");
}

/// Writes one response, closing a reader that stops reading (a zero TCP window) like
/// an idle one. False when the connection is done.
async fn write_response<W: AsyncWrite + Unpin>(
    writer: &mut BufWriter<W>,
    response: &[u8],
    peer: SocketAddr,
    limits: &Limits,
    deadline: Option<tokio::time::Instant>,
) -> bool {
    let by = tokio::time::Instant::now() + limits.idle;
    let by = deadline.map_or(by, |d| d.min(by));
    let written = tokio::time::timeout_at(by, async {
        writer.write_all(response).await?;
        writer.flush().await
    })
    .await;
    match written {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            debug!(%peer, error = %e, "connection write failed");
            false
        }
        Err(_) => {
            debug!(%peer, "closing a connection that did not take its response within connections.max.idle.ms");
            false
        }
    }
}

/// Bytes a connection reads ahead: a small request (anything but a large Produce)
/// arrives with one read instead of one for its size, one for its API key and one
/// for the rest (docs/performance.md); larger reads bypass the buffer.
const READ_AHEAD: usize = 4096;

async fn serve_connection<R, W>(
    broker: &Arc<Broker>,
    reader: R,
    writer: W,
    peer: SocketAddr,
    mut session: Session,
    mut shutdown: watch::Receiver<bool>,
    limits: &Limits,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::with_capacity(READ_AHEAD, reader);
    let mut writer = BufWriter::new(writer);
    // Who this connection's frames are charged to while it is User:ANONYMOUS (every
    // PLAINTEXT client, and SSL ones without a certificate): the anonymous principal
    // and, within its half, its address's quarter (an IPv6 /64), so one anonymous
    // sender cannot take the share of every other. After a login, the user.
    let anonymous: Arc<str> = ANONYMOUS.into();
    let anonymous_payer = Payer::anonymous_at(&anonymous, &format!("address:{}", counted_address(peer.ip())).into());
    let mut user_payer: Option<Payer> = None;
    let mut authenticate_by = tokio::time::Instant::now() + AUTHENTICATION_TIMEOUT;
    let reauth_ms = broker.config.connections_max_reauth_ms;
    loop {
        let mut authenticating = session.sasl.is_some();
        if let Some(auth) = session.sasl.as_mut().filter(|a| a.raw_tokens()) {
            let token = tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep_until(authenticate_by) => {
                    info!(%peer, listener = %session.listener, "not authenticated within {AUTHENTICATION_TIMEOUT:?}; closing");
                    break;
                }
                token = read_raw_token(&mut reader, limits) => token,
            };
            let token = match token {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(e) => {
                    info!(%peer, listener = %session.listener, error = %e, "closing connection during SASL authentication");
                    break;
                }
            };
            // The whole login, its wait for a PBKDF2 turn included, within the deadline.
            let Ok(step) = tokio::time::timeout_at(authenticate_by, auth.raw(broker, token)).await else {
                info!(%peer, listener = %session.listener, "not authenticated within {AUTHENTICATION_TIMEOUT:?}; closing");
                break;
            };
            if let Some(response) = &step.response {
                if !write_response(&mut writer, response, peer, limits, Some(authenticate_by)).await {
                    break;
                }
            }
            if !session.after_sasl_step(step.outcome, peer, reauth_ms) {
                close_gracefully(&mut reader, &mut writer).await;
                break;
            }
            continue;
        }
        let payer = if *session.principal == *ANONYMOUS {
            &anonymous_payer
        } else {
            // Set once: a connection's principal changes only from anonymous to a user.
            user_payer.get_or_insert_with(|| Payer::principal(&session.principal))
        };
        let frame = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            _ = tokio::time::sleep_until(authenticate_by), if authenticating => {
                info!(%peer, listener = %session.listener, "not authenticated within {AUTHENTICATION_TIMEOUT:?}; closing");
                break;
            }
            frame = read_frame(
                &mut reader,
                limits,
                payer,
                authenticating,
            ) => frame,
        };
        let (frame, permit) = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(FrameError::Io(e)) => {
                debug!(%peer, error = %e, "connection read failed");
                break;
            }
            Err(e @ FrameError::Unauthenticated { .. }) => {
                warn!(%peer, listener = %session.listener, error = %e, "closing connection");
                break;
            }
            Err(e @ FrameError::Idle(_)) => {
                debug!(%peer, error = %e, "closing idle connection");
                break;
            }
            Err(e @ (FrameError::Deadline { .. } | FrameError::NoRoom { .. })) => {
                info!(%peer, listener = %session.listener, principal = %session.principal, error = %e, "closing connection");
                break;
            }
            Err(e) => {
                warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        if !authenticating && key == ApiKey::SaslHandshake as i16 {
            // KIP-368: a logged-in client logs in again (SaslHandshake v1 and
            // SaslAuthenticate), with the mechanism it logged in with, within the login
            // deadline; as Kafka, only where sessions expire, and at most once a second
            // (each login may cost a PBKDF2 turn). Otherwise, and with the v0 framing,
            // the handler answers ILLEGAL_SASL_STATE.
            let version = frame.get(2..4).map_or(0, |v| i16::from_be_bytes([v[0], v[1]]));
            let now = tokio::time::Instant::now();
            if let Some((mechanism, logged_in_at)) = session.sasl_login.filter(|&(_, at)| {
                version >= 1 && reauth_ms > 0 && now.saturating_duration_since(at) >= MIN_REAUTH_INTERVAL
            }) {
                let user = session.principal.strip_prefix("User:").unwrap_or(&session.principal);
                session.sasl = Some(Authenticator::new(&[mechanism], reauth_ms).again_as(user));
                debug!(%peer, since = ?now.saturating_duration_since(logged_in_at), "re-authentication begins");
                authenticate_by = now + AUTHENTICATION_TIMEOUT;
                authenticating = true;
            }
        }
        if !authenticating && session.expires_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
            info!(%peer, listener = %session.listener, principal = %session.principal, "session expired (connections.max.reauth.ms) without a re-authentication; closing");
            break;
        }
        if authenticating {
            // read_frame let through only ApiVersions and the SASL APIs.
            if key == ApiKey::SaslHandshake as i16 || key == ApiKey::SaslAuthenticate as i16 {
                // The whole login, its wait for a PBKDF2 turn included, within the deadline.
                let answered =
                    tokio::time::timeout_at(authenticate_by, sasl_request(broker, &mut session, frame)).await;
                let (response, outcome) = match answered {
                    Ok(Ok(answered)) => answered,
                    Ok(Err(e)) => {
                        warn!(%peer, error = %e, "closing connection");
                        break;
                    }
                    Err(_) => {
                        info!(%peer, listener = %session.listener, "not authenticated within {AUTHENTICATION_TIMEOUT:?}; closing");
                        break;
                    }
                };
                if !write_response(&mut writer, &response, peer, limits, Some(authenticate_by)).await {
                    break;
                }
                if !session.after_sasl_step(outcome, peer, reauth_ms) {
                    close_gracefully(&mut reader, &mut writer).await;
                    break;
                }
                continue;
            }
        }
        match handle_frame(broker, peer, &session, frame, &shutdown, permit).await {
            Ok(answer) => {
                if let Some(response) = &answer.response {
                    if !write_response(
                        &mut writer,
                        response,
                        peer,
                        limits,
                        authenticating.then_some(authenticate_by),
                    )
                    .await
                    {
                        break;
                    }
                }
                // Over a quota: the response goes at once, and nothing more is read
                // from the connection for its throttle time (KIP-219, as Kafka's
                // brokers do for every version), at most connections.max.idle.ms at a
                // time: what is still owed then throttles the next answer.
                if !answer.throttle.is_zero() && !wait_out(answer.throttle.min(limits.idle), &mut shutdown).await {
                    break;
                }
            }
            Err(e @ FrameError::SilentProduceFailed(_)) => {
                debug!(%peer, error = %e, "closing connection");
                break;
            }
            Err(e) => {
                warn!(%peer, error = %e, "closing connection");
                break;
            }
        }
        if *shutdown.borrow() {
            break;
        }
    }
}

/// The least time between two logins of one connection (Kafka's, KIP-368).
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// When a session that starts now ends (`connections.max.reauth.ms`; 0: never).
fn session_end(reauth_ms: u64) -> Option<tokio::time::Instant> {
    (reauth_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(reauth_ms))
}

/// Waits `throttle` out; false when the broker shuts down meanwhile.
async fn wait_out(throttle: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        biased;
        _ = shutdown.changed() => false,
        _ = tokio::time::sleep(throttle) => true,
    }
}

/// How long a connection closed after a failed authentication is drained.
const LINGER: Duration = Duration::from_secs(1);

/// Kafka's connection.failed.authentication.delay.ms (KIP-306): a failed login's
/// answer is left with the client this long before the connection closes. Clients
/// read the answer before they see the close (kafka-python otherwise reports "socket
/// disconnected" instead of the authentication error), and password guessing slows.
const FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);

/// Closes after an answer the client must get (a failed authentication): after
/// [`FAILED_AUTHENTICATION_DELAY`], the write side is shut (TLS close_notify, then
/// FIN) and what the client still sends is read and dropped until it closes too, for
/// at most [`LINGER`]. Dropping a socket with unread input sends a reset, which can
/// destroy the answer before the client reads it.
async fn close_gracefully<R, W>(reader: &mut R, writer: &mut BufWriter<W>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    tokio::time::sleep(FAILED_AUTHENTICATION_DELAY).await;
    let drain = async {
        let _ = writer.shutdown().await;
        let mut sink = [0u8; 1024];
        while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

impl Session {
    /// Applies a SASL step's outcome; false when the connection is to be closed.
    fn after_sasl_step(&mut self, outcome: Outcome, peer: SocketAddr, reauth_ms: u64) -> bool {
        match outcome {
            Outcome::Continue => true,
            Outcome::Authenticated(user) => {
                if self.sasl_login.is_some() {
                    info!(%peer, listener = %self.listener, user, "SASL re-authentication succeeded");
                } else {
                    info!(%peer, listener = %self.listener, user, "SASL authentication succeeded");
                }
                self.principal = format!("User:{user}").into();
                let mechanism = self.sasl.take().and_then(|a| a.mechanism());
                self.sasl_login = mechanism.map(|m| (m, tokio::time::Instant::now()));
                self.expires_at = session_end(reauth_ms);
                true
            }
            Outcome::Failed(why) => {
                if let Some(unlogged) = crate::authz::FAILED_LOGINS.admit() {
                    if unlogged > 0 {
                        info!(target: crate::authz::AUDIT_LOG_TARGET, unlogged, "failed logins not logged since the last one that was (rate limit)");
                    }
                    info!(target: crate::authz::AUDIT_LOG_TARGET, %peer, listener = %self.listener, reason = why, "SASL authentication failed; closing connection");
                }
                false
            }
        }
    }
}

/// A SaslHandshake or SaslAuthenticate request of a connection still authenticating:
/// its encoded answer and the outcome.
async fn sasl_request(
    broker: &Arc<Broker>,
    session: &mut Session,
    mut frame: Bytes,
) -> Result<(Bytes, Outcome), FrameError> {
    let started = std::time::Instant::now();
    let (api, version, correlation_id, request) = match decode_frame(&mut frame)? {
        Decoded::Answered(bytes) => return Ok((bytes, Outcome::Continue)),
        Decoded::Request {
            api,
            version,
            correlation_id,
            request,
            ..
        } => (api, version, correlation_id, request),
    };
    let auth = session.sasl.as_mut().expect("a connection still authenticating");
    let (response, outcome) = auth.request(broker, version, request).await;
    let encoded = encode_response(correlation_id, api.response_header_version(version), &response, version)?;
    crate::metrics::metrics().request_done(api, &response, started.elapsed());
    Ok((encoded, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l() -> Arc<str> {
        "PLAINTEXT".into()
    }

    #[test]
    fn a_listener_limit_counts_that_listener_only() {
        let slots = ConnectionSlots::with(100, 100, HashMap::from([("INTERNAL".to_string(), 2)]), 0);
        let internal: Arc<str> = "INTERNAL".into();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let held = [
            slots.acquire(ip, &internal).unwrap(),
            slots.acquire(ip, &internal).unwrap(),
        ];
        assert_eq!(
            slots.acquire(ip, &internal).err(),
            Some(("listener.name.max.connections", 2))
        );
        assert!(slots.acquire(ip, &l()).is_ok(), "other listeners are not counted");
        drop(held);
        assert!(slots.acquire(ip, &internal).is_ok(), "freed with its connections");
    }

    #[test]
    fn an_address_opening_connections_faster_than_its_rate_is_refused_and_others_are_not() {
        let slots = ConnectionSlots::with(1000, 1000, HashMap::new(), 5);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(slots.acquire(a, &l()).unwrap());
        }
        // Closing them gives back no rate: it is connections opened, not open.
        held.clear();
        assert_eq!(slots.acquire(a, &l()).err(), Some(("connection.creation.rate", 5)));
        assert!(slots.acquire(b, &l()).is_ok(), "per address");
        std::thread::sleep(Duration::from_millis(250));
        assert!(slots.acquire(a, &l()).is_ok(), "refilled at 5 a second");
    }

    #[test]
    fn connection_slots_count_per_address_and_in_total_and_free_on_drop() {
        let slots = ConnectionSlots::new(5, 3);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut held: Vec<Slot> = (0..3).map(|_| slots.acquire(a, &l()).unwrap()).collect();
        assert_eq!(
            slots.acquire(a, &l()).err().map(|e| e.0),
            Some("max.connections.per.ip")
        );
        held.push(slots.acquire(b, &l()).unwrap());
        held.push(slots.acquire(b, &l()).unwrap());
        assert_eq!(slots.acquire(b, &l()).err().map(|e| e.0), Some("max.connections"));
        held.truncate(1);
        assert!(slots.acquire(a, &l()).is_ok());
        drop(held);
        let counts = slots.counts.lock().unwrap();
        assert_eq!(counts.total, 0);
        assert!(counts.per_ip.is_empty(), "no address left behind");
        assert!(counts.per_listener.is_empty());
    }

    #[test]
    fn ipv6_addresses_count_per_64_and_mapped_ipv4_as_ipv4() {
        let slots = ConnectionSlots::new(100, 2);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _held = [slots.acquire(a, &l()).unwrap(), slots.acquire(b, &l()).unwrap()];
        assert_eq!(
            slots
                .acquire("2001:db8:1:2:abcd::7".parse().unwrap(), &l())
                .err()
                .map(|e| e.0),
            Some("max.connections.per.ip"),
            "one /64"
        );
        assert!(slots.acquire(other, &l()).is_ok(), "another /64");
        let v4 = [
            slots.acquire("10.0.0.1".parse().unwrap(), &l()).unwrap(),
            slots.acquire("::ffff:10.0.0.1".parse().unwrap(), &l()).unwrap(),
        ];
        assert!(
            slots.acquire("10.0.0.1".parse().unwrap(), &l()).is_err(),
            "a mapped address is the IPv4 one"
        );
        drop(v4);
    }

    fn limits(budget: u64) -> Limits {
        Limits {
            slots: ConnectionSlots::new(10, 10),
            budget: RequestBudget::new(budget),
            idle: Duration::from_secs(600),
            max_frame: 100 << 20,
        }
    }

    /// A PLAIN login waiting for a PBKDF2 turn (all four taken) waits within the 30 s
    /// login deadline: the connection is closed then, unanswered.
    #[tokio::test(start_paused = true)]
    async fn a_login_waiting_for_a_pbkdf2_turn_is_closed_at_the_login_deadline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let broker = crate::handlers::test_support::broker_with(dir.path(), &["--sasl-enabled-mechanisms", "PLAIN"]);
        let _all_turns = crate::sasl::PBKDF2_AT_ONCE.acquire_many(4).await.expect("the turns");
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(server);
        let mechanisms: Arc<[crate::config::SaslMechanism]> = vec![crate::config::SaslMechanism::Plain].into();
        let mut session = Session::anonymous("SASL_PLAINTEXT", mechanisms.clone());
        session.sasl = Some(Authenticator::new(&mechanisms, 0));
        let (_stop, shutdown) = watch::channel(false);
        let limits = limits(1 << 20);
        let started = tokio::time::Instant::now();
        let serving = async {
            serve_connection(
                &broker,
                reader,
                writer,
                "127.0.0.1:1".parse().unwrap(),
                session,
                shutdown,
                &limits,
            )
            .await
        };
        let talking = async {
            let frame = |key: i16, version: i16, body: &[u8]| {
                let mut f = Vec::new();
                f.extend_from_slice(&key.to_be_bytes());
                f.extend_from_slice(&version.to_be_bytes());
                f.extend_from_slice(&1i32.to_be_bytes());
                f.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
                f.extend_from_slice(body);
                let mut wire = (f.len() as i32).to_be_bytes().to_vec();
                wire.extend_from_slice(&f);
                wire
            };
            let mut handshake = 5i16.to_be_bytes().to_vec();
            handshake.extend_from_slice(b"PLAIN");
            client.write_all(&frame(17, 1, &handshake)).await.unwrap();
            let mut len = [0u8; 4];
            client.read_exact(&mut len).await.unwrap();
            let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
            client.read_exact(&mut answer).await.unwrap();
            assert_eq!(&answer[4..6], &[0, 0], "PLAIN offered");
            let token = b"\0alice\0secret";
            let mut body = (token.len() as i32).to_be_bytes().to_vec();
            body.extend_from_slice(token);
            client.write_all(&frame(36, 1, &body)).await.unwrap();
            let mut rest = Vec::new();
            client.read_to_end(&mut rest).await.unwrap();
            rest
        };
        let ((), rest) = tokio::join!(serving, talking);
        assert!(rest.is_empty(), "no answer: {rest:?}");
        let waited = started.elapsed();
        assert!(
            (AUTHENTICATION_TIMEOUT..AUTHENTICATION_TIMEOUT + Duration::from_secs(1)).contains(&waited),
            "closed after {waited:?}"
        );
    }

    #[tokio::test]
    async fn a_negative_frame_length_closes_the_connection_as_too_short() {
        let limits = limits(1 << 20);
        let mut reader = BufReader::new(&[0xff, 0xff, 0xff, 0xf0, 0, 3][..]);
        let got = read_frame(&mut reader, &limits, &Payer::principal(&ANONYMOUS.into()), false).await;
        assert!(matches!(got, Err(FrameError::TooShort { size: -16 })), "{got:?}");
    }

    #[tokio::test]
    async fn a_small_frame_is_read_whole_and_charged_its_size() {
        let limits = limits(1 << 20);
        // An ApiVersions v0 request (a produce-sized charge would be the same room).
        let frame = [0u8, 18, 0, 0, 0, 0, 0, 7, 0, 0];
        let mut wire = (frame.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&frame);
        let mut reader = BufReader::new(&wire[..]);
        let (got, charge) = read_frame(&mut reader, &limits, &Payer::principal(&ANONYMOUS.into()), false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&got[..], &frame[..]);
        assert_eq!(charge.map(|c| c.bytes()), Some(frame.len() as u64 * DECODE_INFLATION));
    }

    #[tokio::test]
    async fn a_frame_is_charged_as_its_bytes_arrive_and_its_decode_allowance_once_whole() {
        let limits = Arc::new(limits(64 << 20));
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let reading = {
            let limits = limits.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::with_capacity(READ_AHEAD, server);
                read_frame(&mut reader, &limits, &Payer::principal(&ANONYMOUS.into()), false).await
            })
        };
        // A Metadata v3 frame of 100,000 bytes, announced with its API key only.
        let size = 100_000usize;
        client.write_all(&(size as i32).to_be_bytes()).await.unwrap();
        client.write_all(&[0, 3]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(limits.budget.used(), 0, "a stalled header holds nothing");
        client.write_all(&[0, 3]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            limits.budget.used(),
            4096,
            "a first byte of the body: its first 4 KiB of room"
        );
        client.write_all(&vec![0u8; 10_000]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let held = limits.budget.used();
        assert!(
            (10_000..=4 * 10_004).contains(&held),
            "at most four times what arrived: {held}"
        );
        client.write_all(&vec![0u8; size - 10_004]).await.unwrap();
        let (frame, charge) = reading.await.unwrap().unwrap().unwrap();
        assert_eq!(frame.len(), size);
        assert_eq!(charge.as_ref().map(|c| c.bytes()), Some(size as u64 * DECODE_INFLATION));
        drop(charge);
        assert_eq!(limits.budget.used(), 0);
    }
}
