//! The operations listener (`--metrics-listen`): `/metrics` for Prometheus and
//! `/health/live`, `/health/ready` for Kubernetes probes (docs/operations.md).
//!
//! It starts before the volume is opened, so a liveness probe is answered during a
//! long recovery (ready says "opening" meanwhile), and stops after the Kafka
//! listener, saying "not ready" as soon as shutdown begins.

use crate::broker::Broker;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use kaas_core::broker::BrokerLease;
use kaas_core::Volume;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, warn};

/// Operations connections served at once; more are closed at accept (a scraper and
/// two probes need three).
const MAX_HTTP_CONNECTIONS: usize = 32;

/// Connections from one address at once: one client cannot take every slot and
/// starve the kubelet's probes.
const MAX_HTTP_CONNECTIONS_PER_IP: usize = 8;

/// The longest a connection lives, whatever it does (a client that trickles its
/// request or never reads its response gives its slot back then).
const HTTP_CONNECTION_DEADLINE: Duration = Duration::from_secs(30);

/// How long the readiness round trip to the Kafka listener (connect, ApiVersions,
/// answer) may take.
const KAFKA_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The content type of `/metrics` (prometheus-client encodes OpenMetrics text).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the handlers see.
pub struct OpsState {
    /// Set once the volume is open and the broker serves.
    pub broker: OnceLock<Arc<Broker>>,
    pub volume: Volume,
    pub broker_id: i32,
    /// This process's lease incarnation: the lease on the volume must still name it.
    pub incarnation: String,
    /// A Kafka listener's bound address, probed for readiness, and whether it speaks
    /// Kafka without TLS (then an ApiVersions round trip is asked of it; with TLS an
    /// accepted connection is enough).
    pub kafka: (SocketAddr, bool),
    /// Flips when shutdown begins.
    pub shutdown: watch::Receiver<bool>,
    /// The last exposition and when its render began; the lock also makes renders
    /// one at a time.
    pub rendered: tokio::sync::Mutex<Option<(std::time::Instant, Bytes)>>,
}

/// Serves until `stop` flips.
pub async fn serve(listener: TcpListener, state: Arc<OpsState>, mut stop: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(MAX_HTTP_CONNECTIONS));
    let per_ip: PerIp = Default::default();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        debug!(%peer, "operations listener: too many connections; closing this one");
                        continue;
                    };
                    let Some(from_ip) = IpSlot::take(&per_ip, peer.ip()) else {
                        debug!(%peer, "operations listener: too many connections from this address; closing this one");
                        continue;
                    };
                    let state = state.clone();
                    conns.spawn(async move {
                        let _slots = (slot, from_ip);
                        let service = hyper::service::service_fn(move |req| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(route(&state, req).await) }
                        });
                        let served = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(Duration::from_secs(10))
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), service);
                        match tokio::time::timeout(HTTP_CONNECTION_DEADLINE, served).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => debug!(%peer, error = %e, "operations connection ended"),
                            Err(_) => debug!(%peer, "operations connection closed at its deadline"),
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "operations listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
}

type PerIp = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// One connection's share of its address's [`MAX_HTTP_CONNECTIONS_PER_IP`], given
/// back on drop (also if the connection's task panics or is aborted).
struct IpSlot {
    counts: PerIp,
    ip: std::net::IpAddr,
}

impl IpSlot {
    fn take(counts: &PerIp, ip: std::net::IpAddr) -> Option<IpSlot> {
        let mut map = counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= MAX_HTTP_CONNECTIONS_PER_IP {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}

async fn route(state: &Arc<OpsState>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "only GET\n");
    }
    match req.uri().path() {
        "/metrics" => {
            // One render at a time; a scrape that waited takes the result of a render
            // begun after it arrived (as fresh as its own would be): a burst of
            // scrapers costs two renders, not one each.
            let arrived = std::time::Instant::now();
            let mut rendered = state.rendered.lock().await;
            if let Some((_, text)) = rendered.as_ref().filter(|(at, _)| *at >= arrived) {
                return reply(StatusCode::OK, OPENMETRICS, text.clone());
            }
            let broker = state.broker.get().cloned();
            let started = std::time::Instant::now();
            match tokio::task::spawn_blocking(move || crate::metrics::render(broker.map(|b| move || b.gauges()))).await
            {
                Ok(Ok(text)) => {
                    let text = Bytes::from(text);
                    *rendered = Some((started, text.clone()));
                    reply(StatusCode::OK, OPENMETRICS, text)
                }
                Ok(Err(e)) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("encoding metrics failed: {e}\n"),
                ),
                Err(e) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("collecting metrics failed: {e}\n"),
                ),
            }
        }
        "/health/live" => reply(StatusCode::OK, "text/plain", "live\n"),
        "/health/ready" => {
            let checks = readiness(state).await;
            let ready = checks.iter().all(|c| c.ok);
            let body = serde_json::json!({
                "status": if ready { "ready" } else { "not ready" },
                "checks": checks
                    .iter()
                    .map(|c| (c.name.to_string(), serde_json::json!({"ok": c.ok, "detail": c.detail})))
                    .collect::<serde_json::Map<_, _>>(),
            });
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            reply(status, "application/json", format!("{body}\n"))
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics, /health/live or /health/ready\n",
        ),
    }
}

