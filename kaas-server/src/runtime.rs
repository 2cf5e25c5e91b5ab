//! Starting and stopping a broker: bind, open the volume, run the background tasks
//! (lease renewal, group timers, background fsync, retention), serve until a signal,
//! then finish in-flight requests, fsync everything and return.

use crate::broker::Broker;
use crate::config::Config;
use kaas_core::broker::{BrokerLease, RoutedBroker, LEASE_FORMAT_VERSION};
use kaas_core::now_ms;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{error, info, warn};

/// The data directory must be a directory, or not exist yet (the broker makes a new
/// volume there, and says so loudly: `Cluster::open`). Anything else is said once,
/// plainly, before anything is created.
fn check_data_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    use std::io::ErrorKind;
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!(
            "the data directory {} is not a directory (--data-dir or KAAS_DATA_DIR names a file)",
            dir.display()
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotADirectory => anyhow::bail!(
            "the data directory {} cannot be made: part of its path is a file, not a directory (--data-dir or KAAS_DATA_DIR)",
            dir.display()
        ),
        Err(e) => anyhow::bail!("cannot use the data directory {}: {e}", dir.display()),
    }
}

/// Settings that are each valid alone but not together, refused before anything starts
/// (Apache refuses them too: `GroupCoordinatorConfig`).
fn check_group_timeouts(config: &Config) -> anyhow::Result<()> {
    // A member told to heartbeat no sooner than its session lapses is removed before
    // each heartbeat arrives: the group would churn for good.
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms {
        anyhow::bail!(
            "--group-consumer-heartbeat-interval-ms ({}) must be less than --group-consumer-session-timeout-ms ({}): members would be removed before each heartbeat arrives",
            config.group_consumer_heartbeat_interval_ms,
            config.group_consumer_session_timeout_ms
        );
    }
    if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms {
        anyhow::bail!(
            "--group-min-session-timeout-ms ({}) must not be more than --group-max-session-timeout-ms ({}): every classic member's session timeout would be refused",
            config.group_min_session_timeout_ms,
            config.group_max_session_timeout_ms
        );
    }
    Ok(())
}

/// How long the process waits at exit for blocking work still running once [`run`]
/// returned (a straggler: a peer's name still being resolved after the stop notice's
/// second, an fsync a timed-out request left behind). Past it the process exits
/// anyway, as a `kill -9` would leave the volume — which every crash rule covers.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Shuts the runtime down once [`run`] returned, waiting at most `grace` for its
/// blocking tasks: dropping it would wait for every one of them, so a lookup or a
/// write stuck on the network or the volume held the exit after "stopped cleanly"
/// (`a_blocking_straggler_holds_the_exit_only_for_the_grace`). Logs what it left,
/// and returns whether it left any (the grace ran out).
pub fn wind_down(runtime: tokio::runtime::Runtime, grace: Duration) -> bool {
    let started = Instant::now();
    runtime.shutdown_timeout(grace);
    let abandoned = started.elapsed() >= grace;
    if abandoned {
        warn!(
            grace_ms = grace.as_millis() as u64,
            "blocking work was still running at exit and is abandoned (as a kill -9 would leave it)"
        );
    }
    abandoned
}

