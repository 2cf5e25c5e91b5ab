//! Fault injection for tests: `KAAS_FAILPOINTS=spec[,spec...]`, read once per process.
//! A spec is `name` (the process aborts the first time it gets there, as abruptly as
//! `kill -9`: no flush, no snapshot, no lease release), `name=abort@N` (it aborts the
//! N-th time, so a test can let earlier rolls or aborts complete first) or
//! `name=error` / `name=error*N` (the step fails with an I/O error there, every time or
//! the first N times, then heals; `name=error@N`: only the N-th time). Unset in production, where a check is one lookup in
//! an empty list. docs/testing.md lists every point.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The coordinator persisted Prepare* and has not written any marker yet.
pub const TXN_AFTER_PREPARE: &str = "txn-after-prepare";
/// Every marker is durable (or queued); Complete* is not written yet.
pub const TXN_AFTER_MARKERS: &str = "txn-after-markers";
/// The coordinator's queue entries for partitions led elsewhere are durable and marked
/// on the slot entry; no leader is notified yet.
pub const TXN_AFTER_QUEUED: &str = "txn-after-queued";
/// Sending a WriteTxnMarkers notification with markers to a partition's leader (error
/// injection: the notification is lost; the leader's poll finds the entry). Batches of
/// fence or cluster notices alone do not pass here.
pub const MARKER_NOTIFY: &str = "marker-notify";
/// A leader received a WriteTxnMarkers notification with markers (not a fence or
/// cluster notice alone) and has applied nothing of it.
pub const MARKERS_NOTIFIED: &str = "markers-notified";
/// A transaction slot's journal append (error injection, or a crash before it).
pub const TXN_JOURNAL_APPEND: &str = "txn-journal-append";
/// The fdatasync after cutting a torn tail off a transaction slot's journal (error
/// injection: as if the kernel reported EIO).
pub const TXN_JOURNAL_CUT_SYNC: &str = "txn-journal-cut-sync";
/// The fdatasync of a transaction slot's journal that the group commit issues
/// (error injection: as if the kernel reported a failed write-back).
pub const TXN_JOURNAL_SYNC: &str = "txn-journal-sync";
/// A fold wrote the new slot checkpoint; the journal is not emptied yet.
pub const TXN_FOLD_AFTER_CHECKPOINT: &str = "txn-fold-after-checkpoint";
/// Any fsync of a partition's log file: the one an acknowledgment (or the flusher)
/// waits for, a roll's seal (error injection: as if the kernel reported EIO and
/// dropped the dirty pages; the failure is sticky, as `LogFile::sync` makes it).
pub const LOG_FSYNC: &str = "log-fsync";
/// Writing a batch into a partition's active segment (error injection: the write fails
/// with an I/O error before any byte of it is written).
pub const SEGMENT_WRITE: &str = "segment-write";
/// Appending a COMMIT/ABORT control batch to a partition log (error injection).
pub const MARKER_APPEND: &str = "marker-append";
/// An ABORT marker is in the log (not fsynced), its `.txnindex` entry not yet written.
pub const ABORT_BEFORE_TXNINDEX: &str = "abort-before-txnindex";
/// `.txnindex` entries are written (an ABORT marker's, or ones re-derived at open),
/// not yet fsynced.
pub const ABORT_AFTER_TXNINDEX_WRITE: &str = "abort-after-txnindex-write";
/// The `.txnindex` entry is fsynced; the ABORT marker itself is not fsynced yet (the
/// caller does that after `write_marker` returns).
pub const ABORT_AFTER_TXNINDEX_FSYNC: &str = "abort-after-txnindex-fsync";
/// A roll sealed (fsynced the log and finalised the index of) the old segment; the new
/// segment does not exist yet.
pub const ROLL_AFTER_SEAL: &str = "roll-after-seal";
/// A roll created the new, still empty, segment file (directory fsynced); the batch
/// that caused the roll is not appended yet.
pub const ROLL_AFTER_NEW_SEGMENT: &str = "roll-after-new-segment";
/// A roll is done and the batch that caused it is in the new segment; the
/// producer-state snapshot is not written.
pub const ROLL_BEFORE_SNAPSHOT: &str = "roll-before-snapshot";
/// A roll wrote the producer-state snapshot; the append is not fsynced nor answered.
pub const ROLL_AFTER_SNAPSHOT: &str = "roll-after-snapshot";

