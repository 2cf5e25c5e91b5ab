//! Links to the other brokers (docs/cluster.md#markers-across-brokers): the
//! transaction coordinator's notices that markers are queued for a partition's leader,
//! fence notices, and cluster notices (a lease or the topics changed:
//! docs/cluster.md#cluster-notices), sent as Kafka's inter-broker WriteTxnMarkers on
//! the inter-broker listener
//! (`--inter-broker-listener-name`), authenticated like any client (TLS, SASL with
//! `--inter-broker-sasl-*`).
//!
//! The volume is the record, the network the doorbell: a notice is sent only for a
//! queue entry already written, and whatever happens to it — no connection, a refusal,
//! a timeout, a leader that dies after reading it — the coordinator is told
//! ([`crate::txn_coordinator::TransactionCoordinator::notice_answered`]: it makes the
//! entry durable if it was not) and the leader's marker-queue poll still applies the
//! entry. So nothing here retries: a failed notice is counted
//! (`kaas_txn_marker_notifications{outcome="lost"|"refused"}`), its connection
//! dropped and made again for the next one.
//!
//! Two tasks per leader each hold one connection and send one request at a time;
//! notices that arrive while both are busy go together in the next request (one
//! WriteTxnMarkers carries many markers), so a busy coordinator sends fewer, larger
//! requests.

use crate::broker::Broker;
use crate::config::{Config, SaslMechanism};
use crate::listeners::ListenerSpec;
use crate::metrics::{ClusterNoticeEvent, NotificationOutcome};
use crate::txn_coordinator::{
    txn_seq_in, txn_seq_tag, NoticeAnswer, PeerNotice, CLUSTER_NOTICE_PRODUCER_ID, TXN_SEQ_TAG,
};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::write_txn_markers_response::WritableTxnMarkerResult;
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

/// Connecting, the TLS handshake and SASL together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One WriteTxnMarkers: the leader's marker appends and their fsync.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Notices sent in one request at most.
const MAX_BATCH: usize = 256;
/// Requests in flight to one leader at most, each on its own connection (a broker
/// answers one request per connection at a time, as Kafka's do): a notice does not
/// wait behind another transaction's markers' fsync.
const CONNECTIONS_PER_PEER: usize = 2;
/// Notices waiting for the links, all peers together, and for one peer: past that a
/// notice is counted lost at once (the links are far behind; the polls deliver).
pub const QUEUED_NOTICES: usize = 16_384;
const QUEUED_PER_PEER: usize = 4_096;
/// After a failed request, a link waits this long before the next (doubling up to
/// `MAX_BACKOFF`), so an unreachable or refusing peer is not hammered with connections
/// and logins.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// The largest response read from a peer.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// The transaction number a leader's answer echoes ([`TXN_SEQ_TAG`]): every marker of
/// it applied by that number ([`crate::txn_coordinator::NotifiedMarkers::applied`]).
fn txn_seq_of_result(result: &WritableTxnMarkerResult) -> Option<u64> {
    txn_seq_in(&result.unknown_tagged_fields)
}

/// How this broker reaches its peers.
pub struct PeerSettings {
    listener: String,
    sasl: Option<SaslLogin>,
    tls: Option<tokio_rustls::TlsConnector>,
    client_id: StrBytes,
}

struct SaslLogin {
    mechanism: SaslMechanism,
    user: String,
    password: String,
}

