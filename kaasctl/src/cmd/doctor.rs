//! `kaasctl doctor`: the volume and the cluster checked from the outside — leases,
//! clocks, slot files, disk space and inodes, the marker queue, hanging and overdue
//! transactions, pinned LSOs — each finding with what it means and the next step.
//! Works with every broker down. Exit code 3 when something is wrong (a problem;
//! warnings alone exit 0).

use super::Status;
use crate::cluster::Cluster;
use crate::out::{age, Out, Tone};
use kaas_core::broker::list_brokers;
use serde::Serialize;
use std::time::Duration;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Ok,
    Warning,
    Problem,
}

#[derive(Debug, Serialize)]
pub struct Finding {
    /// leases | clocks | slots | disk | markers | transactions | lso | volume
    pub check: &'static str,
    pub severity: Severity,
    pub detail: String,
    /// What to do about it (None when all is well).
    pub next_step: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    /// healthy | warnings | problems
    pub verdict: &'static str,
    pub problems: usize,
    pub warnings: usize,
    pub findings: Vec<Finding>,
}

/// Thresholds of the checks.
pub struct Limits {
    /// A queued marker entry, a Prepare* entry or a pinned LSO older than this is stuck.
    pub stuck_after: Duration,
    /// An LSO held back longer than this by a transaction within its timeout is a
    /// warning.
    pub lso_pinned_after: Duration,
    /// Free space or inodes below this percentage is a problem (twice it a warning).
    pub min_free_percent: f64,
}

fn finding(check: &'static str, severity: Severity, detail: String, next_step: Option<String>) -> Finding {
    Finding {
        check,
        severity,
        detail,
        next_step,
    }
}

fn ok(check: &'static str, detail: String) -> Finding {
    finding(check, Severity::Ok, detail, None)
}

pub fn examine(c: &Cluster, limits: &Limits) -> anyhow::Result<Report> {
    let mut f = Vec::new();
    leases_and_clocks(c, &mut f)?;
    slots(c, &mut f);
    disk(c, limits, &mut f);
    markers(c, limits, &mut f)?;
    transactions(c, limits, &mut f)?;
    lso(c, limits, &mut f)?;
    let problems = f.iter().filter(|x| x.severity == Severity::Problem).count();
    let warnings = f.iter().filter(|x| x.severity == Severity::Warning).count();
    Ok(Report {
        verdict: match (problems, warnings) {
            (0, 0) => "healthy",
            (0, _) => "warnings",
            _ => "problems",
        },
        problems,
        warnings,
        findings: f,
    })
}

