//! The command line, as clap parses it. The same definition generates the shell
//! completions and the man page in `completions/`.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "kaasctl",
    version,
    about = "Inspect, repair and force-abort kaas transactions straight off the shared volume",
    long_about = "kaasctl reads the kaas shared volume directly — no broker needs to run — to show the cluster's transactions, fences, marker queue, producer state and logs, and to repair or force-abort transactions safely while brokers run.\n\nExit codes: 0 ok, 1 error, 2 usage, 3 problems found (check-style commands and unreadable files)."
)]
pub struct Cli {
    /// The shared volume (the brokers' --data-dir).
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// Print JSON (stable field names, see docs/kaasctl.md) instead of tables: the same
    /// as --output json.
    #[arg(long, global = true, conflicts_with = "output")]
    pub json: bool,

    /// Output format: tables for people, JSON or YAML (the same fields) for scripts.
    #[arg(long, short = 'o', value_enum, global = true)]
    pub output: Option<OutputFormat>,

    /// Tables: whole rows on one line even on a terminal, and the extra columns some
    /// commands keep for this (like kubectl -o wide).
    #[arg(long, global = true)]
    pub wide: bool,

    /// Tables: only these columns (header names, comma-separated, any case), in the
    /// table's order; e.g. --columns 'transactional id,state'.
    #[arg(long, global = true, value_delimiter = ',')]
    pub columns: Vec<String>,

    /// When to colour tables (NO_COLOR in the environment means never).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    /// A broker whose lease is older than this is dead (the brokers' --broker-session-timeout-ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration, global = true)]
    pub session_timeout: Duration,