impl PeerSettings {
    /// The inter-broker settings of `config`, checked against this broker's own
    /// `listeners` (the peers are expected to have the same one). None when
    /// notifications are off, or the listener needs credentials or a CA not given
    /// (warned). Errors (a listener that does not exist, half the credentials, an
    /// unreadable file) name the flag.
    pub fn from_config(config: &Config, listeners: &[ListenerSpec]) -> anyhow::Result<Option<PeerSettings>> {
        if !config.inter_broker_notifications {
            return Ok(None);
        }
        let listener = match &config.inter_broker_listener_name {
            Some(name) => listeners.iter().find(|l| &l.name == name).ok_or_else(|| {
                anyhow::anyhow!(
                    "--inter-broker-listener-name {name} is not a listener of this broker (listeners: {})",
                    listeners.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", ")
                )
            })?,
            None => listeners
                .iter()
                .find(|l| l.name == "PLAINTEXT")
                .unwrap_or(&listeners[0]),
        };
        // A listener that needs what is not given: the broker runs (alone it needs no
        // peers), said at start; markers and fences then wait for the peers' polls.
        let without = |what: &str| {
            warn!(
                listener = %listener.name,
                protocol = listener.protocol.name(),
                "the inter-broker listener needs {what}: brokers do not notify each other, so markers and fences for other brokers wait for their polls (--volume-poll-interval-ms); docs/security.md#between-brokers"
            );
            Ok(None)
        };
        let sasl = if listener.protocol.sasl() {
            let (user, file) = match (
                config.inter_broker_sasl_username.clone(),
                config.inter_broker_sasl_password_file.as_ref(),
            ) {
                (Some(user), Some(file)) => (user, file),
                (None, None) => return without("--inter-broker-sasl-username and --inter-broker-sasl-password-file"),
                _ => anyhow::bail!(
                    "--inter-broker-sasl-username and --inter-broker-sasl-password-file go together: give both"
                ),
            };
            let password = read_password(file)?;
            Some(SaslLogin {
                mechanism: config.inter_broker_sasl_mechanism,
                user,
                password,
            })
        } else {
            None
        };
        let tls = if listener.protocol.tls() {
            // The listener's own TLS files where it has them (--listener-ssl-*): its CA
            // is what the peers' certificates on it chain to, and its certificate what
            // they ask this broker for.
            use crate::config::for_listener;
            let name = &listener.name;
            let Some(ca) = config
                .inter_broker_ssl_ca
                .as_ref()
                .or(for_listener(&config.listener_ssl_ca, name))
                .or(config.ssl_ca.as_ref())
            else {
                return without("--inter-broker-ssl-ca (or the listener's --listener-ssl-ca, or --ssl-ca), the CA the peers' certificates chain to");
            };
            let certificate = for_listener(&config.listener_ssl_certificate, name).or(config.ssl_certificate.as_ref());
            let key = for_listener(&config.listener_ssl_key, name).or(config.ssl_key.as_ref());
            let identity = certificate.map(|c| c.as_path()).zip(key.map(|k| k.as_path()));
            Some(crate::tls::client_connector(ca, identity).map_err(|e| anyhow::anyhow!("inter-broker TLS: {e}"))?)
        } else {
            None
        };
        Ok(Some(PeerSettings {
            listener: listener.name.clone(),
            sasl,
            tls,
            client_id: StrBytes::from_string(format!("kaas-broker-{}", config.broker_id)),
        }))
    }

    /// The inter-broker listener's name.
    pub fn listener(&self) -> &str {
        &self.listener
    }
}

/// A password file's first line (at most 4 KiB; a trailing newline is not part of it).
fn read_password(path: &std::path::Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("--inter-broker-sasl-password-file {}: {e}", path.display()))?;
    if bytes.len() > 4096 {
        anyhow::bail!("--inter-broker-sasl-password-file {}: more than 4 KiB", path.display());
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--inter-broker-sasl-password-file {}: not UTF-8", path.display()))?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() || password.contains('\n') {
        anyhow::bail!(
            "--inter-broker-sasl-password-file {}: expected the password on one line",
            path.display()
        );
    }
    Ok(password.to_string())
}

/// Sends the coordinator's notices until shutdown: one link per leader.
pub async fn run(
    broker: Arc<Broker>,
    settings: Arc<PeerSettings>,
    mut notices: mpsc::Receiver<PeerNotice>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut links: HashMap<i32, mpsc::Sender<PeerNotice>> = HashMap::new();
    loop {
        let notice = tokio::select! {
            n = notices.recv() => match n {
                Some(n) => n,
                None => break,
            },
            _ = shutdown.changed() => break,
        };
        let leader = notice.to();
        let sender = links.entry(leader).or_insert_with(|| {
            let (tx, rx) = mpsc::channel(QUEUED_PER_PEER);
            let rx = Arc::new(tokio::sync::Mutex::new(rx));
            for _ in 0..CONNECTIONS_PER_PEER {
                tokio::spawn(link(
                    broker.clone(),
                    settings.clone(),
                    leader,
                    rx.clone(),
                    shutdown.clone(),
                ));
            }
            tx
        });
        match sender.try_send(notice) {
            Ok(()) => {}
            // The peer is far behind: this one is left to its poll.
            Err(mpsc::error::TrySendError::Full(notice)) => dropped_before_a_link(&broker, notice),
            // The link ended (only at shutdown): its notices are left to the poll.
            Err(mpsc::error::TrySendError::Closed(notice)) => {
                links.remove(&leader);
                dropped_before_a_link(&broker, notice);
            }
        }
    }
}

