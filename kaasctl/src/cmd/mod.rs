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
