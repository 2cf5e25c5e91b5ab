//! `kaasctl metrics`: Prometheus text exposition format, for node-exporter's textfile
//! collector or a cron job. Names are documented in docs/kaasctl.md.

use super::Status;
use crate::cli::{TxnListArgs, TxnSort};
use crate::cluster::Cluster;
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn render(c: &Cluster) -> anyhow::Result<String> {
    let all = super::txn::collect(
        c,
        &TxnListArgs {
            state: Vec::new(),
            slot: None,
            owner: None,
            older_than: None,
            transactional_id: None,
            sort: TxnSort::Id,
        },
    )?;
    let mut by_state: BTreeMap<&str, usize> = kaas_core::txn::TxnState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    for t in &all.transactions {
        *by_state.entry(t.state).or_default() += 1;
    }
    let oldest = all.transactions.iter().filter_map(|t| t.open_age_ms).max().unwrap_or(0);
    let overdue = all.transactions.iter().filter(|t| t.overdue).count();
    let queues = super::markers::queues(c)?;
    let findings = super::txn::check(c)?;
    let hanging = findings.iter().filter(|f| f.kind == "hanging_transaction").count();
    let unverifiable = findings
        .iter()
        .filter(|f| f.kind == "unverifiable_open_transaction")
        .count();
    let unreadable = findings.iter().filter(|f| f.kind.starts_with("unreadable")).count();
    let mut s = String::new();
    writeln!(
        s,
        "# HELP kaas_transactions Transactions on the volume by coordinator state."
    )?;
    writeln!(s, "# TYPE kaas_transactions gauge")?;
    for (state, n) in &by_state {
        writeln!(s, "kaas_transactions{{state=\"{state}\"}} {n}")?;
    }
    writeln!(
        s,
        "# HELP kaas_transaction_oldest_open_seconds Age of the oldest open transaction."
    )?;
    writeln!(s, "# TYPE kaas_transaction_oldest_open_seconds gauge")?;
    writeln!(s, "kaas_transaction_oldest_open_seconds {:.3}", oldest as f64 / 1000.0)?;
    writeln!(
        s,
        "# HELP kaas_transactions_overdue Ongoing transactions past their timeout."
    )?;
    writeln!(s, "# TYPE kaas_transactions_overdue gauge")?;
    writeln!(s, "kaas_transactions_overdue {overdue}")?;
    writeln!(
        s,
        "# HELP kaas_marker_queue_depth Queued marker entries per target broker."
    )?;
    writeln!(s, "# TYPE kaas_marker_queue_depth gauge")?;
    for q in &queues {
        writeln!(s, "kaas_marker_queue_depth{{broker=\"{}\"}} {}", q.broker, q.depth)?;
    }
    writeln!(
        s,
        "# HELP kaas_marker_queue_oldest_seconds Age of the oldest queued marker entry per target broker."
    )?;
    writeln!(s, "# TYPE kaas_marker_queue_oldest_seconds gauge")?;
    for q in &queues {
        writeln!(
            s,
            "kaas_marker_queue_oldest_seconds{{broker=\"{}\"}} {:.3}",
            q.broker,
            q.oldest_age_ms.unwrap_or(0) as f64 / 1000.0
        )?;
    }
    writeln!(
        s,
        "# HELP kaas_hanging_transactions Partitions' open transactions their coordinator does not know as open."
    )?;
    writeln!(s, "# TYPE kaas_hanging_transactions gauge")?;
    writeln!(s, "kaas_hanging_transactions {hanging}")?;
    writeln!(
        s,
        "# HELP kaas_unverifiable_open_transactions Partitions' open transactions not judged because a slot is unreadable (or the partition could not be read again)."
    )?;
    writeln!(s, "# TYPE kaas_unverifiable_open_transactions gauge")?;
    writeln!(s, "kaas_unverifiable_open_transactions {unverifiable}")?;
    writeln!(s, "# HELP kaas_unreadable_files Volume files kaasctl could not read.")?;
    writeln!(s, "# TYPE kaas_unreadable_files gauge")?;
    writeln!(s, "kaas_unreadable_files {unreadable}")?;
    Ok(s)
}

pub fn run(c: &Cluster) -> anyhow::Result<Status> {
    outp!("{}", render(c)?);
    Ok(Status::Ok)
}