fn leases_and_clocks(c: &Cluster, f: &mut Vec<Finding>) -> anyhow::Result<()> {
    let timeout = c.session_timeout_ms;
    let mut leases = Vec::new();
    for lease in list_brokers(&c.volume)? {
        match lease {
            Ok(l) => leases.push(l),
            Err(e) => f.push(finding(
                "leases",
                Severity::Problem,
                format!("unreadable broker lease: {e}"),
                Some("the broker it belongs to is not counted live; restart it (it rewrites its lease) or remove the file if that broker is gone for good".into()),
            )),
        }
    }
    if leases.is_empty() {
        f.push(finding(
            "leases",
            Severity::Warning,
            "no broker has ever run on this volume".into(),
            Some("start a broker with --data-dir pointing here".into()),
        ));
        return Ok(());
    }
    let mut live = 0;
    for l in &leases {
        let age_ms = c.now_ms - l.heartbeat_ms;
        if l.stopped_ms.is_some() {
            f.push(ok(
                "leases",
                format!("broker {} stopped cleanly {} ago", l.broker_id, age(age_ms)),
            ));
        } else if l.is_alive(c.now_ms, timeout) {
            live += 1;
            if l.liveness(c.now_ms, timeout) == kaas_core::broker::Liveness::Stale {
                f.push(finding(
                    "leases",
                    Severity::Warning,
                    format!(
                        "broker {} is stale: its heartbeat is {} old, over half the session timeout ({}); it stopped renewing (killed, frozen, or too slow on the volume) and is judged dead in {} unless it renews — or its clock is behind this host's",
                        l.broker_id,
                        age(age_ms),
                        age(timeout),
                        age(timeout - age_ms)
                    ),
                    Some(format!("is broker {0}'s process running? Look at its log for lease renewal errors (a slow or full volume) and check its clock (NTP)", l.broker_id)),
                ));
            } else if let Some(waited) = l.joining_ms.map(|at| l.heartbeat_ms - at).filter(|_| !l.is_opening()) {
                // Serving, but waiting for its peers to route its share of groups and
                // slots to it. Seconds normally. How long, on its own clock (as of its
                // last renewal): this host's may be ahead or behind.
                let text = format!(
                    "broker {} is joining: it takes its share of groups and transaction slots once every live peer's lease routes to it (waiting {}); clients its peers already send there are told to retry meanwhile",
                    l.broker_id,
                    age(waited.max(0))
                );
                if waited >= timeout {
                    let silent: Vec<String> = leases
                        .iter()
                        .filter(|p| p.broker_id != l.broker_id && p.is_alive(c.now_ms, timeout))
                        .filter(|p| {
                            p.routes.as_ref().is_some_and(|r| {
                                !r.iter()
                                    .any(|r| r.broker_id == l.broker_id && r.incarnation == l.incarnation)
                            })
                        })
                        .map(|p| p.broker_id.to_string())
                        .collect();
                    f.push(finding(
                        "leases",
                        Severity::Warning,
                        text,
                        Some(match silent.as_slice() {
                            [] => format!("its peers' leases name it, but as read before it served: a peer slow to read the leases? Broker {}'s log names the peers it waits for", l.broker_id),
                            [one] => format!("broker {one}'s lease does not name it yet: can broker {one} read broker {}'s lease, and does it renew in time? Broker {}'s log names the peers it waits for", l.broker_id, l.broker_id),
                            many => format!("the leases of brokers {} do not name it yet: can they read broker {}'s lease, and do they renew in time? Broker {}'s log names the peers it waits for", many.join(", "), l.broker_id, l.broker_id),
                        }),
                    ));
                } else {
                    f.push(ok("leases", text));
                }
            } else {
                f.push(ok(
                    "leases",
                    format!("broker {} is live (heartbeat {} ago)", l.broker_id, age(age_ms.max(0))),
                ));
            }
        } else if l.is_stepped_down(c.now_ms, timeout) {
            f.push(finding(
                "leases",
                Severity::Problem,
                format!(
                    "broker {} ({}:{}) is running but stepped down: it could not renew its lease within half the session timeout, so it serves nothing (heartbeat {} ago)",
                    l.broker_id,
                    l.host,
                    l.port,
                    age(age_ms.max(0))
                ),
                Some(format!(
                    "its lease writes are too slow: look at broker {}'s log for lease renewal errors and at the volume's latency; it comes back by itself once renewals are quick again (docs/cluster.md, timing)",
                    l.broker_id
                )),
            ));
        } else {
            f.push(finding(
                "leases",
                Severity::Warning,
                format!(
                    "broker {} ({}:{}) is dead: it did not stop cleanly, and its last heartbeat is {} old",
                    l.broker_id,
                    l.host,
                    l.port,
                    age(age_ms)
                ),
                Some(format!(
                    "live brokers took over its partitions and transactions; restart broker {} if it should run (`kaasctl brokers` shows who owns what)",
                    l.broker_id
                )),
            ));
        }
        // A heartbeat from the future: that broker's clock is ahead of this host's.
        if l.heartbeat_ms - c.now_ms > 1_000 {
            let ahead = l.heartbeat_ms - c.now_ms;
            f.push(finding(
                "clocks",
                if ahead > timeout { Severity::Problem } else { Severity::Warning },
                format!(
                    "broker {}'s last heartbeat is {} ahead of this host's clock{}",
                    l.broker_id,
                    age(ahead),
                    if ahead > timeout {
                        ", more than the session timeout: brokers refuse to start beside it and judge leases wrongly at first sight"
                    } else {
                        ""
                    }
                ),
                Some("sync the clocks of every broker host and this one (chrony or ntpd)".into()),
            ));
        }
    }
    // One broker without the authorizer lets clients past what the others refuse
    // (clients are sent to every broker): all live ones must say the same.
    let mut authorizers: std::collections::BTreeMap<&str, Vec<i32>> = std::collections::BTreeMap::new();
    for l in leases
        .iter()
        .filter(|l| l.stopped_ms.is_none() && l.is_alive(c.now_ms, timeout))
    {
        // A lease without the field is a broker from before ACLs: it authorizes nothing.
        let a = l.authorizer.as_deref().unwrap_or("none");
        authorizers.entry(a).or_default().push(l.broker_id);
    }
    if authorizers.len() > 1 {
        let each: Vec<String> = authorizers
            .iter()
            .map(|(a, ids)| {
                let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                format!("{a} on broker(s) {}", ids.join(", "))
            })
            .collect();
        f.push(finding(
            "authorizer",
            Severity::Problem,
            format!(
                "live brokers authorize differently ({}): a client sent to one gets past what another refuses",
                each.join("; ")
            ),
            Some("restart the odd brokers with the same --authorizer, --super-users and --allow-everyone-if-no-acl-found as the rest (docs/security.md#acls)".into()),
        ));
    } else if let Some((a, ids)) = authorizers.iter().next() {
        let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        f.push(ok(
            "authorizer",
            format!(
                "live brokers authorize alike ({}): broker(s) {}",
                if *a == "none" {
                    "no authorizer".to_string()
                } else {
                    format!("--authorizer {a}")
                },
                ids.join(", ")
            ),
        ));
    }
    // Live brokers renew every second: their heartbeats, read now, should lie within
    // a few seconds of each other whatever their clocks. A stale one (reported above)
    // has stopped renewing: most likely killed, not a clock that disagrees.
    let live_beats: Vec<(i32, i64)> = leases
        .iter()
        .filter(|l| {
            matches!(
                l.liveness(c.now_ms, timeout),
                kaas_core::broker::Liveness::Alive | kaas_core::broker::Liveness::Joining
            )
        })
        .map(|l| (l.broker_id, l.heartbeat_ms))
        .collect();
    if let (Some(lo), Some(hi)) = (
        live_beats.iter().min_by_key(|b| b.1),
        live_beats.iter().max_by_key(|b| b.1),
    ) {
        if hi.1 - lo.1 > timeout / 2 {
            f.push(finding(
                "clocks",
                Severity::Warning,
                format!(
                    "live brokers' heartbeats are {} apart (broker {} behind broker {}): their clocks disagree, or one renews slowly",
                    age(hi.1 - lo.1),
                    lo.0,
                    hi.0
                ),
                Some("sync the brokers' clocks (NTP); kaas tolerates skew below the session timeout".into()),
            ));
        }
    }
    if !f.iter().any(|x| x.check == "clocks") {
        f.push(ok(
            "clocks",
            "no lease heartbeat is ahead of this host's clock; live brokers agree".into(),
        ));
    }
    if live == 0 {
        f.push(finding(
            "leases",
            Severity::Warning,
            "no broker is live: clients cannot connect, transactions time out only once a broker runs".into(),
            Some("start the brokers; kaasctl works meanwhile (txn abort writes markers itself)".into()),
        ));
    }
    Ok(())
}

