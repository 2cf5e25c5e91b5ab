use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, Out, Time, Tone};
use kaas_core::fence_log::{list_deliveries, list_fence_logs, ADMIN_WRITER};
use kaas_core::inspect::segment_files;
use kaas_core::partition::ProducerStateSnapshot;
use kaas_core::topic::{list_topics, PartitionOwner};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub struct FenceRow {
    /// Broker id, or "admin" for kaasctl's log.
    pub writer: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub transactional_id: Option<String>,
    pub recorded: Option<Time>,
    pub age_ms: i64,
    /// Per owning broker: how many of the partitions that know this producer already
    /// hold the fenced epoch in their producer-state snapshot, out of how many. Only
    /// what snapshots show: a broker may have applied it in memory since.
    pub applied: BTreeMap<String, (usize, usize)>,
    /// Per broker whose fence watcher applied this bump (or a later one for the same
    /// producer): when, and how long after it was recorded (the two hosts' clocks).
    pub reached: BTreeMap<String, Reach>,
    /// Live brokers other than the writer whose watcher has not recorded it (yet).
    pub not_reached: Vec<i32>,
}

#[derive(Serialize)]
pub struct Reach {
    pub applied: Option<Time>,
    pub delay_ms: i64,
}

#[derive(Serialize)]
pub struct FenceShow {
    pub fences: Vec<FenceRow>,
    pub unreadable: Vec<String>,
}

pub fn run(c: &Cluster, out: &Out, pid: Option<i64>) -> anyhow::Result<Status> {
    // Every partition's snapshot: producer id -> (owner, epoch).
    let mut known: BTreeMap<i64, Vec<(Option<i32>, i16)>> = BTreeMap::new();
    for t in list_topics(&c.volume)?.into_iter().flatten() {
        for p in 0..t.partitions {
            let dir = c.volume.partition_dir(&t.name, p);
            if segment_files(&dir).is_err() {
                continue;
            }
            let owner = PartitionOwner::read(&PartitionOwner::path(&c.volume, &t.name, p))
                .ok()
                .map(|o| o.broker);
            if let Ok(Some(s)) = ProducerStateSnapshot::read(&dir) {
                for e in s.producers {
                    known.entry(e.producer_id).or_default().push((owner, e.epoch));
                }
            }
        }
    }
    let mut fences = Vec::new();
    let mut unreadable = Vec::new();
    let mut deliveries = Vec::new();
    for (broker, d) in list_deliveries(&c.volume)? {
        match d {
            Ok(d) => deliveries.push((broker, d)),
            Err(e) => unreadable.push(e.to_string()),
        }
    }
    let live = kaas_core::admin::live_brokers(&c.volume, c.now_ms, c.session_timeout_ms)?;
    for (writer, log) in list_fence_logs(&c.volume)? {
        let log = match log {
            Ok(l) => l,
            Err(e) => {
                unreadable.push(e.to_string());
                continue;
            }
        };
        for (p, r) in log.fences {
            if pid.is_some_and(|want| want != p) {
                continue;
            }
            let mut applied: BTreeMap<String, (usize, usize)> = BTreeMap::new();
            for (owner, epoch) in known.get(&p).into_iter().flatten() {
                let slot = applied
                    .entry(owner.map(|o| o.to_string()).unwrap_or_else(|| "unowned".into()))
                    .or_default();
                slot.1 += 1;
                if *epoch >= r.epoch {
                    slot.0 += 1;
                }
            }
            let mut reached = BTreeMap::new();
            for (broker, d) in &deliveries {
                if let Some(got) = d.applied.get(&p).filter(|got| got.epoch >= r.epoch) {
                    reached.insert(
                        broker.to_string(),
                        Reach {
                            applied: Time::from_ms(got.applied_ms),
                            delay_ms: got.applied_ms - r.recorded_ms,
                        },
                    );
                }
            }
            let not_reached = live
                .iter()
                .copied()
                .filter(|b| *b != writer && !reached.contains_key(&b.to_string()))
                .collect();
            fences.push(FenceRow {
                writer: if writer == ADMIN_WRITER {
                    "admin".into()
                } else {
                    writer.to_string()
                },
                producer_id: p,
                epoch: r.epoch,
                transactional_id: r.transactional_id,
                recorded: Time::from_ms(r.recorded_ms),
                age_ms: c.now_ms - r.recorded_ms,
                applied,
                reached,
                not_reached,
            });
        }
    }
    let problems = !unreadable.is_empty();
    let show = FenceShow { fences, unreadable };
    if out.structured() {
        out.json(&show);
    } else {
        let mut t = out.table(&[
            "FROM",
            "PRODUCER",
            "EPOCH",
            "TRANSACTIONAL ID",
            "AGE",
            "REACHED",
            "IN SNAPSHOTS",
        ]);
        for f in &show.fences {
            t.add_row(vec![
                out.cell(&f.writer, Tone::Plain),
                out.cell(f.producer_id, Tone::Plain),
                out.cell(f.epoch, Tone::Plain),
                out.cell(f.transactional_id.as_deref().unwrap_or("-"), Tone::Plain),
                out.cell(age(f.age_ms), Tone::Dim),
                out.cell(
                    f.reached
                        .iter()
                        .map(|(b, r)| format!("{b} +{}", age(r.delay_ms)))
                        .chain(f.not_reached.iter().map(|b| format!("{b} not yet")))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if f.not_reached.is_empty() {
                        Tone::Plain
                    } else {
                        Tone::Warn
                    },
                ),
                out.cell(
                    f.applied
                        .iter()
                        .map(|(b, (a, n))| format!("broker {b}: {a}/{n}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    Tone::Dim,
                ),
            ]);
        }
        outln!("{t}");
        for u in &show.unreadable {
            eprintln!("kaasctl: {}", crate::out::safe(u));
        }
    }
    Ok(Status::from_problems(problems))
}
