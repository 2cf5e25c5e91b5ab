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
}

fn find(c: &Cluster, tid: &str) -> anyhow::Result<TxnEntry> {
    c.store()
        .get(tid)?
        .ok_or_else(|| anyhow::anyhow!("no transaction with transactional.id {tid:?} (slot {})", slot_for(tid)))
}

fn queued_for(c: &Cluster, pid: i64) -> anyhow::Result<Vec<QueuedMarker>> {
    let mut out = Vec::new();
    for broker in marker_queue::targets(&c.volume)? {
        for (path, e) in marker_queue::list(&c.volume, broker)? {
            if let Ok(e) = e {
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
                        marker_landed: Some(open.is_none()),
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
    for g in &e.groups {
        if let Ok(offsets) = GroupOffsets::load(&c.volume, g) {
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
        queued_markers: queued_for(c, e.producer_id)?,
        history: e.history.iter().cloned().collect(),
    })
}

pub fn show(c: &Cluster, out: &Out, tid: &str) -> anyhow::Result<Status> {
    let d = detail(c, tid)?;
    let problems = d.partition_details.iter().any(|p| p.error.is_some());
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
        // The group list may wrap between groups; every other value is one word.
        let value = if k == "Groups" {
            out.text(v, tone)
        } else {
            out.cell(v, tone)
        };
        t.add_row(vec![out.cell(k, Tone::Dim), value]);
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
                    if pd.marker_landed == Some(true) {
                        out.cell("landed", Tone::Good)
                    } else {
                        out.cell("pending", Tone::Warn)
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
    Ok(Status::from_problems(problems))
}

fn command_line() -> Vec<String> {
    std::env::args().collect()
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

fn describe_plan(plan: &ActionPlan) -> String {
    let mut s = format!(
        "{} transaction {:?} (producer {}, slot {}): {} -> {} at epoch {}\n",
        if plan.commit { "complete (commit)" } else { "abort" },
        plan.transactional_id,
        plan.producer_id,
        plan.slot,
        plan.state_before.as_str(),
        if plan.commit {
            "PrepareCommit -> CompleteCommit"
        } else {
            "PrepareAbort -> CompleteAbort"
        },
        plan.marker_epoch
    );
    if plan.marker_epoch > plan.epoch_before {
        s += &format!(
            "  fence producer {} at epoch {} (admin fence log)\n",
            plan.producer_id, plan.marker_epoch
        );
    }
    for (tp, route) in &plan.partitions {
        let how = match route {
            MarkerRoute::Direct => "written directly (no live owner)".to_string(),
            MarkerRoute::Queue { broker } => format!("queued for broker {broker}"),
        };
        s += &format!(
            "  {} marker on {}-{}: {how}\n",
            if plan.commit { "COMMIT" } else { "ABORT" },
            tp.topic,
            tp.partition
        );
    }
    for g in &plan.groups {
        s += &format!(
            "  staged offsets of group {g:?}: {}\n",
            if plan.commit { "committed" } else { "discarded" }
        );
    }
    s
}

#[derive(Serialize)]
struct AbortOutput<'a> {
    dry_run: bool,
    plan: &'a ActionPlan,
    report: Option<&'a admin::ActionReport>,
}

pub fn abort(c: &Cluster, out: &Out, args: &TxnAbortArgs) -> anyhow::Result<Status> {
    let (plan, _) = admin::plan_abort(&c.volume, &args.transactional_id, &c.live)?;
    if args.dry_run {
        if out.structured() {
            out.json(&AbortOutput {
                dry_run: true,
                plan: &plan,
                report: None,
            });
        } else {
            outp!("would {}", describe_plan(&plan));
        }
        return Ok(Status::Ok);
    }
    if !out.structured() {
        eprint!("{}", describe_plan(&plan));
    }
    if !args.yes && !confirm("proceed?")? {
        anyhow::bail!("nothing changed: not confirmed");
    }
    let report = admin::execute(
        &c.volume,
        &plan,
        &crate::cluster::admin_actor("kaasctl"),
        &command_line(),
        c.now_ms,
        args.wait,
    )?;
    if out.structured() {
        out.json(&AbortOutput {
            dry_run: false,
            plan: &plan,
            report: Some(&report),
        });
    } else {
        outln!(
            "transaction {:?}: {} -> {} (epoch {} -> {})",
            plan.transactional_id,
            report.before.state.as_str(),
            report.after.state.as_str(),
            report.before.producer_epoch,
            report.after.producer_epoch
        );
        for tp in &report.markers_written {
            outln!("  ABORT marker written to {}-{}", tp.topic, tp.partition);
        }
        for (b, p) in &report.markers_queued {
            outln!("  ABORT markers queued for broker {b}: {}", p.display());
        }
        if !report.completed {
            outln!(
                "  queued markers not yet written after {}; the owning broker completes the transaction when they land",
                humantime::format_duration(args.wait)
            );
        }
        outln!("  audit: {}", report.audit_file.display());
    }
    Ok(Status::Ok)
}

/// One thing `repair` or `find-hanging` found.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// hanging_transaction | prepare_not_finished | queue_to_dead_broker | unreadable_slot | unreadable_file | epoch_regression | unverifiable_open_transaction
    pub kind: &'static str,
    pub detail: String,
    pub transactional_id: Option<String>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub producer_id: Option<i64>,
    pub producer_epoch: Option<i16>,
    /// First offset of the open transaction on the partition (hanging ones).
    pub start_offset: Option<i64>,
    /// The file concerned, when there is one.
    pub path: Option<String>,
    pub fixed: bool,
    pub fix: Option<String>,
    /// For a hanging transaction: whether the marker that ends it is a COMMIT (the
    /// coordinator recorded a commit at that epoch) rather than an ABORT.
    pub commit: bool,
    /// For a Prepare* entry: when it last changed, as this check read it (doctor
    /// judges its age by it). Not part of the JSON.
    #[serde(skip)]
    pub since_ms: Option<i64>,
    /// Found by repair's second look, after the operator confirmed what it showed:
    /// reported, not fixed.
    #[serde(skip)]
    pub unconfirmed: bool,
}

impl Finding {
    /// Whether `other` names the same problem (kind and subject).
    fn same_problem(&self, other: &Finding) -> bool {
        (
            self.kind,
            &self.transactional_id,
            &self.topic,
            self.partition,
            self.producer_id,
            self.producer_epoch,
            self.start_offset,
            &self.path,
            self.since_ms,
        ) == (
            other.kind,
            &other.transactional_id,
            &other.topic,
            other.partition,
            other.producer_id,
            other.producer_epoch,
            other.start_offset,
            &other.path,
            other.since_ms,
        )
    }

    fn new(kind: &'static str, detail: String) -> Self {
        Finding {
            kind,
            detail,
            transactional_id: None,
            topic: None,
            partition: None,
            producer_id: None,
            producer_epoch: None,
            start_offset: None,
            path: None,
            fixed: false,
            fix: None,
            commit: false,
            since_ms: None,
            unconfirmed: false,
        }
    }
}

/// Per partition: (producer id, epoch, first offset) of each open transaction.
type OpenTransactions = BTreeMap<(String, i32), Vec<OpenTransaction>>;

/// An open transaction on a partition: (producer id, epoch, first offset).
type OpenTransaction = (i64, i16, i64);

/// The open transactions of one partition.
fn open_transactions(dir: &std::path::Path) -> Result<Vec<OpenTransaction>, kaas_core::VolumeError> {
    Ok(inspect_partition(dir, false)?
        .producers
        .producers
        .values()
        .filter_map(|e| e.txn_first_offset.map(|first| (e.producer_id, e.epoch, first)))
        .collect())
}

/// The exact join behind find-hanging, repair and doctor: every partition's open
/// transactions against the coordinator slots, Prepare* entries against the
/// partitions, queue entries against live brokers, and every unreadable file.
///
/// Read while brokers run, so in the order that keeps a busy producer from looking
/// hanging: the partitions first, the slots after (a producer that moved on to its
/// next transaction meanwhile shows there as newer, never older); and a transaction
/// judged hanging is confirmed by reading its partition again, after the slots: it
/// must still be open there from the same first offset (a marker written between
/// the first read and the slot read would otherwise look missing).
pub fn check(c: &Cluster) -> anyhow::Result<Vec<Finding>> {
    let mut file_findings = Vec::new();
    let mut open_on: OpenTransactions = BTreeMap::new();
    for topic in list_topics(&c.volume)? {
        let topic = match topic {
            Ok(t) => t,
            Err(e) => {
                file_findings.push(Finding::new("unreadable_file", e.to_string()));
                continue;
            }
        };
        for p in 0..topic.partitions {
            match open_transactions(&c.volume.partition_dir(&topic.name, p)) {
                Ok(opens) if !opens.is_empty() => {
                    open_on.insert((topic.name.clone(), p), opens);
                }
                Ok(_) => {}
                Err(e) => file_findings.push(Finding::new("unreadable_file", e.to_string())),
            }
        }
    }
    let mut findings = Vec::new();
    let mut entries: Vec<TxnEntry> = Vec::new();
    for (slot, file) in c.slots() {
        match file {
            Ok(f) => entries.extend(f.entries.into_values()),
            Err(e) => {
                let mut f = Finding::new("unreadable_slot", e.to_string());
                f.partition = Some(slot as i32);
                findings.push(f);
            }
        }
    }
    let unreadable_slots: Vec<String> = findings
        .iter()
        .filter(|f| f.kind == "unreadable_slot")
        .filter_map(|f| f.partition.map(|s| s.to_string()))
        .collect();
    findings.extend(file_findings);
    // Entries by every producer id they hold or held (the broker's reconcile uses the same).
    let by_pid = reconcile::index_by_producer(entries.iter());
    for ((topic, partition), opens) in &open_on {
        let mut reread: Option<Result<Vec<OpenTransaction>, String>> = None;
        for &(pid, epoch, first) in opens {
            let tp = TopicPartition {
                topic: topic.clone(),
                partition: *partition,
            };
            let entry = by_pid.get(&pid).copied();
            // The slots were read after the partition, so an entry at a lower epoch
            // than the partition knows is a real regression, not a race.
            if entry.is_some_and(|e| e.producer_id == pid && e.producer_epoch < epoch) {
                let e = entry.expect("checked");
                let mut f = Finding::new("epoch_regression", format!("partition {topic}-{partition} knows producer {pid} at epoch {epoch}, its coordinator entry {:?} only at {}", e.transactional_id, e.producer_epoch));
                f.transactional_id = Some(e.transactional_id.clone());
                f.topic = Some(topic.clone());
                f.partition = Some(*partition);
                f.producer_id = Some(pid);
                f.producer_epoch = Some(epoch);
                findings.push(f);
            }
            let unverifiable = |why: String| {
                let mut f = Finding::new(
                    "unverifiable_open_transaction",
                    format!("open transaction of producer {pid} on {topic}-{partition} since offset {first}: {why}; not judged"),
                );
                f.topic = Some(topic.clone());
                f.partition = Some(*partition);
                f.producer_id = Some(pid);
                f.producer_epoch = Some(epoch);
                f.start_offset = Some(first);
                f
            };
            if matches!(reconcile::judge(entry, &tp, pid, epoch), Verdict::Hanging { .. }) {
                let now = reread.get_or_insert_with(|| {
                    open_transactions(&c.volume.partition_dir(topic, *partition)).map_err(|e| e.to_string())
                });
                match now {
                    Ok(now) if now.contains(&(pid, epoch, first)) => {}
                    // It ended (or another began) while we read: not hanging.
                    Ok(_) => continue,
                    // Not confirmed: never judged on the old read, still reported.
                    Err(e) => {
                        findings.push(unverifiable(format!(
                            "the partition could not be read again to confirm it ({e}); run the check again"
                        )));
                        continue;
                    }
                }
                // Its entry may be in a slot that could not be read: never guess (as
                // the brokers' reconcile backstop), and never abort it.
                if entry.is_none() && !unreadable_slots.is_empty() {
                    findings.push(unverifiable(format!(
                        "no readable coordinator entry has this producer id, and slot(s) {} could not be read (once the slot reads again, or `txn repair --fix` has moved it aside, run repair again)",
                        unreadable_slots.join(", ")
                    )));
                    continue;
                }
            }
            if let Verdict::Hanging { commit, reason: why } = reconcile::judge(entry, &tp, pid, epoch) {
                let mut f = Finding::new(
                    "hanging_transaction",
                    format!("open transaction of producer {pid} on {topic}-{partition} since offset {first}: {why}"),
                );
                f.transactional_id = entry.map(|e| e.transactional_id.clone());
                f.topic = Some(topic.clone());
                f.partition = Some(*partition);
                f.producer_id = Some(pid);
                f.producer_epoch = Some(epoch);
                f.start_offset = Some(first);
                f.commit = commit;
                f.fix = Some(format!(
                    "write {} marker to the partition",
                    if commit { "a COMMIT" } else { "an ABORT" }
                ));
                findings.push(f);
            }
        }
    }
    let mut prepared: Vec<&TxnEntry> = entries.iter().filter(|e| e.state.is_prepare()).collect();
    prepared.sort_by_key(|e| e.producer_id);
    for e in prepared {
        let pending: Vec<String> = e
            .partitions
            .iter()
            .filter(|tp| {
                open_on
                    .get(&(tp.topic.clone(), tp.partition))
                    .is_some_and(|o| o.iter().any(|&(pid, _, _)| pid == e.producer_id))
            })
            .map(|tp| format!("{}-{}", tp.topic, tp.partition))
            .collect();
        let mut f = Finding::new(
            "prepare_not_finished",
            format!(
                "{:?} is {} since {} ({}); markers pending on: {}",
                e.transactional_id,
                e.state.as_str(),
                when(e.last_update_ms),
                age(c.now_ms - e.last_update_ms),
                if pending.is_empty() {
                    "none (only the completion is missing)".into()
                } else {
                    pending.join(", ")
                }
            ),
        );
        f.transactional_id = Some(e.transactional_id.clone());
        f.producer_id = Some(e.producer_id);
        f.producer_epoch = Some(e.producer_epoch);
        f.fix = Some("finish it: markers, offsets, Complete*".into());
        f.since_ms = Some(e.last_update_ms);
        findings.push(f);
    }
    for broker in marker_queue::targets(&c.volume)? {
        for (path, entry) in marker_queue::list(&c.volume, broker)? {
            match entry {
                Err(e) => findings.push(Finding::new("unreadable_file", e.to_string())),
                Ok(m) if !c.live.contains(&broker) => {
                    let mut f = Finding::new(
                        "queue_to_dead_broker",
                        format!("{} addressed to dead broker {broker}", path.display()),
                    );
                    f.transactional_id = Some(m.transactional_id.clone()).filter(|s| !s.is_empty());
                    f.producer_id = Some(m.producer_id);
                    f.producer_epoch = Some(m.producer_epoch);
                    f.path = Some(path.display().to_string());
                    f.fix = Some("deliver its markers and delete it".into());
                    findings.push(f);
                }
                Ok(_) => {}
            }
        }
    }
    for (writer, log) in list_fence_logs(&c.volume)? {
        if let Err(e) = log {
            findings.push(Finding::new("unreadable_file", format!("fence log of {writer}: {e}")));
        }
    }
    Ok(findings)
}

fn print_findings(out: &Out, findings: &[Finding]) {
    if out.structured() {
        out.json(&findings);
        return;
    }
    if findings.is_empty() {
        outln!("no problems found");
        return;
    }
    let mut t = out.table(&["PROBLEM", "DETAIL", "FIX"]);
    for f in findings {
        t.add_row(vec![
            out.cell(f.kind, if f.fixed { Tone::Good } else { Tone::Bad }),
            out.text(&f.detail, Tone::Plain),
            out.text(
                match (&f.fix, f.fixed) {
                    (Some(fix), true) => format!("fixed: {fix}"),
                    (Some(fix), false) => fix.clone(),
                    (None, _) => "manual".into(),
                },
                if f.fixed { Tone::Good } else { Tone::Plain },
            ),
        ]);
    }
    outln!("{t}");
}

pub fn find_hanging(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    let findings: Vec<Finding> = check(c)?
        .into_iter()
        .filter(|f| {
            matches!(
                f.kind,
                "hanging_transaction" | "prepare_not_finished" | "epoch_regression" | "unverifiable_open_transaction"
            )
        })
        .collect();
    print_findings(out, &findings);
    Ok(Status::from_problems(!findings.is_empty()))
}

pub fn repair(c: &Cluster, out: &Out, fix: bool, yes: bool, wait: std::time::Duration) -> anyhow::Result<Status> {
    let mut c = c;
    let fresh;
    let mut findings = check(c)?;
    if fix && findings.iter().any(|f| f.fix.is_some() || f.kind == "unreadable_slot") {
        if !yes {
            print_findings(out, &findings);
            if !confirm("repair these?")? {
                anyhow::bail!("nothing changed: not confirmed");
            }
            // The operator took a while: look again (brokers may have started or
            // died, transactions moved on) and fix only what was shown and is still
            // there; anything new is reported, not fixed.
            fresh = crate::cluster::Cluster::open(c.volume.clone(), c.session_timeout_ms)?;
            c = &fresh;
            let confirmed = std::mem::replace(&mut findings, check(c)?);
            for f in findings
                .iter_mut()
                .filter(|f| !confirmed.iter().any(|g| g.same_problem(f)))
            {
                f.unconfirmed = true;
                f.fix = None;
                f.detail = format!(
                    "{} (found after the confirmation: run repair again to fix it)",
                    f.detail
                );
            }
        }
        let actor = crate::cluster::admin_actor("kaasctl");
        let cmd = command_line();
        let store = c.store();
        for f in findings.iter_mut().filter(|f| !f.unconfirmed) {
            let now = c.now_ms;
            // Ok(true): fixed now; Ok(false): handed to a live broker (its queue),
            // which finishes it shortly — still reported, so the exit code says so.
            let result: anyhow::Result<bool> = match f.kind {
                "hanging_transaction" => {
                    let tp = TopicPartition {
                        topic: f.topic.clone().unwrap_or_default(),
                        partition: f.partition.unwrap_or(0),
                    };
                    admin::end_hanging(
                        &c.volume,
                        &tp,
                        f.producer_id.unwrap_or(-1),
                        f.producer_epoch.unwrap_or(0),
                        f.commit,
                        &c.live,
                        &actor,
                        &cmd,
                        now,
                    )
                    .map(|route| match route {
                        MarkerRoute::Direct => true,
                        MarkerRoute::Queue { broker } => {
                            let kind = if f.commit { "COMMIT" } else { "ABORT" };
                            f.fix = Some(format!("{kind} marker queued for broker {broker}"));
                            false
                        }
                    })
                    .map_err(Into::into)
                }
                "prepare_not_finished" => match store.get(f.transactional_id.as_deref().unwrap_or_default())? {
                    Some(entry) => match admin::plan_finish(&c.volume, &entry, &c.live) {
                        Some(plan) => admin::execute(&c.volume, &plan, &actor, &cmd, now, wait)
                            .map(|report| {
                                if !report.completed {
                                    f.fix = Some("markers queued for the owning broker, which completes it".into());
                                }
                                report.completed
                            })
                            .map_err(Into::into),
                        None => Ok(true),
                    },
                    None => Ok(true),
                },
                "queue_to_dead_broker" => {
                    let path = std::path::PathBuf::from(f.path.clone().unwrap_or_default());
                    match kaas_core::error::read_versioned_json::<marker_queue::MarkerEntry>(
                        &path,
                        "marker queue entry",
                        marker_queue::MARKER_FORMAT_VERSION,
                    ) {
                        Ok(entry) => admin::redeliver(&c.volume, &path, &entry, &c.live, &actor, &cmd, now)
                            .map(|_| true)
                            .map_err(Into::into),
                        Err(e) => Err(e.into()),
                    }
                }
                "unreadable_slot" => {
                    let slot = f.partition.unwrap_or(0) as u32;
                    admin::quarantine_slot(&c.volume, slot, &actor, &cmd, now)
                        .map(|moved| {
                            let moved: Vec<String> = moved.iter().map(|p| p.display().to_string()).collect();
                            f.fix = Some(if moved.is_empty() {
                                "reads fine now; nothing moved".into()
                            } else {
                                format!("moved aside to {}", moved.join(" and "))
                            });
                            true
                        })
                        .map_err(Into::into)
                }
                _ => continue,
            };
            match result {
                Ok(done) => f.fixed = done,
                Err(e) => f.detail = format!("{} (fix failed: {e:#})", f.detail),
            }
        }
    }
    print_findings(out, &findings);
    Ok(Status::from_problems(findings.iter().any(|f| !f.fixed)))
}

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
    for q in queued_for(c, e.producer_id)? {
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