pub async fn run(config: Config, shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
    check_group_timeouts(&config)?;
    // Before anything is bound or touched on the volume: one process per broker id.
    check_data_dir(&config.data_dir)?;
    let volume = kaas_core::Volume::new(&config.data_dir);
    let claim = kaas_core::broker::claim_broker_id(&volume, config.broker_id, now_ms())?;
    warn_of_loose_modes(&config);
    if let Some(prev) = claim
        .previous
        .as_ref()
        .filter(|l| l.is_alive(now_ms(), config.broker_session_timeout_ms))
    {
        warn!(
            incarnation = %prev.incarnation,
            heartbeat_age_ms = now_ms() - prev.heartbeat_ms,
            "the previous incarnation of this broker id died without releasing its lease; its id lock is free, taking over"
        );
    }
    let leases: Vec<BrokerLease> = kaas_core::broker::list_brokers(&volume)?
        .into_iter()
        .filter_map(|l| l.ok())
        .collect();
    kaas_core::broker::check_clock_skew(&leases, config.broker_id, now_ms(), config.broker_session_timeout_ms)
        .map_err(|e| anyhow::anyhow!("refusing to start: {e}"))?;
    let specs = config.resolved_listeners().map_err(|e| anyhow::anyhow!("{e}"))?;
    if config.super_users.iter().any(|u| u == crate::server::ANONYMOUS) {
        use crate::listeners::SecurityProtocol;
        for spec in &specs {
            let nameless = match spec.protocol {
                SecurityProtocol::Plaintext => true,
                SecurityProtocol::Ssl => config.ssl_client_auth_for(&spec.name) != crate::config::ClientAuth::Required,
                SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => false,
            };
            if nameless {
                warn!(listener = %spec.name, "User:ANONYMOUS is a super user (--super-users), and this listener lets clients in without a name: everyone who reaches it may do everything");
            }
        }
    }
    if specs.iter().any(|l| l.protocol.sasl()) {
        crate::sasl::warm_up(&volume);
    }
    for (name, _) in &config.listener_max_connections {
        if !specs.iter().any(|l| l.name == *name) {
            anyhow::bail!("--listener-max-connections names {name}, which is not a listener of this broker");
        }
    }
    check_listener_overrides(&config, &specs)?;
    let peer_settings = crate::peers::PeerSettings::from_config(&config, &specs)?;
    let mut listeners = Vec::with_capacity(specs.len());
    for spec in specs {
        let tls = if spec.protocol.tls() {
            Some(listener_tls(&config, &spec.name)?)
        } else {
            None
        };
        if spec.protocol == crate::listeners::SecurityProtocol::SaslPlaintext
            && config
                .sasl_mechanisms_for(&spec.name)
                .contains(&crate::config::SaslMechanism::Plain)
        {
            warn!(listener = %spec.name, "SASL PLAIN is enabled on a SASL_PLAINTEXT listener: passwords cross the network in the clear (enable it on SASL_SSL listeners only with --listener-sasl-enabled-mechanisms)");
        }
        let socket = TcpListener::bind(spec.addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {spec}: {e}"))?;
        listeners.push(crate::server::BoundListener {
            tls,
            sasl_mechanisms: config.sasl_mechanisms_for(&spec.name).into(),
            spec,
            socket,
        });
    }
    let bound: Vec<(crate::listeners::ListenerSpec, std::net::SocketAddr)> = listeners
        .iter()
        .map(|l| Ok((l.spec.clone(), l.socket.local_addr()?)))
        .collect::<std::io::Result<_>>()?;
    let advertised =
        crate::listeners::advertised(&bound, &config.advertised_listeners).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Readiness asks a listener without TLS for ApiVersions (served before SASL
    // authentication too); with TLS everywhere, a connection accepted is enough.
    let probe = bound
        .iter()
        .find(|(l, _)| !l.protocol.tls())
        .map(|(_, a)| (*a, true))
        .unwrap_or((bound[0].1, false));
    let incarnation = uuid::Uuid::new_v4().to_string();
    // The operations listener answers liveness during the (possibly long) opening;
    // readiness says "opening" until the broker serves. Bound before the lease is
    // written: a port already taken stops this process before peers see it live.
    let (ops_stop, ops_stopped) = watch::channel(false);
    let ops = match config.metrics_listen {
        Some(addr) => {
            let ops_listener = TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on --metrics-listen {addr}: {e}"))?;
            let state = std::sync::Arc::new(crate::http::OpsState {
                broker: std::sync::OnceLock::new(),
                volume: volume.clone(),
                broker_id: config.broker_id,
                incarnation: incarnation.clone(),
                kafka: probe,
                shutdown: shutdown.clone(),
                rendered: tokio::sync::Mutex::new(None),
            });
            info!(metrics_listen = %ops_listener.local_addr()?, "operations listener: /metrics, /health/live, /health/ready");
            let task = tokio::spawn(crate::http::serve(ops_listener, state.clone(), ops_stopped));
            Some((state, task))
        }
        None => None,
    };
    // The new incarnation's lease first, then the partitions: a peer that judged the
    // previous incarnation dead never confirms it dead once this one is on the volume,
    // so it cannot steal a lock this process took while opening (docs/cluster.md).
    // The lease's own host/port is what brokers from before listeners read as this
    // broker's (PLAINTEXT) address: the PLAINTEXT listener's when there is one, so a
    // rolling upgrade keeps sending their clients to a port that speaks plain Kafka.
    let plaintext = |(l, _): &&(crate::listeners::ListenerSpec, std::net::SocketAddr)| {
        l.protocol == crate::listeners::SecurityProtocol::Plaintext
    };
    let primary = bound
        .iter()
        .filter(plaintext)
        .find(|(l, _)| l.name == "PLAINTEXT")
        .or_else(|| bound.iter().find(plaintext))
        .unwrap_or(&bound[0]);
    let (host, port) = advertised
        .on(&primary.0.name)
        .map(|(h, p)| (h.to_string(), p))
        .expect("every bound listener has an advertised address");
    let lease = BrokerLease {
        version: LEASE_FORMAT_VERSION,
        authorizer: Some(crate::authz::lease_settings(&config)),
        // Its lease task counts renewals and says where it routes; before, it
        // coordinates nothing.
        renewal: 0,
        routes: None,
        broker_id: config.broker_id,
        host,
        port,
        listeners: advertised
            .0
            .iter()
            .map(|(name, (host, port))| {
                (
                    name.clone(),
                    kaas_core::broker::ListenerEndpoint {
                        host: host.clone(),
                        port: *port,
                    },
                )
            })
            .collect(),
        incarnation,
        started_ms: now_ms(),
        heartbeat_ms: now_ms(),
        stopped_ms: None,
        stepped_down_ms: None,
        // Until it serves: peers keep its partitions for it but route nothing to it
        // (no group, slot or partition is placed here while it recovers).
        opening_ms: Some(now_ms()),
        joining_ms: None,
    };
    let written_at = Instant::now();
    lease.write(&volume)?;
    // Opening recovers every partition this broker owns, which can take longer than
    // the session timeout on big logs: the lease is renewed meanwhile, so peers do not
    // judge this process dead (and take its locks) while it is still recovering.
    let renewed = std::sync::Arc::new(std::sync::Mutex::new(written_at));
    // Dropping `opened_tx` wakes the renewer at once and ends it.
    let (opened_tx, opened_rx) = std::sync::mpsc::channel::<()>();
    let renewal = renewal_period(config.broker_session_timeout_ms);
    let renewer = std::thread::spawn({
        let (renewed, volume) = (renewed.clone(), volume.clone());
        let mut lease = lease.clone();
        move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                opened_rx.recv_timeout(Duration::from_millis(200))
            {
                if renewed.lock().unwrap_or_else(|p| p.into_inner()).elapsed() < renewal {
                    continue;
                }
                let at = Instant::now();
                lease.heartbeat_ms = now_ms();
                match lease.renew(&volume) {
                    Ok(()) => *renewed.lock().unwrap_or_else(|p| p.into_inner()) = at,
                    Err(e) => error!(error = %e, "cannot renew broker lease while opening the volume"),
                }
            }
        }
    });
    kaas_core::failpoint::hit(kaas_core::failpoint::BROKER_OPEN);
    let opened = Broker::open(config, advertised);
    drop(opened_tx);
    if renewer.join().is_err() {
        error!("the lease renewer of the opening broker panicked");
    }
    let broker = match opened {
        Ok(broker) => broker,
        Err(e) => {
            // Nothing of it is held any more (what it opened, locks included, went
            // with the error), and it exits: said in its lease, so peers take its
            // partitions over at once instead of keeping them for a broker that will
            // never serve (a restart loop faster than the session timeout kept them
            // offline for good).
            let mut stopped = lease.clone();
            stopped.heartbeat_ms = now_ms();
            stopped.stopped_ms = Some(stopped.heartbeat_ms);
            if let Err(w) = stopped.write(&volume) {
                warn!(error = %w, "cannot mark the lease stopped after a failed start; peers see this broker dead after the session timeout");
            }
            return Err(e);
        }
    };
    // Fresh as of the last renewal: if renewing failed for half the session timeout,
    // the broker is stale, so it steps down (writing nothing) and renews before it
    // appends.
    broker.renewed_at(*renewed.lock().unwrap_or_else(|p| p.into_inner()));
    let leases = refresh_live_brokers(&broker);
    // Groups and transaction slots: coordinated at once by a broker alone on the
    // volume; one started beside others waits until they have seen its lease say it
    // serves (the lease task's `joining`) — until then they coordinate its share.
    let alone = !broker.has_live_peers();
    broker.set_coordinating(alone);
    let mut keeper = LeaseKeeper::new(lease, !alone);
    if let Some(leases) = &leases {
        keeper.note_routes(&broker, leases);
    }
    // The lease task from here on, its first renewal at once: recovery and
    // reconciliation below can take long, and a lease left unrenewed through them
    // made the broker step down (letting go of every partition it had just
    // recovered) or be judged dead while still recovering.
    let lease = std::sync::Arc::new(std::sync::Mutex::new(keeper));
    tick_lease(&broker, &lease).await;
    // Its own stop, after the clean-stop path below: a SIGTERM during start-up (or
    // during the drain) must not leave the lease unrenewed while recovery goes on.
    let (lease_stop, lease_stopped) = watch::channel(false);
    let lease_task = tokio::spawn(lease_task(
        broker.clone(),
        lease.clone(),
        renewal_period(broker.config.broker_session_timeout_ms),
        lease_stopped,
    ));
    // Marker notices to partition leaders (the peer links start with the other tasks
    // below; what recovery announces meanwhile waits in the channel).
    let peer_settings = peer_settings.map(std::sync::Arc::new);
    // Kept for the notice at a clean stop, after the links are closed.
    let stop_notice = peer_settings.clone();
    let notices = peer_settings.map(|settings| {
        let (sender, receiver) = tokio::sync::mpsc::channel(crate::peers::QUEUED_NOTICES);
        broker.txn.notify_leaders_through(sender);
        info!(
            listener = settings.listener(),
            "queued markers are announced to their leaders (WriteTxnMarkers)"
        );
        (settings, receiver)
    });
    // Finish what a previous run left between PrepareCommit/PrepareAbort and Complete*
    // (in the slots it coordinates: beside other brokers, none yet — their owners'
    // reapers finish those).
    broker.txn.recover(&broker).await;
    broker.txn.reconcile(&broker).await;
    // It serves from here on: the lease says so at once, and the peers route its
    // share of groups, slots and partitions to it from their next read of the leases
    // — unless it was told to stop meanwhile: it never says it serves then.
    if !*shutdown.borrow() {
        {
            let mut keeper = lease.lock().unwrap_or_else(|p| p.into_inner());
            keeper.lease.opening_ms = None;
        }
        tick_lease(&broker, &lease).await;
    }
    info!(
        listeners = %bound.iter().map(|(l, a)| format!("{}={}://{a}", l.name, l.protocol.name())).collect::<Vec<_>>().join(","),
        advertised = %broker.advertised.0.iter().map(|(n, (h, p))| format!("{n}={h}:{p}")).collect::<Vec<_>>().join(","),
        broker_id = broker.config.broker_id,
        data_dir = %broker.config.data_dir.display(),
        cluster_id = %broker.cluster_id,
        "kaas-server ready"
    );
    if let Some((state, _)) = &ops {
        let _ = state.broker.set(broker.clone());
    }
    let mut tasks = vec![
        tokio::spawn({
            let broker = broker.clone();
            let shutdown = shutdown.clone();
            async move {
                let mut watcher = kaas_core::fence_log::FenceWatcher::new(broker.config.broker_id);
                let mut deliveries = None;
                let mut counting = false;
                let period = Duration::from_millis(broker.config.volume_poll_interval_ms.max(10));
                let watching = broker.clone();
                fence_watch_task(&broker.fence_doorbell, period, shutdown, move || {
                    crate::cluster::apply_peer_fences(&watching, &mut watcher, &mut deliveries, &mut counting)
                })
                .await
            }
        }),
        tokio::spawn({
            let broker = broker.clone();
            let shutdown = shutdown.clone();
            async move {
                let syncing = broker.clone();
                let sync = move |rung: bool| {
                    let handed_over = || syncing.handed_over.load(std::sync::atomic::Ordering::Relaxed);
                    let before = handed_over();
                    if rung {
                        syncing.sync_with_volume_between_rounds()
                    } else {
                        syncing.sync_with_volume()
                    }
                    // Partitions let go for their new owner: it takes them at once.
                    if handed_over() != before {
                        syncing.txn.announce_change(&syncing);
                    }
                };
                volume_sync_task(&broker.sync_doorbell, shutdown, sync).await
            }
        }),
        tokio::spawn({
            let broker = broker.clone();
            let period = Duration::from_millis(broker.config.volume_poll_interval_ms.max(10));
            every_async(period, shutdown.clone(), move || {
                let broker = broker.clone();
                async move {
                    crate::broker::process_marker_queue(&broker).await;
                }
            })
        }),
        tokio::spawn({
            let broker = broker.clone();
            let period = Duration::from_millis(broker.config.txn_reaper_interval_ms.max(10));
            every_async(period, shutdown.clone(), move || {
                let broker = broker.clone();
                async move {
                    broker
                        .txn
                        .reap(&broker, 2 * broker.config.volume_poll_interval_ms as i64 + 1000)
                        .await;
                }
            })
        }),
        tokio::spawn({
            let broker = broker.clone();
            let period = Duration::from_millis(broker.config.txn_reconcile_interval_ms.max(100));
            every_async(period, shutdown.clone(), move || {
                let broker = broker.clone();
                async move {
                    broker.txn.reconcile(&broker).await;
                }
            })
        }),
        tokio::spawn(every(Duration::from_millis(100), shutdown.clone(), {
            let broker = broker.clone();
            move || broker.groups.tick(Instant::now())
        })),
        // KIP-848 consumer groups: members past their session or rebalance timeout
        // are removed (a file write per group that changed).
        tokio::spawn(every_blocking(
            Duration::from_millis(250),
            shutdown.clone(),
            "a consumer group expiry pass",
            {
                let broker = broker.clone();
                move || {
                    broker.groups.expire_consumer_members(
                        &|| crate::handlers::consumer_group_heartbeat::topics_view(&broker),
                        &|g| broker.owns_group(g),
                        kaas_core::now_ms(),
                    )
                }
            },
        )),
        // When each classic group's last member left, to its file within a second
        // (offsets retention; only for groups just emptied), and the membership
        // records of the classic groups that changed.
        tokio::spawn(every_blocking(
            Duration::from_secs(1),
            shutdown.clone(),
            "recording the groups' departures",
            {
                let broker = broker.clone();
                move || {
                    broker.groups.persist_departures(kaas_core::now_ms());
                    // Classic groups' membership records that changed (members left
                    // or expired) and no request wrote.
                    broker.groups.persist_records(&|g| broker.owns_group(g));
                }
            },
        )),
        // Offsets retention over the groups this broker coordinates.
        tokio::spawn(every_blocking(
            Duration::from_millis(broker.config.offsets_retention_check_interval_ms.max(100)),
            shutdown.clone(),
            "an offsets retention pass",
            {
                let broker = broker.clone();
                move || {
                    if let Err(e) = broker
                        .groups
                        .expire_offsets(&|g| broker.owns_group(g), kaas_core::now_ms())
                    {
                        tracing::warn!(error = %e, "offsets retention cannot list the groups; tried again at the next pass")
                    }
                }
            },
        )),
        // Deletes, each partition's owner.gate and owner.json.
        tokio::spawn(every_blocking(
            Duration::from_millis(broker.config.retention_check_interval_ms.max(100)),
            shutdown.clone(),
            "a retention pass",
            {
                let broker = broker.clone();
                move || broker.enforce_retention()
            },
        )),
        tokio::spawn(every_blocking(
            Duration::from_millis(broker.config.log_cleaner_backoff_ms),
            shutdown.clone(),
            "the log cleaner's round",
            {
                let broker = broker.clone();
                let stopping = shutdown.clone();
                move || broker.clean_round(&|| *stopping.borrow())
            },
        )),
        tokio::spawn({
            let broker = broker.clone();
            let period = Duration::from_millis(broker.config.flush_interval_ms.max(10));
            every_async(period, shutdown.clone(), move || {
                let broker = broker.clone();
                async move {
                    broker.flush_all().await;
                }
            })
        }),
    ];
    if let Some((settings, receiver)) = notices {
        tasks.push(tokio::spawn(crate::peers::run(
            broker.clone(),
            settings,
            receiver,
            shutdown.clone(),
        )));
    }
    crate::server::serve(broker.clone(), listeners, shutdown).await;
    for t in tasks {
        let _ = t.await;
    }
    // Transactions EndTxn answered and is still finishing: their markers first.
    broker.txn.wait_for_finishes(Duration::from_secs(10)).await;
    // Finishes whose leaders have not answered (no more notices go out; a link still
    // waiting for an answer finds its transaction handed over): to their polls.
    broker.txn.hand_unanswered_to_polls(&broker).await;
    broker.flush_all().await;
    // Renew first (draining connections may have taken longer than half the session
    // timeout, and a stale broker writes nothing), let every partition go, then mark
    // the lease stopped so peers take over at once rather than after the timeout.
    let releasing = broker.clone();
    let stopping = tokio::task::spawn_blocking(move || {
        let mut keeper = lease.lock().unwrap_or_else(|p| p.into_inner());
        renew_lease(&releasing, &mut keeper);
        releasing.release_partitions("clean shutdown");
        let lease = &mut keeper.lease;
        lease.heartbeat_ms = now_ms();
        lease.stopped_ms = Some(lease.heartbeat_ms);
        match lease.write(&releasing.volume) {
            Ok(()) => true,
            Err(e) => {
                crate::metrics::metrics().lease_write_failed(&e);
                warn!(error = %e, "cannot mark the lease stopped; peers see this broker dead after the session timeout");
                false
            }
        }
    });
    let marked = match stopping.await {
        Ok(marked) => marked,
        Err(e) => {
            error!(error = %e, "releasing partitions at shutdown failed");
            false
        }
    };
    // Its peers take over at once rather than at their next renewal and sync.
    if let Some(settings) = stop_notice.filter(|_| marked) {
        crate::peers::announce_stop(&broker, &settings).await;
    }
    let _ = lease_stop.send(true);
    let _ = lease_task.await;
    let _ = ops_stop.send(true);
    if let Some((_, task)) = ops {
        let _ = task.await;
    }
    info!("kaas-server stopped cleanly");
    Ok(())
}

/// How often the lease is renewed: every second, or every quarter of the session
/// timeout when that is shorter. A broker steps down when it finds its last renewal
/// older than half the session timeout, and the ticks are a period apart plus the
/// renewal's own time: with a 2 s session and 1 s ticks it found itself stale at
/// every tick (`test_a_broker_that_cannot_write_its_lease_is_not_ready`).
fn renewal_period(session_timeout_ms: i64) -> Duration {
    Duration::from_millis((session_timeout_ms.max(0) as u64 / 4).clamp(50, 1_000))
}

/// The lease task's state: this broker's lease as last written, and whether the
/// broker is out (stepped down and not back yet).
struct LeaseKeeper {
    lease: BrokerLease,
    /// Stepped down and not back: the broker is not fresh, whatever its last write.
    out: bool,
    /// While out: since when the first renewal without the stepped-down mark is on the
    /// volume, and that renewal's number.
    unmarked_at: Option<(Instant, u64)>,
    /// How long the last renewal took, if it succeeded.
    last_write: Option<Duration>,
    /// Started beside other brokers and not coordinating groups and slots yet:
    /// `Some(None)` while its lease says opening, `Some(Some((at, renewal)))` once the
    /// lease without the mark is on the volume (since `at`, from that renewal on);
    /// None once it coordinates.
    joining: Option<Option<(Instant, u64)>>,
    /// What the next renewal says this broker routes to (`BrokerLease::routes`): its
    /// live set as of its last read of the leases.
    routes: Vec<RoutedBroker>,
    /// Whether it said it still waits for a peer to route to it (once per wait).
    said_waiting: bool,
    /// What the last lease written said that peers act on: a renewal that changes it
    /// is announced to them at once ([`Renewed::announce`]).
    announced: Option<Announced>,
}

/// What peers act on in a broker's lease: whether it opens the volume or stepped
/// down, and which incarnations it routes to (not the renewal numbers read, which
/// change at every renewal). A broker joining waits for its peers' routes to name it,
/// a peer takes over the share of one that stepped down: each learns it from the
/// lease, at its next reading — at once when told by a cluster notice
/// (docs/cluster.md#cluster-notices).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Announced {
    opening: bool,
    stepped_down: bool,
    routes: Vec<(i32, String)>,
}