/// One of a leader's links: batches of notices, one request at a time on its own
/// connection ([`CONNECTIONS_PER_PEER`] of them share the leader's notices). A notice
/// older than the poll interval is not sent (the leader's poll has it, or is about
/// to); after a failure the link backs off before the next request.
async fn link(
    broker: Arc<Broker>,
    settings: Arc<PeerSettings>,
    leader: i32,
    notices: Arc<tokio::sync::Mutex<mpsc::Receiver<PeerNotice>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connection: Option<Connection> = None;
    let mut backoff = Duration::ZERO;
    // No request before this, after a failure.
    let mut next_attempt = tokio::time::Instant::now();
    let stale_after = Duration::from_millis(broker.config.volume_poll_interval_ms.max(10));
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next_attempt) => {}
            _ = shutdown.changed() => break,
        }
        let batch = {
            let mut notices = tokio::select! {
                n = notices.lock() => n,
                _ = shutdown.changed() => break,
            };
            let first = tokio::select! {
                n = notices.recv() => match n {
                    Some(n) => n,
                    None => break,
                },
                _ = shutdown.changed() => break,
            };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match notices.try_recv() {
                    Ok(n) => batch.push(n),
                    Err(_) => break,
                }
            }
            batch
        };
        // Taken: a change from now on needs a notice of its own (this one may reach
        // the peer before it).
        for notice in &batch {
            if let PeerNotice::Cluster { to } = notice {
                broker.txn.cluster_notice_taken(*to);
            }
        }
        // Older than the poll interval (the link was backing off): the leader's poll
        // has them, or is about to.
        let (fresh, stale): (Vec<PeerNotice>, Vec<PeerNotice>) =
            batch.into_iter().partition(|n| n.queued_for() < stale_after);
        for notice in stale {
            answered(&broker, notice, NotificationOutcome::Lost, false);
        }
        if fresh.is_empty() {
            continue;
        }
        let outcomes = match notify(&broker, &settings, leader, &mut connection, &fresh).await {
            Ok(outcomes) => {
                backoff = Duration::ZERO;
                outcomes
            }
            Err(e) => {
                // Dropped: the next request connects again, after a pause.
                connection = None;
                backoff = (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                next_attempt = tokio::time::Instant::now() + backoff;
                warn!(leader, notices = fresh.len(), error = %e, "notifying a partition leader of queued markers failed; its marker-queue poll applies them");
                vec![(NotificationOutcome::Lost, false); fresh.len()]
            }
        };
        for (notice, (outcome, applied)) in fresh.into_iter().zip(outcomes) {
            answered(&broker, notice, outcome, applied);
        }
    }
}

/// How long a stopping broker spends telling its peers it stopped, all together.
const STOP_NOTICE_TIMEOUT: Duration = Duration::from_secs(1);

/// Tells every live peer once, at a clean stop, that this broker's lease says it
/// stopped (a cluster notice, docs/cluster.md#cluster-notices), so they take its
/// groups, slots and partitions over at once rather than at their next renewal and
/// sync: each on a connection of its own, all at once, for at most
/// [`STOP_NOTICE_TIMEOUT`] together (the links are closed by then). A peer not told
/// reads the lease at its next renewal anyway.
pub async fn announce_stop(broker: &Broker, settings: &PeerSettings) {
    let me = broker.config.broker_id;
    let request = WriteTxnMarkersRequest::default().with_markers(vec![marker_of(&PeerNotice::Cluster { to: me })]);
    let request = &request;
    let told = broker.live_brokers().into_keys().filter(|b| *b != me).map(|peer| async move {
        let mut connection = None;
        let sent = tokio::time::timeout(
            STOP_NOTICE_TIMEOUT,
            exchange(broker, settings, peer, &mut connection, request),
        )
        .await;
        let event = match sent {
            Ok(Ok(_)) => ClusterNoticeEvent::Sent,
            _ => ClusterNoticeEvent::Lost,
        };
        crate::metrics::metrics().cluster_notice(event);
        match sent {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => debug!(peer, error = %e, "a peer was not told of this broker's stop; it reads the lease at its next renewal"),
            Err(_) => debug!(peer, "a peer was not told of this broker's stop in time; it reads the lease at its next renewal"),
        }
    });
    futures_util::future::join_all(told).await;
}

/// A notice no link took (the peer's queue full, or its links gone at shutdown): a
/// cluster notice's mark is cleared, so the next change queues one again, and the
/// notice is counted lost like one a link could not deliver.
fn dropped_before_a_link(broker: &Arc<Broker>, notice: PeerNotice) {
    if let PeerNotice::Cluster { to } = notice {
        broker.txn.cluster_notice_taken(to);
    }
    answered(broker, notice, NotificationOutcome::Lost, false);
}

