use super::Status;
use crate::cluster::Cluster;
use crate::out::{Out, Time, Tone};
use kaas_core::inspect::inspect_partition;
use serde::Serialize;

#[derive(Serialize)]
pub struct ProducerRow {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: Option<i32>,
    pub last_offset: Option<i64>,
    pub last_timestamp: Option<Time>,
    pub current_transaction_start_offset: Option<i64>,
    /// The dedupe window: (first sequence, last sequence, base offset), oldest first.
    pub window: Vec<(i32, i32, i64)>,
}

#[derive(Serialize)]
pub struct ProducersShow {
    pub topic: String,
    pub partition: i32,
    pub snapshot_offset: Option<i64>,
    pub snapshot_written: Option<Time>,
    pub log_end_offset: i64,
    pub last_stable_offset: i64,
    pub producers: Vec<ProducerRow>,
    /// Data the next broker start would cut (torn or corrupt tail), if any.
    pub bad_tail: Option<String>,
}

pub fn run(c: &Cluster, out: &Out, topic: &str, partition: i32) -> anyhow::Result<Status> {
    let dir = c.volume.partition_dir(topic, partition);
    if !dir.is_dir() {
        anyhow::bail!("no partition directory {}", dir.display());
    }
    let view = inspect_partition(&dir, false)?;
    let show = ProducersShow {
        topic: topic.into(),
        partition,
        snapshot_offset: view.snapshot.map(|s| s.0),
        snapshot_written: view.snapshot.and_then(|s| Time::from_ms(s.1)),
        log_end_offset: view.log_end_offset,
        last_stable_offset: view.last_stable_offset,
        producers: view
            .producers
            .producers
            .values()
            .map(|e| ProducerRow {
                producer_id: e.producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.last_seq(),
                last_offset: e.batches.back().map(|b| b.last_offset),
                last_timestamp: Time::from_ms(e.last_timestamp),
                current_transaction_start_offset: e.txn_first_offset,
                window: e
                    .batches
                    .iter()
                    .map(|b| (b.first_seq, b.last_seq, b.base_offset))
                    .collect(),
            })
            .collect(),
        bad_tail: view
            .bad_tail
            .map(|b| format!("{} at byte {}: {}", b.path.display(), b.position, b.reason)),
    };
    let problems = show.bad_tail.is_some();
    if out.structured() {
        out.json(&show);
    } else {
        outln!(
            "{topic}-{partition}: log end {}, last stable offset {}, snapshot at {}",
            show.log_end_offset,
            show.last_stable_offset,
            show.snapshot_offset
                .map(|o| o.to_string())
                .unwrap_or_else(|| "none".into())
        );
        let mut t = out.table(&["PRODUCER", "EPOCH", "LAST SEQ", "LAST OFFSET", "TXN START", "WINDOW"]);
        for p in &show.producers {
            t.add_row(vec![
                out.cell(p.producer_id, Tone::Plain),
                out.cell(p.producer_epoch, Tone::Plain),
                out.cell(
                    p.last_sequence.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                    Tone::Plain,
                ),
                out.cell(
                    p.last_offset.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                    Tone::Plain,
                ),
                out.cell(
                    p.current_transaction_start_offset
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "-".into()),
                    if p.current_transaction_start_offset.is_some() {
                        Tone::Warn
                    } else {
                        Tone::Plain
                    },
                ),
                out.text(
                    p.window
                        .iter()
                        .map(|(a, b, o)| format!("{a}-{b}@{o}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    Tone::Dim,
                ),
            ]);
        }
        outln!("{t}");
        if let Some(b) = &show.bad_tail {
            eprintln!(
                "kaasctl: the log has a bad tail the next broker start will cut: {}",
                crate::out::safe(b)
            );
        }
    }
    Ok(Status::from_problems(problems))
}