impl Announced {
    fn of(lease: &BrokerLease, routes: &[RoutedBroker]) -> Self {
        Announced {
            opening: lease.opening_ms.is_some(),
            stepped_down: lease.stepped_down_ms.is_some(),
            routes: routed_incarnations(routes),
        }
    }
}

fn routed_incarnations(routes: &[RoutedBroker]) -> Vec<(i32, String)> {
    routes.iter().map(|r| (r.broker_id, r.incarnation.clone())).collect()
}

/// What one renewal ([`renew_lease`]) leaves to do.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Renewed {
    /// It began coordinating its share of groups and slots.
    began_coordinating: bool,
    /// What the lease written says that peers act on changed: tell them (a cluster
    /// notice to each live peer).
    announce: bool,
    /// The leases read change where this broker routes, which its lease says only
    /// from its next renewal: renew again now rather than a period later.
    again: bool,
}

impl LeaseKeeper {
    /// `joining`: the broker waits for its peers to see it serve before it
    /// coordinates anything.
    fn new(lease: BrokerLease, joining: bool) -> Self {
        Self {
            lease,
            out: false,
            unmarked_at: None,
            last_write: None,
            joining: joining.then_some(None),
            routes: Vec::new(),
            said_waiting: false,
            announced: None,
        }
    }

    /// [`refresh_live_brokers`], and what this broker routes to from now on (each
    /// live broker with the lease it was judged by). The leases read, if listed.
    fn read_leases(&mut self, broker: &Broker) -> Option<Vec<BrokerLease>> {
        let leases = refresh_live_brokers(broker)?;
        self.note_routes(broker, &leases);
        Some(leases)
    }

    /// What this broker routes to as of `leases`, just read: each broker of its live
    /// set with the lease it was judged by (one kept live though its lease failed to
    /// read this time, with the entry of the last good reading).
    fn note_routes(&mut self, broker: &Broker, leases: &[BrokerLease]) {
        let before = std::mem::take(&mut self.routes);
        self.routes = broker
            .live_brokers()
            .into_keys()
            .filter_map(|id| match leases.iter().find(|l| l.broker_id == id) {
                Some(lease) => Some(RoutedBroker::of(lease)),
                None => before.iter().find(|r| r.broker_id == id).cloned(),
            })
            .collect();
    }

    /// Whether every peer alive here (serving or opening the volume) leaves this
    /// broker its share: its lease, in `leases` as just read, names this incarnation
    /// at renewal `since` or later — it read this broker's lease saying it serves, and
    /// routes by that view until its next read, which keeps this broker while its
    /// lease stays unmarked and fresh. A peer whose lease names none (written before
    /// `routes`, or while it opens the volume and coordinates nothing) counts once
    /// this broker's unmarked lease has been on the volume since `visible` for
    /// [`rejoin_wait`]: two renewal periods and a bound, a time in which such a peer
    /// renewing normally reads the leases. A peer that does not answer at all is
    /// waited for until it steps down (its own lease older than half the session
    /// timeout) or is judged dead.
    fn peers_route_here(&mut self, broker: &Broker, leases: &[BrokerLease], visible: Instant, since: u64) -> bool {
        let me = (&self.lease.broker_id, &self.lease.incarnation);
        let bounded = visible.elapsed() >= rejoin_wait(broker.config.broker_session_timeout_ms);
        let mut peers: Vec<i32> = broker.live_brokers().into_keys().collect();
        peers.extend(broker.opening_brokers());
        peers.retain(|id| id != me.0);
        let waiting: Vec<i32> = peers
            .into_iter()
            .filter(
                |id| match leases.iter().find(|l| l.broker_id == *id).map(|l| &l.routes) {
                    Some(Some(routes)) => !routes
                        .iter()
                        .any(|r| (&r.broker_id, &r.incarnation) == me && r.renewal >= since),
                    Some(None) => !bounded,
                    None => true,
                },
            )
            .collect();
        if waiting.is_empty() {
            self.said_waiting = false;
            return true;
        }
        if !self.said_waiting
            && visible.elapsed() >= Duration::from_millis(broker.config.broker_session_timeout_ms.max(0) as u64)
        {
            self.said_waiting = true;
            warn!(
                peers = ?waiting,
                "this broker serves but coordinates no group or slot yet: the leases of brokers {waiting:?} do not yet say they leave it its share (a peer slow to renew, or one that cannot read this broker's lease)"
            );
        }
        false
    }
}

/// One renewal of the lease ([`renew_lease`]) on the blocking pool. A broker that
/// began coordinating its share of the slots with it finishes what their Prepare*
/// entries wait for at once, as a broker does for its slots at start (their owners
/// until now may have left them, or be about to: every finish is a compare-and-set).
async fn tick_lease(broker: &std::sync::Arc<Broker>, lease: &std::sync::Arc<std::sync::Mutex<LeaseKeeper>>) {
    let tick = tokio::task::spawn_blocking({
        let (broker, lease) = (broker.clone(), lease.clone());
        move || {
            let mut keeper = lease.lock().unwrap_or_else(|p| p.into_inner());
            renew_lease(&broker, &mut keeper)
        }
    });
    match tick.await {
        Ok(renewed) => {
            if renewed.announce {
                broker.txn.announce_change(broker);
            }
            if renewed.again {
                // Where it routes changed: partitions move too (the sync lets go of
                // those placed elsewhere now and takes those placed here).
                broker.lease_doorbell.notify_one();
                broker.sync_doorbell.notify_one();
            }
            if renewed.began_coordinating {
                let broker = broker.clone();
                tokio::spawn(async move { broker.txn.recover(&broker).await });
            }
        }
        Err(e) => error!(error = %e, "lease task failed"),
    }
}

/// The fence watcher's task: `watch` (file reads and, for new fences, a record
/// rewritten: off the runtime's workers) every `period`, and at once when `doorbell`
/// rings (a peer's fence notice); then a pause of [`FENCE_WATCH_GAP`], so peers
/// ringing often cost at most one run per gap.
async fn fence_watch_task(
    doorbell: &tokio::sync::Notify,
    period: Duration,
    mut shutdown: watch::Receiver<bool>,
    mut watch: impl FnMut(),
) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = doorbell.notified() => {}
            _ = shutdown.changed() => break,
        }
        crate::blocking::off_worker(&mut watch);
        tokio::time::sleep(FENCE_WATCH_GAP).await;
    }
}

/// The least time between two runs of the fence watcher.
const FENCE_WATCH_GAP: Duration = Duration::from_millis(50);

/// The volume sync task: `sync(false)` every second, and `sync(true)` at once when
/// `doorbell` rings (a peer's cluster notice, or this broker's routes changed), at
/// most once per [`RUNG_SYNC_GAP`] when rung. The counted rounds keep their own
/// clock, however often the doorbell rings: each a second after the last one ended
/// (a slow volume is not synced back to back). `sync` is blocking file work: it runs
/// on the blocking pool, one run at a time.
async fn volume_sync_task<F>(doorbell: &tokio::sync::Notify, mut shutdown: watch::Receiver<bool>, sync: F)
where
    F: Fn(bool) + Clone + Send + 'static,
{
    let mut next_round = tokio::time::Instant::now() + VOLUME_SYNC_ROUND;
    loop {
        let rung = tokio::select! {
            _ = tokio::time::sleep_until(next_round) => false,
            _ = doorbell.notified() => true,
            _ = shutdown.changed() => break,
        };
        let sync = sync.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || sync(rung)).await {
            error!(error = %e, "volume sync task failed");
        }
        if !rung {
            next_round = tokio::time::Instant::now() + VOLUME_SYNC_ROUND;
        } else {
            tokio::select! {
                _ = tokio::time::sleep(RUNG_SYNC_GAP) => {}
                _ = shutdown.changed() => break,
            }
        }
    }
}

/// The period of the volume sync's counted rounds.
const VOLUME_SYNC_ROUND: Duration = Duration::from_secs(1);

/// The lease task: a renewal every `period`, and at once when the lease doorbell
/// rings (a peer's cluster notice, or this broker's own view of where it routes
/// changed), at most one rung renewal per [`RUNG_RENEWAL_GAP`].
async fn lease_task(
    broker: std::sync::Arc<Broker>,
    lease: std::sync::Arc<std::sync::Mutex<LeaseKeeper>>,
    period: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let rung = tokio::select! {
            _ = tokio::time::sleep(period) => false,
            _ = broker.lease_doorbell.notified() => true,
            _ = shutdown.changed() => break,
        };
        tick_lease(&broker, &lease).await;
        if rung {
            tokio::select! {
                _ = tokio::time::sleep(RUNG_RENEWAL_GAP) => {}
                _ = shutdown.changed() => break,
            }
        }
    }
}

/// The least time between two renewals rung by the lease doorbell: peers ringing
/// often cost at most one renewal (a rename and a read of the leases) per gap.
const RUNG_RENEWAL_GAP: Duration = Duration::from_millis(10);

/// The least time between two volume syncs rung by the sync doorbell (a sync reads
/// every topic file that changed and the ownership of every partition).
const RUNG_SYNC_GAP: Duration = Duration::from_millis(50);

