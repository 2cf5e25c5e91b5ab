use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, Out};
use kaas_core::inspect::inspect_partition;
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
    let entries = c.entries();
    Ok(explain_with(c, topic, partition, &view, &entries))
}

/// [`explain`] from a partition view and the coordinator entries already read (the
/// entries read after the view).
pub fn explain_with(
    c: &Cluster,
    topic: &str,
    partition: i32,
    view: &kaas_core::inspect::PartitionInspection,
    entries: &[kaas_core::txn::TxnEntry],
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
        None => format!("hanging: no coordinator entry has producer {}. Run `kaasctl txn repair --fix` to write its ABORT marker.", p.producer_id),
        Some(e) if e.state == TxnState::Ongoing && tp_in && !e.is_overdue(c.now_ms) => format!(
            "the transaction {:?} is open and within its timeout ({} left); it ends when the producer commits or aborts, or when the reaper aborts it. To end it now: `{}`.",
            e.transactional_id,
            age(e.txn_start_ms + e.timeout_ms as i64 - c.now_ms),
            crate::out::abort_command(&e.transactional_id)
        ),
        Some(e) if e.state == TxnState::Ongoing && tp_in => match slot.and_then(|s| c.slot_owner(s)) {
            Some(b) => format!("{:?} is past its timeout; broker {b} owns its slot and its reaper aborts it within one sweep. Or now: `{}`.", e.transactional_id, crate::out::abort_command(&e.transactional_id)),
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

pub fn run(c: &Cluster, out: &Out, topic: &str, partition: i32) -> anyhow::Result<Status> {
    let e = explain(c, topic, partition)?;
    let pinned = e.pinned_by.is_some();
    if out.structured() {
        out.json(&e);
    } else {
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
    Ok(Status::from_problems(pinned))
}
