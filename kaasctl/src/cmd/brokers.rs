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
    /// alive | opening | joining | stale | stepped_down | dead | stopped
    /// ([`kaas_core::broker::Liveness`]): stale once its heartbeat is half a session
    /// timeout old (still counted live); joining while it serves but waits for its
    /// peers to route its share of slots and groups to it (listed under it, served by
    /// nobody meanwhile).
    pub state: Option<kaas_core::broker::Liveness>,
    /// It stopped cleanly (its lease says so).
    pub stopped: bool,
    /// It is running but stepped down: it could not renew its lease within half the
    /// session timeout, let its partitions go and coordinates nothing (its lease
    /// says so until a renewal in time).
    pub stepped_down: bool,
    pub lease_age_ms: Option<i64>,
    pub heartbeat: Option<Time>,
    pub started: Option<Time>,
    pub incarnation: Option<String>,
    /// Partitions whose `owner.json` names this broker as their current (not
    /// released) leader.
    pub leads: Vec<String>,
    /// Transaction slots and consumer groups it coordinates: their rendezvous owner
    /// over the brokers alive by lease age (empty for a dead broker).
    pub txn_slots: Vec<u32>,
    pub groups: Vec<String>,
    pub error: Option<String>,
}

/// What each broker owns: partitions by `owner.json`, slots and groups by rendezvous
/// hashing over the live brokers (as the brokers compute it).
struct Ownership {
    leads: std::collections::BTreeMap<i32, Vec<String>>,
    slots: std::collections::BTreeMap<i32, Vec<u32>>,
    groups: std::collections::BTreeMap<i32, Vec<String>>,
}

fn ownership(c: &Cluster) -> anyhow::Result<Ownership> {
    use kaas_core::ownership::{group_key, owner, txn_slot_key};
    use kaas_core::topic::{list_topics, PartitionOwner};
    // A broker still opening the volume coordinates nothing yet.
    let live = &c.serving;
    let mut o = Ownership {
        leads: Default::default(),
        slots: Default::default(),
        groups: Default::default(),
    };
    for t in list_topics(&c.volume)?.into_iter().flatten() {
        for p in 0..t.partitions {
            if let Ok(owner) = PartitionOwner::read(&PartitionOwner::path(&c.volume, &t.name, p)) {
                // An `owner.json` left by a deleted topic of the same name (its
                // leader not yet gone from it) names no leader of this topic, as the
                // brokers read it.
                if !owner.released && owner.topic_id.is_none_or(|id| id == t.topic_id) {
                    o.leads.entry(owner.broker).or_default().push(format!("{}-{p}", t.name));
                }
            }
        }
    }
    for slot in 0..kaas_core::txn_store::SLOTS {
        if let Some(b) = owner(&txn_slot_key(slot), live) {
            o.slots.entry(b).or_default().push(slot);
        }
    }
    for g in kaas_core::offsets::list_groups(&c.volume)? {
        if let Some(b) = owner(&group_key(&g), live) {
            o.groups.entry(b).or_default().push(g);
        }
    }
    Ok(o)
}

pub fn run(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let mut owned = ownership(c)?;
    let rows: Vec<BrokerRow> = list_brokers(&c.volume)?
        .into_iter()
        .map(|l| match l {
            Ok(l) => BrokerRow {
                leads: owned.leads.remove(&l.broker_id).unwrap_or_default(),
                txn_slots: owned.slots.remove(&l.broker_id).unwrap_or_default(),
                groups: owned.groups.remove(&l.broker_id).unwrap_or_default(),
                broker_id: Some(l.broker_id),
                host: Some(l.host.clone()),
                port: Some(l.port),
                alive: l.is_alive(c.now_ms, c.session_timeout_ms),
                state: Some(l.liveness(c.now_ms, c.session_timeout_ms)),
                stopped: l.stopped_ms.is_some(),
                stepped_down: l.is_stepped_down(c.now_ms, c.session_timeout_ms),
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
                state: None,
                stopped: false,
                stepped_down: false,
                lease_age_ms: None,
                heartbeat: None,
                started: None,
                incarnation: None,
                leads: Vec::new(),
                txn_slots: Vec::new(),
                groups: Vec::new(),
                error: Some(e.to_string()),
            },
        })
        .collect();
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&[
            "BROKER",
            "ADDRESS",
            "STATE",
            "LEASE AGE",
            "STARTED",
            "LEADS",
            "TXN SLOTS",
            "GROUPS",
            "~HEARTBEAT",
            "~INCARNATION",
        ]);
        for r in &rows {
            match &r.error {
                Some(e) => t.add_row(vec![out.cell("?", Tone::Bad), out.text(e, Tone::Bad)]),
                None => t.add_row(vec![
                    out.cell(r.broker_id.unwrap_or(-1), Tone::Plain),
                    out.cell(
                        format!("{}:{}", r.host.as_deref().unwrap_or(""), r.port.unwrap_or(0)),
                        Tone::Plain,
                    ),
                    {
                        use kaas_core::broker::Liveness;
                        let state = r.state.unwrap_or(Liveness::Dead);
                        let tone = match state {
                            Liveness::Alive => Tone::Good,
                            Liveness::Stopped => Tone::Dim,
                            Liveness::Opening | Liveness::Joining | Liveness::Stale | Liveness::SteppedDown => {
                                Tone::Warn
                            }
                            Liveness::Dead => Tone::Bad,
                        };
                        out.cell(state.as_str(), tone)
                    },
                    out.cell(age(r.lease_age_ms.unwrap_or(-1)), Tone::Plain),
                    out.cell(
                        r.started
                            .as_ref()
                            .map(|t| crate::out::when(t.epoch_ms))
                            .unwrap_or_default(),
                        Tone::Dim,
                    ),
                    out.cell(r.leads.len(), Tone::Plain),
                    out.cell(r.txn_slots.len(), Tone::Plain),
                    out.cell(r.groups.len(), Tone::Plain),
                    out.cell(
                        r.heartbeat.as_ref().map(|t| t.rfc3339.clone()).unwrap_or_default(),
                        Tone::Dim,
                    ),
                    out.cell(r.incarnation.as_deref().unwrap_or(""), Tone::Dim),
                ]),
            };
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}