/// A renewal of the broker's lease (a `delay:` makes every renewal slow).
pub const LEASE_RENEW: &str = "lease-renew";
/// A starting broker wrote its lease (marked opening) and has not opened the volume
/// yet (a `delay:` here stands for a long recovery).
pub const BROKER_OPEN: &str = "broker-open";
/// DeleteTopics' removal of the topic's file is durable (the groups' offsets of it
/// were dropped before); no partition directory is removed yet.
pub const TOPIC_FILE_REMOVED: &str = "topic-file-removed";
/// The cleaner recorded a swap (`cleaning-swap.json`); no old segment is removed yet.
pub const CLEAN_AFTER_SWAP_RECORD: &str = "clean-after-swap-record";
/// The cleaner swapped its segments in; the swap record is not removed yet.
pub const CLEAN_AFTER_SWAP: &str = "clean-after-swap";

enum Action {
    /// Abort when this many more hits have passed (0: at the next one).
    Abort(AtomicU64),
    /// Fail this many more times (u64::MAX: always).
    Error(AtomicU64),
    /// Fail once, when this many more passes have gone by (0: at the next one).
    ErrorAt(AtomicU64),
    /// Every pass sleeps this many milliseconds (a slow volume).
    Delay(u64),
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
            None => (s.to_string(), Action::Abort(AtomicU64::new(0))),
            Some((name, action)) if action.starts_with("abort") => {
                let nth = action
                    .strip_prefix("abort")
                    .map(|n| n.trim_start_matches('@'))
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(1);
                (name.to_string(), Action::Abort(AtomicU64::new(nth.saturating_sub(1))))
            }
            Some((name, action)) if action.starts_with("delay:") => {
                let ms = action["delay:".len()..].parse().unwrap_or(1000);
                (name.to_string(), Action::Delay(ms))
            }
            Some((name, action)) if action.starts_with("error@") => {
                let nth = action["error@".len()..].parse::<u64>().unwrap_or(1);
                (name.to_string(), Action::ErrorAt(AtomicU64::new(nth.saturating_sub(1))))
            }
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
    for (n, a) in active() {
        if let (true, Action::Delay(ms)) = (n == name, a) {
            tracing::warn!(failpoint = name, ms, "failpoint reached: delaying");
            std::thread::sleep(std::time::Duration::from_millis(*ms));
        }
        if let (true, Action::Abort(skip)) = (n == name, a) {
            // Ok(previous) while hits are still to be let through; Err(0) when this is the one.
            if skip
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| l.checked_sub(1))
                .is_err()
            {
                tracing::error!(failpoint = name, "failpoint reached: aborting the process");
                std::process::abort();
            }
        }
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
        if let (true, Action::ErrorAt(skip)) = (n == name, a) {
            // The pass that finds 0 fails and leaves u64::MAX (spent); every pass
            // before it counts down, every one after it finds it spent.
            let took = skip.fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| match l {
                0 => Some(u64::MAX),
                u64::MAX => None,
                l => Some(l - 1),
            }) == Ok(0);
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
        let parsed = parse("a, b=error*2 ,c=error,d=abort@3,e=delay:250,f=error@3");
        assert_eq!(parsed.len(), 6);
        assert!(matches!(&parsed[5], (n, Action::ErrorAt(s)) if n == "f" && s.load(Ordering::Relaxed) == 2));
        assert!(matches!(&parsed[4], (n, Action::Delay(250)) if n == "e"));
        assert!(matches!(&parsed[0], (n, Action::Abort(s)) if n == "a" && s.load(Ordering::Relaxed) == 0));
        assert!(matches!(&parsed[3], (n, Action::Abort(s)) if n == "d" && s.load(Ordering::Relaxed) == 2));
        assert!(matches!(&parsed[1], (n, Action::Error(l)) if n == "b" && l.load(Ordering::Relaxed) == 2));
        assert!(matches!(&parsed[2], (n, Action::Error(l)) if n == "c" && l.load(Ordering::Relaxed) == u64::MAX));
    }
}
