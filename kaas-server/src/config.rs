//! Command line and environment of `kaas-server`. Every flag has an env twin
//! (`KAAS_*`); docs/configuration.md lists them all.

use clap::{Parser, ValueEnum};
use kaas_core::log::LogConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per event (colour only on a terminal).
    Human,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (the message
    /// and every field of the event: `topic`, `partition`, `producer_id`, …), for log
    /// collectors.
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// A client certificate is asked for; a client without one still connects.
    Requested,
    /// A client must present a certificate that chains to --ssl-ca.
    Required,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthorizerKind {
    /// Every client may do everything (Kafka without authorizer.class.name).
    None,
    /// Kafka's ACL model over the ACLs on the volume; deny wins, super users pass.
    Acls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlushPolicy {
    /// acks=-1 produce requests are answered after an fsync that covers them
    /// (concurrent requests share one fsync); other data is fsynced every
    /// --flush-interval-ms.
    AcksAll,
    /// Every produce request, whatever its acks, waits for an fsync.
    Always,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "kaas-server",
    version,
    about = "A Kafka-compatible broker whose brokers share one volume",
    long_about = "A Kafka-compatible broker whose brokers share one volume.\n\nAll state lives under --data-dir in the layout documented in docs/volume-layout.md. Logs go to stderr through tracing; set RUST_LOG (e.g. RUST_LOG=kaas_server=debug) to change the level. SIGTERM or SIGINT stop the broker cleanly."
)]
pub struct Config {
    /// A TOML file of settings: each key a long flag without `--` (`data-dir =
    /// "/var/lib/kaas"`, `segment-bytes = 1073741824`). Flags and KAAS_* variables
    /// override it; unknown keys are an error.
    #[arg(long, env = "KAAS_CONFIG")]
    pub config: Option<PathBuf>,

    /// Print the effective configuration (as a config file, with each value's source)
    /// and exit.
    #[arg(long)]
    pub print_config: bool,

    /// Directory holding the shared volume (created if missing).
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// How log lines are written to stderr.
    #[arg(long, env = "KAAS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// Address of the one PLAINTEXT listener when no --listener is given.
    #[arg(long, env = "KAAS_LISTEN", default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,

    /// Address of the operations listener: Prometheus metrics at /metrics, Kubernetes
    /// probes at /health/live and /health/ready (docs/operations.md). Off when not set.
    #[arg(long, env = "KAAS_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// This broker's id (node id in Metadata responses); unique in the cluster, 0 or
    /// more. Kafka's -1 ("assign one") is refused: kaas assigns none.
    #[arg(long, env = "KAAS_BROKER_ID", default_value_t = 0, value_parser = parse_broker_id)]
    pub broker_id: i32,

    /// A Kafka listener: NAME=PROTOCOL://HOST:PORT, or PROTOCOL://HOST:PORT for one named
    /// after its protocol; repeat the flag (or separate with commas) for several.
    /// PROTOCOL is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (docs/security.md). With
    /// none, the broker has one PLAINTEXT listener on --listen.
    #[arg(long = "listener", env = "KAAS_LISTENERS", value_delimiter = ',', value_parser = crate::listeners::parse_listener)]
    pub listeners: Vec<crate::listeners::ListenerSpec>,

    /// host:port clients are told to connect to, per listener: NAME=HOST:PORT, or
    /// HOST:PORT for the first listener; repeat (or separate with commas) for several.
    /// A listener not named gets its bound address; one bound to every interface
    /// (0.0.0.0, ::) must be named (the broker refuses to start otherwise).
    #[arg(long = "advertised-listener", env = "KAAS_ADVERTISED_LISTENER", value_delimiter = ',', value_parser = crate::listeners::parse_advertised)]
    pub advertised_listeners: Vec<crate::listeners::AdvertisedSpec>,

    /// PEM file with this broker's certificate chain, for SSL and SASL_SSL listeners.
    /// Re-read when it changes (checked at most once a second), without a restart.
    #[arg(long, env = "KAAS_SSL_CERTIFICATE")]
    pub ssl_certificate: Option<PathBuf>,

    /// PEM file with the private key of --ssl-certificate (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "KAAS_SSL_KEY")]
    pub ssl_key: Option<PathBuf>,

    /// PEM file of the CA certificates client certificates must chain to (Kafka's
    /// ssl.truststore); needed for --ssl-client-auth requested or required.
    #[arg(long, env = "KAAS_SSL_CA")]
    pub ssl_ca: Option<PathBuf>,

    /// ssl.client.auth on SSL and SASL_SSL listeners: none, requested (a client may
    /// present a certificate) or required (mTLS). On an SSL listener, a client's
    /// principal is its certificate's subject (User:CN=...,O=...).
    #[arg(long, env = "KAAS_SSL_CLIENT_AUTH", value_enum, default_value_t = ClientAuth::None)]
    pub ssl_client_auth: ClientAuth,

    /// ssl.principal.mapping.rules (KIP-371), in Kafka's syntax: how a client
    /// certificate's subject becomes its principal's name on an SSL listener, e.g.
    /// RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT. With rules and none matching, the
    /// connection is closed. Default: DEFAULT (User:CN=...,O=...).
    #[arg(long, env = "KAAS_SSL_PRINCIPAL_MAPPING_RULES", value_parser = PrincipalMapping::parse, default_value = "DEFAULT")]
    pub ssl_principal_mapping_rules: PrincipalMapping,

    /// sasl.enabled.mechanisms on SASL_PLAINTEXT and SASL_SSL listeners: any of
    /// SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (credentials: kaasctl users). PLAIN sends
    /// the password itself: enable it on purpose, and use it over SASL_SSL.
    #[arg(long, env = "KAAS_SASL_ENABLED_MECHANISMS", value_delimiter = ',', default_values = ["SCRAM-SHA-256", "SCRAM-SHA-512"], value_parser = parse_mechanism)]
    pub sasl_enabled_mechanisms: Vec<SaslMechanism>,

    /// listener.name.NAME.sasl.enabled.mechanisms: the mechanisms one SASL listener
    /// offers instead of --sasl-enabled-mechanisms, as NAME=M,M; separate listeners with
    /// ';' (or repeat the flag). E.g. PLAIN over SASL_SSL only:
    /// SASL_SSL=PLAIN,SCRAM-SHA-512;SASL_PLAINTEXT=SCRAM-SHA-512.
    #[arg(long = "listener-sasl-enabled-mechanisms", env = "KAAS_LISTENER_SASL_ENABLED_MECHANISMS", value_delimiter = ';', value_parser = parse_listener_mechanisms)]
    pub listener_sasl_enabled_mechanisms: Vec<(String, Vec<SaslMechanism>)>,

    /// listener.name.NAME.ssl.* for one TLS listener's certificate chain, as
    /// NAME=PATH (repeat, or separate with commas); a listener not named uses
    /// --ssl-certificate. Re-read when it changes, as --ssl-certificate is.
    #[arg(long = "listener-ssl-certificate", env = "KAAS_LISTENER_SSL_CERTIFICATE", value_delimiter = ',', value_parser = parse_listener_path)]
    pub listener_ssl_certificate: Vec<(String, PathBuf)>,

    /// One TLS listener's private key, NAME=PATH; others use --ssl-key.
    #[arg(long = "listener-ssl-key", env = "KAAS_LISTENER_SSL_KEY", value_delimiter = ',', value_parser = parse_listener_path)]
    pub listener_ssl_key: Vec<(String, PathBuf)>,

    /// The CA one TLS listener checks client certificates against, NAME=PATH; others
    /// use --ssl-ca.
    #[arg(long = "listener-ssl-ca", env = "KAAS_LISTENER_SSL_CA", value_delimiter = ',', value_parser = parse_listener_path)]
    pub listener_ssl_ca: Vec<(String, PathBuf)>,

    /// One TLS listener's ssl.client.auth, NAME=none|requested|required; others use
    /// --ssl-client-auth. E.g. mTLS on an internal listener only: INTERNAL=required.
    #[arg(long = "listener-ssl-client-auth", env = "KAAS_LISTENER_SSL_CLIENT_AUTH", value_delimiter = ',', value_parser = parse_listener_client_auth)]
    pub listener_ssl_client_auth: Vec<(String, ClientAuth)>,

    /// inter.broker.listener.name: the listener this broker reaches its peers on, at
    /// their advertised address for it (from their leases), to tell a partition's
    /// leader at once of markers queued for it (WriteTxnMarkers). Every broker of the
    /// cluster needs a listener of this name. Default: the listener named PLAINTEXT,
    /// else the first.
    #[arg(long, env = "KAAS_INTER_BROKER_LISTENER_NAME", value_parser = parse_listener_name)]
    pub inter_broker_listener_name: Option<String>,

    /// sasl.mechanism.inter.broker.protocol: how this broker authenticates to its
    /// peers when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (PLAIN,
    /// SCRAM-SHA-256 or SCRAM-SHA-512).
    #[arg(long, env = "KAAS_INTER_BROKER_SASL_MECHANISM", default_value = "SCRAM-SHA-512", value_parser = parse_mechanism)]
    pub inter_broker_sasl_mechanism: SaslMechanism,

    /// The user this broker authenticates to its peers as on a SASL inter-broker
    /// listener (made with kaasctl users add). Under --authorizer acls it needs
    /// CLUSTER_ACTION on the cluster (or to be a super user).
    #[arg(long, env = "KAAS_INTER_BROKER_SASL_USERNAME")]
    pub inter_broker_sasl_username: Option<String>,

    /// A file holding the password of --inter-broker-sasl-username (one trailing
    /// newline ignored), read at start: a password never appears in flags, the
    /// environment or --print-config.
    #[arg(long, env = "KAAS_INTER_BROKER_SASL_PASSWORD_FILE")]
    pub inter_broker_sasl_password_file: Option<PathBuf>,

    /// PEM file of the CA certificates peers' certificates must chain to, when the
    /// inter-broker listener is SSL or SASL_SSL; default: --ssl-ca. This broker
    /// presents --ssl-certificate to its peers (their principal for it under mTLS).
    #[arg(long, env = "KAAS_INTER_BROKER_SSL_CA")]
    pub inter_broker_ssl_ca: Option<PathBuf>,

    /// Tell partition leaders over the network of markers queued for them, and peers
    /// of fences and of changes to leases and topics (WriteTxnMarkers on the
    /// inter-broker listener). false: the leaders' marker-queue polls
    /// (--volume-poll-interval-ms) alone deliver markers and fences, and peers see
    /// other changes at their next lease renewal and volume sync (within a second).
    #[arg(long, env = "KAAS_INTER_BROKER_NOTIFICATIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub inter_broker_notifications: bool,

    /// authorizer.class.name: `none` lets every client do everything; `acls` enforces
    /// the ACLs in __cluster/acls.json (kaasctl acls, CreateAcls) on every API, as
    /// Kafka's StandardAuthorizer does (docs/security.md#acls).
    #[arg(long, env = "KAAS_AUTHORIZER", value_enum, default_value_t = AuthorizerKind::None)]
    pub authorizer: AuthorizerKind,

    /// super.users: principals the ACL authorizer allows everything, separated by `;`
    /// (User:admin;User:CN=ops,O=example).
    #[arg(long, env = "KAAS_SUPER_USERS", value_delimiter = ';', value_parser = kaas_core::acl::parse_principal)]
    pub super_users: Vec<String>,

    /// With --authorizer none, let any client add, change, delete and list SCRAM
    /// credentials (AlterUserScramCredentials, DescribeUserScramCredentials). Off: only
    /// --super-users may (without ACLs every client may do everything else; taking over
    /// every user's password, or listing who exists, is kept apart).
    #[arg(long, env = "KAAS_ALLOW_SCRAM_CHANGES_WITHOUT_AUTHORIZER", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_scram_changes_without_authorizer: bool,

    /// allow.everyone.if.no.acl.found: with --authorizer acls, a resource no ACL
    /// names at all is open to everyone (for moving a cluster onto ACLs).
    #[arg(long, env = "KAAS_ALLOW_EVERYONE_IF_NO_ACL_FOUND", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_everyone_if_no_acl_found: bool,

    /// Create a topic when a client asks for metadata of, or produces to, an unknown one.
    #[arg(long, env = "KAAS_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,

    /// Partition count of auto-created topics and of CreateTopics requests that say -1.
    #[arg(long, env = "KAAS_DEFAULT_PARTITIONS", default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=100_000))]
    pub default_partitions: i32,

    /// max.partitions (KIP-578): the most partitions the volume may hold, all topics
    /// together. CreateTopics and CreatePartitions past it are refused
    /// (POLICY_VIOLATION) before any directory is made.
    #[arg(long, env = "KAAS_MAX_PARTITIONS", default_value_t = 100_000, value_parser = clap::value_parser!(i32).range(1..))]
    pub max_partitions: i32,

    /// max.broker.partitions (KIP-578): the most partitions each live broker should
    /// lead; with N live brokers the volume may hold N times this many.
    #[arg(long, env = "KAAS_MAX_BROKER_PARTITIONS", default_value_t = 10_000, value_parser = clap::value_parser!(i32).range(1..))]
    pub max_broker_partitions: i32,

    /// max.connections: client connections this broker keeps open at once; one past it
    /// is closed as soon as it is accepted.
    #[arg(long, env = "KAAS_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// max.connections.per.ip: connections from one address; one past it is closed as
    /// soon as it is accepted.
    #[arg(long, env = "KAAS_MAX_CONNECTIONS_PER_IP", default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_ip: u32,

    /// listener.name.NAME.max.connections: connections one listener takes, as NAME=N
    /// (repeat, or separate with commas, for several); past it a new connection on
    /// that listener is closed as soon as it is accepted. A listener not named has
    /// only --max-connections.
    #[arg(long = "listener-max-connections", env = "KAAS_LISTENER_MAX_CONNECTIONS", value_delimiter = ',', value_parser = parse_listener_limit)]
    pub listener_max_connections: Vec<(String, u32)>,

    /// KIP-612's connection creation rate per address: new connections a second one
    /// address (an IPv6 /64) may open, over any one second; past it a new connection
    /// is closed as soon as it is accepted. 0: no limit (Kafka's default).
    #[arg(long, env = "KAAS_MAX_CONNECTION_CREATION_RATE_PER_IP", default_value_t = 0)]
    pub max_connection_creation_rate_per_ip: u32,

    /// connections.max.reauth.ms (KIP-368): an authenticated session lasts this long. A
    /// SASL client is told so (SaslAuthenticate v1+) and logs in again on its connection
    /// before then, as the same principal; a connection whose session has expired is
    /// closed at its next request, so a deleted user or a certificate no longer trusted
    /// is cut off within this time (docs/security.md#re-authentication). 0: sessions
    /// last as long as their connections.
    #[arg(long, env = "KAAS_CONNECTIONS_MAX_REAUTH_MS", default_value_t = 0)]
    pub connections_max_reauth_ms: u64,

    /// connections.max.idle.ms: a connection that sends nothing for this long is closed
    /// (also one that stalls half-way through a request).
    #[arg(long, env = "KAAS_CONNECTIONS_MAX_IDLE_MS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub connections_max_idle_ms: u64,

    /// queued.max.request.bytes: memory for request frames read but not yet answered,
    /// all connections together. When it is used up, connections stop being read until
    /// requests finish (back-pressure, as Kafka's memory pool).
    #[arg(long, env = "KAAS_QUEUED_MAX_REQUEST_BYTES", default_value_t = 512 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub queued_max_request_bytes: u64,

    /// fetch.max.bytes: the most record bytes one Fetch response carries, whatever the
    /// request asks (at least one batch, as Kafka).
    #[arg(long, env = "KAAS_FETCH_MAX_BYTES", default_value_t = 57_671_680, value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    pub fetch_max_bytes: u64,

    /// Largest request frame accepted (socket.request.max.bytes); bigger ones close the connection.
    #[arg(long, env = "KAAS_MAX_REQUEST_BYTES", default_value_t = 104_857_600)]
    pub max_request_bytes: usize,

    /// Largest record batch accepted, broker default for max.message.bytes.
    #[arg(long, env = "KAAS_MESSAGE_MAX_BYTES", default_value_t = 1_048_588)]
    pub message_max_bytes: usize,

    /// Default segment.bytes: roll the active segment past this size.
    #[arg(long, env = "KAAS_SEGMENT_BYTES", default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(14..=i32::MAX as u64))]
    pub segment_bytes: u64,

    /// Default segment.ms: roll the active segment after this long (at least 1, as the
    /// topic config: 0 or less rolled a segment at every append).
    #[arg(long, env = "KAAS_SEGMENT_MS", default_value_t = 7 * 24 * 3600 * 1000, value_parser = clap::value_parser!(i64).range(1..))]
    pub segment_ms: i64,

    /// Default retention.ms (-1: keep forever).
    #[arg(long, env = "KAAS_RETENTION_MS", default_value_t = 7 * 24 * 3600 * 1000, allow_hyphen_values = true)]
    pub retention_ms: i64,

    /// Default retention.bytes per partition (-1: no limit).
    #[arg(long, env = "KAAS_RETENTION_BYTES", default_value_t = -1, allow_hyphen_values = true)]
    pub retention_bytes: i64,

    /// How often retention is enforced.
    #[arg(long, env = "KAAS_RETENTION_CHECK_INTERVAL_MS", default_value_t = 300_000)]
    pub retention_check_interval_ms: u64,

    /// log.cleaner.enable: run the log cleaner for topics whose cleanup.policy
    /// includes compact (docs/compaction.md).
    #[arg(long, env = "KAAS_LOG_CLEANER_ENABLE", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_cleaner_enable: bool,

    /// log.cleaner.backoff.ms: how often the cleaner looks for partitions to clean.
    #[arg(long, env = "KAAS_LOG_CLEANER_BACKOFF_MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub log_cleaner_backoff_ms: u64,

    /// log.cleaner.dedupe.buffer.size: memory for the cleaner's offset map (96 bytes
    /// per distinct key of a pass); a pass covers as many dirty segments as fit.
    #[arg(long, env = "KAAS_LOG_CLEANER_DEDUPE_BUFFER_SIZE", default_value_t = 128 << 20, value_parser = clap::value_parser!(u64).range(1 << 10..))]
    pub log_cleaner_dedupe_buffer_size: u64,

    /// log.cleaner.io.max.bytes.per.second: the cleaner's read plus write rate
    /// (unlimited when not set).
    #[arg(long, env = "KAAS_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND")]
    pub log_cleaner_io_max_bytes_per_second: Option<f64>,

    /// When produced data is fsynced before the answer.
    #[arg(long, env = "KAAS_FLUSH_POLICY", value_enum, default_value_t = FlushPolicy::AcksAll)]
    pub flush_policy: FlushPolicy,

    /// Background fsync period for data not already fsynced for an acks=-1 answer.
    #[arg(long, env = "KAAS_FLUSH_INTERVAL_MS", default_value_t = 1000)]
    pub flush_interval_ms: u64,

    /// group.initial.rebalance.delay.ms: wait for more members before the first rebalance of an empty group.
    #[arg(long, env = "KAAS_GROUP_INITIAL_REBALANCE_DELAY_MS", default_value_t = 3000)]
    pub group_initial_rebalance_delay_ms: u64,

    /// group.min.session.timeout.ms
    #[arg(long, env = "KAAS_GROUP_MIN_SESSION_TIMEOUT_MS", default_value_t = 6000)]
    pub group_min_session_timeout_ms: i32,

    /// group.max.session.timeout.ms
    #[arg(long, env = "KAAS_GROUP_MAX_SESSION_TIMEOUT_MS", default_value_t = 1_800_000)]
    pub group_max_session_timeout_ms: i32,

    /// quota.window.size.seconds: how much of its quota a client may use at once (one
    /// window's worth) before it is throttled, and the longest a request-time throttle
    /// lasts (docs/quotas.md).
    #[arg(long, env = "KAAS_QUOTA_WINDOW_SIZE_SECONDS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub quota_window_size_seconds: u32,

    /// group.max.size: members (and members asked to rejoin with their new id) one
    /// consumer group may have; one more is answered GROUP_MAX_SIZE_REACHED.
    #[arg(long, env = "KAAS_GROUP_MAX_SIZE", default_value_t = i32::MAX as u32, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub group_max_size: u32,

    /// group.consumer.session.timeout.ms: how long a member of a consumer group
    /// (`group.protocol=consumer`, KIP-848) may go without a heartbeat before it is
    /// removed and its partitions go to the others.
    #[arg(long, env = "KAAS_GROUP_CONSUMER_SESSION_TIMEOUT_MS", default_value_t = 45_000, value_parser = clap::value_parser!(i32).range(1..))]
    pub group_consumer_session_timeout_ms: i32,

    /// group.consumer.heartbeat.interval.ms: how often members of a consumer group
    /// (KIP-848) are told to heartbeat.
    #[arg(long, env = "KAAS_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS", default_value_t = 5_000, value_parser = clap::value_parser!(i32).range(1..))]
    pub group_consumer_heartbeat_interval_ms: i32,

    /// group.consumer.max.size: members one consumer group (KIP-848) may have; one
    /// more is answered GROUP_MAX_SIZE_REACHED.
    #[arg(long, env = "KAAS_GROUP_CONSUMER_MAX_SIZE", default_value_t = i32::MAX as u32, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub group_consumer_max_size: u32,

    /// Memory for the protocol metadata group members join with and the assignments
    /// their leaders hand out, all groups together (kept for as long as each member
    /// stays, up to its session timeout). A join or a leader's SyncGroup past it is
    /// answered COORDINATOR_NOT_AVAILABLE (the client retries) until members leave.
    /// Not a Kafka setting.
    #[arg(long, env = "KAAS_GROUP_MEMBER_METADATA_MAX_BYTES", default_value_t = 128 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub group_member_metadata_max_bytes: u64,

    /// offsets.retention.minutes, in ms (KIP-211): a group's committed offsets expire
    /// once the group has had no members for this long and they were committed at
    /// least this long ago; a group left with nothing is removed
    /// (docs/consumer-groups.md#offsets-retention).
    #[arg(long, env = "KAAS_OFFSETS_RETENTION_MS", default_value_t = 7 * 24 * 3600 * 1000, value_parser = clap::value_parser!(i64).range(1..))]
    pub offsets_retention_ms: i64,

    /// offsets.retention.check.interval.ms: how often each broker expires the
    /// committed offsets of the groups it coordinates.
    #[arg(long, env = "KAAS_OFFSETS_RETENTION_CHECK_INTERVAL_MS", default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub offsets_retention_check_interval_ms: u64,

    /// How often the transaction timeout reaper sweeps the slots this broker owns.
    #[arg(long, env = "KAAS_TXN_REAPER_INTERVAL_MS", default_value_t = 10_000)]
    pub txn_reaper_interval_ms: u64,

    /// producer.id.expiration.ms: a partition forgets an idempotent producer idle this
    /// long (its dedupe window and epoch), so producer state stays bounded.
    #[arg(long, env = "KAAS_PRODUCER_ID_EXPIRATION_MS", default_value_t = 86_400_000)]
    pub producer_id_expiration_ms: i64,

    /// transactional.id.expiration.ms: the coordinator forgets a transactional id whose
    /// entry is Empty or Complete* and unchanged this long.
    #[arg(long, env = "KAAS_TRANSACTIONAL_ID_EXPIRATION_MS", default_value_t = 604_800_000)]
    pub transactional_id_expiration_ms: i64,

    /// How often a broker reconciles the open transactions of the partitions it leads
    /// with the coordinator slots (and ends the hanging ones). Also run at start.
    #[arg(long, env = "KAAS_TXN_RECONCILE_INTERVAL_MS", default_value_t = 30_000)]
    pub txn_reconcile_interval_ms: u64,

    /// How often the fence and marker watchers poll the volume.
    #[arg(long, env = "KAAS_VOLUME_POLL_INTERVAL_MS", default_value_t = 2_000)]
    pub volume_poll_interval_ms: u64,

    /// A broker whose lease is older than this is dead.
    #[arg(long, env = "KAAS_BROKER_SESSION_TIMEOUT_MS", default_value_t = 10_000)]
    pub broker_session_timeout_ms: i64,

    /// How long shutdown waits for in-flight requests before closing connections.
    #[arg(long, env = "KAAS_SHUTDOWN_TIMEOUT_MS", default_value_t = 10_000)]
    pub shutdown_timeout_ms: u64,

    /// Every setting's key (its long flag), effective value and origin, by id.
    #[arg(skip)]
    pub sources: std::collections::BTreeMap<String, Setting>,
}

/// Arguments about the configuration itself: not settings, not allowed in the file.
const SELF_ARGS: &[&str] = &["config", "print_config", "help", "version"];

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env(String),
    File(PathBuf),
    Default,
}

