//! `kaasctl txn ...`: list, show, abort, repair, find-hanging, timeline.

use super::Status;
use crate::cli::{TxnAbortArgs, TxnListArgs, TxnSort};
use crate::cluster::Cluster;
use crate::out::{age, when, Out, Time, Tone};
use kaas_core::admin::{self, ActionPlan, MarkerRoute};
use kaas_core::fence_log::list_fence_logs;
use kaas_core::inspect::inspect_partition;
use kaas_core::marker_queue;
use kaas_core::offsets::GroupOffsets;
use kaas_core::reconcile::{self, Verdict};
use kaas_core::topic::{list_topics, PartitionOwner};
use kaas_core::txn::{slot_for, Actor, TopicPartition, TxnEntry, TxnState};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};

mod abort;
mod repair;
mod timeline;

pub use abort::abort;
pub use repair::{check, find_hanging, repair};
pub use timeline::timeline;

/// One line of `txn list` (names follow kafka-transactions.sh and rpk).
#[derive(Debug, Clone, Serialize)]
pub struct TxnRow {
    pub transactional_id: String,
    pub slot: u32,
    pub coordinator: Option<i32>,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: &'static str,
    pub partitions: usize,
    pub groups: usize,
    pub transaction_start: Option<Time>,
    /// Age of the open transaction; null when none is open.
    pub open_age_ms: Option<i64>,
    pub timeout_ms: i32,
    pub overdue: bool,
    pub last_update: Option<Time>,
}

/// A slot file that could not be read, reported beside the rows.
#[derive(Debug, Serialize)]
pub struct SlotProblem {
    pub slot: u32,
    pub path: String,
    pub error: String,
}

#[derive(Debug, Serialize)]
pub struct TxnList {
    pub transactions: Vec<TxnRow>,
    pub unreadable_slots: Vec<SlotProblem>,
}

pub fn row(c: &Cluster, slot: u32, e: &TxnEntry) -> TxnRow {
    TxnRow {
        transactional_id: e.transactional_id.clone(),
        slot,
        coordinator: c.slot_owner(slot),
        producer_id: e.producer_id,
        producer_epoch: e.producer_epoch,
        state: e.state.as_str(),
        partitions: e.partitions.len(),
        groups: e.groups.len(),
        transaction_start: Time::from_ms(e.txn_start_ms),
        open_age_ms: c.txn_age_ms(e),
        timeout_ms: e.timeout_ms,
        overdue: e.is_overdue(c.now_ms),
        last_update: Time::from_ms(e.last_update_ms),
    }
}

pub fn collect(c: &Cluster, args: &TxnListArgs) -> anyhow::Result<TxnList> {
    for s in &args.state {
        if !TxnState::ALL.iter().any(|k| k.as_str().eq_ignore_ascii_case(s)) {
            let names: Vec<&str> = TxnState::ALL.iter().map(|k| k.as_str()).collect();
            anyhow::bail!("unknown state {s:?}; expected one of {}", names.join(", "));
        }
    }
    let pattern = match &args.transactional_id {
        Some(g) => Some(glob::Pattern::new(g).map_err(|e| anyhow::anyhow!("bad --transactional-id glob {g:?}: {e}"))?),
        None => None,
    };
    enum Item {
        Row(TxnRow),
        Unreadable(SlotProblem),
    }
    let items = c.map_slots(|slot, file| {
        if args.slot.is_some_and(|s| s != slot) || (args.owner.is_some() && c.slot_owner(slot) != args.owner) {
            return Vec::new();
        }
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                return vec![Item::Unreadable(SlotProblem {
                    slot,
                    path: e.path().display().to_string(),
                    error: e.to_string(),
                })]
            }
        };
        file.entries
            .values()
            .filter(|e| args.state.is_empty() || args.state.iter().any(|s| s.eq_ignore_ascii_case(e.state.as_str())))
            .filter(|e| pattern.as_ref().is_none_or(|p| p.matches(&e.transactional_id)))
            .filter(|e| {
                args.older_than
                    .is_none_or(|d| c.txn_age_ms(e).is_some_and(|a| a >= d.as_millis() as i64))
            })
            .map(|e| Item::Row(row(c, slot, e)))
            .collect()
    });
    let mut rows = Vec::new();
    let mut unreadable = Vec::new();
    for item in items {
        match item {
            Item::Row(r) => rows.push(r),
            Item::Unreadable(u) => unreadable.push(u),
        }
    }
    match args.sort {
        TxnSort::Id => rows.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id)),
        TxnSort::Age => rows.sort_by_key(|r| std::cmp::Reverse(r.open_age_ms.unwrap_or(-1))),
        TxnSort::State => rows.sort_by(|a, b| a.state.cmp(b.state).then(a.transactional_id.cmp(&b.transactional_id))),
        TxnSort::Pid => rows.sort_by_key(|r| r.producer_id),
        TxnSort::Slot => rows.sort_by(|a, b| a.slot.cmp(&b.slot).then(a.transactional_id.cmp(&b.transactional_id))),
    }
    Ok(TxnList {
        transactions: rows,
        unreadable_slots: unreadable,
    })
}

