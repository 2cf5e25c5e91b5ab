//! `kaasctl txn timeline`: one transactional id's history, merged from its slot entry,
//! the fence logs, the marker queue and the audit journal.

use super::*;

/// One event of a transaction's timeline.
#[derive(Debug, Serialize)]
pub struct TimelineEvent {
    pub at: Option<Time>,
    /// transition | fence | queued_marker
    pub kind: &'static str,
    pub detail: String,
    pub by: String,
}

pub fn timeline(c: &Cluster, out: &Out, tid: &str) -> anyhow::Result<Status> {
    let e = find(c, tid)?;
    let mut events: Vec<(i64, TimelineEvent)> = e
        .history
        .iter()
        .map(|t| {
            (
                t.at_ms,
                TimelineEvent {
                    at: Time::from_ms(t.at_ms),
                    kind: "transition",
                    detail: format!(
                        "{} -> {} (producer {} epoch {}): {}",
                        t.from.as_str(),
                        t.to.as_str(),
                        t.producer_id,
                        t.epoch,
                        t.reason
                    ),
                    by: match &t.by {
                        Actor::Broker { id } => format!("broker {id}"),
                        Actor::Admin { tool, user } => format!("{tool} ({user})"),
                    },
                },
            )
        })
        .collect();
    for (writer, log) in list_fence_logs(&c.volume)? {
        if let Ok(log) = log {
            for pid in [e.producer_id, e.last_producer_id] {
                if let Some(r) = log.fences.get(&pid) {
                    events.push((
                        r.recorded_ms,
                        TimelineEvent {
                            at: Time::from_ms(r.recorded_ms),
                            kind: "fence",
                            detail: format!("producer {pid} fenced at epoch {}", r.epoch),
                            by: if writer == kaas_core::fence_log::ADMIN_WRITER {
                                "kaasctl".into()
                            } else {
                                format!("broker {writer}")
                            },
                        },
                    ));
                }
            }
        }
    }
    let mut unreadable = Vec::new();
    let queued = queued_for(c, e.producer_id, &mut unreadable)?;
    // A queue entry that cannot be read may be one of this producer's: said, last.
    for u in unreadable {
        events.push((
            i64::MAX,
            TimelineEvent {
                at: None,
                kind: "unreadable",
                detail: format!("{}: {}", u.path, u.error),
                by: String::new(),
            },
        ));
    }
    for q in queued {
        events.push((
            q.enqueued.as_ref().map(|t| t.epoch_ms).unwrap_or(0),
            TimelineEvent {
                at: q.enqueued.clone(),
                kind: "queued_marker",
                detail: format!(
                    "{} marker (epoch {}) queued for broker {} on {} partition(s)",
                    q.result,
                    q.producer_epoch,
                    q.target_broker,
                    q.partitions.len()
                ),
                by: String::new(),
            },
        ));
    }
    events.sort_by_key(|(t, _)| *t);
    let events: Vec<TimelineEvent> = events.into_iter().map(|(_, e)| e).collect();
    if out.structured() {
        out.json(&events);
    } else {
        let mut t = out.table(&["TIME", "EVENT", "DETAIL", "BY"]);
        for ev in &events {
            t.add_row(vec![
                out.cell(ev.at.as_ref().map(|t| when(t.epoch_ms)).unwrap_or_default(), Tone::Dim),
                out.cell(ev.kind, Tone::Plain),
                out.text(&ev.detail, Tone::Plain),
                out.cell(&ev.by, Tone::Plain),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::Ok)
}