    /// Let mutating commands (txn abort, txn repair --fix, users and acls add/delete, aborts
    /// from top) run as a user other than the volume's owner. The files they write
    /// then belong to that user, and brokers running as the owner may be unable to
    /// read them.
    #[arg(long, global = true)]
    pub allow_other_user: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Brokers with their lease age and liveness.
    Brokers,
    /// Topics: partitions, id, config overrides, and for compacted topics each
    /// partition's dirty ratio and last cleaning.
    Topics,
    /// The log cleaner per partition of compacted topics: dirty ratio, how far
    /// cleaning reached, what the last pass removed, failures.
    Compaction {
        /// Only this topic.
        topic: Option<String>,
    },
    /// Consumer groups: committed offsets and lag per partition (real lag, lag blocked
    /// behind an open transaction, control records no consumer will see).
    Groups {
        /// Only this group.
        group: Option<String>,
    },
    /// Transactions.
    #[command(subcommand)]
    Txn(TxnCommand),
    /// Fence logs.
    #[command(subcommand)]
    Fence(FenceCommand),
    /// The marker queue.
    #[command(subcommand)]
    Markers(MarkersCommand),
    /// Producer state of partitions.
    #[command(subcommand)]
    Producers(ProducersCommand),
    /// Partition logs.
    #[command(subcommand)]
    Log(LogCommand),
    /// Last stable offsets.
    #[command(subcommand)]
    Lso(LsoCommand),
    /// The audit journal of mutating kaasctl commands.
    Audit,
    /// SASL/SCRAM users brokers check logins against (salted verifiers only).
    #[command(subcommand)]
    Users(UsersCommand),
    /// ACLs brokers enforce with --authorizer acls (Kafka's model: deny wins).
    #[command(subcommand)]
    Acls(AclsCommand),
    /// Client quotas brokers enforce: produce and fetch byte rates and request-time
    /// percentages per user and client id (Kafka's model; docs/quotas.md).
    #[command(subcommand)]
    Quotas(QuotasCommand),
    /// Check the volume and cluster from the outside: leases, clocks, slot files, disk
    /// space and inodes, stuck markers, hanging and overdue transactions, pinned LSOs.
    /// Prints a verdict and the next step for each finding; exit code 3 on a problem.
    Doctor {
        /// A marker entry, Prepare* transaction or pinned LSO older than this is stuck.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        stuck_after: Duration,
        /// A last stable offset held back longer than this by a transaction still
        /// within its timeout is a warning (read_committed consumers wait behind it).
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        lso_pinned_after: Duration,
        /// Free space or inodes below this percentage is a problem (below twice it, a warning).
        #[arg(long, default_value_t = 5.0)]
        min_free_percent: f64,
    },
    /// Transaction facts in Prometheus text format (for a textfile collector).
    Metrics,
    /// The live dashboard: transactions, markers, fences, partitions, groups.
    Top {
        /// Refresh period.
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        interval: Duration,
        /// Render one frame as plain text to stdout and exit (size from COLUMNS/LINES, default 120x40).
        #[arg(long)]
        once: bool,
        /// The view to start in.
        #[arg(long, value_enum, default_value_t = TopView::Overview)]
        view: TopView,
    },
    /// Shell completions for kaasctl.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The kaasctl man page (roff) on stdout.
    Man,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TopView {
    Overview,
    Transactions,
    Markers,
    Fences,
    Partitions,
    Groups,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxnSort {
    Id,
    Age,
    State,
    Pid,
    Slot,
}

#[derive(Debug, Subcommand)]
pub enum TxnCommand {
    /// Every transaction on the volume (kafka-transactions.sh list / rpk cluster txn list).
    List(TxnListArgs),
    /// Everything about one transaction: entry, partitions with leader and LSO, staged offsets, queued markers
    /// (also `describe`, kafka-transactions.sh's name).
    #[command(visible_alias = "describe")]
    Show { transactional_id: String },
    /// Force-abort an open transaction: PrepareAbort at epoch + 1, ABORT markers, staged offsets discarded, CompleteAbort.
    Abort(TxnAbortArgs),
    /// Check the whole volume; with --fix, repair what is inconsistent.
    Repair {
        /// Repair what was found (asks first unless --yes).
        #[arg(long)]
        fix: bool,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        /// How long to wait for brokers to write queued markers of a finished transaction.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        wait: Duration,
        /// A Prepare* transaction younger than this is left to its coordinator while
        /// any broker is live (its reaper finishes one within seconds).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        stuck_after: Duration,
        /// Rescue an unreadable slot even when that loses something in flight (its
        /// checkpoint does not parse, or a dropped journal line may have moved on a
        /// transaction that is Ongoing or Prepare*); refused otherwise.
        #[arg(long)]
        accept_slot_loss: bool,
    },
    /// Exact hanging-transaction detection: partitions' open transactions joined with the coordinator's slots.
    FindHanging,
    /// The recorded transition history of one transaction, with its fences and queued markers.
    Timeline { transactional_id: String },
}

#[derive(Debug, Args)]
pub struct TxnListArgs {
    /// Only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort); repeatable.
    #[arg(long, value_delimiter = ',')]
    pub state: Vec<String>,
    /// Only this slot (0..49).
    #[arg(long)]
    pub slot: Option<u32>,
    /// Only transactions coordinated by this broker.
    #[arg(long)]
    pub owner: Option<i32>,
    /// Only open transactions older than this (e.g. 5m, 1h30m).
    #[arg(long, value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Only transactional ids matching this glob (e.g. 'orders-*').
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// Sort order.
    #[arg(long, value_enum, default_value_t = TxnSort::Id)]
    pub sort: TxnSort,
}

#[derive(Debug, Args)]
pub struct TxnAbortArgs {
    pub transactional_id: String,
    /// Show the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// How long to wait for brokers to write queued markers before leaving completion to them.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub wait: Duration,
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Users and their SCRAM mechanisms with iteration counts.
    List,
    /// Add a user, or change its password: the password is asked for on the terminal
    /// (twice, without echo) or read from stdin's first line with --password-stdin.
    Add {
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both (the default). PLAIN logins
        /// are checked against these verifiers too.
        #[arg(long = "mechanism", value_parser = parse_mechanism)]
        mechanisms: Vec<kaas_core::scram::Mechanism>,
        /// PBKDF2 iterations (4096..=16384).
        #[arg(long, default_value_t = kaas_core::scram::DEFAULT_ITERATIONS)]
        iterations: u32,
        /// Read the password from the first line of stdin.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Delete a user's credentials (all mechanisms, or those named).
    Delete {
        user: String,
        #[arg(long = "mechanism", value_parser = parse_mechanism)]
        mechanisms: Vec<kaas_core::scram::Mechanism>,
    },
}

#[derive(Debug, Subcommand)]
pub enum QuotasCommand {
    /// Quotas, all or those of the entities matching the names given (a component not
    /// given may be anything).
    List {
        #[command(flatten)]
        entity: QuotaEntityArgs,
    },
    /// Set quotas on an entity: KEY=VALUE with producer_byte_rate and
    /// consumer_byte_rate in bytes per second, request_percentage in percent of one
    /// thread.
    Set {
        #[command(flatten)]
        entity: QuotaEntityArgs,
        #[arg(required = true, value_name = "KEY=VALUE")]
        values: Vec<String>,
    },
    /// Delete an entity's quotas: those named, or all.
    Delete {
        #[command(flatten)]
        entity: QuotaEntityArgs,
        #[arg(value_name = "KEY")]
        keys: Vec<String>,
    },
}

/// A quota entity: a user, a client id, or both; each a name or the default.
#[derive(Debug, Clone, clap::Args)]
pub struct QuotaEntityArgs {
    /// The user (the principal's name: alice for User:alice).
    #[arg(long, conflicts_with = "default_user")]
    pub user: Option<String>,
    /// The default for users without a quota of their own.
    #[arg(long)]
    pub default_user: bool,
    /// The client id.
    #[arg(long, conflicts_with = "default_client_id")]
    pub client_id: Option<String>,
    /// The default for client ids without a quota of their own.
    #[arg(long)]
    pub default_client_id: bool,
}

#[derive(Debug, Subcommand)]
pub enum AclsCommand {
    /// ACLs, all or those about one resource or principal.
    List {
        #[command(flatten)]
        resource: AclResourceArgs,
        /// How the resource name matches: any (ACLs with exactly this name), match
        /// (every ACL that applies to it: literal, '*' and prefixes), literal, prefixed.
        #[arg(long, value_enum, default_value_t = AclPatternFilter::Any)]
        resource_pattern_type: AclPatternFilter,
        /// Only ACLs naming this principal (User:alice).
        #[arg(long, value_parser = kaas_core::acl::parse_principal)]
        principal: Option<String>,
    },
    /// Add ACLs: each principal × host × operation on one resource, like kafka-acls
    /// --add (e.g. --allow-principal User:alice --operation write --topic orders).
    Add(AclSpec),
    /// Delete the ACLs the same flags as `add` describe.
    Delete(AclSpec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AclPatternFilter {
    Any,
    Match,
    Literal,
    Prefixed,
}

#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct AclResourceArgs {
    /// A topic ('*' for every topic).
    #[arg(long)]
    pub topic: Option<String>,
    /// A consumer group ('*' for every group).
    #[arg(long)]
    pub group: Option<String>,
    /// A transactional id ('*' for every id).
    #[arg(long)]
    pub transactional_id: Option<String>,
    /// The cluster (kafka-cluster).
    #[arg(long)]
    pub cluster: bool,
}

#[derive(Debug, Args)]
pub struct AclSpec {
    #[command(flatten)]
    pub resource: AclResourceArgs,
    /// The name is a prefix (PREFIXED), not a literal name.
    #[arg(long)]
    pub prefixed: bool,
    /// Principals allowed (User:alice, User:* for everyone); repeatable.
    #[arg(long = "allow-principal", value_parser = kaas_core::acl::parse_principal)]
    pub allow: Vec<String>,
    /// Principals denied; a DENY wins over any ALLOW. Repeatable.
    #[arg(long = "deny-principal", value_parser = kaas_core::acl::parse_principal)]
    pub deny: Vec<String>,
    /// Operations: all, read, write, create, delete, alter, describe, cluster-action,
    /// describe-configs, alter-configs, idempotent-write. Repeatable.
    #[arg(long = "operation", required = true, value_parser = parse_operation)]
    pub operations: Vec<kaas_core::acl::Operation>,
    /// Client addresses the ACL applies to ('*': any). Repeatable.
    #[arg(long = "host", default_value = "*")]
    pub hosts: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum FenceCommand {
    /// Per writer (broker or admin): producer id, fenced epoch, when recorded.
    Show {
        /// Only this producer id.
        #[arg(long)]
        pid: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum MarkersCommand {
    /// Queue depth and oldest entry age per target broker.
    List,
    /// Each queued entry: transaction, result, partitions.
    Show {
        /// Only the queue of this broker.
        broker: Option<i32>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProducersCommand {
    /// The partition's producer-state snapshot plus the log tail replayed after it.
    Show { topic: String, partition: i32 },
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Batches of a partition log: offsets, producer id/epoch/sequence, flags, control type.
    Dump {
        topic: String,
        partition: i32,
        /// First offset to show.
        #[arg(long, default_value_t = 0)]
        from: i64,
        /// At most this many batches.
        #[arg(long, default_value_t = 100)]
        count: usize,
        /// Also print each record's key and value (uncompressed batches).
        #[arg(long)]
        records: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum LsoCommand {
    /// Which producer and transaction pin a partition's last stable offset, and what to
    /// do; without PARTITION, every partition of the topic.
    Explain { topic: String, partition: Option<i32> },
    /// The partitions whose last stable offset an open transaction holds back, the
    /// longest first.
    List,
}

/// "5m", "1h30m", "250ms", or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration like 30s, 5m or 1h30m: {e}"))
}

/// Parses a mechanism name for `--mechanism`.
pub fn parse_mechanism(s: &str) -> Result<kaas_core::scram::Mechanism, String> {
    kaas_core::scram::Mechanism::from_name(s)
        .ok_or_else(|| format!("unknown mechanism {s:?} (SCRAM-SHA-256 or SCRAM-SHA-512)"))
}

/// Parses an operation for `--operation` (Kafka's names, any case, `-` or `_`).
pub fn parse_operation(s: &str) -> Result<kaas_core::acl::Operation, String> {
    use kaas_core::acl::Operation;
    Operation::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Operation::ALL.iter().map(|o| o.name()).collect();
        format!("unknown operation {s:?} (one of {})", names.join(", "))
    })
}
