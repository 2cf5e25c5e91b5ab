//! One module per command group; each command returns its data, prints it through
//! `Out`, and reports whether it found problems (exit code 3).

pub mod acls;
pub mod audit;
pub mod brokers;
pub mod compaction;
pub mod doctor;
pub mod fence;
pub mod groups;
pub mod log;
pub mod lso;
pub mod markers;
pub mod metrics;
pub mod producers;
pub mod quotas;
pub mod topics;
pub mod txn;
pub mod users;

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Something is wrong on the volume (exit code 3).
    Problems,
}

impl Status {
    pub fn from_problems(found: bool) -> Status {
        if found {
            Status::Problems
        } else {
            Status::Ok
        }
    }
}

/// Records in the audit journal a change a command already made to `target`
/// (`user alice`, `quota user=alice`). A crash between the two leaves the change
/// unrecorded; a failure to record says the change stands.
pub fn audit(c: &crate::cluster::Cluster, target: &str) -> anyhow::Result<()> {
    let command = crate::cluster::command_line();
    kaas_core::admin::record_audit(
        &c.volume,
        &crate::cluster::admin_actor("kaasctl"),
        &command,
        target,
        None,
        None,
        c.now_ms,
    )
    .map_err(|e| anyhow::anyhow!("{target}: changed, but the audit record could not be written: {e}"))?;
    Ok(())
}
