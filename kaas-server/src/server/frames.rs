//! Frames on the wire: the length prefix, a frame read whole within its budget and
//! checked before any decoder sees it (size, header, API and version), decoded
//! without letting a count on the wire size an allocation, dispatched, and the
//! response encoded. SASL's raw tokens (the v0 framing) are read here too.

use super::*;

/// The 4-byte length that starts a frame, within `idle`; None on a clean end of stream.
pub(super) async fn read_length<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    idle: Duration,
) -> Result<Option<i64>, FrameError> {
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
pub(super) async fn read_raw_token<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    limits: &Limits,
) -> Result<Option<Bytes>, FrameError> {
    let idle = limits.idle;
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
    let deadline = frame_deadline(size as usize);
    tokio::time::timeout(deadline.min(idle), reader.read_exact(&mut token))
        .await
        .map_err(|_| FrameError::Deadline {
            size: size as usize,
            secs: deadline.min(idle).as_secs(),
        })??;
    Ok(Some(Bytes::from(token)))
}

/// Room a frame's buffer starts with once its body begins to arrive; it grows
/// [`ROOM_GROWTH`]-fold each time it fills ([`read_frame`]).
const FIRST_ROOM: usize = 4096;
const ROOM_GROWTH: usize = 4;

/// Reads one frame of `payer`, with its charge to the request memory budget (none
/// before authentication); None on a clean end of stream between frames. The next
/// frame must start within `connections.max.idle.ms`; once its length is read, it
/// must arrive whole, and be charged, within [`frame_deadline`] of its size.
///
/// The budget is charged as the bytes arrive ([`super::budget`]): room in the frame's
/// buffer is paid for only once bytes are there to fill it (4 KiB first, then
/// four times as much each time it is full, so holding a share takes sending at least
/// a quarter of it, and a 1 MiB Produce is read with four reallocations), and a non-Produce
/// request's decode allowance once its frame is whole. A sender that announces a
/// frame and stalls holds nothing. Before SASL authentication (`pre_auth`) only
/// ApiVersions, SaslHandshake and SaslAuthenticate frames of at most
/// [`MAX_PRE_AUTH_FRAME`] are read; any other closes the connection before its body
/// is read (past what the connection's 4 KiB read-ahead, [`READ_AHEAD`], already
/// holds).
pub(super) async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limits: &Limits,
    payer: &Payer,
    pre_auth: bool,
) -> Result<Option<(Bytes, Option<Charge>)>, FrameError> {
    let idle = limits.idle;
    let Some(size) = read_length(reader, idle).await? else {
        return Ok(None);
    };
    let allowed = frame_deadline(size.max(0) as usize);
    let deadline = tokio::time::Instant::now() + allowed;
    let timed = |_: tokio::time::error::Elapsed| FrameError::Deadline {
        size: size.max(0) as usize,
        secs: allowed.as_secs(),
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
    tokio::time::timeout_at(deadline, reader.read_exact(&mut key))
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
    // A frame before authentication is charged nothing: it is at most
    // MAX_PRE_AUTH_FRAME, one per connection, and clients nobody knows must not be
    // able to make anyone else wait.
    let mut charge = (!pre_auth).then(|| limits.budget.charge(payer.clone()));
    let no_room = |_: Expired| FrameError::NoRoom {
        size,
        secs: allowed.as_secs(),
    };
    // Read into the buffer's spare capacity: no zeroing of every frame first (it
    // showed in the produce profile, docs/performance.md).
    let mut buf = BytesMut::with_capacity(key.len());
    buf.extend_from_slice(&key);
    let mut room = key.len();
    tokio::time::timeout_at(deadline, async {
        while buf.len() < size {
            if buf.len() == room {
                // More room is paid for only once bytes have arrived to fill it.
                if reader.fill_buf().await?.is_empty() {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                }
                room = (room * ROOM_GROWTH).max(FIRST_ROOM).min(size);
                if let Some(charge) = charge.as_mut() {
                    charge.raise_to(room as u64, deadline).await.map_err(no_room)?;
                }
                buf.reserve(room - buf.len());
            }
            let mut body = (&mut *reader).take((room - buf.len()) as u64);
            if body.read_buf(&mut buf).await? == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
        }
        // Whole: what a request other than Produce may take once decoded.
        if let (false, Some(charge)) = (produce, charge.as_mut()) {
            charge
                .raise_to(size as u64 * DECODE_INFLATION, deadline)
                .await
                .map_err(no_room)?;
        }
        Ok::<(), FrameError>(())
    })
    .await
    .map_err(timed)??;
    Ok(Some((buf.freeze(), charge)))
}

/// A frame decoded: a request, or an answer already due (ApiVersions at a version
/// this broker does not have).
// Returned once per request and taken apart at once: boxing the request would cost
// an allocation per request for nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Decoded {
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
pub(super) fn decode_frame(frame: &mut Bytes) -> Result<Decoded, FrameError> {
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

/// Decodes, dispatches and encodes one request of `session`, and records it against
/// the client's quotas ([`Answer`]; no response for an acks=0 produce).
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
    permit: Option<Charge>,
) -> Result<Answer, FrameError> {
    // What a Produce request counts against its producer_byte_rate: the whole frame,
    // its size prefix included, as Kafka's request size.
    let size = frame.len() + 4;
    let (api, version, correlation_id, header, mut request) = match decode_frame(&mut frame)? {
        Decoded::Answered(bytes) => return Ok(Answer::now(Some(bytes))),
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
    // Quotas apply by the principal's name (`alice` of `User:alice`) and client id.
    let quotas = (!throttle::exempt(broker, &ctx))
        .then(|| broker.quotas.current())
        .filter(|q| !q.entries.is_empty());
    let user = session
        .principal
        .split_once(':')
        .map_or(&*session.principal, |(_, name)| name);
    if let (Some(quotas), RequestKind::Fetch(fetch)) = (&quotas, &mut request) {
        if let Some(cap) = broker.quotas.fetch_cap(quotas, user, &ctx.client_id) {
            fetch.max_bytes = fetch.max_bytes.min(cap.max(1));
        }
    }
    let started = std::time::Instant::now();
    let (mut response, busy) = throttle::timed(handlers::dispatch(broker, &ctx, request)).await;
    // Recorded against the quotas in force once the handler is done (a long poll may
    // outlast a quota change), not the snapshot above.
    let throttle = match &quotas {
        Some(_) => over_quota(broker, user, &ctx.client_id, size, busy, &mut response),
        None => Duration::ZERO,
    };
    let answer = |response: Option<Bytes>| Answer { response, throttle };
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
        return Ok(answer(None));
    }
    let response_header_version = api.response_header_version(version);
    let encoded = encode_response(correlation_id, response_header_version, &response, version)?;
    crate::metrics::metrics().request_done(api, &response, started.elapsed());
    Ok(answer(Some(encoded)))
}

/// What a request of `user` with `client_id` used, recorded against its quotas; the
/// throttle time it earned, also put into the response. A throttled Fetch keeps its
/// records (Kafka empties it; docs/quotas.md#how-kaas-differs-from-kafka).
fn over_quota(
    broker: &Broker,
    user: &str,
    client_id: &str,
    size: usize,
    busy: Duration,
    response: &mut ResponseKind,
) -> Duration {
    use crate::quotas::QuotaKind;
    let q = &broker.quotas;
    let mut throttle = q.record(QuotaKind::Request, user, client_id, busy.as_secs_f64() * 100.0);
    match response {
        ResponseKind::Produce(_) => {
            throttle = throttle.max(q.record(QuotaKind::Produce, user, client_id, size as f64));
        }
        ResponseKind::Fetch(fetch) => {
            let bytes: usize = fetch
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
                .sum();
            throttle = throttle.max(q.record(QuotaKind::Fetch, user, client_id, bytes as f64));
        }
        _ => {}
    }
    if !throttle.is_zero() {
        throttle::set_throttle_time(response, throttle.as_millis().min(i32::MAX as u128) as i32);
    }
    throttle
}

/// A request's answer and the throttle its quotas gave it.
pub struct Answer {
    /// None for a Produce with acks=0.
    pub response: Option<Bytes>,
    /// How long the connection is muted after the response (zero when under every
    /// quota).
    pub throttle: Duration,
}

impl Answer {
    fn now(response: Option<Bytes>) -> Answer {
        Answer {
            response,
            throttle: Duration::ZERO,
        }
    }
}

/// Runs a kafka-protocol decoder, turning both errors and panics into a message.
pub(super) fn decode_guarded<T>(f: impl FnOnce() -> anyhow::Result<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(panic) => Err(kaas_core::error::panic_message(panic.as_ref()).unwrap_or_else(|| "decoder panicked".into())),
    }
}

pub(super) fn encode_response(
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
