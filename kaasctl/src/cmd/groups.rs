use super::Status;
use crate::cluster::Cluster;
use crate::out::{Out, Time, Tone};
use kaas_core::inspect::inspect_partition;
use kaas_core::offsets::{list_groups, GroupOffsets};
use serde::Serialize;

#[derive(Serialize)]
pub struct GroupPartitionRow {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    pub committed: Option<Time>,
    pub high_watermark: Option<i64>,
    pub last_stable_offset: Option<i64>,
    /// HW − committed.
    pub lag: Option<i64>,
    /// Records a read_committed consumer can still fetch now: LSO − committed.
    pub real_lag: Option<i64>,
    /// Records held back behind an open transaction: HW − max(LSO, committed).
    pub blocked_by_open_transaction: Option<i64>,
    /// Control records (markers) after the committed offset: counted in the lag but
    /// never delivered to a consumer.
    pub control_records: Option<i64>,
    /// Offsets staged by open transactions for this partition.
    pub staged: usize,
    pub error: Option<String>,
}

pub fn rows(c: &Cluster, only: Option<&str>) -> anyhow::Result<Vec<GroupPartitionRow>> {
    let mut rows = Vec::new();
    for g in list_groups(&c.volume)? {
        if only.is_some_and(|o| o != g) {
            continue;
        }
        let offsets = match GroupOffsets::load(&c.volume, &g) {
            Ok(o) => o,
            Err(e) => {
                rows.push(GroupPartitionRow {
                    group: g,
                    topic: String::new(),
                    partition: -1,
                    committed_offset: -1,
                    committed: None,
                    high_watermark: None,
                    last_stable_offset: None,
                    lag: None,
                    real_lag: None,
                    blocked_by_open_transaction: None,
                    control_records: None,
                    staged: 0,
                    error: Some(e.to_string()),
                });
                continue;
            }
        };
        for (topic, parts) in &offsets.offsets {
            for (p, co) in parts {
                let staged = offsets
                    .pending
                    .values()
                    .filter(|s| s.offsets.get(topic).is_some_and(|x| x.contains_key(p)))
                    .count();
                let mut row = GroupPartitionRow {
                    group: g.clone(),
                    topic: topic.clone(),
                    partition: *p,
                    committed_offset: co.offset,
                    committed: Time::from_ms(co.commit_ms),
                    high_watermark: None,
                    last_stable_offset: None,
                    lag: None,
                    real_lag: None,
                    blocked_by_open_transaction: None,
                    control_records: None,
                    staged,
                    error: None,
                };
                match inspect_partition(&c.volume.partition_dir(topic, *p), true) {
                    Ok(view) => {
                        let (hw, lso) = (view.log_end_offset, view.last_stable_offset);
                        row.high_watermark = Some(hw);
                        row.last_stable_offset = Some(lso);
                        row.lag = Some((hw - co.offset).max(0));
                        row.real_lag = Some((lso - co.offset).max(0));
                        row.blocked_by_open_transaction = Some((hw - lso.max(co.offset)).max(0));
                        row.control_records = Some(view.markers.iter().filter(|m| m.0 >= co.offset).count() as i64);
                    }
                    Err(e) => row.error = Some(e.to_string()),
                }
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

pub fn run(c: &Cluster, out: &Out, only: Option<&str>) -> anyhow::Result<Status> {
    let rows = rows(c, only)?;
    if let (Some(g), true) = (only, rows.is_empty()) {
        anyhow::bail!("no committed offsets for group {g:?}");
    }
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&[
            "GROUP",
            "PARTITION",
            "COMMITTED",
            "HW",
            "LAG",
            "REAL",
            "BLOCKED",
            "CONTROL",
        ]);
        let n = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        for r in &rows {
            if let Some(e) = &r.error {
                t.add_row(vec![
                    out.cell(&r.group, Tone::Plain),
                    out.cell(format!("{}-{}", r.topic, r.partition), Tone::Plain),
                    out.text(e, Tone::Bad),
                ]);
                continue;
            }
            t.add_row(vec![
                out.cell(&r.group, Tone::Plain),
                out.cell(format!("{}-{}", r.topic, r.partition), Tone::Plain),
                out.cell(r.committed_offset, Tone::Plain),
                out.cell(n(r.high_watermark), Tone::Plain),
                out.cell(n(r.lag), Tone::Plain),
                out.cell(n(r.real_lag), Tone::Plain),
                out.cell(
                    n(r.blocked_by_open_transaction),
                    if r.blocked_by_open_transaction.unwrap_or(0) > 0 {
                        Tone::Warn
                    } else {
                        Tone::Plain
                    },
                ),
                out.cell(n(r.control_records), Tone::Dim),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}
