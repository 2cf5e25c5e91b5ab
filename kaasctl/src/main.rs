//! `kaasctl`: inspect, repair and force-abort kaas transactions straight off the
//! shared volume, with or without brokers running. Parsing is in `cli`, reading in
//! `cluster` and kaas-core, one module per command in `cmd`, printing in `out`.

/// `println!` for kaasctl's output: through [`out::emit`], so a reader that closes
/// early (`kaasctl … | head`) ends kaasctl quietly instead of a panic.
macro_rules! outln {
    () => {
        $crate::out::emit(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::emit(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`out::emit`].
macro_rules! outp {
    ($($arg:tt)*) => {
        $crate::out::emit(format_args!($($arg)*))
    };
}

mod cli;
mod cluster;
mod cmd;
mod out;
mod top;

use clap::{CommandFactory, Parser};
use cli::{
    AclsCommand, Cli, Command, FenceCommand, LogCommand, LsoCommand, MarkersCommand, ProducersCommand, QuotasCommand,
    TxnCommand, UsersCommand,
};
use cmd::Status;
use std::process::ExitCode;

/// Exit codes (docs/kaasctl.md): 0 ok, 1 error, 2 usage (clap), 3 problems found.
const EXIT_ERROR: u8 = 1;
const EXIT_PROBLEMS: u8 = 3;

fn main() -> ExitCode {
    // What kaasctl writes on the volume (audit entries, queue entries, slot files)
    // is readable by its owner only, as the brokers' files are.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = Cli::parse();
    match run(cli) {
        Ok(Status::Ok) => ExitCode::SUCCESS,
        Ok(Status::Problems) => ExitCode::from(EXIT_PROBLEMS),
        Err(e) => {
            eprintln!("kaasctl: {}", out::safe(&kaas_core::error::one_line(e.as_ref())));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<Status> {
    // Commands that do not read the volume.
    match &cli.command {
        Command::Completions { shell } => {
            let mut text = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "kaasctl", &mut text);
            outp!("{}", String::from_utf8_lossy(&text));
            return Ok(Status::Ok);
        }
        Command::Man => {
            let mut text = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut text)?;
            outp!("{}", String::from_utf8_lossy(&text));
            return Ok(Status::Ok);
        }
        _ => {}
    }
    // As root, act as the volume's owner before anything on the volume is touched. The
    // dashboard would wait for a missing volume as root: it may not.
    if matches!(cli.command, Command::Top { .. })
        && rustix::process::geteuid().is_root()
        && std::fs::symlink_metadata(&cli.data_dir).is_err()
    {
        anyhow::bail!(
            "the data directory {} does not exist: run as root, kaasctl top needs it to know whose volume it is (it acts as that user); start it once the volume is there",
            cli.data_dir.display()
        );
    }
    cluster::act_as_volume_owner(&cli.data_dir)?;
    // One frame of nothing would read as an idle cluster: `top --once` (a script's
    // look) learns the volume is not there; the live dashboard waits for it. Checked
    // as the volume's owner (root-squashed NFS refuses root).
    if let Command::Top { once: true, .. } = cli.command {
        cluster::check_is_volume(&cli.data_dir, false)?;
    }
    // The dashboard copes with a missing data directory itself (it says so and waits).
    if let Command::Top { interval, once, view } = cli.command {
        return top::run(top::TopOptions {
            data_dir: cli.data_dir,
            interval,
            session_timeout_ms: cli.session_timeout.as_millis() as i64,
            once,
            view,
            allow_other_user: cli.allow_other_user,
        });
    }
    // Users, ACLs and quotas may be set before the first broker starts (a volume's
    // bootstrap): those alone may begin a volume in an empty directory.
    let bootstraps = matches!(
        cli.command,
        Command::Users(UsersCommand::Add { .. })
            | Command::Acls(AclsCommand::Add(_))
            | Command::Quotas(QuotasCommand::Set { .. })
    );
    cluster::check_is_volume(&cli.data_dir, bootstraps)?;
    let format = match (cli.json, cli.output) {
        (true, _) => cli::OutputFormat::Json,
        (false, Some(f)) => f,
        (false, None) => cli::OutputFormat::Table,
    };
    let out = out::Out::new(format, cli.color, cli.wide, &cli.columns);
    // Mutating commands write files the brokers must read: only as the volume's owner.
    let mutating = match &cli.command {
        Command::Txn(TxnCommand::Abort(a)) => !a.dry_run,
        Command::Txn(TxnCommand::Repair { fix, .. }) => *fix,
        Command::Users(UsersCommand::Add { .. } | UsersCommand::Delete { .. }) => true,
        Command::Acls(AclsCommand::Add(_) | AclsCommand::Delete(_)) => true,
        Command::Quotas(QuotasCommand::Set { .. } | QuotasCommand::Delete { .. }) => true,
        _ => false,
    };
    if mutating {
        cluster::check_volume_owner(&cli.data_dir, cli.allow_other_user)?;
    }
    let c = cluster::Cluster::open(
        kaas_core::Volume::new(&cli.data_dir),
        cli.session_timeout.as_millis() as i64,
    )?;
    let status = match cli.command {
        Command::Brokers => cmd::brokers::run(&c, &out),
        Command::Topics => cmd::topics::run(&c, &out),
        Command::Compaction { topic } => cmd::compaction::run(&c, &out, topic.as_deref()),
        Command::Groups { group } => cmd::groups::run(&c, &out, group.as_deref()),
        Command::Txn(TxnCommand::List(args)) => cmd::txn::list(&c, &out, &args),
        Command::Txn(TxnCommand::Show { transactional_id }) => cmd::txn::show(&c, &out, &transactional_id),
        Command::Txn(TxnCommand::Abort(args)) => cmd::txn::abort(&c, &out, &args),
        Command::Txn(TxnCommand::Repair {
            fix,
            yes,
            wait,
            stuck_after,
            accept_slot_loss,
        }) => cmd::txn::repair(&c, &out, fix, yes, wait, stuck_after, accept_slot_loss),
        Command::Txn(TxnCommand::FindHanging) => cmd::txn::find_hanging(&c, &out),
        Command::Txn(TxnCommand::Timeline { transactional_id }) => cmd::txn::timeline(&c, &out, &transactional_id),
        Command::Fence(FenceCommand::Show { pid }) => cmd::fence::run(&c, &out, pid),
        Command::Markers(MarkersCommand::List) => cmd::markers::list(&c, &out),
        Command::Markers(MarkersCommand::Show { broker }) => cmd::markers::show(&c, &out, broker),
        Command::Producers(ProducersCommand::Show { topic, partition }) => {
            cmd::producers::run(&c, &out, &topic, partition)
        }
        Command::Log(LogCommand::Dump {
            topic,
            partition,
            from,
            count,
            records,
        }) => cmd::log::run(&c, &out, &topic, partition, from, count, records),
        Command::Lso(LsoCommand::Explain { topic, partition }) => cmd::lso::run(&c, &out, &topic, partition),
        Command::Lso(LsoCommand::List) => cmd::lso::list(&c, &out),
        Command::Audit => cmd::audit::run(&c, &out),
        Command::Users(UsersCommand::List) => cmd::users::list(&c, &out),
        Command::Users(UsersCommand::Add {
            user,
            mechanisms,
            iterations,
            password_stdin,
        }) => cmd::users::add(&c, &user, &mechanisms, iterations, password_stdin),
        Command::Users(UsersCommand::Delete { user, mechanisms }) => cmd::users::delete(&c, &user, &mechanisms),
        Command::Acls(AclsCommand::List {
            resource,
            resource_pattern_type,
            principal,
        }) => cmd::acls::list(&c, &out, &resource, resource_pattern_type, principal.as_deref()),
        Command::Acls(AclsCommand::Add(spec)) => cmd::acls::add(&c, &spec),
        Command::Quotas(QuotasCommand::List { entity }) => cmd::quotas::list(&c, &out, &entity),
        Command::Quotas(QuotasCommand::Set { entity, values }) => cmd::quotas::set(&c, &entity, &values),
        Command::Quotas(QuotasCommand::Delete { entity, keys }) => cmd::quotas::delete(&c, &entity, &keys),
        Command::Acls(AclsCommand::Delete(spec)) => cmd::acls::delete(&c, &spec),
        Command::Doctor {
            stuck_after,
            lso_pinned_after,
            min_free_percent,
        } => cmd::doctor::run(
            &c,
            &out,
            &cmd::doctor::Limits {
                stuck_after,
                lso_pinned_after,
                min_free_percent,
            },
        ),
        Command::Metrics => cmd::metrics::run(&c),
        Command::Completions { .. } | Command::Man | Command::Top { .. } => unreachable!("handled above"),
    }?;
    // Said after the command ran (its tables name its columns), so only a warning: the
    // exit status stays the command's own (an abort that ran must not look failed).
    if let Err(unknown) = out.check_columns() {
        eprintln!("kaasctl: warning: {}", out::safe(&unknown));
    }
    Ok(status)
}
