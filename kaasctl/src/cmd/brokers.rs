use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, Out, Time, Tone};
use kaas_core::broker::list_brokers;
use serde::Serialize;

#[derive(Serialize)]
pub struct BrokerRow {
    pub broker_id: Option<i32>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub alive: bool,
    pub lease_age_ms: Option<i64>,
    pub heartbeat: Option<Time>,
    pub started: Option<Time>,
    pub incarnation: Option<String>,
    pub error: Option<String>,
}

pub fn run(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let rows: Vec<BrokerRow> = list_brokers(&c.volume)?
        .into_iter()
        .map(|l| match l {
            Ok(l) => BrokerRow {
                broker_id: Some(l.broker_id),
                host: Some(l.host.clone()),
                port: Some(l.port),
                alive: l.is_alive(c.now_ms, c.session_timeout_ms),
                lease_age_ms: Some(c.now_ms - l.heartbeat_ms),
                heartbeat: Time::from_ms(l.heartbeat_ms),
                started: Time::from_ms(l.started_ms),
                incarnation: Some(l.incarnation),
                error: None,
            },
            Err(e) => BrokerRow {
                broker_id: None,
                host: None,
                port: None,
                alive: false,
                lease_age_ms: None,
                heartbeat: None,
                started: None,
                incarnation: None,
                error: Some(e.to_string()),
            },
        })
        .collect();
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.json {
        out.json(&rows);
    } else {
        let mut t = out.table(&["BROKER", "ADDRESS", "STATE", "LEASE AGE", "STARTED"]);
        for r in &rows {
            match &r.error {
                Some(e) => t.add_row(vec![out.cell("?", Tone::Bad), out.cell(e, Tone::Bad)]),
                None => t.add_row(vec![
                    out.cell(r.broker_id.unwrap_or(-1), Tone::Plain),
                    out.cell(
                        format!("{}:{}", r.host.as_deref().unwrap_or(""), r.port.unwrap_or(0)),
                        Tone::Plain,
                    ),
                    if r.alive {
                        out.cell("alive", Tone::Good)
                    } else {
                        out.cell("dead", Tone::Bad)
                    },
                    out.cell(age(r.lease_age_ms.unwrap_or(-1)), Tone::Plain),
                    out.cell(
                        r.started
                            .as_ref()
                            .map(|t| crate::out::when(t.epoch_ms))
                            .unwrap_or_default(),
                        Tone::Dim,
                    ),
                ]),
            };
        }
        println!("{t}");
    }
    Ok(Status::from_problems(problems))
}
