//! kaas-core: every on-disk format of the shared volume and the state machines the
//! broker and kaasctl share. No network code and no async runtime live here.

pub mod acl;
pub mod admin;
pub mod batch;
pub mod broker;
pub mod cleaner;
pub mod configs;
pub mod consumer_group;
pub mod error;
pub mod failpoint;
pub mod fence_log;
pub mod fsutil;
pub mod idempotence;
pub mod inspect;
pub mod layout;
pub mod log;
pub mod marker_queue;
pub mod offsets;
pub mod ownership;
pub mod partition;
pub mod producer_ids;
pub mod quotas;
pub mod reconcile;
pub mod scram;
pub mod topic;
pub mod txn;
pub mod txn_store;

pub use error::VolumeError;
pub use layout::Volume;

/// Milliseconds since the Unix epoch, for callers that do not inject a clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
