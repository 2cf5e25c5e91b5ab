//! `kaasctl compaction`: what the log cleaner did and has left to do, per partition
//! of every compacted topic, read off the volume (docs/compaction.md).

use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, safe, Out, Tone};
use kaas_core::cleaner::{view, CompactionView};
use kaas_core::topic::{list_topics, TopicMeta};
use serde::Serialize;

#[derive(Serialize)]
pub struct CompactionRow {
    pub topic: String,
    pub partition: i32,
    #[serde(flatten)]
    pub view: Option<CompactionView>,
    /// Set when the partition's files could not be read.
    pub error: Option<String>,
}

/// Whether a topic's cleanup.policy includes compact.
pub fn is_compacted(t: &TopicMeta) -> bool {
    t.configs
        .get("cleanup.policy")
        .is_some_and(|p| kaas_core::configs::list_items(p).contains(&"compact"))
}

/// The rows of every compacted topic (or only `topic`).
pub fn rows(c: &Cluster, topic: Option<&str>) -> anyhow::Result<Vec<CompactionRow>> {
    let mut rows = Vec::new();
    for t in list_topics(&c.volume)?.into_iter().flatten() {
        if !is_compacted(&t) || topic.is_some_and(|n| n != t.name) {
            continue;
        }
        for p in 0..t.partitions {
            let dir = c.volume.partition_dir(&t.name, p);
            let (view, error) = match view(&dir) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e.to_string())),
            };
            rows.push(CompactionRow {
                topic: t.name.clone(),
                partition: p,
                view,
                error,
            });
        }
    }
    Ok(rows)
}

/// "dirty 43%, cleaned 2m10s ago" for one partition.
pub fn summary(v: &CompactionView, now: i64) -> String {
    let cleaned = match v.state.as_ref().and_then(|s| s.last.as_ref()) {
        Some(l) => format!("cleaned {} ago", age(now - l.finished_ms)),
        None => "never cleaned".into(),
    };
    format!("dirty {:.0}%, {cleaned}", v.dirty_ratio * 100.0)
}

pub fn run(c: &Cluster, out: &Out, topic: Option<&str>) -> anyhow::Result<Status> {
    let rows = rows(c, topic)?;
    if let Some(t) = topic {
        if rows.is_empty() {
            anyhow::bail!("no compacted topic {t} (its cleanup.policy must include compact)");
        }
    }
    let problems = rows.iter().any(|r| {
        r.error.is_some()
            || r.view
                .as_ref()
                .is_some_and(|v| v.swap_pending || v.state.as_ref().is_some_and(|s| s.last_error.is_some()))
    });
    if out.structured() {
        out.json(&rows);
        return Ok(Status::from_problems(problems));
    }
    let now = crate::cluster::now_ms();
    let mut t = out.table(&[
        "TOPIC",
        "PARTITION",
        "DIRTY",
        "CLEAN TO",
        "LAST CLEAN",
        "PASSES",
        "LAST PASS",
        "PROBLEM",
    ]);
    for r in &rows {
        let Some(v) = &r.view else {
            t.add_row(vec![
                out.cell(safe(&r.topic), Tone::Plain),
                out.cell(r.partition, Tone::Plain),
                out.cell("", Tone::Plain),
                out.cell("", Tone::Plain),
                out.cell("", Tone::Plain),
                out.cell("", Tone::Plain),
                out.cell("", Tone::Plain),
                out.text(r.error.as_deref().unwrap_or(""), Tone::Bad),
            ]);
            continue;
        };
        let last = v.state.as_ref().and_then(|s| s.last.as_ref());
        let pass = last.map(|l| {
            format!(
                "{}..{}: {} -> {} bytes, {} records, {} tombstones, {} aborted batches, {} markers removed in {} ms",
                l.dirty_from,
                l.dirty_to,
                l.bytes_before,
                l.bytes_after,
                l.records_removed,
                l.tombstones_removed,
                l.aborted_batches_removed,
                l.markers_removed,
                l.finished_ms - l.started_ms
            )
        });
        let problem = if v.swap_pending {
            Some("a swap was interrupted; the next broker to open the partition finishes it".to_string())
        } else {
            v.state.as_ref().and_then(|s| s.last_error.clone())
        };
        t.add_row(vec![
            out.cell(safe(&r.topic), Tone::Plain),
            out.cell(r.partition, Tone::Plain),
            out.cell(
                format!("{:.0}% of {} bytes", v.dirty_ratio * 100.0, v.sealed_bytes),
                Tone::Plain,
            ),
            out.cell(v.clean_offset, Tone::Plain),
            out.cell(
                last.map(|l| format!("{} ago", age(now - l.finished_ms)))
                    .unwrap_or_else(|| "never".into()),
                Tone::Dim,
            ),
            out.cell(v.state.as_ref().map_or(0, |s| s.total_passes), Tone::Plain),
            out.text(pass.unwrap_or_default(), Tone::Plain),
            out.text(problem.as_deref().unwrap_or(""), Tone::Bad),
        ]);
    }
    outln!("{t}");
    Ok(Status::from_problems(problems))
}