fn state_tone(state: &str, overdue: bool) -> Tone {
    match state {
        _ if overdue => Tone::Bad,
        "Ongoing" => Tone::Warn,
        "PrepareCommit" | "PrepareAbort" => Tone::Bad,
        "CompleteCommit" => Tone::Good,
        _ => Tone::Plain,
    }
}

pub fn list(c: &Cluster, out: &Out, args: &TxnListArgs) -> anyhow::Result<Status> {
    let list = collect(c, args)?;
    let problems = !list.unreadable_slots.is_empty();
    if out.structured() {
        out.json(&list);
    } else {
        let rows = list
            .transactions
            .iter()
            .map(|r| {
                vec![
                    (r.transactional_id.clone(), Tone::Plain),
                    (r.producer_id.to_string(), Tone::Plain),
                    (r.producer_epoch.to_string(), Tone::Plain),
                    (r.state.to_string(), state_tone(r.state, r.overdue)),
                    (r.partitions.to_string(), Tone::Plain),
                    (r.open_age_ms.map(age).unwrap_or_else(|| "-".into()), Tone::Plain),
                    (age(r.timeout_ms as i64), Tone::Dim),
                    (if r.overdue { "yes" } else { "" }.to_string(), Tone::Bad),
                    (
                        r.coordinator.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
                        Tone::Plain,
                    ),
                    (r.slot.to_string(), Tone::Plain),
                    (r.groups.to_string(), Tone::Plain),
                    (
                        r.last_update
                            .as_ref()
                            .map(|t| crate::out::when(t.epoch_ms))
                            .unwrap_or_else(|| "-".into()),
                        Tone::Dim,
                    ),
                ]
            })
            .collect();
        out.listing(
            &[
                "TRANSACTIONAL ID",
                "PID",
                "EPOCH",
                "STATE",
                "PARTS",
                "AGE",
                "TIMEOUT",
                "LATE",
                "COORD",
                "~SLOT",
                "~GROUPS",
                "~LAST UPDATE",
            ],
            rows,
        );
        for p in &list.unreadable_slots {
            eprintln!("kaasctl: slot {} unreadable: {}", p.slot, crate::out::safe(&p.error));
        }
    }
    Ok(Status::from_problems(problems))
}

