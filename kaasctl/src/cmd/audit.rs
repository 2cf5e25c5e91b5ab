use super::Status;
use crate::cluster::Cluster;
use crate::out::{when, Out, Time, Tone};
use kaas_core::admin::list_audit;
use kaas_core::txn::Actor;
use serde::Serialize;

#[derive(Serialize)]
pub struct AuditRow {
    pub at: Option<Time>,
    pub user: Option<String>,
    pub tool: Option<String>,
    pub command: Vec<String>,
    /// The volume acted on (absolute), whatever named it.
    pub data_dir: Option<String>,
    pub target: Option<String>,
    pub state_before: Option<&'static str>,
    pub state_after: Option<&'static str>,
    pub epoch_before: Option<i16>,
    pub epoch_after: Option<i16>,
    pub path: String,
    pub error: Option<String>,
}

pub fn run(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let rows: Vec<AuditRow> = list_audit(&c.volume)?
        .into_iter()
        .map(|(path, r)| match r {
            Ok(r) => {
                let (tool, user) = match &r.actor {
                    Actor::Admin { tool, user } => (Some(tool.clone()), Some(user.clone())),
                    Actor::Broker { id } => (Some(format!("broker {id}")), None),
                };
                AuditRow {
                    at: Time::from_ms(r.at_ms),
                    user,
                    tool,
                    command: r.command,
                    data_dir: r.data_dir,
                    target: Some(r.target),
                    state_before: r.before.as_ref().map(|e| e.state.as_str()),
                    state_after: r.after.as_ref().map(|e| e.state.as_str()),
                    epoch_before: r.before.as_ref().map(|e| e.producer_epoch),
                    epoch_after: r.after.as_ref().map(|e| e.producer_epoch),
                    path: path.display().to_string(),
                    error: None,
                }
            }
            Err(e) => AuditRow {
                at: None,
                user: None,
                tool: None,
                command: Vec::new(),
                data_dir: None,
                target: None,
                state_before: None,
                state_after: None,
                epoch_before: None,
                epoch_after: None,
                path: path.display().to_string(),
                error: Some(e.to_string()),
            },
        })
        .collect();
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&["TIME", "WHO", "TARGET", "CHANGE", "COMMAND"]);
        for r in &rows {
            t.add_row(vec![
                out.cell(r.at.as_ref().map(|t| when(t.epoch_ms)).unwrap_or_default(), Tone::Dim),
                out.cell(r.user.as_deref().unwrap_or("-"), Tone::Plain),
                out.cell(r.target.as_deref().unwrap_or("-"), Tone::Plain),
                out.text(
                    match (r.state_before, r.state_after) {
                        (Some(a), Some(b)) => format!("{a} -> {b}"),
                        _ => r.error.clone().unwrap_or_default(),
                    },
                    if r.error.is_some() { Tone::Bad } else { Tone::Plain },
                ),
                out.text(
                    r.command.iter().skip(1).cloned().collect::<Vec<_>>().join(" "),
                    Tone::Dim,
                ),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}
