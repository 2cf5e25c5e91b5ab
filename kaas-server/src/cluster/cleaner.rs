//! The log cleaner's background task (docs/compaction.md): every
//! `--log-cleaner-backoff-ms`, each compacted partition this broker leads is checked
//! and the ones due are cleaned, one at a time, on a blocking thread. The partition
//! lock is held only to plan a pass and to swap its segments in; reading and
//! rewriting happen without it, so produce and fetch go on meanwhile.

use super::{Cluster, Partition};
use kaas_core::cleaner::{self, CleanLimits, CleanerState};
use kaas_core::now_ms;
use std::sync::Arc;
use tracing::{debug, error, info, warn};

impl Cluster {
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
    /// logged and recorded in the partition's `cleaner.json` (kaasctl shows them),
    /// which is only ever written under the partition lock by its current leader.
    pub fn clean_partition(&self, p: &Partition, stop: &(dyn Fn() -> bool + Sync)) -> bool {
        let installed = self.clean_pass(p, stop);
        // Retention leaves a partition alone while it is being cleaned; what it
        // skipped runs now, so passes back to back never put it off.
        if self.lease_fresh() {
            self.retain(p, now_ms());
        }
        installed
    }

    /// One cleaning pass of [`Self::clean_partition`].
    fn clean_pass(&self, p: &Partition, stop: &(dyn Fn() -> bool + Sync)) -> bool {
        let started = now_ms();
        let (dir, input, _pass) = {
            let Some(mut state) = p.writable() else { return false };
            let dir = state.log.dir().to_path_buf();
            let cs = match CleanerState::read(&dir) {
                Ok(cs) => cs.unwrap_or_default(),
                Err(e) => {
                    error!(topic = %p.topic, partition = p.index, error = %e, "cleaner state unreadable; partition not cleaned until it is repaired");
                    return false;
                }
            };
            let plan = match state.cleaner_plan(&cs, started) {
                Ok(Some(plan)) if plan.due(state.log.config()) => plan,
                _ => return false,
            };
            // Unique to this broker, leadership and pass: no other writer's files
            // are ever taken for this pass's.
            let tag = format!("{}-{}-{started}", self.config.broker_id, p.leader_epoch);
            let pass = p.cleaning(&state);
            (dir.clone(), state.clean_input(&plan, &cs, tag, started), pass)
        };
        let should_stop = || stop() || p.is_retired() || !self.lease_fresh();
        let limits = CleanLimits {
            dedupe_buffer_bytes: usize::try_from(self.config.log_cleaner_dedupe_buffer_size).unwrap_or(usize::MAX),
            io_max_bytes_per_second: self.config.log_cleaner_io_max_bytes_per_second,
            stop: &should_stop,
        };
        let out = match cleaner::clean(&input, limits, started) {
            Ok(out) => out,
            Err(e) if should_stop() => {
                debug!(topic = %p.topic, partition = p.index, error = %e, "cleaning stopped");
                return false;
            }
            Err(kaas_core::log::LogError::Volume(e)) if e.is_not_found() => {
                // Retention or DeleteRecords removed a segment the pass was reading.
                debug!(topic = %p.topic, partition = p.index, error = %e, "the log changed during cleaning; the pass was dropped");
                cleaner::remove_cleaned_files(&dir, Some(&input.tag));
                return false;
            }
            Err(e) => {
                error!(topic = %p.topic, partition = p.index, error = %e, "cleaning failed; the log is as it was");
                self.record_cleaner_error(p, &dir, e.to_string());
                return false;
            }
        };
        // A broker that went stale meanwhile swaps nothing in; nor one whose leadership
        // owner.json, read under the partition's gate with the swap, no longer
        // records (another broker took the partition over).
        let Some(mut state) = p.writable().filter(|_| self.lease_fresh()) else {
            cleaner::remove_cleaned_files(&dir, Some(&out.tag));
            return false;
        };
        let delete_retention_ms = state.log.config().delete_retention_ms;
        let installed = match p.while_led(|| state.install_cleaned(&out, now_ms())) {
            Ok(installed) => installed,
            Err(e) => {
                info!(topic = %p.topic, partition = p.index, error = %e, "the cleaned segments are not swapped in: this broker's leadership is not confirmed");
                cleaner::remove_cleaned_files(&dir, Some(&out.tag));
                return false;
            }
        };
        match installed {
            Ok(true) => {
                let mut report = out.report;
                report.finished_ms = now_ms();
                info!(topic = %p.topic, partition = p.index,
                    dirty_from = report.dirty_from, dirty_to = report.dirty_to,
                    segments_before = report.segments_before, segments_after = report.segments_after,
                    bytes_before = report.bytes_before, bytes_after = report.bytes_after,
                    records_removed = report.records_removed, tombstones_removed = report.tombstones_removed,
                    aborted_batches_removed = report.aborted_batches_removed, markers_removed = report.markers_removed,
                    millis = report.finished_ms - report.started_ms, "cleaned");
                let recorded = CleanerState::read(&dir).and_then(|cs| {
                    let mut cs = cs.unwrap_or_default();
                    cs.record(report, delete_retention_ms);
                    cs.write(&dir)
                });
                if let Err(e) = recorded {
                    // The swap stands; the next pass starts from the older clean offset.
                    warn!(topic = %p.topic, partition = p.index, error = %e, "cannot record the cleaner state");
                }
                true
            }
            Ok(false) => {
                debug!(topic = %p.topic, partition = p.index, "the log changed during cleaning; the pass was dropped");
                false
            }
            Err(e @ kaas_core::log::LogError::SwapIncomplete(_)) => {
                error!(topic = %p.topic, partition = p.index, error = %e, "reopening the partition to finish the cleaner's swap");
                drop(state);
                self.reopen_partition(&p.topic, p.index, "a cleaner swap must be finished by reopening it");
                false
            }
            Err(e) => {
                error!(topic = %p.topic, partition = p.index, error = %e, "installing cleaned segments failed; the log is as it was");
                drop(state);
                self.record_cleaner_error(p, &dir, e.to_string());
                false
            }
        }
    }

    /// Notes a failed pass in `cleaner.json`, under the partition lock and only while
    /// this broker still leads the partition; never over a file it cannot read.
    fn record_cleaner_error(&self, p: &Partition, dir: &std::path::Path, error: String) {
        let Some(_state) = p.writable().filter(|_| self.lease_fresh()) else {
            return;
        };
        let written = CleanerState::read(dir).and_then(|cs| {
            let mut cs = cs.unwrap_or_default();
            cs.version = kaas_core::cleaner::CLEANER_FORMAT_VERSION;
            cs.last_error = Some(error);
            cs.write(dir)
        });
        if let Err(e) = written {
            warn!(topic = %p.topic, partition = p.index, error = %e, "cannot record the cleaner's failure");
        }
    }
}
