//! `kaasctl`: inspect a kaas cluster straight off its shared volume, with or without
//! brokers running. Commands return data; printing (table or JSON) is a separate step.

use clap::{Parser, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use kaas_core::topic::list_topics;
use kaas_core::Volume;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kaasctl",
    version,
    about = "Inspect a kaas cluster straight off its shared volume"
)]
struct Cli {
    /// The shared volume (the brokers' --data-dir).
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data", global = true)]
    data_dir: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Topics on the volume: name, id, partitions, config overrides.
    Topics,
}

#[derive(Serialize)]
struct TopicRow {
    name: String,
    topic_id: Option<String>,
    partitions: Option<i32>,
    configs: std::collections::BTreeMap<String, String>,
    /// Set when the topic file could not be read; the other fields are then empty.
    error: Option<String>,
}

fn topics(volume: &Volume) -> anyhow::Result<Vec<TopicRow>> {
    Ok(list_topics(volume)?
        .into_iter()
        .map(|r| match r {
            Ok(t) => TopicRow {
                name: t.name,
                topic_id: Some(t.topic_id.to_string()),
                partitions: Some(t.partitions),
                configs: t.configs,
                error: None,
            },
            Err(e) => TopicRow {
                name: String::new(),
                topic_id: None,
                partitions: None,
                configs: Default::default(),
                error: Some(e.to_string()),
            },
        })
        .collect())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let volume = Volume::new(&cli.data_dir);
    if !cli.data_dir.is_dir() {
        eprintln!(
            "kaasctl: data directory {} does not exist",
            cli.data_dir.display()
        );
        return ExitCode::from(1);
    }
    match cli.command {
        Command::Topics => match topics(&volume) {
            Ok(rows) => {
                if cli.json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&rows).expect("rows serialise")
                    );
                } else {
                    let mut table = Table::new();
                    table.load_preset(UTF8_FULL_CONDENSED).set_header([
                        "TOPIC",
                        "PARTITIONS",
                        "TOPIC ID",
                        "CONFIGS",
                    ]);
                    for r in &rows {
                        match &r.error {
                            Some(e) => table.add_row([
                                format!("(unreadable) {e}"),
                                String::new(),
                                String::new(),
                                String::new(),
                            ]),
                            None => table.add_row([
                                r.name.clone(),
                                r.partitions.map(|p| p.to_string()).unwrap_or_default(),
                                r.topic_id.clone().unwrap_or_default(),
                                r.configs
                                    .iter()
                                    .map(|(k, v)| format!("{k}={v}"))
                                    .collect::<Vec<_>>()
                                    .join(","),
                            ]),
                        };
                    }
                    println!("{table}");
                }
                if rows.iter().any(|r| r.error.is_some()) {
                    ExitCode::from(3)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(e) => {
                eprintln!("kaasctl: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}
