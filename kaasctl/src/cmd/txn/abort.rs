//! `kaasctl txn abort`: the force-abort plan, shown, confirmed and carried out.

use super::*;

pub(super) fn describe_plan(plan: &ActionPlan) -> String {
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
        &crate::cluster::command_line(),
        // Now, not when the volume was read: the prompt may have waited minutes, and
        // a PrepareAbort stamped then looks stuck to the reaper at once.
        crate::cluster::now_ms(),
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