fn slots(c: &Cluster, f: &mut Vec<Finding>) {
    let mut bad = 0;
    for (slot, file) in c.slots() {
        if let Err(e) = file {
            bad += 1;
            f.push(finding(
                "slots",
                Severity::Problem,
                format!("transaction slot {slot} is unreadable: {e}"),
                Some("its transactions cannot be coordinated, and open transactions it may hold are not judged. Fix the file if you can (a disk or NFS error, a newer kaas version); else `kaasctl txn repair --fix` moves it aside (`slot-N.json.corrupt-*`, kept for inspection) and its transactions are forgotten (docs/transaction-formats.md)".into()),
            ));
        }
    }
    if bad == 0 {
        // A volume no transactional producer used yet has no slot file at all.
        let present = (0..kaas_core::txn_store::SLOTS)
            .filter(|&s| c.store().stamp(s).is_some())
            .count();
        f.push(ok(
            "slots",
            match present {
                0 => "no transaction slot file yet (no transactional producer has used this volume)".to_string(),
                1 => "the volume's one transaction slot file parses".to_string(),
                n => format!("all {n} transaction slot files on the volume parse"),
            },
        ));
    }
}

/// Space and inodes of the volume's file system. KAASCTL_STATVFS
/// (`blocks,free_blocks,files,free_files` in 4 KiB blocks) pins them for reproducible
/// output, as KAASCTL_NOW_MS pins the time.
fn disk(c: &Cluster, limits: &Limits, f: &mut Vec<Finding>) {
    let stat = match std::env::var("KAASCTL_STATVFS") {
        Ok(pinned) => {
            let n: Vec<u64> = pinned.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            match n[..] {
                [blocks, bfree, files, ffree] => Ok((blocks * 4096, bfree * 4096, files, ffree)),
                _ => Err("KAASCTL_STATVFS must be blocks,free_blocks,files,free_files".to_string()),
            }
        }
        Err(_) => rustix::fs::statvfs(c.volume.root())
            .map(|s| {
                let unit = s.f_frsize.max(1);
                (s.f_blocks * unit, s.f_bavail * unit, s.f_files, s.f_favail)
            })
            .map_err(|e| format!("statvfs {}: {e}", c.volume.root().display())),
    };
    let (total, free, files, ffree) = match stat {
        Ok(s) => s,
        Err(e) => {
            f.push(finding(
                "disk",
                Severity::Warning,
                format!("cannot measure free space: {e}"),
                None,
            ));
            return;
        }
    };
    let pct = |part: u64, whole: u64| {
        if whole == 0 {
            100.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let judge = |what: &str, left: f64, figures: String, f: &mut Vec<Finding>| {
        let severity = if left < limits.min_free_percent {
            Severity::Problem
        } else if left < 2.0 * limits.min_free_percent {
            Severity::Warning
        } else {
            Severity::Ok
        };
        let detail = format!("{what}: {left:.1}% free ({figures})");
        f.push(match severity {
            Severity::Ok => ok("disk", detail),
            s => finding(
                "disk",
                s,
                detail,
                Some(format!(
                    "free {what} on the volume: lower retention.ms / retention.bytes, delete unused topics, or grow the file system; a full volume refuses produce with KAFKA_STORAGE_ERROR (docs/limits.md)"
                )),
            ),
        });
    };
    judge(
        "space",
        pct(free, total),
        format!("{} of {} MiB", free >> 20, total >> 20),
        f,
    );
    if files > 0 {
        judge("inodes", pct(ffree, files), format!("{ffree} of {files}"), f);
    }
}

fn markers(c: &Cluster, limits: &Limits, f: &mut Vec<Finding>) -> anyhow::Result<()> {
    let stuck = limits.stuck_after.as_millis() as i64;
    let before = f.len();
    for q in super::markers::queues(c)? {
        if q.unreadable > 0 {
            f.push(finding(
                "markers",
                Severity::Problem,
                format!("{} unreadable entries in broker {}'s marker queue", q.unreadable, q.broker),
                Some(format!("`kaasctl markers show {}` names the files; the transactions they finish stay in their Prepare state until repaired (`kaasctl txn repair --fix`)", q.broker)),
            ));
        }
        if q.depth == 0 {
            continue;
        }
        let oldest = q.oldest_age_ms.unwrap_or(0);
        if !q.alive {
            // A broker restarting (a rolling update) is not live for a moment: its
            // queue is a problem once its oldest entry waited past --stuck-after.
            f.push(finding(
                "markers",
                if oldest > stuck { Severity::Problem } else { Severity::Warning },
                format!(
                    "{} marker entries queued for broker {}, which is not live (oldest {} old)",
                    q.depth,
                    q.broker,
                    age(oldest)
                ),
                Some("live brokers deliver them once they lead the partitions; with none running, `kaasctl txn repair --fix` writes the markers itself".into()),
            ));
        } else if oldest > stuck {
            f.push(finding(
                "markers",
                Severity::Problem,
                format!(
                    "broker {}'s marker queue holds {} entries, the oldest {} old (stuck after {})",
                    q.broker,
                    q.depth,
                    age(oldest),
                    age(stuck)
                ),
                Some(format!("look at broker {}'s log for marker errors (a partition offline, the volume failing); `kaasctl markers show {}`", q.broker, q.broker)),
            ));
        }
    }
    if f.len() == before {
        f.push(ok("markers", "no marker entry is stuck".into()));
    }
    Ok(())
}

fn transactions(c: &Cluster, limits: &Limits, f: &mut Vec<Finding>) -> anyhow::Result<()> {
    let stuck = limits.stuck_after.as_millis() as i64;
    let before = f.len();
    let entries = c.entries();
    for x in super::txn::check(c)? {
        let next = x.fix.as_ref().map(|fix| format!("`kaasctl txn repair --fix` ({fix})"));
        match x.kind {
            "hanging_transaction" | "epoch_regression" => f.push(finding(
                "transactions",
                Severity::Problem,
                format!("{}: {}", x.kind.replace('_', " "), x.detail),
                next.or_else(|| Some("`kaasctl txn find-hanging`; see docs/runbook-hanging-transaction.md".into())),
            )),
            "prepare_not_finished" => {
                // A Prepare* entry is normal for the moment its markers are written.
                if x.since_ms.is_none_or(|at| c.now_ms - at > stuck) {
                    f.push(finding("transactions", Severity::Problem, x.detail, next));
                }
            }
            "unverifiable_open_transaction" => f.push(finding(
                "transactions",
                Severity::Problem,
                x.detail,
                Some("make the slot readable (see the slots check), then `kaasctl txn find-hanging`".into()),
            )),
            "unreadable_file" => f.push(finding(
                "volume",
                Severity::Problem,
                x.detail,
                Some("restore or remove the file; `kaasctl txn repair` lists what it affects".into()),
            )),
            // Reported by the slots and markers checks.
            "unreadable_slot" | "queue_to_dead_broker" => {}
            _ => f.push(finding("transactions", Severity::Problem, x.detail, next)),
        }
    }
    for e in entries
        .iter()
        .filter(|e| e.state == kaas_core::txn::TxnState::Ongoing && e.is_overdue(c.now_ms))
    {
        let (tid, age_ms, timeout_ms) = (&e.transactional_id, c.now_ms - e.txn_start_ms, e.timeout_ms);
        let owner = c.slot_owner(kaas_core::txn::slot_for(tid));
        f.push(finding(
            "transactions",
            overdue_severity(c, e, stuck),
            format!(
                "{:?} has been open {}, past its timeout ({})",
                tid,
                age(age_ms),
                age(timeout_ms as i64)
            ),
            Some(match owner {
                Some(b) if c.joining.contains(&b) => format!(
                    "broker {b} owns its slot but is joining: its reaper aborts it once every peer's lease routes to broker {b}; now: `{}`",
                    crate::out::abort_command(tid)
                ),
                Some(b) => format!(
                    "broker {b} coordinates it and aborts it at its next reaper sweep; now: `{}`",
                    crate::out::abort_command(tid)
                ),
                None => format!("no live broker coordinates it: `{}`", crate::out::abort_command(tid)),
            }),
        ));
    }
    if f.len() == before {
        f.push(ok("transactions", "no hanging, stuck or overdue transaction".into()));
    }
    Ok(())
}

/// An Ongoing transaction past its timeout: the coordinator's reaper aborts it at its
/// next sweep, so that is a warning while it is overdue by less than `--stuck-after`
/// and a live broker coordinates it; a problem after, or with no live coordinator.
fn overdue_severity(c: &Cluster, e: &kaas_core::txn::TxnEntry, stuck_ms: i64) -> Severity {
    let overdue_by = c.now_ms - (e.txn_start_ms + e.timeout_ms as i64);
    if overdue_by > stuck_ms || c.slot_owner(kaas_core::txn::slot_for(&e.transactional_id)).is_none() {
        Severity::Problem
    } else {
        Severity::Warning
    }
}

/// Partitions whose LSO is held back: by a transaction that should have ended — an
/// Ongoing one past its timeout (with the transactions check's severity for it), or a
/// Prepare* one older than `--stuck-after` — one finding per partition; and by a
/// transaction within its timeout for longer than `--lso-pinned-after` — a warning per
/// transaction, naming its partitions and the consumer groups waiting behind it (a
/// Flink sink may keep one open for minutes on purpose, but a forgotten producer looks
/// the same to its consumers). One no coordinator knows as open is reported by the
/// transactions check, after it confirmed it by reading the partition again.
fn lso(c: &Cluster, limits: &Limits, f: &mut Vec<Finding>) -> anyhow::Result<()> {
    use kaas_core::txn::TxnState;
    let stuck = limits.stuck_after.as_millis() as i64;
    let pinned_after = limits.lso_pinned_after.as_millis() as i64;
    let before = f.len();
    let (pinned, entries) = super::lso::pinned_with_entries(c, None)?;
    let by_pid = kaas_core::reconcile::index_by_producer(entries.iter());
    let mut held_long: std::collections::BTreeMap<&str, Vec<&super::lso::LsoExplain>> = Default::default();
    for e in &pinned {
        let Some(pin) = &e.pinned_by else { continue };
        let Some(entry) = by_pid.get(&pin.producer_id) else {
            continue;
        };
        let here = entry
            .partitions
            .iter()
            .any(|tp| tp.topic == e.topic && tp.partition == e.partition);
        // The pin is this transaction's only if the entry's producer is the pinning
        // one now (not an id it had before a rotation, nor an older epoch): else
        // aborting it would not move the LSO, and the transactions check judges it.
        let current = entry.producer_id == pin.producer_id && entry.producer_epoch == pin.producer_epoch;
        // The same rule as the transactions check, so one transaction gets one
        // severity.
        let severity = match entry.state {
            TxnState::Ongoing if entry.is_overdue(c.now_ms) => overdue_severity(c, entry, stuck),
            s if s.is_prepare() && c.now_ms - entry.last_update_ms > stuck => Severity::Problem,
            TxnState::Ongoing if here && current && c.now_ms - entry.txn_start_ms > pinned_after => {
                held_long.entry(&entry.transactional_id).or_default().push(e);
                continue;
            }
            _ => continue,
        };
        f.push(finding(
            "lso",
            severity,
            format!(
                "{}-{}: {} records held back from read_committed consumers{}",
                e.topic,
                e.partition,
                e.blocked_records,
                match pin.open_age_ms {
                    Some(a) => format!(" for {}", age(a)),
                    None => String::new(),
                }
            ),
            Some(e.advice.clone()),
        ));
    }
    for (tid, parts) in held_long {
        let Some(entry) = entries.iter().find(|x| x.transactional_id == tid) else {
            continue;
        };
        let open = c.now_ms - entry.txn_start_ms;
        let names: Vec<String> = parts.iter().map(|e| format!("{}-{}", e.topic, e.partition)).collect();
        let shown = match names.len() {
            0..=8 => names.join(", "),
            n => format!("{} and {} more", names[..6].join(", "), n - 6),
        };
        let records: i64 = parts.iter().map(|e| e.blocked_records).sum();
        let on: Vec<(String, i32, i64, i64)> = parts
            .iter()
            .map(|e| (e.topic.clone(), e.partition, e.high_watermark, e.last_stable_offset))
            .collect();
        let groups = super::lso::groups_behind(c, &on)?;
        let waiting = if groups.is_empty() {
            "no consumer group has committed offsets there".to_string()
        } else {
            let each: Vec<String> = groups
                .iter()
                .take(5)
                .map(|g| format!("{} (lag {}, {} of it held back)", g.group, g.lag, g.held_back))
                .collect();
            let more = groups.len().saturating_sub(5);
            format!(
                "consumer groups behind it: {}{}",
                each.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        };
        f.push(finding(
            "lso",
            Severity::Warning,
            format!(
                "{tid:?} has been open {} (timeout {}, {} left) and holds back the last stable offset of {} partition(s), {records} records in all: {shown}; {waiting}",
                age(open),
                age(entry.timeout_ms as i64),
                age(entry.txn_start_ms + entry.timeout_ms as i64 - c.now_ms),
                names.len(),
            ),
            Some(format!(
                "read_committed consumers see nothing past it until its producer commits or aborts, or its coordinator aborts it at its timeout. If the producer is gone or stuck, end it now: `{}` (`kaasctl lso explain {}` shows each partition)",
                crate::out::abort_command(tid),
                crate::out::shell_word(&parts[0].topic)
            )),
        ));
    }
    if f.len() == before {
        f.push(ok(
            "lso",
            format!(
                "no partition's last stable offset is held back longer than {} or by an overdue or stuck transaction",
                age(pinned_after)
            ),
        ));
    }
    Ok(())
}

pub fn run(c: &Cluster, out: &Out, limits: &Limits) -> anyhow::Result<Status> {
    let report = examine(c, limits)?;
    if out.structured() {
        out.json(&report);
    } else {
        let mut t = out.table(&["CHECK", "STATUS", "FINDING", "NEXT STEP"]);
        for x in &report.findings {
            let (label, tone) = match x.severity {
                Severity::Ok => ("ok", Tone::Good),
                Severity::Warning => ("WARNING", Tone::Warn),
                Severity::Problem => ("PROBLEM", Tone::Bad),
            };
            t.add_row(vec![
                out.cell(x.check, Tone::Plain),
                out.cell(label, tone),
                out.text(&x.detail, Tone::Plain),
                out.text(x.next_step.as_deref().unwrap_or("-"), Tone::Plain),
            ]);
        }
        outln!("{t}");
        outln!(
            "verdict: {}",
            match report.verdict {
                "healthy" => "healthy".to_string(),
                "warnings" => format!("{} warning(s), no problem", report.warnings),
                _ => format!(
                    "{} problem(s), {} warning(s): follow NEXT STEP for each",
                    report.problems, report.warnings
                ),
            }
        );
    }
    Ok(Status::from_problems(report.problems > 0))
}
