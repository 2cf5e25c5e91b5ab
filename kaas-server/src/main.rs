//! `kaas-server`: parse flags, set up logging, run until SIGTERM/SIGINT.

use kaas_server::config::{Config, LogFormat};
use std::io::IsTerminal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static GLOBAL: kaas_server::alloc::GuardedAlloc = kaas_server::alloc::GuardedAlloc;

fn main() -> std::process::ExitCode {
    // Everything the broker creates on the volume is its own: directories 0700, files
    // 0600 (docs/operations.md#the-volume-belongs-to-the-brokers-user). Set before any
    // thread starts, so every file and directory is created under it.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let config = match Config::parse_noting_sources() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kaas-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if config.print_config {
        print!("{}", config.render_effective());
        return std::process::ExitCode::SUCCESS;
    }
    let log_format = config.log_format;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match config.log_format {
        LogFormat::Human => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kaas-server: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let (tx, rx) = watch::channel(false);
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            }
            let _ = tx.send(true);
        });
        kaas_server::runtime::run(config, rx).await
    });
    let code = match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // Once: as a plain line for a person reading a terminal (the human log
            // format writes to the same stderr), as a log record for a collector.
            match log_format {
                LogFormat::Human => eprintln!("kaas-server: {}", kaas_core::error::one_line(e.as_ref())),
                LogFormat::Json => tracing::error!("{}", kaas_core::error::one_line(e.as_ref())),
            }
            std::process::ExitCode::FAILURE
        }
    };
    // After the error is told, not after a straggler's grace.
    kaas_server::runtime::wind_down(runtime, kaas_server::runtime::EXIT_GRACE);
    code
}
