//! The log cleaner's background task (docs/compaction.md): every
//! `--log-cleaner-backoff-ms`, each compacted partition this broker leads is checked
//! and the ones due are cleaned, one at a time, on a blocking thread. The partition
//! lock is held only to plan a pass and to swap its segments in; reading and
//! rewriting happen without it, so produce and fetch go on meanwhile.

use crate::broker::{Broker, Partition};
use kaas_core::cleaner::{self, CleanLimits, CleanerState};
use kaas_core::now_ms;
use std::sync::Arc;
use tracing::{debug, error, info, warn};

impl Broker {
    /// One round of the cleaner: every compacted partition led here that is due,
    /// dirtiest first. `stop` ends the round early (shutdown). Returns the passes done.
    pub fn clean_round(&self, stop: &(dyn Fn() -> bool + Sync)) -> usize {
        if !self.config.log_cleaner_enable || !self.lease_fresh() {
            return 0;
        }
        let now = now_ms();
        let mut due: Vec<(bool, f64, Arc<Partition>)> = Vec::new();
        for p in self.partitions() {
            if !p.state().log.config().compact {
                continue;
            }
            let dir = p.state().log.dir().to_path_buf();
            let cs = match CleanerState::read(&dir) {
                Ok(cs) => cs.unwrap_or_default(),
                Err(e) => {
                    error!(topic = %p.topic, partition = p.index, error = %e, "cleaner state unreadable; partition not cleaned until it is repaired");
                    continue;
                }
            };
            let mut state = p.state();
            match state.cleaner_plan(&cs, now) {
                Ok(Some(plan)) if plan.due(state.log.config()) => {
                    due.push((plan.overdue, plan.dirty_ratio(), p.clone()));
                }
                Ok(_) => {}
                Err(e) => warn!(topic = %p.topic, partition = p.index, error = %e, "cannot plan cleaning"),
            }
        }
        due.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
        let mut done = 0;
        for (_, _, p) in due {
            if stop() || !self.lease_fresh() {
                break;
            }
            if self.clean_partition(&p, stop) {
                done += 1;
            }
        }
        done
    }

    /// One cleaning pass over `p`; true when segments were swapped in. Failures are
    /// logged and recorded in the partition's `cleaner.json` (kaasctl shows them).
    pub fn clean_partition(&self, p: &Partition, stop: &(dyn Fn() -> bool + Sync)) -> bool {
        let started = now_ms();
        let (dir, input) = {
            let Some(mut state) = p.writable() else { return false };
            let dir = state.log.dir().to_path_buf();
            let cs = match CleanerState::read(&dir) {
                Ok(cs) => cs.unwrap_or_default(),
                Err(_) => return false,
            };
            let plan = match state.cleaner_plan(&cs, started) {
                Ok(Some(plan)) if plan.due(state.log.config()) => plan,
                _ => return false,
            };
            let tag = format!("{}-{}", self.config.broker_id, p.leader_epoch);
            (dir.clone(), state.clean_input(&plan, &cs, tag, started))
        };
        let should_stop = || stop() || !self.lease_fresh();
        let limits = CleanLimits {
            dedupe_buffer_bytes: usize::try_from(self.config.log_cleaner_dedupe_buffer_size).unwrap_or(usize::MAX),
            io_max_bytes_per_second: self.config.log_cleaner_io_max_bytes_per_second,
            stop: &should_stop,
        };
        let result = cleaner::clean(&input, limits, started).and_then(|out| {
            // A broker that went stale meanwhile swaps nothing in.
            let installed = match p.writable().filter(|_| self.lease_fresh()) {
                Some(mut state) => state.install_cleaned(&out, now_ms())?,
                None => false,
            };
            if !installed {
                cleaner::remove_cleaned_files(&dir, Some(&out.tag));
            }
            Ok(installed.then_some(out))
        });
        let mut cs = CleanerState::read(&dir).ok().flatten().unwrap_or_default();
        match result {
            Ok(Some(out)) => {
                let mut report = out.report;
                report.finished_ms = now_ms();
                info!(topic = %p.topic, partition = p.index,
                    dirty_from = report.dirty_from, dirty_to = report.dirty_to,
                    segments_before = report.segments_before, segments_after = report.segments_after,
                    bytes_before = report.bytes_before, bytes_after = report.bytes_after,
                    records_removed = report.records_removed, tombstones_removed = report.tombstones_removed,
                    aborted_batches_removed = report.aborted_batches_removed, markers_removed = report.markers_removed,
                    millis = report.finished_ms - report.started_ms, "cleaned");
                cs.record(report);
                if let Err(e) = cs.write(&dir) {
                    // The swap stands; the next pass recomputes from an older clean offset.
                    warn!(topic = %p.topic, partition = p.index, error = %e, "cannot record the cleaner state");
                }
                true
            }
            Ok(None) => {
                debug!(topic = %p.topic, partition = p.index, "the log changed during cleaning; the pass was dropped");
                false
            }
            Err(e) if stop() => {
                debug!(topic = %p.topic, partition = p.index, error = %e, "cleaning stopped");
                false
            }
            Err(e) => {
                error!(topic = %p.topic, partition = p.index, error = %e, "cleaning failed; the log is as it was");
                cs.version = kaas_core::cleaner::CLEANER_FORMAT_VERSION;
                cs.last_error = Some(e.to_string());
                let _ = cs.write(&dir);
                false
            }
        }
    }
}
