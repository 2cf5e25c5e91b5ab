//! Crash points for tests: `KAAS_FAILPOINTS=name[,name...]` makes the broker abort
//! (as abruptly as `kill -9`: no flush, no snapshot, no lease release) when it reaches
//! a named point, so tests can pin down recovery from exactly that moment. Unset in
//! production; the check is one lookup in a list read once at start.

use std::sync::OnceLock;

static ACTIVE: OnceLock<Vec<String>> = OnceLock::new();

/// Names of the points; docs/testing.md lists what each interrupts.
pub const TXN_AFTER_PREPARE: &str = "txn-after-prepare";
pub const TXN_AFTER_MARKERS: &str = "txn-after-markers";

pub fn hit(name: &str) {
    let active = ACTIVE.get_or_init(|| {
        std::env::var("KAAS_FAILPOINTS")
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    });
    if active.iter().any(|a| a == name) {
        tracing::error!(failpoint = name, "failpoint reached: aborting the process");
        std::process::abort();
    }
}
