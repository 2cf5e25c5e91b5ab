use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, Out, Tone};
use kaas_core::inspect::{inspect_partition, PartitionInspection};
use kaas_core::txn::{slot_for, TxnState};
use serde::Serialize;

#[derive(Serialize)]
pub struct LsoExplain {
    pub topic: String,
    pub partition: i32,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// Records read_committed consumers cannot see yet.
    pub blocked_records: i64,
    pub pinned_by: Option<Pin>,
    pub advice: String,
    /// Set when the partition could not be read (`lso explain TOPIC` goes on to the
    /// next one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize)]
pub struct Pin {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_offset: i64,
    pub transactional_id: Option<String>,
    pub coordinator_state: Option<&'static str>,
    pub open_age_ms: Option<i64>,
    pub timeout_ms: Option<i32>,
    pub slot: Option<u32>,
    pub slot_owner: Option<i32>,
}

pub fn explain(c: &Cluster, topic: &str, partition: i32) -> anyhow::Result<LsoExplain> {
    let dir = c.volume.partition_dir(topic, partition);
    if !dir.is_dir() {
        anyhow::bail!("no partition directory {}", dir.display());
    }
    let view = inspect_partition(&dir, false)?;
    // The slots after the partition: a producer that moved on meanwhile shows newer.
    let (entries, unreadable) = c.entries_and_unreadable_slots();
    Ok(explain_with(c, topic, partition, &view, &entries, &unreadable))
}

/// [`explain`] from a partition view and the coordinator entries already read (the
/// entries read after the view).
pub fn explain_with(
    c: &Cluster,
    topic: &str,
    partition: i32,
    view: &kaas_core::inspect::PartitionInspection,
    entries: &[kaas_core::txn::TxnEntry],
    unreadable_slots: &[u32],
) -> LsoExplain {
    let pin = view
        .producers
        .producers
        .values()
        .filter_map(|e| e.txn_first_offset.map(|o| (o, e)))
        .min_by_key(|(o, _)| *o);
    let mut result = LsoExplain {
        topic: topic.into(),
        partition,
        high_watermark: view.log_end_offset,
        last_stable_offset: view.last_stable_offset,
        blocked_records: view.log_end_offset - view.last_stable_offset,
        pinned_by: None,
        advice: "nothing pins the LSO: read_committed consumers see everything".into(),
        error: None,
    };
    let Some((first, p)) = pin else {
        return result;
    };
    // Which transactional id has (or, before a rotation, had) this producer id?
    let entry = kaas_core::reconcile::index_by_producer(entries.iter())
        .get(&p.producer_id)
        .map(|e| (*e).clone());
    let slot = entry.as_ref().map(|e| slot_for(&e.transactional_id));
    let tp_in = entry.as_ref().is_some_and(|e| {
        e.partitions
            .iter()
            .any(|tp| tp.topic == topic && tp.partition == partition)
    });
    result.advice = match &entry {
        // Its entry may be in a slot that does not read: not judged (as `txn repair`).
        None if !unreadable_slots.is_empty() => format!(
            "cannot tell: no readable coordinator entry has producer {}, and slot(s) {} could not be read (`kaasctl txn repair` names the files); not hanging until the slot reads again or is rescued",
            p.producer_id,
            unreadable_slots.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
        ),
        None => format!("hanging: no coordinator entry has producer {}. Run `kaasctl txn repair --fix` to write its ABORT marker.", p.producer_id),
        // The entry moved on to another producer id (a rotation at an epoch
        // overflow): what it does now never ends this producer's transaction.
        Some(e) if e.producer_id != p.producer_id => format!(
            "hanging: {:?} has moved on to producer {}, so nothing will end producer {}'s transaction here. `kaasctl txn repair --fix` writes its ABORT marker.",
            e.transactional_id, e.producer_id, p.producer_id
        ),
        Some(e) if e.state == TxnState::Ongoing && tp_in && !e.is_overdue(c.now_ms) => format!(
            "the transaction {:?} is open and within its timeout ({} left); it ends when the producer commits or aborts, or when the reaper aborts it. To end it now: `{}`.",
            e.transactional_id,
            age(e.txn_start_ms + e.timeout_ms as i64 - c.now_ms),
            crate::out::abort_command(&e.transactional_id)
        ),
        Some(e) if e.state == TxnState::Ongoing && tp_in => match slot.and_then(|s| c.reaper_of(s)) {
            Some(reaper) => format!("{:?} is past its timeout; {reaper}. Or now: `{}`.", e.transactional_id, crate::out::abort_command(&e.transactional_id)),
            None => format!("{:?} is past its timeout and no live broker coordinates it: `{}`.", e.transactional_id, crate::out::abort_command(&e.transactional_id)),
        },
        Some(e) if e.state.is_prepare() => format!("{:?} is {}: its markers have not landed here. `kaasctl txn repair --fix` finishes it.", e.transactional_id, e.state.as_str()),
        Some(e) => format!(
            "hanging: the coordinator says {:?} is {}{}, but this partition still has its transaction open. `kaasctl txn repair --fix` writes the ABORT marker.",
            e.transactional_id,
            e.state.as_str(),
            if tp_in { "" } else { " without this partition" }
        ),
    };
    result.pinned_by = Some(Pin {
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        first_offset: first,
        transactional_id: entry.as_ref().map(|e| e.transactional_id.clone()),
        coordinator_state: entry.as_ref().map(|e| e.state.as_str()),
        open_age_ms: entry.as_ref().and_then(|e| c.txn_age_ms(e)),
        timeout_ms: entry.as_ref().map(|e| e.timeout_ms),
        slot,
        slot_owner: slot.and_then(|s| c.slot_owner(s)),
    });
    result
}

/// Partitions whose last stable offset is behind their high watermark (`only`: of one
/// topic), with what was read of each. A partition that cannot be read is left out
/// here; `txn::check` (doctor's transactions check) reports it.
pub fn lagging(c: &Cluster, only: Option<&str>) -> anyhow::Result<Vec<(String, i32, PartitionInspection)>> {
    let mut lagging = Vec::new();
    for topic in kaas_core::topic::list_topics(&c.volume)?.into_iter().flatten() {
        if only.is_some_and(|t| t != topic.name) {
            continue;
        }
        for p in 0..topic.partitions {
            let Ok(view) = inspect_partition(&c.volume.partition_dir(&topic.name, p), false) else {
                continue;
            };
            if view.log_end_offset > view.last_stable_offset {
                lagging.push((topic.name.clone(), p, view));
            }
        }
    }
    Ok(lagging)
}

/// Every partition whose LSO an open transaction pins, explained, in topic and
/// partition order.
pub fn pinned(c: &Cluster, only: Option<&str>) -> anyhow::Result<Vec<LsoExplain>> {
    pinned_with_entries(c, only).map(|(pinned, _)| pinned)
}

/// [`pinned`], and the coordinator entries it was judged by (read after the
/// partitions: a transaction that moved on shows as newer).
pub fn pinned_with_entries(
    c: &Cluster,
    only: Option<&str>,
) -> anyhow::Result<(Vec<LsoExplain>, Vec<kaas_core::txn::TxnEntry>)> {
    let lagging = lagging(c, only)?;
    if lagging.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let (entries, unreadable) = c.entries_and_unreadable_slots();
    let pinned = lagging
        .iter()
        .map(|(topic, p, view)| explain_with(c, topic, *p, view, &entries, &unreadable))
        .filter(|e| e.pinned_by.is_some())
        .collect();
    Ok((pinned, entries))
}

/// A consumer group with committed offsets on pinned partitions: read_committed
/// members read up to the LSO and wait there.
#[derive(Debug, Serialize)]
pub struct GroupBehind {
    pub group: String,
    /// Records after its committed offsets on those partitions (high watermark −
    /// committed, summed).
    pub lag: i64,
    /// The part of the lag a read_committed member cannot read until the transaction
    /// ends (high watermark − max(LSO, committed), summed).
    pub held_back: i64,
    pub partitions: usize,
}

/// The groups with committed offsets on any of `partitions` ((topic, partition,
/// high watermark, last stable offset)), the most held back first.
pub fn groups_behind(c: &Cluster, partitions: &[(String, i32, i64, i64)]) -> anyhow::Result<Vec<GroupBehind>> {
    let mut behind = Vec::new();
    for g in kaas_core::offsets::list_groups(&c.volume)? {
        let Ok(offsets) = kaas_core::offsets::GroupOffsets::load(&c.volume, &g) else {
            continue; // `kaasctl groups` reports it
        };
        let (mut lag, mut held_back, mut on) = (0, 0, 0);
        for (topic, p, hw, lso) in partitions {
            if let Some(co) = offsets.offsets.get(topic).and_then(|parts| parts.get(p)) {
                lag += (hw - co.offset).max(0);
                held_back += (hw - co.offset.max(*lso)).max(0);
                on += 1;
            }
        }
        if on > 0 {
            behind.push(GroupBehind {
                group: g,
                lag,
                held_back,
                partitions: on,
            });
        }
    }
    behind.sort_by(|a, b| {
        (b.held_back, b.lag)
            .cmp(&(a.held_back, a.lag))
            .then_with(|| a.group.cmp(&b.group))
    });
    Ok(behind)
}

fn print_explain(e: &LsoExplain) {
    if let Some(err) = &e.error {
        outln!("{}-{}: cannot read: {}", e.topic, e.partition, crate::out::safe(err));
        outln!("{}", crate::out::safe(&e.advice));
        return;
    }
    outln!(
        "{}-{}: high watermark {}, last stable offset {} ({} records held back)",
        e.topic,
        e.partition,
        e.high_watermark,
        e.last_stable_offset,
        e.blocked_records
    );
    if let Some(p) = &e.pinned_by {
        outln!(
            "pinned by producer {} (epoch {}) since offset {}: transactional.id {}, coordinator state {}, open for {}",
            p.producer_id,
            p.producer_epoch,
            p.first_offset,
            crate::out::safe(p.transactional_id.as_deref().unwrap_or("(none)")),
            p.coordinator_state.unwrap_or("-"),
            p.open_age_ms.map(age).unwrap_or_else(|| "-".into())
        );
    }
    outln!("{}", crate::out::safe(&e.advice));
}

/// `lso explain TOPIC [PARTITION]`: one partition, or every partition of the topic.
pub fn run(c: &Cluster, out: &Out, topic: &str, partition: Option<i32>) -> anyhow::Result<Status> {
    let explained = match partition {
        Some(p) => vec![explain(c, topic, p)?],
        None => {
            let meta = kaas_core::topic::list_topics(&c.volume)?
                .into_iter()
                .flatten()
                .find(|t| t.name == topic)
                .ok_or_else(|| {
                    anyhow::anyhow!("no topic {topic:?} on the volume ({})", c.volume.topics_dir().display())
                })?;
            // Every partition first, the slots once after (as `explain`).
            let views: Vec<(i32, Result<Option<PartitionInspection>, String>)> = (0..meta.partitions)
                .map(|p| {
                    let dir = c.volume.partition_dir(topic, p);
                    // No directory yet: no broker has opened the partition, nothing
                    // is written, nothing is held back.
                    let view = if dir.is_dir() {
                        inspect_partition(&dir, false).map(Some).map_err(|e| e.to_string())
                    } else {
                        Ok(None)
                    };
                    (p, view)
                })
                .collect();
            let (entries, unreadable) = c.entries_and_unreadable_slots();
            views
                .into_iter()
                .map(|(p, view)| match view {
                    Ok(Some(view)) => explain_with(c, topic, p, &view, &entries, &unreadable),
                    Ok(None) => LsoExplain {
                        topic: topic.into(),
                        partition: p,
                        high_watermark: 0,
                        last_stable_offset: 0,
                        blocked_records: 0,
                        pinned_by: None,
                        advice: "nothing written yet (no broker has opened the partition)".into(),
                        error: None,
                    },
                    Err(e) => LsoExplain {
                        topic: topic.into(),
                        partition: p,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        blocked_records: 0,
                        pinned_by: None,
                        advice: "the partition could not be read: `kaasctl txn repair` lists what it affects".into(),
                        error: Some(e),
                    },
                })
                .collect()
        }
    };
    let pinned = explained.iter().any(|e| e.pinned_by.is_some() || e.error.is_some());
    if out.structured() {
        match partition {
            Some(_) => out.json(&explained[0]),
            None => out.json(&explained),
        }
    } else {
        for (i, e) in explained.iter().enumerate() {
            if i > 0 {
                outln!();
            }
            print_explain(e);
        }
    }
    Ok(Status::from_problems(pinned))
}

/// `lso list`: the partitions whose LSO a transaction holds back, longest first.
pub fn list(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let mut rows = pinned(c, None)?;
    rows.sort_by_key(|e| std::cmp::Reverse(e.pinned_by.as_ref().and_then(|p| p.open_age_ms).unwrap_or(i64::MAX)));
    if out.structured() {
        out.json(&rows);
        return Ok(Status::Ok);
    }
    if rows.is_empty() {
        outln!("no partition's last stable offset is held back: read_committed consumers see every record");
        return Ok(Status::Ok);
    }
    let mut t = out.table(&[
        "PARTITION",
        "HELD BACK",
        "FOR",
        "TRANSACTIONAL ID",
        "STATE",
        "TIMEOUT",
        "LEFT",
        "~PRODUCER",
    ]);
    for e in &rows {
        let p = e.pinned_by.as_ref().expect("pinned rows only");
        let left = p
            .open_age_ms
            .zip(p.timeout_ms)
            .map(|(open, timeout)| timeout as i64 - open);
        t.add_row(vec![
            out.cell(format!("{}-{}", e.topic, e.partition), Tone::Plain),
            out.cell(e.blocked_records, Tone::Warn),
            out.cell(p.open_age_ms.map(age).unwrap_or_else(|| "-".into()), Tone::Plain),
            out.cell(
                p.transactional_id.as_deref().unwrap_or("(no coordinator entry)"),
                Tone::Plain,
            ),
            out.cell(p.coordinator_state.unwrap_or("-"), Tone::Plain),
            out.cell(
                p.timeout_ms.map(|t| age(t as i64)).unwrap_or_else(|| "-".into()),
                Tone::Dim,
            ),
            match left {
                Some(l) if l < 0 => out.cell(format!("overdue {}", age(-l)), Tone::Bad),
                Some(l) => out.cell(age(l), Tone::Plain),
                None => out.cell("-", Tone::Dim),
            },
            out.cell(format!("{}/{}", p.producer_id, p.producer_epoch), Tone::Dim),
        ]);
    }
    outln!("{t}");
    outln!("`kaasctl lso explain TOPIC PARTITION` says what to do about each; `kaasctl doctor` judges them");
    Ok(Status::Ok)
}