/// A partition of a transaction, as `txn show` reports it.
#[derive(Debug, Serialize)]
pub struct PartitionDetail {
    pub topic: String,
    pub partition: i32,
    pub leader: Option<i32>,
    pub leader_alive: bool,
    pub high_watermark: Option<i64>,
    pub last_stable_offset: Option<i64>,
    /// First offset of this producer's open transaction here; null once the marker landed.
    pub open_since_offset: Option<i64>,
    pub marker_landed: Option<bool>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct StagedOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

#[derive(Debug, Serialize)]
pub struct QueuedMarker {
    pub target_broker: i32,
    pub path: String,
    pub result: String,
    pub producer_epoch: i16,
    pub partitions: Vec<TopicPartition>,
    pub enqueued: Option<Time>,
}

#[derive(Debug, Serialize)]
pub struct TxnDetail {
    #[serde(flatten)]
    pub summary: TxnRow,
    pub last_epoch: i16,
    pub last_producer_id: i64,
    pub partition_details: Vec<PartitionDetail>,
    pub group_ids: Vec<String>,
    pub staged_offsets: Vec<StagedOffset>,
    pub queued_markers: Vec<QueuedMarker>,
    pub history: Vec<kaas_core::txn::Transition>,
    /// Files this view needed and could not read (a group's offsets, a queue entry):
    /// what they would have shown is missing above, and the exit status says so.
    pub unreadable: Vec<UnreadableFile>,
}

#[derive(Debug, Serialize)]
pub struct UnreadableFile {
    pub path: String,
    pub error: String,
}

fn find(c: &Cluster, tid: &str) -> anyhow::Result<TxnEntry> {
    c.store()
        .get(tid)?
        .ok_or_else(|| anyhow::anyhow!("no transaction with transactional.id {tid:?} (slot {})", slot_for(tid)))
}

fn queued_for(c: &Cluster, pid: i64, unreadable: &mut Vec<UnreadableFile>) -> anyhow::Result<Vec<QueuedMarker>> {
    let mut out = Vec::new();
    for broker in marker_queue::targets(&c.volume)? {
        for (path, e) in marker_queue::list(&c.volume, broker)? {
            let e = match e {
                Ok(e) => e,
                // Whose it is cannot be told: it may be this producer's.
                Err(err) => {
                    unreadable.push(UnreadableFile {
                        path: path.display().to_string(),
                        error: err.to_string(),
                    });
                    continue;
                }
            };
            {
                if e.producer_id == pid {
                    out.push(QueuedMarker {
                        target_broker: broker,
                        path: path.display().to_string(),
                        result: format!("{:?}", e.result),
                        producer_epoch: e.producer_epoch,
                        partitions: e.partitions,
                        enqueued: Time::from_ms(e.enqueued_ms),
                    });
                }
            }
        }
    }
    Ok(out)
}

pub fn detail(c: &Cluster, tid: &str) -> anyhow::Result<TxnDetail> {
    let e = find(c, tid)?;
    let slot = slot_for(tid);
    let partition_details = e
        .partitions
        .iter()
        .map(|tp| {
            let owner = PartitionOwner::read(&PartitionOwner::path(&c.volume, &tp.topic, tp.partition)).ok();
            let leader = owner.as_ref().map(|o| o.broker);
            match inspect_partition(&c.volume.partition_dir(&tp.topic, tp.partition), false) {
                Ok(view) => {
                    let open = view.producers.get(e.producer_id).and_then(|p| p.txn_first_offset);
                    PartitionDetail {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        leader,
                        leader_alive: leader.is_some_and(|l| c.live.contains(&l)),
                        high_watermark: Some(view.log_end_offset),
                        last_stable_offset: Some(view.last_stable_offset),
                        open_since_offset: open,
                        // A marker is written only once the outcome is decided: an
                        // Ongoing transaction with nothing open on a partition has not
                        // written there yet.
                        marker_landed: (e.state != TxnState::Ongoing && e.state != TxnState::Empty)
                            .then_some(open.is_none()),
                        error: None,
                    }
                }
                Err(err) => PartitionDetail {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    leader,
                    leader_alive: leader.is_some_and(|l| c.live.contains(&l)),
                    high_watermark: None,
                    last_stable_offset: None,
                    open_since_offset: None,
                    marker_landed: None,
                    error: Some(err.to_string()),
                },
            }
        })
        .collect();
    let mut staged = Vec::new();
    let mut unreadable = Vec::new();
    for g in &e.groups {
        let offsets = match GroupOffsets::load(&c.volume, g) {
            Ok(offsets) => offsets,
            Err(err) => {
                unreadable.push(UnreadableFile {
                    path: kaas_core::offsets::offsets_file(&c.volume, g).display().to_string(),
                    error: err.to_string(),
                });
                continue;
            }
        };
        {
            if let Some(p) = offsets.pending.get(&e.producer_id) {
                for (topic, parts) in &p.offsets {
                    for (partition, o) in parts {
                        staged.push(StagedOffset {
                            group: g.clone(),
                            topic: topic.clone(),
                            partition: *partition,
                            offset: o.offset,
                        });
                    }
                }
            }
        }
    }
    Ok(TxnDetail {
        summary: row(c, slot, &e),
        last_epoch: e.last_epoch,
        last_producer_id: e.last_producer_id,
        partition_details,
        group_ids: e.groups.iter().cloned().collect(),
        staged_offsets: staged,
        queued_markers: queued_for(c, e.producer_id, &mut unreadable)?,
        history: e.history.iter().cloned().collect(),
        unreadable,
    })
}

pub fn show(c: &Cluster, out: &Out, tid: &str) -> anyhow::Result<Status> {
    let d = detail(c, tid)?;
    let problems = d.partition_details.iter().any(|p| p.error.is_some()) || !d.unreadable.is_empty();
    if out.structured() {
        out.json(&d);
        return Ok(Status::from_problems(problems));
    }
    let s = &d.summary;
    let mut t = out.table(&["FIELD", "VALUE"]);
    let fields: Vec<(&str, String)> = vec![
        ("TransactionalId", s.transactional_id.clone()),
        ("Slot", s.slot.to_string()),
        (
            "Coordinator",
            s.coordinator
                .map(|b| b.to_string())
                .unwrap_or_else(|| "none alive".into()),
        ),
        ("ProducerId", s.producer_id.to_string()),
        ("ProducerEpoch", s.producer_epoch.to_string()),
        ("LastEpoch", d.last_epoch.to_string()),
        ("TransactionState", s.state.to_string()),
        ("TransactionTimeoutMs", s.timeout_ms.to_string()),
        (
            "CurrentTransactionStartTime",
            s.transaction_start
                .as_ref()
                .map(|t| when(t.epoch_ms))
                .unwrap_or_else(|| "-".into()),
        ),
        (
            "TransactionDuration",
            s.open_age_ms.map(age).unwrap_or_else(|| "-".into()),
        ),
        ("Overdue", s.overdue.to_string()),
        ("Groups", d.group_ids.join(", ")),
    ];
    for (k, v) in fields {
        let tone = if k == "TransactionState" {
            state_tone(s.state, s.overdue)
        } else {
            Tone::Plain
        };
        t.add_row(vec![out.cell(k, Tone::Dim), out.cell(v, tone)]);
    }
    outln!("{t}");
    if !d.partition_details.is_empty() {
        let mut p = out.table(&["PARTITION", "LEADER", "HW", "LSO", "OPEN SINCE", "MARKER"]);
        for pd in &d.partition_details {
            let leader = match pd.leader {
                Some(l) if pd.leader_alive => l.to_string(),
                Some(l) => format!("{l} (dead)"),
                None => "-".into(),
            };
            match &pd.error {
                Some(e) => p.add_row(vec![
                    out.cell(format!("{}-{}", pd.topic, pd.partition), Tone::Plain),
                    out.cell(leader, Tone::Plain),
                    out.text(e, Tone::Bad),
                ]),
                None => p.add_row(vec![
                    out.cell(format!("{}-{}", pd.topic, pd.partition), Tone::Plain),
                    out.cell(leader, Tone::Plain),
                    out.cell(pd.high_watermark.unwrap_or(-1), Tone::Plain),
                    out.cell(pd.last_stable_offset.unwrap_or(-1), Tone::Plain),
                    out.cell(
                        pd.open_since_offset
                            .map(|o| o.to_string())
                            .unwrap_or_else(|| "-".into()),
                        Tone::Plain,
                    ),
                    match pd.marker_landed {
                        Some(true) => out.cell("landed", Tone::Good),
                        Some(false) => out.cell("pending", Tone::Warn),
                        // Not decided yet: no marker is due.
                        None => out.cell("-", Tone::Plain),
                    },
                ]),
            };
        }
        outln!("{p}");
    }
    if !d.staged_offsets.is_empty() {
        let mut st = out.table(&["GROUP", "PARTITION", "STAGED OFFSET"]);
        for o in &d.staged_offsets {
            st.add_row(vec![
                out.cell(&o.group, Tone::Plain),
                out.cell(format!("{}-{}", o.topic, o.partition), Tone::Plain),
                out.cell(o.offset, Tone::Plain),
            ]);
        }
        outln!("{st}");
    }
    for m in &d.queued_markers {
        outln!(
            "queued {} marker (epoch {}) for broker {}: {}",
            m.result,
            m.producer_epoch,
            m.target_broker,
            m.path
        );
    }
    for u in &d.unreadable {
        // The error names the path.
        outln!("unreadable, not shown: {}", crate::out::safe(&u.error));
    }
    Ok(Status::from_problems(problems))
}

/// Asks on the terminal; refuses (as an error) when stdin is not interactive.
fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("refusing to change the volume without confirmation: stdin is not a terminal; pass --yes");
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES"))
}