/// One readiness check's outcome.
#[derive(Debug)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

fn check(name: &'static str, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check { name, ok: true, detail },
        Err(detail) => Check {
            name,
            ok: false,
            detail,
        },
    }
}

/// Ready when: the volume is open and the broker not stopping; its own lease reads
/// back (the volume is readable) naming this process, not stopped (the lease is
/// held); the lease was renewed — written — within half the session timeout (the
/// volume is writable, and the broker may append); and the Kafka listener accepts a
/// connection.
pub async fn readiness(state: &Arc<OpsState>) -> Vec<Check> {
    let mut checks = Vec::new();
    let broker = state.broker.get().cloned();
    checks.push(check(
        "serving",
        match (&broker, *state.shutdown.borrow()) {
            (_, true) => Err("shutting down".into()),
            (None, _) => Err("opening the volume (recovering partitions)".into()),
            (Some(_), false) => Ok("serving".into()),
        },
    ));
    let lease = {
        let (volume, id) = (state.volume.clone(), state.broker_id);
        tokio::task::spawn_blocking(move || BrokerLease::read(&volume, id))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
    };
    checks.push(check(
        "volume_readable",
        lease
            .as_ref()
            .map(|_| "own lease read back".to_string())
            .map_err(|e| format!("cannot read own lease: {e}")),
    ));
    checks.push(check(
        "lease_held",
        match &lease {
            Ok(l) if l.incarnation != state.incarnation => Err(format!(
                "the lease names incarnation {} (another process), not this one",
                l.incarnation
            )),
            Ok(l) if l.stopped_ms.is_some() => Err("the lease is marked stopped".into()),
            Ok(l) if l.stepped_down_ms.is_some() => {
                Err("the lease is marked stepped down (it could not be renewed in time)".into())
            }
            Ok(_) => Ok("the lease names this process".into()),
            Err(_) => Err("own lease unreadable".into()),
        },
    ));
    checks.push(check(
        "volume_writable",
        match &broker {
            Some(b) if b.lease_fresh() => Ok("lease renewed within half the session timeout".into()),
            Some(_) => Err(
                "the lease was not renewed (written) within half the session timeout: the broker stepped down".into(),
            ),
            None => Err("not open yet".into()),
        },
    ));
    let (addr, plain) = state.kafka;
    let probe = if addr.ip().is_unspecified() {
        let loopback: std::net::IpAddr = if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        SocketAddr::new(loopback, addr.port())
    } else {
        addr
    };
    checks.push(check(
        "listener_accepting",
        if plain {
            match tokio::time::timeout(KAFKA_PROBE_TIMEOUT, api_versions_round_trip(probe)).await {
                Ok(Ok(())) => Ok(format!("{probe} answered an ApiVersions request")),
                Ok(Err(e)) => Err(format!("{probe}: {e}")),
                Err(_) => Err(format!("{probe}: no ApiVersions answer within {KAFKA_PROBE_TIMEOUT:?}")),
            }
        } else {
            match tokio::time::timeout(KAFKA_PROBE_TIMEOUT, TcpStream::connect(probe)).await {
                Ok(Ok(_)) => Ok(format!("{probe} (TLS) accepted a connection")),
                Ok(Err(e)) => Err(format!("{probe}: {e}")),
                Err(_) => Err(format!("{probe}: no connection within {KAFKA_PROBE_TIMEOUT:?}")),
            }
        },
    ));
    checks
}

/// Connects to the Kafka listener and sends an ApiVersions v0 request: ok once a
/// response with the same correlation id comes back. So the check covers the accept
/// loop and request handling, not only a bound socket whose backlog the kernel fills.
async fn api_versions_round_trip(addr: SocketAddr) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const CORRELATION_ID: i32 = 0x6b61_6173; // "kaas"
    let client_id = b"kaas-readiness-probe";
    let mut frame = Vec::with_capacity(32);
    let len = 2 + 2 + 4 + 2 + client_id.len();
    frame.extend_from_slice(&(len as i32).to_be_bytes());
    frame.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    frame.extend_from_slice(&0i16.to_be_bytes()); // v0: no flexible header
    frame.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    frame.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    frame.extend_from_slice(client_id);
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(&frame).await?;
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).await?;
    let correlation = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    if correlation != CORRELATION_ID {
        return Err(std::io::Error::other(format!(
            "answered with correlation id {correlation}, not {CORRELATION_ID}"
        )));
    }
    Ok(())
}