/// One setting as `--print-config` shows it.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The long flag, which is also the key in a config file.
    pub key: String,
    /// None when not set (an optional setting without a default).
    pub value: Option<String>,
    /// A number or boolean, written without quotes.
    pub bare: bool,
    pub origin: Origin,
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path} is not valid TOML: {detail}")]
    Syntax { path: PathBuf, detail: String },
    #[error(
        "config file {path}: unknown key `{key}`{hint} (keys are the long flags without `--`, see kaas-server --help)"
    )]
    UnknownKey { path: PathBuf, key: String, hint: String },
    #[error("config file {path}: key `{key}`: {detail}")]
    Value { path: PathBuf, key: String, detail: String },
}

/// The settings of a TOML config file: (arg id, long flag, value as a flag takes it).
/// Every key must be a setting's long flag; values are strings, numbers or booleans.
fn read_config_file(
    command: &clap::Command,
    path: &std::path::Path,
) -> Result<Vec<(String, String, String)>, ConfigError> {
    let text = read_config_bytes(path)
        .map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|e| ConfigError::Syntax {
                path: path.to_path_buf(),
                detail: format!("not UTF-8: {e}"),
            })
        })?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let at = e.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: ")
        });
        ConfigError::Syntax {
            path: path.to_path_buf(),
            detail: format!("{}{}", at.unwrap_or_default(), e.message()),
        }
    })?;
    let settings: Vec<(&str, &str)> = command
        .get_arguments()
        .filter(|a| !SELF_ARGS.contains(&a.get_id().as_str()))
        .filter_map(|a| Some((a.get_id().as_str(), a.get_long()?)))
        .collect();
    let mut out = Vec::new();
    for (key, value) in table {
        let Some(&(id, long)) = settings.iter().find(|(_, long)| *long == key) else {
            let closest = settings
                .iter()
                .map(|(_, long)| (strsim::jaro(long, &key), *long))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .filter(|(score, _)| *score > 0.8);
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                hint: closest
                    .map(|(_, l)| format!(" (did you mean `{l}`?)"))
                    .unwrap_or_default(),
                key,
            });
        };
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            // A list setting (`listener = ["PLAINTEXT://…", "SSL://…"]`): its flag takes
            // the values separated by its delimiter (`,`, or `;` for super-users); an
            // empty list leaves it unset.
            toml::Value::Array(items)
                if let Some(delimiter) = items
                    .iter()
                    .all(|v| v.is_str())
                    .then(|| {
                        command
                            .get_arguments()
                            .find(|a| a.get_id() == id)
                            .and_then(|a| a.get_value_delimiter())
                    })
                    .flatten() =>
            {
                if items.is_empty() {
                    continue;
                }
                items
                    .iter()
                    .filter_map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(&delimiter.to_string())
            }
            other => {
                return Err(ConfigError::Value {
                    path: path.to_path_buf(),
                    key,
                    detail: format!(
                        "expected a string, number or boolean (or a list of strings for a list setting), found {}",
                        other.type_str()
                    ),
                })
            }
        };
        out.push((id.to_string(), long.to_string(), value));
    }
    Ok(out)
}