/// A broker that stepped down comes back only once its renewals take less than
/// this: half of what is left of half the session timeout after a renewal period,
/// so one that renews just in time does not flap between in and out at every tick
/// (never less than half a period: with a tiny session timeout it would never come
/// back).
fn rejoin_bound(session_timeout_ms: i64) -> Duration {
    let half = Duration::from_millis(session_timeout_ms.max(0) as u64 / 2);
    let period = renewal_period(session_timeout_ms);
    (half.saturating_sub(period) / 2).max(period / 2)
}

/// How long after its unmarked lease is on the volume a broker that joins (back from
/// a step-down, or started beside others) waits for a peer whose lease says nothing of
/// where it routes (a build from before `routes`): such a peer re-reads leases every
/// renewal period plus its own renewal's time (under [`rejoin_bound`] while renewing
/// normally), so two periods and that bound cover one read by it — a bound, not an
/// acknowledgment, which a peer whose renewal hangs for longer can miss.
fn rejoin_wait(session_timeout_ms: i64) -> Duration {
    2 * renewal_period(session_timeout_ms) + rejoin_bound(session_timeout_ms)
}

/// One tick of the lease task (blocking file work). A broker that finds its own
/// lease older than half the session timeout — it could not renew it, or the whole
/// process was paused — first steps down: it lets every partition go (they are
/// re-acquired through the volume sync once it is back, unless another broker took
/// them meanwhile), leaves its own live set, so it coordinates nothing, and says so
/// in its lease (`stepped_down_ms`), so peers take over at once rather than wait for
/// a heartbeat that may still change (renewals that are only slow).
///
/// It comes back only through renewals quicker than [`rejoin_bound`]: the first
/// clears the mark while the broker stays out; it is fresh again only once every live
/// peer's lease says it routes to it as read since then ([`LeaseKeeper::peers_route_here`]).
/// So peers have seen the mark gone before it claims a slot or group again: never is
/// it live to itself while its lease tells them it is dead, nor while a peer slow to
/// read the leases still coordinates its share
/// (`a_broker_that_stepped_down_comes_back_only_once_its_peers_route_to_it_again`).
/// A broker started beside others takes its share by the same rule.
/// Returns whether the broker began coordinating groups and slots with this tick.
fn renew_lease(broker: &Broker, keeper: &mut LeaseKeeper) -> Renewed {
    // Another process running as this broker id (possible only if the id lock lapsed,
    // as an NFS lock does for a host cut off long enough) owns the lease now: this
    // process must stop at once and write nothing more.
    if let Ok(current) = BrokerLease::read(&broker.volume, keeper.lease.broker_id) {
        if current.incarnation != keeper.lease.incarnation {
            error!(
                incarnation = %keeper.lease.incarnation,
                other = %current.incarnation,
                "another process took over this broker id; exiting without writing anything"
            );
            std::process::exit(70);
        }
    }
    let session = broker.config.broker_session_timeout_ms;
    let mut renewed = Renewed::default();
    if !keeper.out && !broker.lease_fresh() {
        warn!("this broker's lease was not renewed for half the session timeout: stepping down");
        broker.stepping_down();
        broker.release_partitions("lease not renewed in time");
        keeper.read_leases(broker);
        keeper.out = true;
        keeper.unmarked_at = None;
        keeper.lease.stepped_down_ms = Some(now_ms());
    } else if keeper.out {
        if keeper.last_write.is_some_and(|d| d < rejoin_bound(session)) {
            keeper.lease.stepped_down_ms = None;
        } else {
            keeper.unmarked_at = None;
            keeper.lease.stepped_down_ms.get_or_insert_with(now_ms);
        }
    }
    let at = Instant::now();
    kaas_core::failpoint::hit(kaas_core::failpoint::LEASE_RENEW);
    keeper.lease.heartbeat_ms = now_ms();
    keeper.lease.renewal += 1;
    // Where it routes as of its last read of the leases: still so until its next read.
    keeper.lease.routes = Some(keeper.routes.clone());
    // For operators: it serves (unmarked) but waits for its peers to route its share
    // of groups and slots to it — started beside others, or back from a step-down.
    // Not while it opens the volume (peers route nothing to it then, whatever else).
    let waiting = keeper.lease.opening_ms.is_none()
        && if keeper.out {
            keeper.lease.stepped_down_ms.is_none()
        } else {
            keeper.joining.is_some()
        };
    keeper.lease.joining_ms = waiting.then(|| keeper.lease.joining_ms.unwrap_or_else(now_ms));
    let mut quick = false;
    let written = keeper.lease.renew(&broker.volume).map(|()| {
        let announced = Announced::of(&keeper.lease, &keeper.routes);
        renewed.announce = keeper.announced.as_ref() != Some(&announced);
        keeper.announced = Some(announced);
    });
    let wrote = written.is_ok();
    match written {
        Ok(()) => {
            let took = at.elapsed();
            keeper.last_write = Some(took);
            quick = took < rejoin_bound(session);
            if !keeper.out {
                broker.renewed_at(at);
            } else if keeper.lease.stepped_down_ms.is_none() {
                if !quick {
                    // Too slow after all: the mark goes back on at the next tick.
                    keeper.unmarked_at = None;
                } else if keeper.unmarked_at.is_none() {
                    // From when the unmarked lease is on the volume, not from before
                    // the write: a peer can only see it from then on.
                    keeper.unmarked_at = Some((Instant::now(), keeper.lease.renewal));
                }
            }
            if !keeper.out && keeper.lease.opening_ms.is_none() && keeper.joining == Some(None) {
                keeper.joining = Some(Some((Instant::now(), keeper.lease.renewal)));
            }
        }
        Err(e) => {
            keeper.last_write = None;
            crate::metrics::metrics().lease_write_failed(&e);
            error!(error = %e, "cannot renew broker lease; this broker steps down once it is older than half the session timeout")
        }
    }
    let leases = keeper.read_leases(broker);
    // Back from a step-down, or started beside others: it serves (and its lease says
    // so) but takes its share of groups and slots only once every live peer leaves it
    // to it — its lease names this broker as read since it said so — however slowly
    // that peer renews (a time bound let a peer whose renewal hung for seconds go on
    // coordinating that share with a view from before).
    if let Some(leases) = &leases {
        if keeper.out && quick && keeper.lease.stepped_down_ms.is_none() {
            if let Some((visible, since)) = keeper.unmarked_at {
                if keeper.peers_route_here(broker, leases, visible, since) {
                    info!("this broker's lease is renewed in time again, and its peers have seen it back: back in service");
                    keeper.out = false;
                    keeper.unmarked_at = None;
                    broker.renewed_at(at);
                    keeper.read_leases(broker);
                }
            }
        }
        if !keeper.out && keeper.lease.opening_ms.is_none() {
            if let Some(Some((visible, since))) = keeper.joining {
                if keeper.peers_route_here(broker, leases, visible, since) {
                    keeper.joining = None;
                    info!("its peers have seen it serve: coordinating its share of groups and transaction slots");
                    broker.set_coordinating(true);
                    renewed.began_coordinating = true;
                }
            }
        }
    }
    // Its lease says where it routes as of the read before; now it routes elsewhere
    // (a peer came, came back or went): the next renewal says so, and is due now,
    // not a period later — a peer joining waits for it. Only after a renewal that
    // wrote: a volume refusing writes is not retried in a loop.
    renewed.again = keeper
        .announced
        .as_ref()
        .is_some_and(|a| a.routes != routed_incarnations(&keeper.routes))
        && wrote;
    // Alone on the volume when it opened, so coordinating at once — but another
    // broker's lease appeared while this one still opens the volume: that broker,
    // counting this one opening, coordinates its share once it serves. So this one
    // waits too, as one started beside others.
    if keeper.joining.is_none() && keeper.lease.opening_ms.is_some() && broker.has_live_peers() {
        info!("another broker appeared while this one opens the volume: it coordinates nothing until its peers have seen it serve");
        broker.set_coordinating(false);
        keeper.joining = Some(None);
    }
    renewed
}

/// A live peer that authorizes differently (`--authorizer`, `--super-users`,
/// `--allow-everyone-if-no-acl-found`) lets clients do there what they may not do here
/// (Metadata and FindCoordinator send them to it): said at error level, once a minute,
/// until every broker runs with the same settings (docs/security.md).
fn warn_of_other_authorizers<'a>(broker: &Broker, live: impl IntoIterator<Item = &'a BrokerLease>, now: i64) {
    static LAST_WARNED_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);
    let mine = crate::authz::lease_settings(&broker.config);
    let others: Vec<String> = live
        .into_iter()
        .filter(|l| l.broker_id != broker.config.broker_id)
        .filter_map(|l| {
            // A lease without the field is a broker from before ACLs: it authorizes nothing.
            let theirs = l.authorizer.as_deref().unwrap_or("none");
            (theirs != mine).then(|| format!("broker {} ({theirs})", l.broker_id))
        })
        .collect();
    let last = LAST_WARNED_MS.load(std::sync::atomic::Ordering::Relaxed);
    if !others.is_empty() && now.saturating_sub(last) >= 60_000 {
        LAST_WARNED_MS.store(now, std::sync::atomic::Ordering::Relaxed);
        error!(
            authorizer = %mine,
            others = %others.join(", "),
            "brokers of this cluster authorize differently: clients sent to the others get past what this one refuses, or the reverse; run every broker with the same --authorizer, --super-users and --allow-everyone-if-no-acl-found"
        );
    }
}

/// Logs, once per change, each peer that left the live set — and why: stopped cleanly
/// (its partitions are handed over), stepped down, or dead with how long this process
/// saw its heartbeat unchanged — and each that joined it.
#[allow(clippy::too_many_arguments)]
fn say_who_came_and_went(
    me: i32,
    before: &BTreeMap<i32, crate::listeners::Endpoints>,
    after: &BTreeMap<i32, crate::listeners::Endpoints>,
    opening: &[i32],
    leases: &[BrokerLease],
    tracker: &kaas_core::broker::LeaseTracker,
    now: Instant,
    now_ms: i64,
) {
    // One that left because it restarted and is opening the volume is said apart
    // (its partitions stay its own): not dead.
    for &id in before
        .keys()
        .filter(|id| **id != me && !after.contains_key(id) && !opening.contains(id))
    {
        match leases.iter().find(|l| l.broker_id == id) {
            Some(l) if l.stopped_ms.is_some() => {
                info!(broker = id, "broker {id} stopped cleanly; what it led is handed over")
            }
            Some(l) if l.stepped_down_ms.is_some() => warn!(
                broker = id,
                "broker {id} stepped down (it could not renew its lease in time); what it led is taken over"
            ),
            Some(l) => {
                // Seen unchanged by this process's clock (from its first sighting, if
                // it started after the peer died); the heartbeat's own age is by the
                // two hosts' clocks.
                let unchanged = tracker.unchanged_for(l, now).unwrap_or_default().as_secs_f64();
                let written = (now_ms - l.heartbeat_ms) as f64 / 1000.0;
                warn!(
                    broker = id,
                    heartbeat_unchanged_s = format_args!("{unchanged:.1}"),
                    heartbeat_age_s = format_args!("{written:.1}"),
                    "broker {id} is dead (heartbeat unchanged for {unchanged:.1} s, last written {written:.1} s ago by the clocks); what it led is taken over"
                )
            }
            None => warn!(
                broker = id,
                "broker {id} is no longer live: its lease file is gone or unreadable"
            ),
        }
    }
    for &id in after.keys().filter(|id| **id != me && !before.contains_key(id)) {
        info!(broker = id, "broker {id} is live");
    }
}

