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
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

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
    #[error("an acks=0 produce failed (error {0}): closing the connection so the client notices, as Kafka does")]
    SilentProduceFailed(i16),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Open connections, in total and per address, against `max.connections` and
/// `max.connections.per.ip`. A slot is freed when its connection task ends.
struct ConnectionSlots {
    counts: Mutex<(u32, HashMap<IpAddr, u32>)>,
    max_total: u32,
    max_per_ip: u32,
    refused: AtomicU64,
    last_warned_ms: AtomicI64,
}

/// One open connection's place in [`ConnectionSlots`].
struct Slot {
    slots: Arc<ConnectionSlots>,
    ip: IpAddr,
}

impl ConnectionSlots {
    fn new(max_total: u32, max_per_ip: u32) -> Arc<Self> {
        Arc::new(ConnectionSlots {
            counts: Mutex::new((0, HashMap::new())),
            max_total,
            max_per_ip,
            refused: AtomicU64::new(0),
            last_warned_ms: AtomicI64::new(0),
        })
    }

    /// A slot for a connection from `ip`, or which limit (name, value) it would break.
    fn acquire(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, (&'static str, u32)> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (total, per_ip) = &mut *counts;
        if *total >= self.max_total {
            return Err(("max.connections", self.max_total));
        }
        let mine = per_ip.entry(ip).or_insert(0);
        if *mine >= self.max_per_ip {
            return Err(("max.connections.per.ip", self.max_per_ip));
        }
        *mine += 1;
        *total += 1;
        let m = crate::metrics::metrics();
        m.connections.inc();
        m.connections_accepted.inc();
        Ok(Slot {
            slots: self.clone(),
            ip,
        })
    }

    /// Logs a refusal, at most once a second (a flood must not flood the log too).
    fn refused(&self, peer: SocketAddr, limit: &'static str, max: u32) {
        crate::metrics::metrics().connection_refused(limit);
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let now = kaas_core::now_ms();
        let last = self.last_warned_ms.load(Ordering::Relaxed);
        if now - last >= 1000
            && self
                .last_warned_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            warn!(%peer, limit, max, refused_so_far = refused, "connection refused: {limit} reached");
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        crate::metrics::metrics().connections.dec();
        let mut counts = self.slots.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (total, per_ip) = &mut *counts;
        *total -= 1;
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

/// What every connection shares: the limits of docs/limits.md.
struct Limits {
    slots: Arc<ConnectionSlots>,
    /// `queued.max.request.bytes`, as permits of one byte each.
    request_bytes: Arc<Semaphore>,
    request_bytes_max: u64,
    idle: Duration,
    max_frame: usize,
}

/// A bound listener, ready to serve: its name and protocol, its socket, and its TLS
/// configuration when the protocol has TLS.
pub struct BoundListener {
    pub spec: ListenerSpec,
    pub socket: TcpListener,
    pub tls: Option<Arc<Tls>>,
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
    let budget = config.queued_max_request_bytes.min(Semaphore::MAX_PERMITS as u64);
    let limits = Arc::new(Limits {
        slots: ConnectionSlots::new(config.max_connections, config.max_connections_per_ip),
        request_bytes: Arc::new(Semaphore::new(budget as usize)),
        request_bytes_max: budget,
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
    let BoundListener { spec, socket, tls } = listener;
    let name: Arc<str> = spec.name.as_str().into();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = socket.accept() => match accepted {
                Ok((stream, peer)) => match limits.slots.acquire(peer.ip()) {
                    Ok(slot) => {
                        let on = Listening {
                            name: name.clone(),
                            protocol: spec.protocol,
                            tls: tls.clone(),
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
}

/// Who a connection is and where it came in: what its requests are judged by.
pub struct Session {
    pub listener: Arc<str>,
    pub principal: Arc<str>,
    /// Some until a SASL listener's connection has authenticated.
    sasl: Option<Authenticator>,
}

impl Session {
    /// A connection on `listener` that has not authenticated (yet): User:ANONYMOUS.
    fn anonymous(listener: &str) -> Session {
        Session {
            listener: listener.into(),
            principal: ANONYMOUS.into(),
            sasl: None,
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
    let mut session = Session::anonymous(&on.name);
    if on.protocol.sasl() {
        session.sasl = Some(Authenticator::new(&broker.config.sasl_enabled_mechanisms));
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
                    match crate::tls::subject_principal(cert) {
                        Some(subject) => {
                            session.principal = format!("User:{subject}").into();
                            info!(%peer, listener = %on.name, principal = ?session.principal, "TLS client certificate accepted");
                        }
                        None => {
                            warn!(%peer, "client certificate subject unreadable; the connection stays User:ANONYMOUS")
                        }
                    }
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
    let authenticate_by = tokio::time::Instant::now() + AUTHENTICATION_TIMEOUT;
    loop {
        let authenticating = session.sasl.is_some();
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
            let step = auth.raw(broker, token).await;
            if let Some(response) = &step.response {
                if !write_response(&mut writer, response, peer, limits, Some(authenticate_by)).await {
                    break;
                }
            }
            if !session.after_sasl_step(step.outcome, peer) {
                close_gracefully(&mut reader, &mut writer).await;
                break;
            }
            continue;
        }
        let frame = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            _ = tokio::time::sleep_until(authenticate_by), if authenticating => {
                info!(%peer, listener = %session.listener, "not authenticated within {AUTHENTICATION_TIMEOUT:?}; closing");
                break;
            }
            frame = read_frame(&mut reader, limits, authenticating) => frame,
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
            Err(e) => {
                warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        if authenticating {
            // read_frame let through only ApiVersions and the SASL APIs.
            let key = i16::from_be_bytes([frame[0], frame[1]]);
            if key == ApiKey::SaslHandshake as i16 || key == ApiKey::SaslAuthenticate as i16 {
                let (response, outcome) = match sasl_request(broker, &mut session, frame).await {
                    Ok(answered) => answered,
                    Err(e) => {
                        warn!(%peer, error = %e, "closing connection");
                        break;
                    }
                };
                if !write_response(&mut writer, &response, peer, limits, Some(authenticate_by)).await {
                    break;
                }
                if !session.after_sasl_step(outcome, peer) {
                    close_gracefully(&mut reader, &mut writer).await;
                    break;
                }
                continue;
            }
        }
        match handle_frame(broker, peer, &session, frame, &shutdown, permit).await {
            Ok(Some(response)) => {
                if !write_response(
                    &mut writer,
                    &response,
                    peer,
                    limits,
                    authenticating.then_some(authenticate_by),
                )
                .await
                {
                    break;
                }
            }
            Ok(None) => {}
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
    fn after_sasl_step(&mut self, outcome: Outcome, peer: SocketAddr) -> bool {
        match outcome {
            Outcome::Continue => true,
            Outcome::Authenticated(user) => {
                info!(%peer, listener = %self.listener, user, "SASL authentication succeeded");
                self.principal = format!("User:{user}").into();
                self.sasl = None;
                true
            }
            Outcome::Failed(why) => {
                info!(%peer, listener = %self.listener, reason = why, "SASL authentication failed; closing connection");
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

/// The 4-byte length that starts a frame, within `idle`; None on a clean end of stream.
async fn read_length<R: AsyncReadExt + Unpin>(reader: &mut R, idle: Duration) -> Result<Option<i64>, FrameError> {
    let mut len = [0u8; 4];
    match tokio::time::timeout(idle, reader.read_exact(&mut len))
        .await
        .map_err(|_| FrameError::Idle(idle.as_millis() as u64))?
    {
        Ok(_) => Ok(Some(i32::from_be_bytes(len) as i64)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads one raw SASL token (4-byte length, then the token), for the framing that
/// follows a v0 SaslHandshake.
async fn read_raw_token<R: AsyncReadExt + Unpin>(reader: &mut R, limits: &Limits) -> Result<Option<Bytes>, FrameError> {
    let idle = limits.idle;
    let timed = |_: tokio::time::error::Elapsed| FrameError::Idle(idle.as_millis() as u64);
    let Some(size) = read_length(reader, idle).await? else {
        return Ok(None);
    };
    if !(0..=MAX_PRE_AUTH_FRAME as i64).contains(&size) {
        return Err(FrameError::TooLargeBeforeAuthentication {
            size,
            max: MAX_PRE_AUTH_FRAME,
        });
    }
    // No share of the request budget: before authentication a connection holds at
    // most this one small token (its frame bound), whatever the others do.
    let mut token = vec![0u8; size as usize];
    tokio::time::timeout(idle, reader.read_exact(&mut token))
        .await
        .map_err(timed)??;
    Ok(Some(Bytes::from(token)))
}

/// Reads one frame, with its share of the request memory budget (none before
/// authentication); None on a clean end
/// of stream between frames. The next frame must start within
/// `connections.max.idle.ms`, and once started, arrive whole within it too (a sender
/// trickling a byte at a time gives its share of the budget back then). Before SASL
/// authentication (`pre_auth`) only ApiVersions, SaslHandshake and SaslAuthenticate
/// frames of at most [`MAX_PRE_AUTH_FRAME`] are read; any other closes the connection
/// before its body is read (past what the connection's 4 KiB read-ahead,
/// [`READ_AHEAD`], already holds) or any budget is taken.
async fn read_frame<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    limits: &Limits,
    pre_auth: bool,
) -> Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>, FrameError> {
    let idle = limits.idle;
    let timed = |_: tokio::time::error::Elapsed| FrameError::Idle(idle.as_millis() as u64);
    let Some(size) = read_length(reader, idle).await? else {
        return Ok(None);
    };
    if pre_auth && size > MAX_PRE_AUTH_FRAME as i64 {
        return Err(FrameError::TooLargeBeforeAuthentication {
            size,
            max: MAX_PRE_AUTH_FRAME,
        });
    }
    let max = limits.max_frame;
    if size > max as i64 {
        return Err(FrameError::TooLarge { size, max });
    }
    if size < MIN_REQUEST_LEN as i64 {
        return Err(FrameError::TooShort { size });
    }
    let size = size as usize;
    // The API key comes first: it decides the frame's bound and what it costs.
    let mut key = [0u8; 2];
    tokio::time::timeout(idle, reader.read_exact(&mut key))
        .await
        .map_err(timed)??;
    let api = i16::from_be_bytes(key);
    if pre_auth
        && ![ApiKey::ApiVersions, ApiKey::SaslHandshake, ApiKey::SaslAuthenticate]
            .iter()
            .any(|k| *k as i16 == api)
    {
        return Err(FrameError::Unauthenticated {
            api: ApiKey::try_from(api)
                .map(|a| format!("{a:?}"))
                .unwrap_or_else(|_| format!("api key {api}")),
        });
    }
    let produce = api == ApiKey::Produce as i16;
    if !produce && size > MAX_NON_PRODUCE_FRAME {
        return Err(FrameError::TooLargeForApi {
            size,
            max: MAX_NON_PRODUCE_FRAME,
        });
    }
    // Wait for room in the budget before allocating (a frame bigger than the whole
    // budget waits for all of it). A Produce costs its bytes; any other request what
    // it may take once decoded. A frame before authentication takes none: it is at
    // most MAX_PRE_AUTH_FRAME, one per connection, and clients nobody knows must not
    // be able to make anyone else wait.
    let permit = if pre_auth {
        None
    } else {
        let weight = if produce { 1 } else { DECODE_INFLATION };
        let cost = (size as u64 * weight)
            .min(limits.request_bytes_max)
            .min(u32::MAX as u64) as u32;
        Some(
            limits
                .request_bytes
                .clone()
                .acquire_many_owned(cost)
                .await
                .map_err(|_| std::io::Error::other("request memory budget closed"))?,
        )
    };
    // Read into the buffer's spare capacity: no zeroing of every frame first (it
    // showed in the produce profile, docs/performance.md).
    let mut buf = BytesMut::with_capacity(size);
    buf.extend_from_slice(&key);
    let mut body = (&mut *reader).take((size - key.len()) as u64);
    tokio::time::timeout(idle, async {
        while buf.len() < size {
            if body.read_buf(&mut buf).await? == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
        }
        Ok(())
    })
    .await
    .map_err(timed)??;
    Ok(Some((buf.freeze(), permit)))
}

/// A frame decoded: a request, or an answer already due (ApiVersions at a version
/// this broker does not have).
// Returned once per request and taken apart at once: boxing the request would cost
// an allocation per request for nothing.
#[allow(clippy::large_enum_variant)]
enum Decoded {
    Request {
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        header: RequestHeader,
        request: RequestKind,
    },
    Answered(Bytes),
}

/// Checks a frame's API and version and decodes its header and body.
fn decode_frame(frame: &mut Bytes) -> Result<Decoded, FrameError> {
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(key).map_err(|_| FrameError::UnknownApiKey(key))?;
    let Some((min, max)) = handlers::supported(api) else {
        return Err(FrameError::UnknownApiKey(key));
    };
    if version < min || version > max {
        if api == ApiKey::ApiVersions {
            // KIP-511: answer with a v0 body carrying UNSUPPORTED_VERSION and our
            // ranges, so the client can pick a version it shares with us.
            let body = ResponseKind::ApiVersions(handlers::api_versions::unsupported_version_response());
            return Ok(Decoded::Answered(encode_response(correlation_id, 0, &body, 0)?));
        }
        return Err(FrameError::UnsupportedVersion { api, version, min, max });
    }
    let header_version = api.request_header_version(version);
    let header = decode_guarded(|| RequestHeader::decode(frame, header_version))
        .map_err(|detail| FrameError::BadHeader { api, version, detail })?;
    let request = decode_guarded(|| RequestKind::decode(api, frame, version))
        .map_err(|detail| FrameError::BadBody { api, version, detail })?;
    if frame.has_remaining() {
        debug!(
            ?api,
            version,
            trailing = frame.remaining(),
            "request has trailing bytes"
        );
    }
    Ok(Decoded::Request {
        api,
        version,
        correlation_id,
        header,
        request,
    })
}

/// Decodes, dispatches and encodes one request of `session`. Ok(None) when no
/// response is due (acks=0 produce).
/// `permit` is the frame's share of `queued.max.request.bytes`, kept until the request
/// is answered (the decoded request refers to the frame's bytes). JoinGroup and
/// SyncGroup give it back once decoded: their handlers copy out what they keep and drop
/// the request before they wait for the rebalance, so waiting members never hold it.
pub async fn handle_frame(
    broker: &Arc<Broker>,
    peer: SocketAddr,
    session: &Session,
    mut frame: Bytes,
    shutdown: &watch::Receiver<bool>,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Option<Bytes>, FrameError> {
    let (api, version, correlation_id, header, request) = match decode_frame(&mut frame)? {
        Decoded::Answered(bytes) => return Ok(Some(bytes)),
        Decoded::Request {
            api,
            version,
            correlation_id,
            header,
            request,
        } => (api, version, correlation_id, header, request),
    };
    let _permit = permit.filter(|_| !matches!(&request, RequestKind::JoinGroup(_) | RequestKind::SyncGroup(_)));
    drop(frame);
    let silent = matches!(&request, RequestKind::Produce(p) if p.acks == 0);
    let ctx = RequestContext {
        api,
        version,
        correlation_id,
        client_id: header.client_id.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        peer,
        listener: session.listener.clone(),
        principal: session.principal.clone(),
        shutdown: shutdown.clone(),
    };
    let started = std::time::Instant::now();
    let response = handlers::dispatch(broker, &ctx, request).await;
    if silent {
        crate::metrics::metrics().request_done(api, &response, started.elapsed());
        // Nothing is answered, so a refusal (an ACL, a leader elsewhere) would go
        // unseen: Kafka closes the connection instead, and the client reconnects,
        // refreshes its metadata and sees the error there.
        if let ResponseKind::Produce(p) = &response {
            if let Some(code) = p
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .map(|r| r.error_code)
                .find(|&c| c != 0)
            {
                return Err(FrameError::SilentProduceFailed(code));
            }
        }
        return Ok(None);
    }
    let response_header_version = api.response_header_version(version);
    let encoded = encode_response(correlation_id, response_header_version, &response, version)?;
    crate::metrics::metrics().request_done(api, &response, started.elapsed());
    Ok(Some(encoded))
}

/// Runs a kafka-protocol decoder, turning both errors and panics into a message.
fn decode_guarded<T>(f: impl FnOnce() -> anyhow::Result<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(panic) => Err(panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "decoder panicked".into())),
    }
}

fn encode_response(
    correlation_id: i32,
    header_version: i16,
    body: &ResponseKind,
    version: i16,
) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, header_version)
        .and_then(|_| body.encode(&mut buf, version))
        .map_err(|e| FrameError::Io(std::io::Error::other(format!("encoding response: {e:#}"))))?;
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_slots_count_per_address_and_in_total_and_free_on_drop() {
        let slots = ConnectionSlots::new(5, 3);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let mut held: Vec<Slot> = (0..3).map(|_| slots.acquire(a).unwrap()).collect();
        assert_eq!(slots.acquire(a).err().map(|e| e.0), Some("max.connections.per.ip"));
        held.push(slots.acquire(b).unwrap());
        held.push(slots.acquire(b).unwrap());
        assert_eq!(slots.acquire(b).err().map(|e| e.0), Some("max.connections"));
        held.truncate(1);
        assert!(slots.acquire(a).is_ok());
        drop(held);
        let counts = slots.counts.lock().unwrap();
        assert_eq!(counts.0, 0);
        assert!(counts.1.is_empty(), "no address left behind");
    }
}