/// The configuration reference of docs/operations.md, generated from the flags: each
/// setting's file key (its long flag), env variable, default and help.
pub fn reference_markdown() -> String {
    use clap::CommandFactory;
    let mut out = String::from("| Key (file) / flag | Environment | Default | What it does |\n|---|---|---|---|\n");
    let command = Config::command();
    for arg in command.get_arguments() {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else {
            continue;
        };
        if matches!(id, "help" | "version") {
            continue;
        }
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_else(|| "—".into());
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = if defaults.is_empty() {
            "not set".to_string()
        } else {
            format!("`{}`", defaults.join(","))
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|");
        let key = if SELF_ARGS.contains(&id) {
            let how = if arg.get_env().is_some() {
                "flag and env only"
            } else {
                "flag only"
            };
            format!("`--{long}` ({how})")
        } else {
            format!("`{long}`")
        };
        out.push_str(&format!("| {key} | {env} | {default} | {help} |\n"));
    }
    out
}

/// The config file's bytes. Unlike files on the volume, the path is the operator's
/// own choice, so symbolic links are followed (a Kubernetes ConfigMap mounts its keys
/// as links); it must be a regular file (never blocks on a FIFO) of at most 1 MiB.
fn read_config_bytes(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    kaas_core::fsutil::read_capped_from(&file, 1 << 20)
}

/// A value as TOML writes it: numbers and booleans bare, anything else a string.
fn toml_value(v: &str, bare: bool) -> String {
    // A number as the flag took it may not be TOML (`007`, `.5`, `NaN`): quoted then,
    // which a config file takes just as well (its strings go to the flag parser).
    if bare && format!("k = {v}").parse::<toml::Table>().is_ok() {
        v.to_string()
    } else {
        toml::Value::String(v.to_string()).to_string()
    }
}

/// Whether `arg`'s values are numbers or booleans (written bare in TOML); anything
/// else (paths, addresses, names, enums) is written as a string, even `007`.
fn bare_in_toml(arg: &clap::Arg) -> bool {
    use std::any::TypeId;
    let t = arg.get_value_parser().type_id();
    [
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<f64>(),
        TypeId::of::<bool>(),
    ]
    .iter()
    .any(|id| t == *id)
}

fn first_line(s: &str) -> String {
    s.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string()
}

impl Config {
    /// Parses the process's flags, environment and `--config` file, noting where each
    /// value came from; exits with clap's message on a bad flag or env value, `--help`
    /// and `--version`.
    pub fn parse_noting_sources() -> Result<Config, ConfigError> {
        Config::load_from(std::env::args_os())
    }

    /// [`Config::parse_noting_sources`] with these arguments (the first is the program).
    pub fn load_from<I, T>(args: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::parser::ValueSource;
        use clap::{CommandFactory, FromArgMatches};
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let command = Config::command();
        let first = command.clone().get_matches_from(args.iter().cloned());
        let file = match first.get_one::<PathBuf>("config") {
            Some(path) => Some((path.clone(), read_config_file(&command, path)?)),
            None => None,
        };
        // A file value goes in as a flag ahead of the real ones, unless a flag or the
        // environment sets it: flags > environment > file > defaults.
        let mut file_args = Vec::new();
        let mut from_file = std::collections::BTreeSet::new();
        if let Some((path, values)) = &file {
            for (id, long, value) in values {
                if matches!(
                    first.value_source(id),
                    Some(ValueSource::CommandLine | ValueSource::EnvVariable)
                ) {
                    continue;
                }
                let arg = std::ffi::OsString::from(format!("--{long}={value}"));
                // Checked alone first, so a bad value is reported as the file's.
                if let Err(e) = Config::command().try_get_matches_from([args[0].clone(), arg.clone()]) {
                    return Err(ConfigError::Value {
                        path: path.clone(),
                        key: long.clone(),
                        detail: first_line(&e.to_string()),
                    });
                }
                file_args.push(arg);
                from_file.insert(id.clone());
            }
        }
        let merged: Vec<std::ffi::OsString> = args[..1]
            .iter()
            .cloned()
            .chain(file_args)
            .chain(args[1..].iter().cloned())
            .collect();
        let matches = command.get_matches_from(merged);
        let mut config = Config::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        for arg in Config::command().get_arguments() {
            let id = arg.get_id().as_str();
            if SELF_ARGS.contains(&id) {
                continue;
            }
            let origin = match first.value_source(id) {
                _ if from_file.contains(id) => Origin::File(file.as_ref().map(|f| f.0.clone()).unwrap_or_default()),
                Some(ValueSource::CommandLine) => Origin::Flag,
                Some(ValueSource::EnvVariable) => Origin::Env(
                    arg.get_env()
                        .map(|e| e.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                ),
                _ => Origin::Default,
            };
            let raw = matches.get_raw(id).map(|values| {
                values
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(&arg.get_value_delimiter().unwrap_or(',').to_string())
            });
            config.sources.insert(
                id.to_string(),
                Setting {
                    key: arg.get_long().unwrap_or(id).to_string(),
                    value: raw,
                    bare: bare_in_toml(arg),
                    origin,
                },
            );
        }
        Ok(config)
    }

    /// The effective configuration as a TOML file (usable as `--config`), each line
    /// ending with where its value came from.
    pub fn render_effective(&self) -> String {
        let mut out = format!(
            "# kaas-server {}: the effective configuration. Each value's source is at the end of\n\
             # its line: flag, env KAAS_*, file <path> or default (flags > env > file > defaults).\n",
            env!("CARGO_PKG_VERSION")
        );
        for (id, setting) in &self.sources {
            // --listen means nothing beside --listener (and reading it back from the
            // file would then be an error): shown, commented out.
            if id == "listen" && !self.listeners.is_empty() {
                if let Some(v) = &setting.value {
                    out.push_str(&format!(
                        "# listen = {}  # not used: listener is set\n",
                        toml_value(v, setting.bare)
                    ));
                }
                continue;
            }
            let source = match &setting.origin {
                Origin::Flag => "flag".to_string(),
                Origin::Env(var) => format!("env {var}"),
                Origin::File(path) => format!("file {}", path.display()),
                Origin::Default => "default".to_string(),
            };
            match &setting.value {
                Some(v) => out.push_str(&format!(
                    "{} = {}  # {source}\n",
                    setting.key,
                    toml_value(v, setting.bare)
                )),
                None => out.push_str(&format!("# {} = (not set)  # {source}\n", setting.key)),
            }
        }
        out
    }

    /// Whether setting `id` (e.g. `segment_bytes`) was given by flag, environment or
    /// config file: DescribeConfigs reports those as STATIC_BROKER_CONFIG and the rest
    /// as DEFAULT_CONFIG. A Config parsed without [`Config::load_from`] has none.
    pub fn given(&self, id: &str) -> bool {
        self.sources.get(id).is_some_and(|s| s.origin != Origin::Default)
    }

    /// The broker-level log defaults the flags set, under Apache's broker config
    /// names, with whether each was given (else it is the built-in default).
    pub fn static_log_defaults(&self) -> Vec<(&'static str, String, bool)> {
        let given = |id: &str| self.given(id);
        vec![
            (
                "log.segment.bytes",
                self.segment_bytes.to_string(),
                given("segment_bytes"),
            ),
            ("log.roll.ms", self.segment_ms.to_string(), given("segment_ms")),
            ("log.retention.ms", self.retention_ms.to_string(), given("retention_ms")),
            (
                "log.retention.bytes",
                self.retention_bytes.to_string(),
                given("retention_bytes"),
            ),
            (
                "message.max.bytes",
                self.message_max_bytes.to_string(),
                given("message_max_bytes"),
            ),
        ]
    }

    /// The broker-wide defaults every topic's log config starts from.
    pub fn default_log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            segment_ms: self.segment_ms,
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            index_interval_bytes: 4096,
            max_message_bytes: self.message_max_bytes,
            ..LogConfig::default()
        }
    }

    /// The listeners to bind: `--listener`s, or PLAINTEXT on `--listen`.
    pub fn resolved_listeners(&self) -> Result<Vec<crate::listeners::ListenerSpec>, String> {
        crate::listeners::resolve(&self.listeners, self.listen, self.given("listen"))
    }
}