/// Counts a marker notice's outcome and lets the coordinator act on it, off the
/// link's task (a completion, or making the entry durable, takes the slot's lock). A fence notice needs nothing
/// more: the peer's fence watcher reads the fence log at its next poll anyway.
/// `applied`: the leader said every marker of it is durable by the notice's
/// transaction number ([`TXN_SEQ_TAG`] echoed in its answer).
fn answered(broker: &Arc<Broker>, notice: PeerNotice, outcome: NotificationOutcome, applied: bool) {
    let notice = match notice {
        PeerNotice::Markers(n) => n,
        PeerNotice::Fence { to, producer_id, epoch } => {
            if outcome != NotificationOutcome::Delivered {
                debug!(
                    to,
                    producer_id,
                    epoch,
                    "a fence notice was not delivered; the peer's fence watcher reads the log at its next poll"
                );
            }
            return;
        }
        PeerNotice::Cluster { to } => {
            // Its mark was cleared when a link took it (or by
            // `dropped_before_a_link`): clearing it here would clear the mark of a
            // newer notice, queued since and still waiting.
            crate::metrics::metrics().cluster_notice(match outcome {
                NotificationOutcome::Delivered => ClusterNoticeEvent::Sent,
                NotificationOutcome::Lost | NotificationOutcome::Refused => ClusterNoticeEvent::Lost,
            });
            if outcome != NotificationOutcome::Delivered {
                debug!(
                    to,
                    "a cluster notice was not delivered; the peer reads the leases and topics at its next renewal and sync"
                );
            }
            return;
        }
    };
    crate::metrics::metrics().marker_notification(outcome);
    let answer = match outcome {
        NotificationOutcome::Delivered if applied => NoticeAnswer::Applied,
        NotificationOutcome::Delivered => NoticeAnswer::Answered,
        NotificationOutcome::Lost | NotificationOutcome::Refused => NoticeAnswer::Failed,
    };
    // Recorded here; a task of its own only for what may take the slot's lock.
    let recorded = broker.txn.record_answer(&notice, answer);
    if matches!(recorded, crate::txn_coordinator::AnswerRecorded::Recorded) {
        return;
    }
    let broker = broker.clone();
    tokio::spawn(async move {
        broker.txn.act_on_answer(&broker, &notice, answer, recorded).await;
    });
}

/// Sends one batch as one WriteTxnMarkers; each notice's outcome, in order, and
/// whether its leader echoed the notice's transaction number (every marker applied by
/// it: [`TXN_SEQ_TAG`]).
async fn notify(
    broker: &Broker,
    settings: &PeerSettings,
    leader: i32,
    connection: &mut Option<Connection>,
    batch: &[PeerNotice],
) -> Result<Vec<(NotificationOutcome, bool)>, String> {
    // Only for batches with markers: fence and cluster notices (sent at start, at a
    // join, for a topic) do not use up a test's count of lost marker notifications.
    if batch.iter().any(|n| matches!(n, PeerNotice::Markers(_))) {
        kaas_core::failpoint::check(kaas_core::failpoint::MARKER_NOTIFY)
            .map_err(|e| format!("failpoint {}: {e}", kaas_core::failpoint::MARKER_NOTIFY))?;
    }
    let request = WriteTxnMarkersRequest::default().with_markers(batch.iter().map(marker_of).collect());
    // A connection kept from an earlier request may have been closed by the peer (a
    // restart) or the network meanwhile: then once more on a new one. The request is
    // a doorbell, so sending it twice is harmless.
    let reused = connection.is_some();
    let response = match exchange(broker, settings, leader, connection, &request).await {
        Err(e) if reused => {
            debug!(leader, error = %e, "a kept connection to a peer failed; trying a new one");
            *connection = None;
            exchange(broker, settings, leader, connection, &request).await?
        }
        other => other?,
    };
    outcomes(leader, batch, &response)
}

