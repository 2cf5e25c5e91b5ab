use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, Out, Time, Tone};
use kaas_core::marker_queue;
use kaas_core::txn::TopicPartition;
use serde::Serialize;

#[derive(Serialize)]
pub struct QueueRow {
    pub broker: i32,
    pub alive: bool,
    pub depth: usize,
    pub oldest_age_ms: Option<i64>,
    pub unreadable: usize,
}

#[derive(Serialize)]
pub struct EntryRow {
    pub broker: i32,
    pub path: String,
    pub transactional_id: Option<String>,
    pub producer_id: Option<i64>,
    pub producer_epoch: Option<i16>,
    pub result: Option<String>,
    pub partitions: Vec<TopicPartition>,
    pub enqueued: Option<Time>,
    pub age_ms: Option<i64>,
    pub error: Option<String>,
}

pub fn entries(c: &Cluster, only: Option<i32>) -> anyhow::Result<Vec<EntryRow>> {
    let mut rows = Vec::new();
    for broker in marker_queue::targets(&c.volume)? {
        if only.is_some_and(|b| b != broker) {
            continue;
        }
        for (path, e) in marker_queue::list(&c.volume, broker)? {
            rows.push(match e {
                Ok(e) => EntryRow {
                    broker,
                    path: path.display().to_string(),
                    transactional_id: Some(e.transactional_id).filter(|s| !s.is_empty()),
                    producer_id: Some(e.producer_id),
                    producer_epoch: Some(e.producer_epoch),
                    result: Some(format!("{:?}", e.result)),
                    partitions: e.partitions,
                    enqueued: Time::from_ms(e.enqueued_ms),
                    age_ms: Some(c.now_ms - e.enqueued_ms),
                    error: None,
                },
                Err(err) => EntryRow {
                    broker,
                    path: path.display().to_string(),
                    transactional_id: None,
                    producer_id: None,
                    producer_epoch: None,
                    result: None,
                    partitions: Vec::new(),
                    enqueued: None,
                    age_ms: None,
                    error: Some(err.to_string()),
                },
            });
        }
    }
    Ok(rows)
}

pub fn queues(c: &Cluster) -> anyhow::Result<Vec<QueueRow>> {
    let all = entries(c, None)?;
    // Every live broker's queue, empty ones too (an empty queue of a live broker is
    // the healthy answer), and every queue directory on the volume.
    let mut brokers: Vec<i32> = marker_queue::targets(&c.volume)?;
    brokers.extend(&c.live);
    brokers.sort_unstable();
    brokers.dedup();
    Ok(brokers
        .into_iter()
        .map(|b| {
            let mine: Vec<&EntryRow> = all.iter().filter(|e| e.broker == b).collect();
            QueueRow {
                broker: b,
                alive: c.live.contains(&b),
                depth: mine.iter().filter(|e| e.error.is_none()).count(),
                oldest_age_ms: mine.iter().filter_map(|e| e.age_ms).max(),
                unreadable: mine.iter().filter(|e| e.error.is_some()).count(),
            }
        })
        .collect())
}

pub fn list(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let rows = queues(c)?;
    let problems = rows.iter().any(|r| r.unreadable > 0 || (!r.alive && r.depth > 0));
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&["TO BROKER", "BROKER STATE", "DEPTH", "OLDEST", "UNREADABLE"]);
        for r in &rows {
            t.add_row(vec![
                out.cell(r.broker, Tone::Plain),
                if r.alive {
                    out.cell("alive", Tone::Good)
                } else {
                    out.cell("dead", if r.depth > 0 { Tone::Bad } else { Tone::Dim })
                },
                out.cell(r.depth, if r.depth > 0 { Tone::Warn } else { Tone::Plain }),
                out.cell(r.oldest_age_ms.map(age).unwrap_or_else(|| "-".into()), Tone::Plain),
                out.cell(r.unreadable, if r.unreadable > 0 { Tone::Bad } else { Tone::Plain }),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}

pub fn show(c: &Cluster, out: &Out, broker: Option<i32>) -> anyhow::Result<Status> {
    let rows = entries(c, broker)?;
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&["TO", "TRANSACTIONAL ID", "PRODUCER", "RESULT", "PARTITIONS", "AGE"]);
        for r in &rows {
            match &r.error {
                Some(e) => t.add_row(vec![out.cell(r.broker, Tone::Plain), out.text(e, Tone::Bad)]),
                None => t.add_row(vec![
                    out.cell(r.broker, Tone::Plain),
                    out.cell(r.transactional_id.as_deref().unwrap_or("-"), Tone::Plain),
                    out.cell(
                        format!("{}/{}", r.producer_id.unwrap_or(-1), r.producer_epoch.unwrap_or(-1)),
                        Tone::Plain,
                    ),
                    out.cell(r.result.as_deref().unwrap_or(""), Tone::Plain),
                    out.text(
                        r.partitions
                            .iter()
                            .map(|p| format!("{}-{}", p.topic, p.partition))
                            .collect::<Vec<_>>()
                            .join(", "),
                        Tone::Plain,
                    ),
                    out.cell(r.age_ms.map(age).unwrap_or_default(), Tone::Dim),
                ]),
            };
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}