/// `--listener-max-connections`' NAME=N.
pub fn parse_listener_limit(s: &str) -> Result<(String, u32), String> {
    let (name, n) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=N, as in PLAINTEXT=1000"))?;
    let n: u32 = n
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{s:?}: the limit must be a whole number from 1"))?;
    Ok((parse_listener_name(name)?, n))
}

/// `--broker-id`: 0 or more. A negative id would be advertised as every partition's
/// leader, which clients read as "no leader" (Kafka's -1 means "assign one").
pub fn parse_broker_id(s: &str) -> Result<i32, String> {
    match s.trim().parse::<i32>() {
        Ok(id) if id >= 0 => Ok(id),
        Ok(id) => Err(format!(
            "broker ids are 0 or more, not {id}: kaas does not assign one (Kafka's broker.id=-1); give each broker of the cluster its own id, e.g. 0, 1, 2"
        )),
        Err(e) => Err(format!("{s:?} is not a broker id: {e}")),
    }
}

/// `--listener-sasl-enabled-mechanisms`' NAME=M,M.
pub fn parse_listener_mechanisms(s: &str) -> Result<(String, Vec<SaslMechanism>), String> {
    let (name, list) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=MECHANISM,MECHANISM, as in SASL_SSL=PLAIN,SCRAM-SHA-512"))?;
    let mechanisms = list
        .split(',')
        .map(|m| parse_mechanism(m.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    if mechanisms.is_empty() {
        return Err(format!("{s:?}: no mechanism"));
    }
    Ok((parse_listener_name(name)?, mechanisms))
}

/// `--listener-ssl-certificate`'s (and -key's, -ca's) NAME=PATH.
pub fn parse_listener_path(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, path)) if !path.is_empty() => Ok((parse_listener_name(name)?, PathBuf::from(path))),
        _ => Err(format!(
            "{s:?}: expected NAME=PATH, as in INTERNAL=/etc/kaas/internal.pem"
        )),
    }
}

