use super::Status;
use crate::cluster::Cluster;
use crate::out::{Out, Tone};
use kaas_core::topic::list_topics;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub struct TopicRow {
    pub name: Option<String>,
    pub topic_id: Option<String>,
    pub partitions: Option<i32>,
    pub configs: BTreeMap<String, String>,
    /// For a compacted topic, the log cleaner's view of each partition.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compaction: Vec<super::compaction::CompactionRow>,
    /// Set when the topic file could not be read; the other fields are then empty.
    pub error: Option<String>,
}

pub fn rows(c: &Cluster) -> anyhow::Result<Vec<TopicRow>> {
    let mut compaction = super::compaction::rows(c, None)?;
    Ok(list_topics(&c.volume)?
        .into_iter()
        .map(|r| match r {
            Ok(t) => TopicRow {
                compaction: {
                    let (mine, rest) = std::mem::take(&mut compaction)
                        .into_iter()
                        .partition(|r| r.topic == t.name);
                    compaction = rest;
                    mine
                },
                name: Some(t.name),
                topic_id: Some(t.topic_id.to_string()),
                partitions: Some(t.partitions),
                configs: t.configs,
                error: None,
            },
            Err(e) => TopicRow {
                name: None,
                topic_id: None,
                partitions: None,
                configs: BTreeMap::new(),
                compaction: Vec::new(),
                error: Some(e.to_string()),
            },
        })
        .collect())
}

pub fn run(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let rows = rows(c)?;
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.structured() {
        out.json(&rows);
    } else {
        let now = crate::cluster::now_ms();
        // The compaction column only when some topic is compacted.
        let compacted = rows.iter().any(|r| !r.compaction.is_empty());
        let mut header = vec!["TOPIC", "PARTITIONS", "TOPIC ID", "CONFIGS"];
        if compacted {
            header.push("COMPACTION");
        }
        let mut t = out.table(&header);
        for r in &rows {
            match &r.error {
                // The error spans the row (see Table::add_row).
                Some(e) => t.add_row(vec![out.cell("(unreadable)", Tone::Bad), out.text(e, Tone::Bad)]),
                None => t.add_row({
                    let mut row = vec![
                        out.cell(r.name.as_deref().unwrap_or(""), Tone::Plain),
                        out.cell(r.partitions.unwrap_or(0), Tone::Plain),
                        out.cell(r.topic_id.as_deref().unwrap_or(""), Tone::Dim),
                        out.text(
                            r.configs
                                .iter()
                                .map(|(k, v)| format!("{k}={v}"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            Tone::Plain,
                        ),
                    ];
                    if compacted {
                        row.push(
                            out.text(
                                r.compaction
                                    .iter()
                                    .map(|p| match &p.view {
                                        Some(v) => format!("p{}: {}", p.partition, super::compaction::summary(v, now)),
                                        None => format!("p{}: unreadable", p.partition),
                                    })
                                    .collect::<Vec<_>>()
                                    .join("; "),
                                Tone::Plain,
                            ),
                        );
                    }
                    row
                }),
            };
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}