/// Reads the lease files and keeps the brokers whose heartbeat keeps changing
/// (`LeaseTracker`: by this process's monotonic clock, whatever the peers' clocks say).
fn refresh_live_brokers(broker: &Broker) -> Option<Vec<BrokerLease>> {
    let now = now_ms();
    match kaas_core::broker::list_brokers(&broker.volume) {
        Ok(leases) => {
            let mut unreadable = Vec::new();
            let leases: Vec<BrokerLease> = leases
                .into_iter()
                .filter_map(|l| {
                    l.map_err(|e| {
                        warn!(error = %e, "broker lease unreadable; that broker stays where its last good reading put it until a session timeout after its last seen renewal");
                        unreadable.extend(kaas_core::broker::lease_id_of(&e));
                    })
                    .ok()
                })
                .collect();
            if let Err(e) = kaas_core::broker::check_clock_skew(
                &leases,
                broker.config.broker_id,
                now,
                broker.config.broker_session_timeout_ms,
            ) {
                warn!("{e}");
            }
            let changed = {
                let mut tracker = broker.lease_tracker.lock().unwrap_or_else(|p| p.into_inner());
                let seen_at = Instant::now();
                let live_leases = tracker.observe_partial(
                    &leases,
                    &unreadable,
                    now,
                    seen_at,
                    broker.config.broker_session_timeout_ms,
                );
                warn_of_other_authorizers(broker, live_leases.iter().copied(), now);
                // A peer still opening the volume is alive (its partitions stay its
                // own) but routed nothing until it serves.
                let mut opening: Vec<i32> = live_leases
                    .iter()
                    .filter(|l| l.is_opening() && l.broker_id != broker.config.broker_id)
                    .map(|l| l.broker_id)
                    .collect();
                let mut live: BTreeMap<i32, crate::listeners::Endpoints> = live_leases
                    .into_iter()
                    .filter(|l| !opening.contains(&l.broker_id))
                    .map(|l| (l.broker_id, crate::listeners::Endpoints::of_lease(l)))
                    .collect();
                let before = broker.cluster.live_brokers();
                let opening_before = broker.cluster.opening_brokers();
                // A lease that failed to read this time (torn by an in-place write on
                // a full volume, a network file system's stale handle) keeps its
                // broker where the last good reading put it until that broker's last
                // seen renewal is a session timeout old (docs/limits.md). Dropped at
                // once, its groups and slots were taken over for a period while it
                // still coordinated them, and a joining broker did not wait for it.
                let timeout = Duration::from_millis(broker.config.broker_session_timeout_ms.max(0) as u64);
                for id in unreadable.iter().filter(|id| **id != broker.config.broker_id) {
                    match tracker.last_changed(*id) {
                        Some(at) if seen_at.saturating_duration_since(at) < timeout => {
                            if let Some(endpoints) = before.get(id) {
                                live.entry(*id).or_insert_with(|| endpoints.clone());
                            } else if opening_before.contains(id) && !opening.contains(id) {
                                opening.push(*id);
                            }
                        }
                        Some(_) => {}
                        // Never read cleanly here (this broker started while that lease
                        // read torn): it may be a broker that serves. Counted as one
                        // opening the volume — alive, routed nothing — for a session
                        // timeout from the first failed read, so
                        // this broker neither takes itself for alone nor takes its
                        // share of groups and slots beside it meanwhile.
                        None => {
                            if tracker.never_read_for(*id, seen_at).is_some_and(|d| d < timeout)
                                && !opening.contains(id)
                            {
                                opening.push(*id);
                            }
                        }
                    }
                }
                say_who_came_and_went(
                    broker.config.broker_id,
                    &before,
                    &live,
                    &opening,
                    &leases,
                    &tracker,
                    seen_at,
                    now,
                );
                // One that went while still opening (killed, or its start failed and
                // it marked its lease stopped) was in no live set: said here.
                for id in opening_before
                    .iter()
                    .filter(|id| !opening.contains(id) && !live.contains_key(id))
                {
                    match leases.iter().find(|l| l.broker_id == *id) {
                        Some(l) if l.stopped_ms.is_some() => info!(
                            broker = id,
                            "broker {id} stopped before it served; what it led is taken over"
                        ),
                        _ => warn!(
                            broker = id,
                            "broker {id} went while it opened the volume (no longer renewed, or unreadable); what it led is taken over once its lease is confirmed dead"
                        ),
                    }
                }
                for id in opening.iter().filter(|id| !opening_before.contains(id)) {
                    info!(
                        broker = id,
                        "broker {id} is opening the volume: its partitions stay its own, and nothing is routed to it until it serves"
                    );
                }
                // Set with the tracker held: a take-over gate reads the live set and
                // the sightings it was built from as one view (`Cluster::gate`).
                broker.cluster.set_live_and_opening(live, opening)
            };
            if changed {
                broker.forget_groups_coordinated_elsewhere();
            }
            Some(leases)
        }
        Err(e) => {
            error!(error = %e, "cannot list broker leases");
            None
        }
    }
}

/// Waits `period`, then runs the future `f` makes, until shutdown (a slow round
/// delays the next one rather than piling up).
async fn every_async<F, Fut>(period: Duration, mut shutdown: watch::Receiver<bool>, mut f: F)
where
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = ()> + Send,
{
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => f().await,
            _ = shutdown.changed() => break,
        }
    }
}

/// Runs `f` on the blocking pool every `period` until shutdown: blocking file work,
/// off the async workers. A run that panicked is logged as `what` and the next run
/// comes as usual.
async fn every_blocking<F, R>(period: Duration, shutdown: watch::Receiver<bool>, what: &'static str, f: F)
where
    F: Fn() -> R + Clone + Send + 'static,
    R: Send + 'static,
{
    every_async(period, shutdown, move || {
        let f = f.clone();
        async move {
            if let Err(e) = tokio::task::spawn_blocking(f).await {
                tracing::error!(error = %e, "{what} panicked");
            }
        }
    })
    .await
}

/// Runs `f` every `period` until shutdown.
async fn every(period: Duration, mut shutdown: watch::Receiver<bool>, mut f: impl FnMut() + Send) {
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => f(),
            _ = shutdown.changed() => break,
        }
    }
}

/// Warns of a data directory, or a TLS private key, that other users may read (any
/// group or other permission bit): the records, the SCRAM verifiers and the key are the
/// brokers' alone (what kaas creates is; a directory or key made before, by hand or by
/// a deployment tool, may not be). The broker starts all the same.
fn warn_of_loose_modes(config: &Config) {
    use std::os::unix::fs::PermissionsExt;
    let keys = config
        .ssl_key
        .iter()
        .chain(config.listener_ssl_key.iter().map(|(_, k)| k));
    let checks = std::iter::once((&config.data_dir, "data directory", "chmod 700"))
        .chain(keys.map(|k| (k, "TLS private key", "chmod 600")));
    for (path, what, fix) in checks {
        match std::fs::metadata(path) {
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => warn!(
                path = %path.display(),
                mode = format!("{:o}", meta.permissions().mode() & 0o7777),
                "the {what} may be read by other users than its owner; {fix} it"
            ),
            Ok(_) => {}
            // A key that cannot be read is reported when TLS loads it.
            Err(e) => warn!(path = %path.display(), error = %e, "cannot check the mode of the {what}"),
        }
    }
}

/// The TLS of one SSL or SASL_SSL listener: its own files and client auth
/// (`--listener-ssl-*`) where given, the broker's (`--ssl-*`) otherwise.
fn listener_tls(config: &crate::config::Config, listener: &str) -> anyhow::Result<std::sync::Arc<crate::tls::Tls>> {
    use crate::config::for_listener;
    let certificate = for_listener(&config.listener_ssl_certificate, listener).or(config.ssl_certificate.as_ref());
    let key = for_listener(&config.listener_ssl_key, listener).or(config.ssl_key.as_ref());
    let (Some(certificate), Some(key)) = (certificate, key) else {
        anyhow::bail!(
            "TLS listener {listener} needs a certificate and a key: --ssl-certificate and --ssl-key, or --listener-ssl-certificate {listener}=PATH and --listener-ssl-key {listener}=PATH"
        );
    };
    let settings = crate::tls::TlsSettings {
        certificate: certificate.clone(),
        key: key.clone(),
        ca: for_listener(&config.listener_ssl_ca, listener)
            .or(config.ssl_ca.as_ref())
            .cloned(),
        client_auth: config.ssl_client_auth_for(listener),
    };
    crate::tls::Tls::load(settings).map_err(|e| anyhow::anyhow!("TLS on listener {listener}: {e}"))
}