/// `--listener-ssl-client-auth`'s NAME=none|requested|required.
pub fn parse_listener_client_auth(s: &str) -> Result<(String, ClientAuth), String> {
    let (name, mode) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=none|requested|required"))?;
    let mode = <ClientAuth as ValueEnum>::from_str(mode, true)
        .map_err(|_| format!("{s:?}: the mode is none, requested or required"))?;
    Ok((parse_listener_name(name)?, mode))
}

/// A listener's own setting among `overrides` (NAME=VALUE flags), if any.
pub fn for_listener<'a, T>(overrides: &'a [(String, T)], listener: &str) -> Option<&'a T> {
    overrides
        .iter()
        .rev()
        .find(|(name, _)| name == listener)
        .map(|(_, v)| v)
}

impl Config {
    /// The SASL mechanisms `listener` offers.
    pub fn sasl_mechanisms_for(&self, listener: &str) -> &[SaslMechanism] {
        for_listener(&self.listener_sasl_enabled_mechanisms, listener).map_or(&self.sasl_enabled_mechanisms, |m| m)
    }

    /// `listener`'s ssl.client.auth.
    pub fn ssl_client_auth_for(&self, listener: &str) -> ClientAuth {
        for_listener(&self.listener_ssl_client_auth, listener)
            .copied()
            .unwrap_or(self.ssl_client_auth)
    }
}

/// A listener name as `--listener` writes it: letters, digits, '_' or '-', upper-cased.
pub fn parse_listener_name(s: &str) -> Result<String, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        Ok(s.to_ascii_uppercase())
    } else {
        Err(format!("listener name {s:?} must be letters, digits, '_' or '-'"))
    }
}

/// A mechanism `--sasl-enabled-mechanisms` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(kaas_core::scram::Mechanism),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }
}

pub fn parse_mechanism(s: &str) -> Result<SaslMechanism, String> {
    if s.eq_ignore_ascii_case("PLAIN") {
        return Ok(SaslMechanism::Plain);
    }
    kaas_core::scram::Mechanism::from_name(s)
        .map(SaslMechanism::Scram)
        .ok_or_else(|| format!("unknown SASL mechanism {s:?} (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"))
}

mod principal_mapping;
pub use principal_mapping::PrincipalMapping;
#[cfg(test)]
mod tests;
