//! The network layer: accepts connections, reads length-prefixed request frames,
//! checks them before any decoder sees them, dispatches, and writes responses in
//! request order. A bad frame closes only its own connection, with a log line that
//! says what was wrong; nothing here can take the process down.

use crate::broker::Broker;
use crate::handlers::{self, RequestContext};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
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
    #[error("idle for connections.max.idle.ms ({0} ms)")]
    Idle(u64),
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

/// Accepts connections until `shutdown` flips, then waits (bounded) for connections
/// to finish their in-flight request.
pub async fn serve(broker: Arc<Broker>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let config = &broker.config;
    let budget = config.queued_max_request_bytes.min(Semaphore::MAX_PERMITS as u64);
    let limits = Arc::new(Limits {
        slots: ConnectionSlots::new(config.max_connections, config.max_connections_per_ip),
        request_bytes: Arc::new(Semaphore::new(budget as usize)),
        request_bytes_max: budget,
        idle: Duration::from_millis(config.connections_max_idle_ms),
        max_frame: config.max_request_bytes,
    });
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match limits.slots.acquire(peer.ip()) {
                    Ok(slot) => {
                        let broker = broker.clone();
                        let shutdown = shutdown.clone();
                        let limits = limits.clone();
                        conns.spawn(async move { connection(broker, stream, peer, shutdown, limits, slot).await });
                    }
                    Err((limit, max)) => {
                        limits.slots.refused(peer, limit, max);
                        drop(stream);
                    }
                },
                Err(e) => {
                    // Usually EMFILE: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    info!(
        connections = conns.len(),
        "stopped accepting; waiting for in-flight requests"
    );
    let grace = Duration::from_millis(broker.config.shutdown_timeout_ms);
    if tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        warn!(
            connections = conns.len(),
            "shutdown grace period over; closing remaining connections"
        );
        conns.abort_all();
    }
}

async fn connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
    limits: Arc<Limits>,
    _slot: Slot,
) {
    let _ = stream.set_nodelay(true);
    let (mut reader, writer) = stream.into_split();
    let mut writer = BufWriter::new(writer);
    debug!(%peer, "connection opened");
    loop {
        let frame = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            frame = read_frame(&mut reader, &limits) => frame,
        };
        let (frame, permit) = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(FrameError::Io(e)) => {
                debug!(%peer, error = %e, "connection read failed");
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
        match handle_frame(&broker, peer, frame, &shutdown, Some(permit)).await {
            Ok(Some(response)) => {
                // A reader that stops reading (a zero TCP window) is closed like an
                // idle one, with its response.
                let written = tokio::time::timeout(limits.idle, async {
                    writer.write_all(&response).await?;
                    writer.flush().await
                })
                .await;
                match written {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        debug!(%peer, error = %e, "connection write failed");
                        break;
                    }
                    Err(_) => {
                        debug!(%peer, "closing a connection that did not take its response within connections.max.idle.ms");
                        break;
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                warn!(%peer, error = %e, "closing connection");
                break;
            }
        }
        if *shutdown.borrow() {
            break;
        }
    }
    debug!(%peer, "connection closed");
}

/// Reads one frame, with its share of the request memory budget; None on a clean end
/// of stream between frames. The next frame must start within
/// `connections.max.idle.ms`, and once started, arrive whole within it too (a sender
/// trickling a byte at a time gives its share of the budget back then).
async fn read_frame<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    limits: &Limits,
) -> Result<Option<(Bytes, OwnedSemaphorePermit)>, FrameError> {
    let idle = limits.idle;
    let timed = |_: tokio::time::error::Elapsed| FrameError::Idle(idle.as_millis() as u64);
    let mut len = [0u8; 4];
    match tokio::time::timeout(idle, reader.read_exact(&mut len))
        .await
        .map_err(timed)?
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let size = i32::from_be_bytes(len) as i64;
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
    let produce = i16::from_be_bytes(key) == ApiKey::Produce as i16;
    if !produce && size > MAX_NON_PRODUCE_FRAME {
        return Err(FrameError::TooLargeForApi {
            size,
            max: MAX_NON_PRODUCE_FRAME,
        });
    }
    // Wait for room in the budget before allocating (a frame bigger than the whole
    // budget waits for all of it). A Produce costs its bytes; any other request what
    // it may take once decoded.
    let weight = if produce { 1 } else { DECODE_INFLATION };
    let cost = (size as u64 * weight)
        .min(limits.request_bytes_max)
        .min(u32::MAX as u64) as u32;
    let permit = limits
        .request_bytes
        .clone()
        .acquire_many_owned(cost)
        .await
        .map_err(|_| std::io::Error::other("request memory budget closed"))?;
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

/// Decodes, dispatches and encodes one request. Ok(None) when no response is due
/// (acks=0 produce).
/// `permit` is the frame's share of `queued.max.request.bytes`, kept until the request
/// is answered (the decoded request refers to the frame's bytes). JoinGroup and
/// SyncGroup give it back once decoded: their handlers copy out what they keep and drop
/// the request before they wait for the rebalance, so waiting members never hold it.
pub async fn handle_frame(
    broker: &Arc<Broker>,
    peer: SocketAddr,
    mut frame: Bytes,
    shutdown: &watch::Receiver<bool>,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Option<Bytes>, FrameError> {
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
            return Ok(Some(encode_response(correlation_id, 0, &body, 0)?));
        }
        return Err(FrameError::UnsupportedVersion { api, version, min, max });
    }
    let header_version = api.request_header_version(version);
    let header = decode_guarded(|| RequestHeader::decode(&mut frame, header_version))
        .map_err(|detail| FrameError::BadHeader { api, version, detail })?;
    let request = decode_guarded(|| RequestKind::decode(api, &mut frame, version))
        .map_err(|detail| FrameError::BadBody { api, version, detail })?;
    if frame.has_remaining() {
        debug!(
            ?api,
            version,
            trailing = frame.remaining(),
            "request has trailing bytes"
        );
    }
    let _permit = permit.filter(|_| !matches!(&request, RequestKind::JoinGroup(_) | RequestKind::SyncGroup(_)));
    drop(frame);
    let silent = matches!(&request, RequestKind::Produce(p) if p.acks == 0);
    let ctx = RequestContext {
        api,
        version,
        correlation_id,
        client_id: header.client_id.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        peer,
        shutdown: shutdown.clone(),
    };
    let started = std::time::Instant::now();
    let response = handlers::dispatch(broker, &ctx, request).await;
    if silent {
        crate::metrics::metrics().request_done(api, &response, started.elapsed());
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
