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
    /// Set when the topic file could not be read; the other fields are then empty.
    pub error: Option<String>,
}

pub fn rows(c: &Cluster) -> anyhow::Result<Vec<TopicRow>> {
    Ok(list_topics(&c.volume)?
        .into_iter()
        .map(|r| match r {
            Ok(t) => TopicRow {
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
                error: Some(e.to_string()),
            },
        })
        .collect())
}

pub fn run(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let rows = rows(c)?;
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.json {
        out.json(&rows);
    } else {
        let mut t = out.table(&["TOPIC", "PARTITIONS", "TOPIC ID", "CONFIGS"]);
        for r in &rows {
            match &r.error {
                Some(e) => t.add_row(vec![
                    out.cell("(unreadable)", Tone::Bad),
                    out.cell("", Tone::Plain),
                    out.cell("", Tone::Plain),
                    out.cell(e, Tone::Bad),
                ]),
                None => t.add_row(vec![
                    out.cell(r.name.as_deref().unwrap_or(""), Tone::Plain),
                    out.cell(r.partitions.unwrap_or(0), Tone::Plain),
                    out.cell(r.topic_id.as_deref().unwrap_or(""), Tone::Dim),
                    out.cell(
                        r.configs
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(","),
                        Tone::Plain,
                    ),
                ]),
            };
        }
        println!("{t}");
    }
    Ok(Status::from_problems(problems))
}