/// Every `--listener-*` override names a listener of this broker of the right kind.
fn check_listener_overrides(
    config: &crate::config::Config,
    specs: &[crate::listeners::ListenerSpec],
) -> anyhow::Result<()> {
    let kind = |name: &str| specs.iter().find(|s| s.name == name).map(|s| s.protocol);
    // A listener named twice by one flag: which value was meant?
    let twice = |flag: &str, names: Vec<&String>| -> anyhow::Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        match names.into_iter().find(|n| !seen.insert(*n)) {
            Some(name) => anyhow::bail!("{flag} names {name} twice"),
            None => Ok(()),
        }
    };
    twice(
        "--listener-sasl-enabled-mechanisms",
        config.listener_sasl_enabled_mechanisms.iter().map(|(n, _)| n).collect(),
    )?;
    twice(
        "--listener-ssl-certificate",
        config.listener_ssl_certificate.iter().map(|(n, _)| n).collect(),
    )?;
    twice(
        "--listener-ssl-key",
        config.listener_ssl_key.iter().map(|(n, _)| n).collect(),
    )?;
    twice(
        "--listener-ssl-ca",
        config.listener_ssl_ca.iter().map(|(n, _)| n).collect(),
    )?;
    twice(
        "--listener-ssl-client-auth",
        config.listener_ssl_client_auth.iter().map(|(n, _)| n).collect(),
    )?;
    let names =
        |flag: &'static str, names: Vec<&String>, fits: fn(crate::listeners::SecurityProtocol) -> bool, what: &str| {
            for name in names {
                match kind(name) {
                    None => anyhow::bail!("{flag} names {name}, which is not a listener of this broker"),
                    Some(p) if !fits(p) => anyhow::bail!("{flag} names {name}, which is not a {what} listener"),
                    Some(_) => {}
                }
            }
            Ok(())
        };
    use crate::listeners::SecurityProtocol;
    names(
        "--listener-sasl-enabled-mechanisms",
        config.listener_sasl_enabled_mechanisms.iter().map(|(n, _)| n).collect(),
        SecurityProtocol::sasl,
        "SASL",
    )?;
    let tls_names = config
        .listener_ssl_certificate
        .iter()
        .map(|(n, _)| n)
        .chain(config.listener_ssl_key.iter().map(|(n, _)| n))
        .chain(config.listener_ssl_ca.iter().map(|(n, _)| n))
        .chain(config.listener_ssl_client_auth.iter().map(|(n, _)| n))
        .collect();
    names("--listener-ssl-*", tls_names, SecurityProtocol::tls, "TLS")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION_MS: i64 = 400;

    /// A blocking task still running when the broker stopped (here a sleep of 30 s,
    /// standing for a lookup or an fsync stuck on the network or the volume) holds
    /// the exit for the grace, not until it ends: dropping the runtime, as main did,
    /// waited for it.
    #[test]
    fn a_blocking_straggler_holds_the_exit_only_for_the_grace() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("a runtime");
        let (started, running) = std::sync::mpsc::channel();
        rt.spawn_blocking(move || {
            started.send(()).expect("the test waits");
            std::thread::sleep(Duration::from_secs(30));
        });
        running.recv().expect("the straggler runs");
        let at = Instant::now();
        assert!(
            wind_down(rt, Duration::from_millis(200)),
            "the straggler is said abandoned"
        );
        assert!(at.elapsed() < Duration::from_secs(10), "waited {:?}", at.elapsed());
        // With nothing left running, the exit is at once and abandons nothing.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("a runtime");
        rt.block_on(async { tokio::task::spawn_blocking(|| ()).await.expect("ran") });
        let at = Instant::now();
        assert!(!wind_down(rt, Duration::from_secs(5)), "nothing was left running");
        assert!(at.elapsed() < Duration::from_secs(4), "waited {:?}", at.elapsed());
    }

    /// Rings `doorbell` every millisecond or two (the timer's tick) for `length`:
    /// a flood, without spinning a core the rung task needs. Returns the rings and
    /// how long they took.
    async fn ring_for(doorbell: &tokio::sync::Notify, length: Duration) -> (u32, Duration) {
        let flood = Instant::now();
        let mut rings = 0;
        while flood.elapsed() < length {
            doorbell.notify_one();
            rings += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (rings, flood.elapsed())
    }

    /// The volume sync runs at once when its doorbell rings, yet a flood of rings (a
    /// peer, or any client without an authorizer, sending cluster notices back to
    /// back) runs it at most once per [`RUNG_SYNC_GAP`], and the counted rounds still
    /// come once a second through the flood (docs/cluster.md#cluster-notices).
    #[test]
    fn a_flood_of_rings_syncs_at_once_but_at_most_once_per_50_ms_and_keeps_the_rounds() {
        use std::sync::atomic::{AtomicU32, Ordering};
        crate::handlers::test_support::two_worker_runtime().block_on(async {
            let doorbell = std::sync::Arc::new(tokio::sync::Notify::new());
            let (stop, stopped) = watch::channel(false);
            let (rung, rounds) = (
                std::sync::Arc::new(AtomicU32::new(0)),
                std::sync::Arc::new(AtomicU32::new(0)),
            );
            let (first_rung, first_rung_at) = std::sync::mpsc::channel();
            let task = tokio::spawn({
                let (doorbell, rung, rounds) = (doorbell.clone(), rung.clone(), rounds.clone());
                async move {
                    let sync = move |was_rung: bool| {
                        if was_rung {
                            if rung.fetch_add(1, Ordering::SeqCst) == 0 {
                                let _ = first_rung.send(Instant::now());
                            }
                        } else {
                            rounds.fetch_add(1, Ordering::SeqCst);
                        }
                    };
                    volume_sync_task(&doorbell, stopped, sync).await
                }
            });
            // One ring: a sync at once, not at the next round a second away.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let rang = Instant::now();
            doorbell.notify_one();
            let synced = tokio::task::spawn_blocking(move || first_rung_at.recv_timeout(Duration::from_secs(5)))
                .await
                .expect("joined")
                .expect("a rung sync");
            // (The next round is 900 ms after the ring, and only a ring sends this.)
            assert!(
                synced.duration_since(rang) < Duration::from_millis(800),
                "the rung sync came {:?} after the ring",
                synced.duration_since(rang)
            );
            // Then a ring every millisecond or two (the timer's tick) for 2.2 s: ten
            // times or more per rung sync, without spinning a core the task needs.
            let (rung_before, rounds_before) = (rung.load(Ordering::SeqCst), rounds.load(Ordering::SeqCst));
            let (rings, elapsed) = ring_for(&doorbell, Duration::from_millis(2200)).await;
            stop.send(true).expect("the task listens");
            task.await.expect("the task ends at the stop");
            let rung = rung.load(Ordering::SeqCst) - rung_before;
            let rounds = rounds.load(Ordering::SeqCst) - rounds_before;
            assert!(rings > 10 * 44, "only {rings} rings");
            // The documented bound (docs/cluster.md), not the constant: one per 50 ms.
            let most = (elapsed.as_secs_f64() / 0.050) as u32 + 2;
            assert!(
                (10..=most).contains(&rung),
                "{rung} rung syncs for {rings} rings in {elapsed:?}: at most {most} (one per 50 ms)"
            );
            assert!(
                (1..=3).contains(&rounds),
                "{rounds} counted rounds in {elapsed:?} of rings: they keep their once-a-second clock"
            );
        });
    }

    /// The fence watcher runs at once when a peer's fence notice rings it, yet a flood
    /// of fence notices (any client may send one when no authorizer is set) runs it at
    /// most once per 50 ms (docs/cluster.md#fences-across-brokers).
    #[test]
    fn a_flood_of_fence_notices_runs_the_fence_watcher_at_once_but_at_most_once_per_50_ms() {
        use std::sync::atomic::{AtomicU32, Ordering};
        crate::handlers::test_support::two_worker_runtime().block_on(async {
            let doorbell = std::sync::Arc::new(tokio::sync::Notify::new());
            let (stop, stopped) = watch::channel(false);
            let runs = std::sync::Arc::new(AtomicU32::new(0));
            let task = tokio::spawn({
                let (doorbell, runs) = (doorbell.clone(), runs.clone());
                async move {
                    // The poll itself: once at start, then not for the test's length.
                    fence_watch_task(&doorbell, Duration::from_secs(600), stopped, move || {
                        runs.fetch_add(1, Ordering::SeqCst);
                    })
                    .await
                }
            });
            // The first poll, at start.
            let started = Instant::now();
            while runs.load(Ordering::SeqCst) < 1 {
                assert!(started.elapsed() < Duration::from_secs(5), "no first poll");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(
                runs.load(Ordering::SeqCst),
                1,
                "nothing but the first poll before a ring"
            );
            let rang = Instant::now();
            doorbell.notify_one();
            while runs.load(Ordering::SeqCst) < 2 {
                assert!(rang.elapsed() < Duration::from_secs(5), "a ring ran no watcher");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert!(
                rang.elapsed() < Duration::from_millis(800),
                "ran {:?} after the ring",
                rang.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
            let before = runs.load(Ordering::SeqCst);
            let (rings, elapsed) = ring_for(&doorbell, Duration::from_millis(1500)).await;
            stop.send(true).expect("the task listens");
            task.await.expect("the task ends at the stop");
            let ran = runs.load(Ordering::SeqCst) - before;
            let most = (elapsed.as_secs_f64() / 0.050) as u32 + 2;
            assert!(rings > 300, "only {rings} rings");
            assert!(
                (5..=most).contains(&ran),
                "{ran} runs for {rings} rings in {elapsed:?}: at most {most} (one per 50 ms)"
            );
        });
    }

    fn lease_on_volume(b: &Broker) -> BrokerLease {
        BrokerLease::read(&b.volume, b.config.broker_id).expect("own lease")
    }

    fn self_live(b: &Broker) -> bool {
        b.live_brokers().contains_key(&b.config.broker_id)
    }

    /// A broker opened on `dir` with the short session timeout, and its lease
    /// (`opening_ms` as given) written.
    fn opened_with_lease(dir: &std::path::Path, opening_ms: Option<i64>) -> (std::sync::Arc<Broker>, BrokerLease) {
        opened_as(dir, 0, SESSION_MS, opening_ms)
    }

    /// [`opened_with_lease`] as broker `broker_id` with session timeout `session_ms`.
    fn opened_as(
        dir: &std::path::Path,
        broker_id: i32,
        session_ms: i64,
        opening_ms: Option<i64>,
    ) -> (std::sync::Arc<Broker>, BrokerLease) {
        let config = <Config as clap::Parser>::parse_from([
            "kaas-server",
            "--data-dir",
            dir.to_str().expect("utf-8"),
            "--broker-id",
            &broker_id.to_string(),
            "--broker-session-timeout-ms",
            &session_ms.to_string(),
        ]);
        let broker = Broker::open(config, crate::listeners::Endpoints::plaintext("127.0.0.1", 9092)).expect("opens");
        let lease = BrokerLease {
            version: LEASE_FORMAT_VERSION,
            authorizer: None,
            renewal: 0,
            routes: None,
            broker_id: broker.config.broker_id,
            host: "127.0.0.1".into(),
            port: 9092,
            listeners: Default::default(),
            incarnation: format!("test-{broker_id}"),
            started_ms: now_ms(),
            heartbeat_ms: now_ms(),
            stopped_ms: None,
            stepped_down_ms: None,
            opening_ms,
            joining_ms: None,
        };
        lease.write(&broker.volume).expect("lease written");
        (broker, lease)
    }

    /// A KIP-848 heartbeat interval not below the session timeout (say a session
    /// shortened to 5 s, the interval left at its 5 s default) was accepted: every
    /// member was removed just before each heartbeat, and the group churned for good
    /// with nothing said at start. Refused, as Apache refuses it.
    #[test]
    fn group_timeouts_that_cannot_work_together_are_refused() {
        let config = |extra: &[&str]| {
            let mut args = vec!["kaas-server"];
            args.extend_from_slice(extra);
            <Config as clap::Parser>::parse_from(args)
        };
        assert!(check_group_timeouts(&config(&[])).is_ok());
        let e = check_group_timeouts(&config(&["--group-consumer-session-timeout-ms", "5000"])).unwrap_err();
        assert!(
            e.to_string()
                .contains("must be less than --group-consumer-session-timeout-ms"),
            "{e}"
        );
        assert!(check_group_timeouts(&config(&[
            "--group-min-session-timeout-ms",
            "60000",
            "--group-max-session-timeout-ms",
            "30000"
        ]))
        .is_err());
    }

    /// A peer (id 7) whose lease says it routes to itself and, when `named` is
    /// given, to broker 0 of incarnation `incarnation` as read at that renewal.
    fn peer_routing(b: &Broker, incarnation: &str, named: Option<u64>) {
        let mut routes = vec![RoutedBroker {
            broker_id: 7,
            incarnation: "peer".into(),
            renewal: 1,
        }];
        routes.extend(named.map(|renewal| RoutedBroker {
            broker_id: 0,
            incarnation: incarnation.into(),
            renewal,
        }));
        BrokerLease {
            routes: Some(routes),
            ..crate::handlers::test_support::peer_lease(7, "peer", now_ms())
        }
        .write(&b.volume)
        .expect("peer lease");
    }

    /// Issue 25, second review of item 5: a broker that stepped down wrote its lease
    /// with the mark and counted itself fresh at once, so for a renewal period it
    /// coordinated slots and groups that its peers, reading the mark, had taken over.
    /// Then it came back a time bound after its unmarked lease was written, which a
    /// peer slow to read the leases could miss; now only once every peer's lease
    /// names it as read since then.
    #[test]
    fn a_broker_that_stepped_down_comes_back_only_once_its_peers_route_to_it_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, lease) = opened_with_lease(dir.path(), None);
        let incarnation = lease.incarnation.clone();
        let mut keeper = LeaseKeeper::new(lease, false);
        peer_routing(&broker, &incarnation, Some(1));
        renew_lease(&broker, &mut keeper);
        assert!(broker.lease_fresh() && self_live(&broker));
        assert_eq!(lease_on_volume(&broker).stepped_down_ms, None);
        // Each lease says where the broker routes as of its previous read.
        renew_lease(&broker, &mut keeper);
        let routes = lease_on_volume(&broker).routes.expect("says where it routes");
        assert!(routes.iter().any(|r| r.broker_id == 7), "{routes:?}");

        // Paused past half the session timeout: it steps down, says so, and is out.
        broker.renewed_at(Instant::now() - Duration::from_secs(1));
        peer_routing(&broker, &incarnation, Some(1));
        renew_lease(&broker, &mut keeper);
        assert!(lease_on_volume(&broker).stepped_down_ms.is_some());
        assert!(
            !broker.lease_fresh() && !self_live(&broker),
            "live to itself while its lease tells its peers it is dead"
        );

        // Renewals still too slow to come back (at the bound) keep it out and marked.
        for _ in 0..3 {
            keeper.last_write = Some(rejoin_bound(SESSION_MS));
            peer_routing(&broker, &incarnation, Some(1));
            renew_lease(&broker, &mut keeper);
            assert!(lease_on_volume(&broker).stepped_down_ms.is_some());
            assert!(!broker.lease_fresh() && !self_live(&broker));
        }

        // Quick renewals: the mark goes at once, but while the peer's lease names it
        // only as read before (a peer that has not read the leases since) it stays
        // out, well past the time bound.
        let mut unmarked = None;
        let until = Instant::now() + 2 * rejoin_wait(SESSION_MS);
        while Instant::now() < until {
            std::thread::sleep(renewal_period(SESSION_MS));
            peer_routing(&broker, &incarnation, Some(1));
            renew_lease(&broker, &mut keeper);
            if lease_on_volume(&broker).stepped_down_ms.is_none() {
                unmarked.get_or_insert(keeper.lease.renewal);
            }
            assert!(
                !broker.lease_fresh() && !self_live(&broker),
                "back before its peer routes to it"
            );
        }
        let since = unmarked.expect("quick renewals take the mark off");
        // The peer reads the unmarked lease and says so: back at the next renewal.
        peer_routing(&broker, &incarnation, Some(since));
        renew_lease(&broker, &mut keeper);
        assert_eq!(lease_on_volume(&broker).stepped_down_ms, None);
        assert!(
            broker.lease_fresh() && self_live(&broker),
            "back, and in its own live set"
        );
    }

    /// A broker started beside others coordinates no group or slot while its lease
    /// says it is opening (its peers coordinate its share), nor until every peer's
    /// lease says it routes to it as read since its lease said it serves: coordinating
    /// at once, it and a peer both answered for its groups for a period or two (found
    /// by a review of the opening mark).
    #[test]
    fn a_broker_started_beside_others_coordinates_only_once_they_route_to_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, lease) = opened_with_lease(dir.path(), Some(now_ms()));
        let incarnation = lease.incarnation.clone();
        broker.set_coordinating(false);
        let mut keeper = LeaseKeeper::new(lease, true);
        peer_routing(&broker, &incarnation, None);
        renew_lease(&broker, &mut keeper);
        assert!(broker.lease_fresh() && self_live(&broker), "it leads its partitions");
        assert!(lease_on_volume(&broker).opening_ms.is_some());
        assert_eq!(slots_of(&broker), 0, "no slot while it is opening");
        // It serves: the mark goes at once, the slots only once the peer routes to it
        // as read since then (a view of it read while it opened is not enough).
        keeper.lease.opening_ms = None;
        renew_lease(&broker, &mut keeper);
        assert_eq!(lease_on_volume(&broker).opening_ms, None);
        let since = keeper.lease.renewal;
        let until = Instant::now() + 2 * rejoin_wait(SESSION_MS);
        while Instant::now() < until {
            std::thread::sleep(renewal_period(SESSION_MS));
            peer_routing(&broker, &incarnation, Some(since - 1));
            renew_lease(&broker, &mut keeper);
            assert_eq!(slots_of(&broker), 0, "coordinating before its peer routes to it");
        }
        peer_routing(&broker, &incarnation, Some(since));
        renew_lease(&broker, &mut keeper);
        let share = slots_of(&broker);
        assert!(
            share > 0 && share < kaas_core::txn::SLOTS as usize,
            "its share of the slots, beside the peer's: {share}"
        );
    }

    /// A broker that found itself alone when it opened coordinates at once; but one
    /// whose peer appears while it still opens the volume (a long recovery) waits as
    /// one started beside others: that peer, counting it opening, takes its share
    /// once it serves, and both coordinated it (a review of the hand-off).
    #[test]
    fn a_broker_alone_at_open_waits_if_a_peer_appears_before_it_serves() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, lease) = opened_with_lease(dir.path(), Some(now_ms()));
        let mut keeper = LeaseKeeper::new(lease, false);
        renew_lease(&broker, &mut keeper);
        assert_eq!(
            slots_of(&broker),
            kaas_core::txn::SLOTS as usize,
            "alone: every slot at once"
        );
        // A peer starts (its lease written) while this one still recovers.
        crate::handlers::test_support::peer_lease(7, "peer", now_ms())
            .write(&broker.volume)
            .expect("peer lease");
        renew_lease(&broker, &mut keeper);
        assert_eq!(slots_of(&broker), 0, "it waits as one started beside others");
        assert!(keeper.joining.is_some());
        // It serves: it takes its share once the peer could have seen it.
        keeper.lease.opening_ms = None;
        let unmarked = Instant::now();
        for _ in 0..50 {
            renew_lease(&broker, &mut keeper);
            if slots_of(&broker) > 0 {
                assert!(unmarked.elapsed() >= rejoin_wait(SESSION_MS));
                return;
            }
            std::thread::sleep(renewal_period(SESSION_MS));
            // The peer keeps renewing.
            crate::handlers::test_support::peer_lease(7, "peer", now_ms())
                .write(&broker.volume)
                .expect("peer lease");
        }
        panic!("it never began coordinating");
    }

    /// A broker that joins (started beside others, or back from a step-down) took its
    /// share of groups and slots `rejoin_wait` after its lease said it serves: a time
    /// bound, not an acknowledgment. A peer fresh from one renewal whose next one hung
    /// on the volume for longer (a few seconds of NFS stall, under half the session
    /// timeout) read no lease meanwhile and went on coordinating that share with a
    /// view from before the joiner served: both answered for the same slots. It now
    /// waits until every peer's lease says it routes to it.
    #[test]
    fn a_joining_broker_waits_until_every_peer_routes_to_it_however_slowly_they_renew() {
        const SESSION: i64 = PAIR_SESSION_MS;
        let dir = tempfile::tempdir().expect("temp dir");
        // The peer's last renewal, seeing the joiner open, keeps it fresh for 8 s.
        let (peer, mut peer_keeper, joiner, mut keeper) = peer_and_opening_joiner(dir.path());
        assert_eq!(
            slots_of(&peer),
            kaas_core::txn::SLOTS as usize,
            "the peer coordinates every slot meanwhile"
        );
        // The joiner serves. The peer's next renewal hangs: no tick of it here.
        keeper.lease.opening_ms = None;
        renew_lease(&joiner, &mut keeper);
        let until = Instant::now() + rejoin_wait(SESSION) + renewal_period(SESSION);
        while Instant::now() < until {
            std::thread::sleep(renewal_period(SESSION) / 4);
            renew_lease(&joiner, &mut keeper);
            let twice = owned_twice(&peer, &joiner);
            assert!(twice.is_empty(), "two coordinators of slots {twice:?}");
        }
        assert!(
            peer.lease_fresh(),
            "the peer was fresh all along: it coordinated every slot"
        );
        assert_eq!(slots_of(&joiner), 0, "nothing until the peer routes to it");
        // The peer's renewal returns, and it reads the leases; its next lease says it
        // routes to the joiner, which then takes its share.
        for _ in 0..3 {
            renew_lease(&peer, &mut peer_keeper);
            renew_lease(&joiner, &mut keeper);
            let twice = owned_twice(&peer, &joiner);
            assert!(twice.is_empty(), "two coordinators of slots {twice:?}");
            if slots_of(&joiner) > 0 {
                assert_eq!(slots_of(&joiner) + slots_of(&peer), kaas_core::txn::SLOTS as usize);
                return;
            }
        }
        panic!("the joiner never began coordinating once its peer routed to it");
    }

    /// While a broker serves but waits for its peers to route to it, nobody serves
    /// its share of groups and slots; kaasctl named it their coordinator all the same
    /// ("a live coordinator, its reaper aborts them"). Its lease says it joins, from
    /// the renewal that says it serves until the one after it began coordinating.
    #[test]
    fn a_joining_brokers_lease_says_so_until_it_coordinates() {
        use kaas_core::broker::Liveness;
        let dir = tempfile::tempdir().expect("temp dir");
        let (peer, mut peer_keeper, joiner, mut keeper) = peer_and_opening_joiner(dir.path());
        let state = |b: &Broker| {
            let l = lease_on_volume(b);
            (l.joining_ms.is_some(), l.liveness(now_ms(), PAIR_SESSION_MS))
        };
        assert_eq!(state(&joiner), (false, Liveness::Opening));
        keeper.lease.opening_ms = None;
        renew_lease(&joiner, &mut keeper);
        assert_eq!(state(&joiner), (true, Liveness::Joining));
        let since = lease_on_volume(&joiner).joining_ms;
        renew_lease(&joiner, &mut keeper);
        assert_eq!(lease_on_volume(&joiner).joining_ms, since, "since when, unchanged");
        assert_eq!(slots_of(&joiner), 0);
        for _ in 0..3 {
            renew_lease(&peer, &mut peer_keeper);
            renew_lease(&joiner, &mut keeper);
            if slots_of(&joiner) > 0 {
                break;
            }
        }
        assert!(slots_of(&joiner) > 0, "it coordinates once its peer routes to it");
        renew_lease(&joiner, &mut keeper);
        assert_eq!(state(&joiner), (false, Liveness::Alive));
        assert_eq!(state(&peer), (false, Liveness::Alive), "the peer never joined");
    }

    /// Started beside others, a broker coordinated nothing for one or two renewal
    /// periods (1 s each) after it said it serves, answering
    /// COORDINATOR_LOAD_IN_PROGRESS, which librdkafka retries only twice: a
    /// consumer's commit failed for about two seconds after a three-broker cluster
    /// started (`test_a_consumer_commits_at_once_on_three_brokers_just_started`). Now
    /// each renewal says when what it wrote changed what peers act on (tell them: a
    /// cluster notice), and when what it read changed where it routes (renew again
    /// now): the hand-off takes four renewals in a row, none waiting for a period.
    #[test]
    fn a_joiner_and_its_peer_hand_over_in_four_renewals_each_rung_by_the_one_before() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (peer, mut peer_keeper, joiner, mut keeper) = peer_and_opening_joiner(dir.path());
        // Opening: its lease says where it routes as read the renewal before, then as
        // it stays: nothing more to tell.
        renew_lease(&joiner, &mut keeper);
        let said = renew_lease(&joiner, &mut keeper);
        assert!(!said.announce && !said.again, "{said:?}");
        keeper.lease.opening_ms = None;
        let said = renew_lease(&joiner, &mut keeper);
        assert!(said.announce, "its lease says it serves now: its peers are told");
        assert!(!said.began_coordinating);
        // Rung by the joiner's notice: the peer's lease written says where it routed
        // before its read; the read routes to the joiner too.
        let said = renew_lease(&peer, &mut peer_keeper);
        assert!(
            said.again,
            "its lease does not say yet that it routes to the joiner: {said:?}"
        );
        // Until the peer's lease says so, the joiner waits, however often it renews.
        let said = renew_lease(&joiner, &mut keeper);
        assert!(!said.began_coordinating && slots_of(&joiner) == 0, "{said:?}");
        // Rung by itself: it says so, and tells the joiner.
        let said = renew_lease(&peer, &mut peer_keeper);
        assert!(said.announce && !said.again, "{said:?}");
        let routes = lease_on_volume(&peer).routes.expect("routes");
        assert!(routes.iter().any(|r| r.broker_id == 1), "{routes:?}");
        // Rung by the peer's notice: the joiner takes its share.
        let said = renew_lease(&joiner, &mut keeper);
        assert!(said.began_coordinating, "{said:?}");
        assert_eq!(slots_of(&joiner) + slots_of(&peer), kaas_core::txn::SLOTS as usize);
        assert!(slots_of(&joiner) > 0);
        // Nothing changed since: nobody is told anything more.
        for _ in 0..2 {
            assert_eq!(renew_lease(&peer, &mut peer_keeper), Renewed::default());
            let said = renew_lease(&joiner, &mut keeper);
            assert!(!said.announce && !said.again, "{said:?}");
        }
    }

    /// A broker that steps down says so in its lease, and its peers take its share
    /// over once they read it: the renewal that writes the mark says to tell them, as
    /// does the one that takes it off; one that fails to write says nothing, and does
    /// not ask to be run again (a volume refusing writes is not retried in a loop).
    #[test]
    fn a_step_down_and_the_way_back_are_told_to_peers_and_a_failed_write_is_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, mut keeper, _joiner, _joiner_keeper) = peer_and_opening_joiner(dir.path());
        assert!(!renew_lease(&broker, &mut keeper).announce, "nothing new");
        let paused = || Instant::now() - Duration::from_millis(PAIR_SESSION_MS as u64);
        // The step-down's own renewal cannot write (a directory where the lease goes:
        // the rename fails): it steps down, but tells nobody of a lease the volume
        // does not hold, and asks for no rerun.
        let path = broker.volume.broker_lease(0);
        let good = std::fs::read(&path).expect("lease");
        std::fs::remove_file(&path).expect("lease removed");
        std::fs::create_dir_all(path.join("in-the-way")).expect("a directory in its place");
        broker.renewed_at(paused());
        let said = renew_lease(&broker, &mut keeper);
        assert!(keeper.out && keeper.lease.stepped_down_ms.is_some(), "stepped down");
        assert!(keeper.lease.renew(&broker.volume).is_err(), "the write fails");
        assert!(!said.announce && !said.again, "{said:?}");
        // Written at last: the mark on the volume is told.
        std::fs::remove_dir_all(&path).expect("directory gone");
        std::fs::write(&path, good).expect("lease back");
        keeper.last_write = Some(rejoin_bound(PAIR_SESSION_MS));
        let said = renew_lease(&broker, &mut keeper);
        assert!(lease_on_volume(&broker).stepped_down_ms.is_some());
        assert!(said.announce, "stepped down: {said:?}");
        // Quick renewals take the mark off: said too.
        let said = renew_lease(&broker, &mut keeper);
        assert!(lease_on_volume(&broker).stepped_down_ms.is_none());
        assert!(said.announce, "back: {said:?}");
    }

    /// A broker that stepped down while it still opened the volume (a long recovery
    /// on a slow volume), its renewals quick again: its lease said joining beside
    /// `opening_ms`, and kept that first time once it served, so doctor warned at once
    /// of a long wait (found by a review). Joining starts when it serves.
    #[test]
    fn a_broker_still_opening_the_volume_is_not_joining_even_back_from_a_step_down() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (_peer, _peer_keeper, joiner, mut keeper) = peer_and_opening_joiner(dir.path());
        keeper.out = true;
        keeper.lease.stepped_down_ms = None;
        assert!(keeper.lease.opening_ms.is_some());
        renew_lease(&joiner, &mut keeper);
        let lease = lease_on_volume(&joiner);
        assert!(lease.opening_ms.is_some());
        assert_eq!(lease.joining_ms, None, "opening, not joining");
    }

    /// Session timeout of the two-broker tests below.
    const PAIR_SESSION_MS: i64 = 16_000;

    /// Two brokers on one volume: the peer (0) serving and coordinating every slot,
    /// the joiner (1) started beside it, its lease still saying it opens the volume,
    /// and the peer having seen it so.
    fn peer_and_opening_joiner(
        dir: &std::path::Path,
    ) -> (std::sync::Arc<Broker>, LeaseKeeper, std::sync::Arc<Broker>, LeaseKeeper) {
        let (peer, peer_lease) = opened_as(dir, 0, PAIR_SESSION_MS, None);
        let mut peer_keeper = LeaseKeeper::new(peer_lease, false);
        renew_lease(&peer, &mut peer_keeper);
        let (joiner, joiner_lease) = opened_as(dir, 1, PAIR_SESSION_MS, Some(now_ms()));
        joiner.set_coordinating(false);
        let mut keeper = LeaseKeeper::new(joiner_lease, true);
        renew_lease(&joiner, &mut keeper);
        renew_lease(&peer, &mut peer_keeper);
        (peer, peer_keeper, joiner, keeper)
    }

    /// Two brokers on one volume (session 16 s), both coordinating their shares: the
    /// joiner (1) has taken its share once the peer (0) routed to it.
    fn coordinating_pair(
        dir: &std::path::Path,
    ) -> (std::sync::Arc<Broker>, LeaseKeeper, std::sync::Arc<Broker>, LeaseKeeper) {
        let (peer, mut peer_keeper, joiner, mut keeper) = peer_and_opening_joiner(dir);
        keeper.lease.opening_ms = None;
        renew_lease(&joiner, &mut keeper);
        renew_lease(&peer, &mut peer_keeper);
        renew_lease(&peer, &mut peer_keeper);
        renew_lease(&joiner, &mut keeper);
        (peer, peer_keeper, joiner, keeper)
    }

    fn slots_of(b: &Broker) -> usize {
        (0..kaas_core::txn::SLOTS).filter(|s| b.owns_txn_slot(*s)).count()
    }

    fn owned_twice(a: &Broker, b: &Broker) -> Vec<u32> {
        (0..kaas_core::txn::SLOTS)
            .filter(|s| a.owns_txn_slot(*s) && b.owns_txn_slot(*s))
            .collect()
    }

    /// A lease file torn in half, as a reader may see one overwritten in place on a
    /// full volume; returns what it held.
    fn tear(b: &Broker, id: i32) -> Vec<u8> {
        let path = b.volume.broker_lease(id);
        let good = std::fs::read(&path).expect("lease");
        std::fs::write(&path, &good[..good.len() / 2]).expect("torn");
        good
    }

    /// A peer's lease that failed to read once dropped that peer from the live set
    /// at once (docs/limits.md says peers keep their last good reading): its share of
    /// groups and slots was taken over for a period while it still coordinated them.
    #[test]
    fn a_lease_that_fails_to_read_once_leaves_its_broker_its_share() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (peer, mut peer_keeper, joiner, _keeper) = coordinating_pair(dir.path());
        assert!(slots_of(&joiner) > 0, "the joiner coordinates its share");
        let good = tear(&peer, 1);
        renew_lease(&peer, &mut peer_keeper);
        assert!(
            peer.live_brokers().contains_key(&1),
            "kept live on its last good reading"
        );
        assert_eq!(owned_twice(&peer, &joiner), Vec::<u32>::new(), "two coordinators");
        assert_eq!(slots_of(&peer) + slots_of(&joiner), kaas_core::txn::SLOTS as usize);
        // Its next lease says it still routes to the joiner.
        renew_lease(&peer, &mut peer_keeper);
        let routes = lease_on_volume(&peer).routes.expect("routes");
        assert!(routes.iter().any(|r| r.broker_id == 1), "{routes:?}");
        std::fs::write(peer.volume.broker_lease(1), good).expect("restored");
    }

    /// A joining broker whose read of a live peer's lease failed at the tick it began
    /// to serve did not wait for that peer (no lease, so not live) and coordinated
    /// every slot beside it (found by a review of `routes`).
    #[test]
    fn a_joining_broker_waits_for_a_peer_whose_lease_it_cannot_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (peer, mut peer_keeper, joiner, mut keeper) = peer_and_opening_joiner(dir.path());
        keeper.lease.opening_ms = None;
        let good = tear(&joiner, 0);
        for _ in 0..3 {
            renew_lease(&joiner, &mut keeper);
            assert_eq!(slots_of(&joiner), 0, "coordinating beside a peer it cannot read");
        }
        std::fs::write(joiner.volume.broker_lease(0), good).expect("restored");
        renew_lease(&peer, &mut peer_keeper);
        renew_lease(&peer, &mut peer_keeper);
        renew_lease(&joiner, &mut keeper);
        assert!(slots_of(&joiner) > 0, "its share once the peer routes to it");
        assert_eq!(owned_twice(&peer, &joiner), Vec::<u32>::new());
    }

    /// A broker that started while a serving peer's lease read torn at every read it
    /// made before serving (its open, its first look) never saw that peer: it took
    /// itself for alone and coordinated every group and slot beside it (found by a
    /// review of the lease keep). Such a peer now counts as opening for a session
    /// timeout from the first failed read.
    #[test]
    fn a_broker_that_never_read_a_peers_lease_does_not_take_itself_for_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (peer, peer_lease) = opened_as(dir.path(), 0, PAIR_SESSION_MS, None);
        let mut peer_keeper = LeaseKeeper::new(peer_lease, false);
        renew_lease(&peer, &mut peer_keeper);
        assert_eq!(slots_of(&peer), kaas_core::txn::SLOTS as usize);
        let good = tear(&peer, 0);
        // The start-up of runtime::run, with the peer's lease torn throughout.
        let (joiner, joiner_lease) = opened_as(dir.path(), 1, PAIR_SESSION_MS, Some(now_ms()));
        refresh_live_brokers(&joiner);
        let alone = !joiner.has_live_peers();
        assert!(!alone, "alone beside a peer whose lease it could not read");
        joiner.set_coordinating(alone);
        let mut keeper = LeaseKeeper::new(joiner_lease, !alone);
        renew_lease(&joiner, &mut keeper);
        keeper.lease.opening_ms = None;
        for _ in 0..3 {
            renew_lease(&joiner, &mut keeper);
            assert_eq!(owned_twice(&peer, &joiner), Vec::<u32>::new(), "two coordinators");
        }
        // The lease reads again: the usual hand-off.
        std::fs::write(joiner.volume.broker_lease(0), good).expect("restored");
        renew_lease(&joiner, &mut keeper);
        renew_lease(&peer, &mut peer_keeper);
        renew_lease(&peer, &mut peer_keeper);
        renew_lease(&joiner, &mut keeper);
        assert!(slots_of(&joiner) > 0, "its share once the peer routes to it");
        assert_eq!(owned_twice(&peer, &joiner), Vec::<u32>::new());
    }
}
