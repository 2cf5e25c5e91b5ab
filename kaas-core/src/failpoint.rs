//! Fault injection for tests: `KAAS_FAILPOINTS=spec[,spec...]`, read once per process.
//! A spec is `name` (the process aborts there, as abruptly as `kill -9`: no flush, no
//! snapshot, no lease release) or `name=error` / `name=error*N` (the step fails with an
//! I/O error there, every time or the first N times, then heals). Unset in production,
//! where a check is one lookup in an empty list. docs/testing.md lists every point.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The coordinator persisted Prepare* and has not written any marker yet.
pub const TXN_AFTER_PREPARE: &str = "txn-after-prepare";
/// Every marker is durable (or queued); Complete* is not written yet.
pub const TXN_AFTER_MARKERS: &str = "txn-after-markers";
/// Appending a COMMIT/ABORT control batch to a partition log (error injection).
pub const MARKER_APPEND: &str = "marker-append";
/// An ABORT marker is in the log, its `.txnindex` entry not yet written.
pub const ABORT_BEFORE_TXNINDEX: &str = "abort-before-txnindex";
/// A segment roll created the new segment; the producer-state snapshot is not written.
pub const ROLL_BEFORE_SNAPSHOT: &str = "roll-before-snapshot";

enum Action {
    Abort,
    /// Fail this many more times (u64::MAX: always).
    Error(AtomicU64),
}

fn active() -> &'static [(String, Action)] {
    static ACTIVE: OnceLock<Vec<(String, Action)>> = OnceLock::new();
    ACTIVE.get_or_init(|| parse(&std::env::var("KAAS_FAILPOINTS").unwrap_or_default()))
}

fn parse(spec: &str) -> Vec<(String, Action)> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.split_once('=') {
            None => (s.to_string(), Action::Abort),
            Some((name, action)) => {
                let times = match action.strip_prefix("error") {
                    Some("") => u64::MAX,
                    Some(n) => n.trim_start_matches('*').parse().unwrap_or(u64::MAX),
                    None => u64::MAX,
                };
                (name.to_string(), Action::Error(AtomicU64::new(times)))
            }
        })
        .collect()
}

/// A crash point: aborts the process when `name` is configured to abort.
pub fn hit(name: &str) {
    if active().iter().any(|(n, a)| n == name && matches!(a, Action::Abort)) {
        tracing::error!(failpoint = name, "failpoint reached: aborting the process");
        std::process::abort();
    }
}

/// An error point: Err when `name` is configured to fail (and has failures left).
/// Also a crash point, so any named step can be used either way.
pub fn check(name: &str) -> std::io::Result<()> {
    hit(name);
    for (n, a) in active() {
        if let (true, Action::Error(left)) = (n == name, a) {
            let took = left
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| match l {
                    0 => None,
                    u64::MAX => Some(u64::MAX),
                    l => Some(l - 1),
                })
                .is_ok();
            if took {
                tracing::warn!(failpoint = name, "failpoint reached: injecting an I/O error");
                return Err(std::io::Error::other(format!("injected failure at failpoint {name}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_into_aborts_and_bounded_errors() {
        let parsed = parse("a, b=error*2 ,c=error,");
        assert_eq!(parsed.len(), 3);
        assert!(matches!(parsed[0], (ref n, Action::Abort) if n == "a"));
        assert!(matches!(&parsed[1], (n, Action::Error(l)) if n == "b" && l.load(Ordering::Relaxed) == 2));
        assert!(matches!(&parsed[2], (n, Action::Error(l)) if n == "c" && l.load(Ordering::Relaxed) == u64::MAX));
    }
}