/// Each notice's outcome in a leader's answer to `batch`, in order, and whether the
/// leader echoed the notice's transaction number ([`TXN_SEQ_TAG`]): only that says
/// every marker of it is durable. An answer of another length is an error (the
/// whole batch is then lost: the polls apply the entries).
fn outcomes(
    leader: i32,
    batch: &[PeerNotice],
    response: &WriteTxnMarkersResponse,
) -> Result<Vec<(NotificationOutcome, bool)>, String> {
    if response.markers.len() != batch.len() {
        return Err(format!(
            "answered {} markers for {} asked",
            response.markers.len(),
            batch.len()
        ));
    }
    Ok(batch
        .iter()
        .zip(&response.markers)
        .map(|(notice, result)| {
            let notice = match notice {
                PeerNotice::Markers(n) => n,
                PeerNotice::Fence { .. } | PeerNotice::Cluster { .. } => return (NotificationOutcome::Delivered, false),
            };
            let errors: Vec<String> = result
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .filter(|p| p.error_code != 0)
                        .map(move |p| format!("{}-{}: error {}", t.name.0.as_str(), p.partition_index, p.error_code))
                })
                .collect();
            if result.producer_id.0 != notice.entry.producer_id {
                warn!(leader, "a leader answered markers out of order; counted as refused");
                (NotificationOutcome::Refused, false)
            } else if errors.is_empty() {
                let echoed = notice.entry.txn_seq.is_some() && txn_seq_of_result(result) == notice.entry.txn_seq;
                (NotificationOutcome::Delivered, echoed)
            } else {
                warn!(leader, transactional_id = %notice.entry.transactional_id, producer_id = notice.entry.producer_id, errors = %errors.join(", "), "a partition leader refused a marker notice; its marker-queue poll applies the entry");
                (NotificationOutcome::Refused, false)
            }
        })
        .collect())
}

/// One WriteTxnMarkers on `connection`, connecting first when there is none.
async fn exchange(
    broker: &Broker,
    settings: &PeerSettings,
    leader: i32,
    connection: &mut Option<Connection>,
    request: &WriteTxnMarkersRequest,
) -> Result<WriteTxnMarkersResponse, String> {
    if connection.is_none() {
        *connection = Some(
            tokio::time::timeout(CONNECT_TIMEOUT, Connection::open(broker, settings, leader))
                .await
                .map_err(|_| format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()))??,
        );
    }
    let conn = connection.as_mut().expect("connected");
    let answer = tokio::time::timeout(
        REQUEST_TIMEOUT,
        conn.call::<_, WriteTxnMarkersResponse>(ApiKey::WriteTxnMarkers, 1, request),
    )
    .await
    .map_err(|_| format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))?;
    if answer.is_err() {
        *connection = None;
    }
    answer
}

/// The WriteTxnMarkers marker of one notice: a marker entry's producer, result and
/// partitions; a fence's producer and new epoch, with no partitions (a peer reads a
/// marker without partitions as "fence logs changed", docs/cluster.md); a cluster
/// notice's producer -1, with no partitions ("leases or topics changed": a peer of a
/// build before cluster notices reads it as a fence notice, and reads the fence logs).
fn marker_of(notice: &PeerNotice) -> WritableTxnMarker {
    let notice = match notice {
        PeerNotice::Markers(n) => n,
        PeerNotice::Fence { producer_id, epoch, .. } => {
            return WritableTxnMarker::default()
                .with_producer_id(ProducerId(*producer_id))
                .with_producer_epoch(*epoch)
                .with_transaction_result(false)
        }
        PeerNotice::Cluster { .. } => {
            return WritableTxnMarker::default()
                .with_producer_id(ProducerId(CLUSTER_NOTICE_PRODUCER_ID))
                .with_producer_epoch(-1)
                .with_transaction_result(false)
        }
    };
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &notice.entry.partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    let marker = WritableTxnMarker::default();
    let marker = match notice.entry.txn_seq {
        Some(seq) => marker.with_unknown_tagged_field(TXN_SEQ_TAG, txn_seq_tag(seq)),
        None => marker,
    };
    marker
        .with_producer_id(ProducerId(notice.entry.producer_id))
        .with_producer_epoch(notice.entry.producer_epoch)
        .with_transaction_result(notice.entry.result == kaas_core::marker_queue::MarkerResult::Commit)
        .with_coordinator_epoch(notice.entry.coordinator_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name.to_string())))
                        .with_partition_indexes(partitions)
                })
                .collect(),
        )
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One authenticated connection to a peer's inter-broker listener.
struct Connection {
    io: Box<dyn Io>,
    correlation_id: i32,
    client_id: StrBytes,
}

