//! The network layer: accepts connections, reads length-prefixed request frames,
//! checks them before any decoder sees them, dispatches, and writes responses in
//! request order. A bad frame closes only its own connection, with a log line that
//! says what was wrong; nothing here can take the process down.

use crate::broker::Broker;
use crate::handlers::{self, RequestContext};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Smallest request: api key, api version, correlation id, client id length.
const MIN_REQUEST_LEN: usize = 10;

/// Why a connection was closed by the broker.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds --max-request-bytes {max}")]
    TooLarge { size: i64, max: usize },
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
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Accepts connections until `shutdown` flips, then waits (bounded) for connections
/// to finish their in-flight request.
pub async fn serve(broker: Arc<Broker>, listener: TcpListener, mut shutdown: watch::Receiver<bool>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let broker = broker.clone();
                    let shutdown = shutdown.clone();
                    conns.spawn(async move { connection(broker, stream, peer, shutdown).await });
                }
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

async fn connection(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let (mut reader, writer) = stream.into_split();
    let mut writer = BufWriter::new(writer);
    debug!(%peer, "connection opened");
    loop {
        let frame = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            frame = read_frame(&mut reader, broker.config.max_request_bytes) => frame,
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(FrameError::Io(e)) => {
                debug!(%peer, error = %e, "connection read failed");
                break;
            }
            Err(e) => {
                warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        match handle_frame(&broker, peer, frame, &shutdown).await {
            Ok(Some(response)) => {
                if let Err(e) = async {
                    writer.write_all(&response).await?;
                    writer.flush().await
                }
                .await
                {
                    debug!(%peer, error = %e, "connection write failed");
                    break;
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

/// Reads one frame; None on a clean end of stream between frames.
async fn read_frame<R: AsyncReadExt + Unpin>(reader: &mut R, max: usize) -> Result<Option<Bytes>, FrameError> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let size = i32::from_be_bytes(len) as i64;
    if size > max as i64 {
        return Err(FrameError::TooLarge { size, max });
    }
    if size < MIN_REQUEST_LEN as i64 {
        return Err(FrameError::TooShort { size });
    }
    // Read into the buffer's spare capacity: no zeroing of every frame first (it
    // showed in the produce profile, docs/performance.md).
    let size = size as usize;
    let mut buf = BytesMut::with_capacity(size);
    let mut body = (&mut *reader).take(size as u64);
    while buf.len() < size {
        if body.read_buf(&mut buf).await? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(Some(buf.freeze()))
}

/// Decodes, dispatches and encodes one request. Ok(None) when no response is due
/// (acks=0 produce).
pub async fn handle_frame(
    broker: &Arc<Broker>,
    peer: SocketAddr,
    mut frame: Bytes,
    shutdown: &watch::Receiver<bool>,
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
    let silent = matches!(&request, RequestKind::Produce(p) if p.acks == 0);
    let ctx = RequestContext {
        api,
        version,
        correlation_id,
        client_id: header.client_id.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        peer,
        shutdown: shutdown.clone(),
    };
    let response = handlers::dispatch(broker, &ctx, request).await;
    if silent {
        return Ok(None);
    }
    let response_header_version = api.response_header_version(version);
    Ok(Some(encode_response(
        correlation_id,
        response_header_version,
        &response,
        version,
    )?))
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
