//! `kaasctl txn repair` and `txn find-hanging`: what is inconsistent on the volume
//! ([`check`]), each finding with its fix, and the fixes carried out with `--fix`.

use super::*;

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
pub(super) fn open_transactions(dir: &std::path::Path) -> Result<Vec<OpenTransaction>, kaas_core::VolumeError> {
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
            let dir = c.volume.partition_dir(&topic.name, p);
            // Leftovers of a deleted topic of the same name (the broker that opens
            // this topic's partition removes them first): nothing of this topic.
            let owner = kaas_core::topic::PartitionOwner::read(&kaas_core::topic::PartitionOwner::path(
                &c.volume,
                &topic.name,
                p,
            ));
            if owner.is_ok_and(|o| o.topic_id.is_some_and(|id| id != topic.topic_id)) {
                continue;
            }
            // A file gone between the listing and its read (a segment retention or
            // DeleteRecords removed, a snapshot rewritten, the topic deleted) is a
            // change, not damage: read again once; gone with its topic, skipped.
            let mut read = open_transactions(&dir);
            if matches!(&read, Err(e) if e.is_not_found()) {
                read = open_transactions(&dir);
            }
            match read {
                Ok(opens) if !opens.is_empty() => {
                    open_on.insert((topic.name.clone(), p), opens);
                }
                Ok(_) => {}
                Err(e) if e.is_not_found() && !c.volume.topic_file(&topic.name).exists() => {}
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
            findings.push(Finding::new(
                "unreadable_file",
                format!("{FENCE_LOG_DETAIL}{writer}: {e}"),
            ));
        }
    }
    Ok(findings)
}

pub(super) fn print_findings(out: &Out, findings: &[Finding]) {
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

/// How an unreadable fence log's finding begins (find-hanging leaves those out: no
/// hanging transaction hides behind one).
const FENCE_LOG_DETAIL: &str = "fence log of ";

pub fn find_hanging(c: &Cluster, out: &Out) -> anyhow::Result<Status> {
    // With the files the judgement could not read: a partition or slot that does not
    // read may hide a hanging transaction, so "no problems found" (exit 0) would be a
    // claim this command cannot make.
    let findings: Vec<Finding> = check(c)?
        .into_iter()
        .filter(|f| {
            matches!(
                f.kind,
                "hanging_transaction"
                    | "prepare_not_finished"
                    | "epoch_regression"
                    | "unverifiable_open_transaction"
                    | "unreadable_slot"
            ) || (f.kind == "unreadable_file" && !f.detail.starts_with(FENCE_LOG_DETAIL))
        })
        .collect();
    print_findings(out, &findings);
    Ok(Status::from_problems(!findings.is_empty()))
}

pub fn repair(
    c: &Cluster,
    out: &Out,
    fix: bool,
    yes: bool,
    wait: std::time::Duration,
    stuck_after: std::time::Duration,
    accept_slot_loss: bool,
) -> anyhow::Result<Status> {
    let stuck_after_ms = stuck_after.as_millis() as i64;
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
        let cmd = crate::cluster::command_line();
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
                    let txn = admin::HangingTxn {
                        tp,
                        producer_id: f.producer_id.unwrap_or(-1),
                        epoch: f.producer_epoch.unwrap_or(0),
                        first_offset: f.start_offset.unwrap_or(-1),
                        transactional_id: f.transactional_id.clone(),
                        commit: f.commit,
                    };
                    admin::end_hanging(&c.volume, &txn, &c.live, &actor, &cmd, now)
                        .map(|end| match end {
                            admin::HangingEnd::Written => true,
                            admin::HangingEnd::Queued { broker } => {
                                let kind = if f.commit { "COMMIT" } else { "ABORT" };
                                f.fix = Some(format!(
                                    "{kind} marker queued for broker {broker}, which judges it again before writing it"
                                ));
                                false
                            }
                            admin::HangingEnd::NotHanging(why) => {
                                f.fix = Some(format!("nothing written: {why}"));
                                true
                            }
                            admin::HangingEnd::OutcomeChanged(why) => {
                                f.fix = Some(format!("nothing written: {why}"));
                                false
                            }
                        })
                        .map_err(Into::into)
                }
                "prepare_not_finished" => match store.get(f.transactional_id.as_deref().unwrap_or_default())? {
                    // A live coordinator finishes its Prepare* entries itself (its
                    // reaper within seconds): one younger than --stuck-after, as read
                    // now (it may be a newer transaction than the one shown), is left
                    // to it.
                    Some(entry)
                        if !c.live.is_empty()
                            && entry.state.is_prepare()
                            && now - entry.last_update_ms < stuck_after_ms =>
                    {
                        f.fix = Some(format!(
                            "left to its coordinator: younger than --stuck-after ({})",
                            crate::out::age(stuck_after_ms)
                        ));
                        Ok(false)
                    }
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
                            .map(|done| {
                                match done {
                                    admin::Redelivered::Spent => f.fix = Some(
                                        "deleted without writing: its transaction is over (its markers are durable)"
                                            .into(),
                                    ),
                                    admin::Redelivered::Gone => {
                                        f.fix = Some("nothing to do: applied by its leader meanwhile".into())
                                    }
                                    admin::Redelivered::Delivered => {}
                                }
                                true
                            })
                            .map_err(Into::into),
                        Err(e) => Err(e.into()),
                    }
                }
                "unreadable_slot" => {
                    let slot = f.partition.unwrap_or(0) as u32;
                    admin::quarantine_slot(&c.volume, slot, accept_slot_loss, &actor, &cmd, now)
                        .map(|rescue| {
                            f.fix = Some(match rescue {
                                None => "reads fine now; nothing changed".into(),
                                Some(r) => rescue_summary(&r),
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

/// What a slot rescue did, in one line for the FIX column.
fn rescue_summary(r: &admin::SlotRescue) -> String {
    let kept: Vec<String> = r.kept_aside.iter().map(|p| p.display().to_string()).collect();
    let mut out = format!(
        "rewritten with {} entries from {} and {} journal line(s)",
        r.entries,
        if r.checkpoint_kept {
            "its checkpoint"
        } else {
            "no checkpoint (it did not parse)"
        },
        r.lines_kept
    );
    if let Some((offset, why)) = &r.dropped_at {
        out.push_str(&format!(
            "; {} line(s) dropped from byte {offset} ({why})",
            r.lines_dropped
        ));
    }
    if !r.maybe_stale.is_empty() {
        out.push_str(&format!(
            "; may have lost a transition: {} (check them with `kaasctl txn timeline`)",
            r.maybe_stale.join(", ")
        ));
    }
    for (id, from, to) in &r.epochs_raised {
        out.push_str(&format!(
            "; {id:?} raised from epoch {from} to {to}, which a fence log records (its bump's line was dropped)"
        ));
    }
    if !r.behind_their_fence.is_empty() {
        out.push_str(&format!(
            "; a fence log knows a newer epoch than the transaction in flight of: {} (check them)",
            r.behind_their_fence.join(", ")
        ));
    }
    if !r.accepted_loss.is_empty() {
        out.push_str(&format!("; loss accepted: {}", r.accepted_loss.join("; ")));
    }
    if !kept.is_empty() {
        out.push_str(&format!("; damaged files kept as {}", kept.join(" and ")));
    }
    out
}