impl Connection {
    async fn open(broker: &Broker, settings: &PeerSettings, leader: i32) -> Result<Connection, String> {
        let endpoints = broker
            .live_brokers()
            .get(&leader)
            .cloned()
            .ok_or_else(|| format!("broker {leader} is not live"))?;
        let (host, port) = endpoints.on(&settings.listener).ok_or_else(|| {
            format!(
                "broker {leader} has no listener {} (--inter-broker-listener-name)",
                settings.listener
            )
        })?;
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connecting to broker {leader} at {host}:{port}: {e}"))?;
        tcp.set_nodelay(true)
            .map_err(|e| format!("connecting to broker {leader} at {host}:{port}: {e}"))?;
        let io: Box<dyn Io> = match &settings.tls {
            Some(tls) => {
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("broker {leader}'s host {host:?} is not a TLS server name: {e}"))?;
                Box::new(
                    tls.connect(name, tcp)
                        .await
                        .map_err(|e| format!("TLS with broker {leader} at {host}:{port}: {e}"))?,
                )
            }
            None => Box::new(tcp),
        };
        let mut conn = Connection {
            io,
            correlation_id: 0,
            client_id: settings.client_id.clone(),
        };
        if let Some(login) = &settings.sasl {
            conn.authenticate(login).await.map_err(|e| {
                format!(
                    "SASL {} as {:?} with broker {leader}: {e}",
                    login.mechanism.name(),
                    login.user
                )
            })?;
        }
        info!(leader, address = %format!("{host}:{port}"), listener = %settings.listener, "connected to a peer for notices");
        Ok(conn)
    }

    async fn authenticate(&mut self, login: &SaslLogin) -> Result<(), String> {
        let handshake: SaslHandshakeResponse = self
            .call(
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(login.mechanism.name())),
            )
            .await?;
        if handshake.error_code != 0 {
            return Err(format!(
                "the peer does not enable {} (it offers {})",
                login.mechanism.name(),
                handshake
                    .mechanisms
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        match login.mechanism {
            SaslMechanism::Plain => {
                let token = format!("\0{}\0{}", login.user, login.password);
                self.sasl_step(Bytes::from(token)).await?;
            }
            SaslMechanism::Scram(m) => {
                let (mut client, first) =
                    kaas_core::scram::ScramClient::first(m, &login.user).map_err(|e| e.to_string())?;
                let server_first = self.sasl_step(Bytes::from(first)).await?;
                // PBKDF2 (thousands of HMAC rounds): off the runtime's workers.
                let password = login.password.clone();
                let (client_back, last) = tokio::task::spawn_blocking(move || {
                    let last = client.answer(&server_first, &password);
                    (client, last)
                })
                .await
                .map_err(|e| e.to_string())?;
                client = client_back;
                let last = last.map_err(|e| e.to_string())?;
                let server_final = self.sasl_step(Bytes::from(last)).await?;
                client.verify_server(&server_final).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    async fn sasl_step(&mut self, token: Bytes) -> Result<Bytes, String> {
        let response: SaslAuthenticateResponse = self
            .call(
                ApiKey::SaslAuthenticate,
                2,
                &SaslAuthenticateRequest::default().with_auth_bytes(token),
            )
            .await?;
        if response.error_code != 0 {
            return Err(format!(
                "refused (error {}): {}",
                response.error_code,
                response.error_message.as_ref().map(|m| m.as_str()).unwrap_or("")
            ));
        }
        Ok(response.auth_bytes)
    }

    /// Sends one request and reads its response.
    async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, String> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()))
            .encode(&mut buf, api.request_header_version(version))
            .and_then(|_| request.encode(&mut buf, version))
            .map_err(|e| format!("encoding {api:?}: {e:#}"))?;
        let len = (buf.len() - 4) as i32;
        buf[0..4].copy_from_slice(&len.to_be_bytes());
        self.io
            .write_all(&buf)
            .await
            .map_err(|e| format!("sending {api:?}: {e}"))?;
        self.io.flush().await.map_err(|e| format!("sending {api:?}: {e}"))?;
        let len = self
            .io
            .read_i32()
            .await
            .map_err(|e| format!("reading the answer to {api:?}: {e}"))?;
        if len < 4 || len as usize > MAX_RESPONSE_BYTES {
            return Err(format!("answer to {api:?} of {len} bytes"));
        }
        let mut frame = vec![0u8; len as usize];
        self.io
            .read_exact(&mut frame)
            .await
            .map_err(|e| format!("reading the answer to {api:?}: {e}"))?;
        let mut frame = Bytes::from(frame);
        let header = ResponseHeader::decode(&mut frame, api.response_header_version(version))
            .map_err(|e| format!("decoding the answer to {api:?}: {e:#}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "answer to {api:?} has correlation id {}, expected {correlation_id}",
                header.correlation_id
            ));
        }
        let response =
            Resp::decode(&mut frame, version).map_err(|e| format!("decoding the answer to {api:?}: {e:#}"))?;
        if frame.has_remaining() {
            debug!(?api, trailing = frame.remaining(), "peer's answer has trailing bytes");
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(args: &[&str]) -> anyhow::Result<Option<PeerSettings>> {
        let config =
            <Config as clap::Parser>::try_parse_from(["kaas-server", "--data-dir", "/nonexistent"].iter().chain(args))
                .expect("flags parse");
        let listeners = config.resolved_listeners().expect("listeners");
        PeerSettings::from_config(&config, &listeners)
    }

    #[test]
    fn the_inter_broker_listener_is_checked_at_start() {
        let plain = settings(&[]).unwrap().expect("notices on");
        assert_eq!(plain.listener(), "PLAINTEXT", "the default");
        assert!(plain.sasl.is_none() && plain.tls.is_none());
        let named = settings(&[
            "--listener",
            "A=PLAINTEXT://127.0.0.1:0,INTERNAL=PLAINTEXT://127.0.0.1:0",
            "--inter-broker-listener-name",
            "internal",
        ])
        .unwrap()
        .expect("notices on");
        assert_eq!(named.listener(), "INTERNAL");
        let missing = settings(&["--inter-broker-listener-name", "NOPE"])
            .err()
            .expect("refused");
        assert!(missing.to_string().contains("NOPE is not a listener"), "{missing}");
        assert!(settings(&["--inter-broker-notifications", "false"]).unwrap().is_none());
        // SASL without credentials: runs, without notices (a warning says so).
        let sasl = ["--listener", "SASL_PLAINTEXT://127.0.0.1:0"];
        assert!(settings(&sasl).unwrap().is_none());
        let half = settings(&[sasl[0], sasl[1], "--inter-broker-sasl-username", "b"])
            .err()
            .expect("refused");
        assert!(half.to_string().contains("go together"), "{half}");
        let unreadable = settings(&[
            sasl[0],
            sasl[1],
            "--inter-broker-sasl-username",
            "b",
            "--inter-broker-sasl-password-file",
            "/nonexistent/pw",
        ])
        .err()
        .expect("refused");
        assert!(unreadable.to_string().contains("/nonexistent/pw"), "{unreadable}");
    }

    fn notice(producer_id: i64, txn_seq: Option<u64>) -> PeerNotice {
        use kaas_core::marker_queue::{MarkerEntry, MarkerResult, MARKER_FORMAT_VERSION};
        use kaas_core::txn::{TopicPartition, TxnEntry, TxnState};
        let tp = TopicPartition {
            topic: "orders".into(),
            partition: 2,
        };
        let entry = MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: "tx".into(),
            producer_id,
            producer_epoch: 3,
            result: MarkerResult::Commit,
            coordinator_epoch: 1,
            partitions: vec![tp.clone()],
            txn_seq,
            enqueued_by: 0,
            enqueued_ms: 0,
            hanging_since: None,
        };
        let prepared = TxnEntry {
            transactional_id: "tx".into(),
            producer_id,
            producer_epoch: 3,
            last_epoch: -1,
            last_producer_id: -1,
            state: TxnState::PrepareCommit,
            timeout_ms: 60_000,
            partitions: [tp].into(),
            groups: Default::default(),
            txn_start_ms: 0,
            txn_seq: txn_seq.unwrap_or(0),
            markers_queued: false,
            last_update_ms: 0,
            history: Default::default(),
        };
        let now = std::time::Instant::now();
        PeerNotice::Markers(Box::new(crate::txn_coordinator::MarkerNotice {
            leader: 1,
            entry,
            prepared,
            prepared_at: now,
            announced_at: now,
        }))
    }

    /// A leader's answer to one marker as the WriteTxnMarkers handler builds it: each
    /// partition's code, and the transaction number echoed when it says so.
    fn answer(producer_id: i64, code: i16, echo: Option<u64>) -> WritableTxnMarkerResult {
        use kafka_protocol::messages::write_txn_markers_response::{
            WritableTxnMarkerPartitionResult, WritableTxnMarkerTopicResult,
        };
        let mut result = WritableTxnMarkerResult::default()
            .with_producer_id(ProducerId(producer_id))
            .with_topics(vec![WritableTxnMarkerTopicResult::default()
                .with_name(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(2)
                    .with_error_code(code)])]);
        if let Some(seq) = echo {
            result.unknown_tagged_fields.insert(TXN_SEQ_TAG, txn_seq_tag(seq));
        }
        result
    }

    /// Through the wire at the version the links speak (1, flexible: tagged fields).
    fn over_the_wire<M: Encodable + Decodable>(message: &M) -> M {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, 1).expect("encodes");
        let mut bytes = buf.freeze();
        let decoded = M::decode(&mut bytes, 1).expect("decodes");
        assert!(!bytes.has_remaining(), "nothing left over");
        decoded
    }

    /// The coordinator completes over a leader's answer only when the leader echoed
    /// the notice's own transaction number (docs/cluster.md, "Why the coordinator
    /// never completes over a missing marker"): the tag crosses the wire both ways,
    /// and an answer without it, with another number, with an error, for another
    /// producer or of another length never counts as applied.
    #[test]
    fn only_an_answer_echoing_the_notices_transaction_number_counts_as_applied() {
        // The notice's number reaches the leader in the request's tagged field.
        let request =
            over_the_wire(&WriteTxnMarkersRequest::default().with_markers(vec![marker_of(&notice(7, Some(42)))]));
        assert_eq!(txn_seq_in(&request.markers[0].unknown_tagged_fields), Some(42));
        let request = over_the_wire(&WriteTxnMarkersRequest::default().with_markers(vec![marker_of(&notice(7, None))]));
        assert_eq!(txn_seq_in(&request.markers[0].unknown_tagged_fields), None);

        let batch = [notice(7, Some(42))];
        let judged = |result: WritableTxnMarkerResult| {
            let response = over_the_wire(&WriteTxnMarkersResponse::default().with_markers(vec![result]));
            outcomes(1, &batch, &response).expect("one answer for one notice")
        };
        use NotificationOutcome::{Delivered, Refused};
        assert_eq!(judged(answer(7, 0, Some(42))), vec![(Delivered, true)]);
        assert_eq!(
            judged(answer(7, 0, None)),
            vec![(Delivered, false)],
            "no number: not applied"
        );
        assert_eq!(
            judged(answer(7, 0, Some(41))),
            vec![(Delivered, false)],
            "another transaction's number"
        );
        assert_eq!(
            judged(answer(7, 6, Some(42))),
            vec![(Refused, false)],
            "a partition refused"
        );
        assert_eq!(
            judged(answer(8, 0, Some(42))),
            vec![(Refused, false)],
            "another producer"
        );
        // A notice without a number (a coordinator of the version before) is never
        // applied by an echo.
        let unnumbered = [notice(7, None)];
        let response = WriteTxnMarkersResponse::default().with_markers(vec![answer(7, 0, Some(0))]);
        assert_eq!(outcomes(1, &unnumbered, &response).unwrap(), vec![(Delivered, false)]);
        // An answer of another length says nothing about any of them.
        let two = WriteTxnMarkersResponse::default().with_markers(vec![answer(7, 0, Some(42)), answer(7, 0, Some(42))]);
        assert!(outcomes(1, &batch, &two)
            .unwrap_err()
            .contains("answered 2 markers for 1 asked"));
    }

    /// A peer has one cluster notice waiting for the links, however many changes come
    /// meanwhile and whatever answers come back: the answer to a notice a link took
    /// before the newest change does not clear the newest one's mark (it did, so up to
    /// three could wait per peer). A notice dropped before a link took it (the peer's
    /// queue full, or its links gone) clears it: the next change queues one again.
    #[tokio::test]
    async fn an_answer_to_an_older_cluster_notice_leaves_the_newer_one_waiting_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let b = crate::handlers::test_support::broker_with(dir.path(), &[]);
        let (sender, mut queued) = mpsc::channel(16);
        b.txn.notify_leaders_through(sender);
        let mut live = b.live_brokers();
        live.insert(7, crate::listeners::Endpoints::plaintext("127.0.0.1", 1));
        b.set_live_brokers(live);
        let waiting = |queued: &mut mpsc::Receiver<PeerNotice>| {
            std::iter::from_fn(|| queued.try_recv().ok())
                .filter(|n| matches!(n, PeerNotice::Cluster { to: 7 }))
                .count()
        };
        b.txn.announce_change(&b);
        assert_eq!(waiting(&mut queued), 1);
        // A link takes it and sends it; a change comes before its answer.
        b.txn.cluster_notice_taken(7);
        b.txn.announce_change(&b);
        assert_eq!(waiting(&mut queued), 1);
        answered(&b, PeerNotice::Cluster { to: 7 }, NotificationOutcome::Delivered, false);
        b.txn.announce_change(&b);
        b.txn.announce_change(&b);
        assert_eq!(
            waiting(&mut queued),
            0,
            "the newer notice still waits and carries these changes"
        );
        // That one dropped before a link took it: the next change needs a new one.
        dropped_before_a_link(&b, PeerNotice::Cluster { to: 7 });
        b.txn.announce_change(&b);
        assert_eq!(waiting(&mut queued), 1);
    }

    #[test]
    fn a_password_file_holds_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        assert_eq!(read_password(&file).unwrap(), "s3cret");
        std::fs::write(&file, "s3cret\r\n").unwrap();
        assert_eq!(read_password(&file).unwrap(), "s3cret");
        std::fs::write(&file, "a\nb\n").unwrap();
        assert!(read_password(&file).is_err());
        std::fs::write(&file, "\n").unwrap();
        assert!(read_password(&file).is_err());
    }
}
