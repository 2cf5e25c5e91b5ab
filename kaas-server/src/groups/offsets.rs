//! Committed and staged offsets of the groups this broker coordinates: OffsetCommit,
//! TxnOffsetCommit (staged until the transaction ends), OffsetFetch, OffsetDelete,
//! through kaas-core's group offsets file, cached by its stamp.

use super::*;

/// A consumer group member's subscription: topic names, and its compiled expression.
type Subscription = (std::collections::BTreeSet<String>, Option<regex::Regex>);

impl GroupCoordinator {
    /// OffsetDelete: drops the committed offsets of `partitions` (topic, partition)
    /// from a group, except those of topics a member of the group is subscribed to
    /// (GROUP_SUBSCRIBED_TO_TOPIC for those, as Apache). A group with members that
    /// does not use the consumer protocol may not lose offsets at all
    /// (NON_EMPTY_GROUP). Returns each partition's error code (0: deleted, or had none).
    pub fn delete_offsets(&self, group_id: &str, partitions: &[(String, i32)]) -> Result<Vec<i16>, ResponseError> {
        let handle = self.group_or_load(group_id);
        let guard = handle.as_ref().map(lock_group);
        let live = guard.as_deref().filter(|g| !g.removed && g.state != GroupState::Dead);
        let subscribed: Option<HashSet<String>> = match live {
            Some(g) if !g.members.is_empty() => {
                if g.protocol_type.as_deref() != Some("consumer") {
                    return Err(ResponseError::NonEmptyGroup);
                }
                subscribed_topics(g)
            }
            _ => Some(HashSet::new()),
        };
        let on_disk = kaas_core::offsets::offsets_file(&self.volume, group_id).exists();
        if live.is_none() && !on_disk {
            return Err(ResponseError::GroupIdNotFound);
        }
        // A KIP-848 consumer group's members subscribe by name or regular expression;
        // an unreadable file protects every topic.
        // Each member's names and compiled expression, once (not per partition).
        let consumer: Result<Vec<Subscription>, VolumeError> = if on_disk {
            GroupOffsets::load(&self.volume, group_id).map(|o| {
                o.consumer
                    .map(|c| {
                        c.members
                            .into_values()
                            .map(|m| {
                                let re = m
                                    .subscribed_regex
                                    .as_deref()
                                    .and_then(|re| consumer::compile_regex(re).ok());
                                (m.subscribed_names, re)
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            })
        } else {
            Ok(Vec::new())
        };
        let consumer_protects = |topic: &str| match &consumer {
            Err(_) => true,
            Ok(members) => members
                .iter()
                .any(|(names, re)| names.contains(topic) || re.as_ref().is_some_and(|re| re.is_match(topic))),
        };
        // Unreadable subscriptions: every topic counts as subscribed (nothing a live
        // member may need is deleted).
        let protected = |topic: &str| subscribed.as_ref().is_none_or(|s| s.contains(topic)) || consumer_protects(topic);
        let codes: Vec<i16> = partitions
            .iter()
            .map(|(t, _)| {
                if protected(t) {
                    ResponseError::GroupSubscribedToTopic.code()
                } else {
                    0
                }
            })
            .collect();
        if !on_disk {
            return Ok(codes);
        }
        // A classic group's lock is never held while a cache entry's is awaited (the
        // lock order is entry, then classic group).
        drop(guard);
        self.with_offsets(group_id, |offsets| {
            let mut changed = false;
            for ((t, p), code) in partitions.iter().zip(&codes) {
                if *code == 0 {
                    changed |= offsets.remove(t, *p);
                }
            }
            ((), changed)
        })
        .map_err(|e| {
            warn!(group = group_id, error = %e, "cannot delete group offsets");
            offsets_error(&e)
        })?;
        info!(
            group = group_id,
            partitions = codes.iter().filter(|c| **c == 0).count(),
            "deleted committed offsets"
        );
        Ok(codes)
    }

    /// Whether a commit from this (generation, member) may proceed; `transactional`
    /// for TxnOffsetCommit (KIP-447). As Apache's coordinator: the member and its
    /// generation are checked first (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID,
    /// ILLEGAL_GENERATION); only then does a plain commit from the current generation
    /// wait out the leader's SyncGroup (REBALANCE_IN_PROGRESS). A transactional one is
    /// not refused for it: Java's producer takes REBALANCE_IN_PROGRESS on
    /// TxnOffsetCommit for a fatal error
    /// (`a_commit_during_completing_rebalance_is_judged_by_member_and_generation_first`).
    pub fn check_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        transactional: bool,
    ) -> Result<(), ResponseError> {
        // A commit outside the group (generation -1: a consumer that assigns its own
        // partitions) reads no file for members this broker has not loaded.
        let handle = if generation < 0 {
            self.group(group_id)
        } else {
            self.group_or_load(group_id)
        };
        let guard = handle.as_ref().map(lock_group);
        let Some(group) = guard.as_deref().filter(|g| !g.removed) else {
            return if generation < 0 {
                Ok(())
            } else {
                Err(ResponseError::IllegalGeneration)
            };
        };
        if generation < 0 && group.members.is_empty() {
            return Ok(());
        }
        check_member(group, member_id, instance_id)?;
        if generation != group.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        if !transactional && group.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Runs `f` on a group's current offsets under the group's lock; when `f` reports
    /// a change, the file is rewritten durably before returning, and on a write error
    /// memory is left equal to the volume (the change did not happen).
    fn with_offsets<R>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut GroupOffsets) -> (R, bool),
    ) -> Result<R, VolumeError> {
        self.with_offsets_guarded(group_id, &|| Ok(()), f)
    }

    /// [`Self::with_offsets`], running `guard` under the group's file lock before
    /// anything is written (a transaction's staged offsets: the transaction
    /// coordinator checks it still holds the slot — a holder deposed while paused
    /// must not stage into, or finish, a later transaction at the same epoch; with
    /// the check under the file lock, every later writer of the file comes after it).
    /// The whole of it — waiting for the cached copy's mutex (another thread may hold
    /// it for the file lock's whole wait), the file lock, the load and the save's
    /// fsync — runs off the async workers.
    fn with_offsets_guarded<R>(
        &self,
        group_id: &str,
        guard: &dyn Fn() -> Result<(), VolumeError>,
        f: impl FnOnce(&mut GroupOffsets) -> (R, bool),
    ) -> Result<R, VolumeError> {
        crate::blocking::off_worker(|| {
            self.with_offsets_blocking(group_id, true, guard, f)
                .map(|r| r.expect("a file is made when there is none"))
        })
    }

    /// [`Self::with_offsets_guarded`], on the calling thread; with `create` false, a
    /// group without a file (deleted, or never committed) is left alone: None,
    /// nothing written.
    pub(super) fn with_offsets_blocking<R>(
        &self,
        group_id: &str,
        create: bool,
        guard: &dyn Fn() -> Result<(), VolumeError>,
        f: impl FnOnce(&mut GroupOffsets) -> (R, bool),
    ) -> Result<Option<R>, VolumeError> {
        let entry = self.cache_entry(group_id);
        let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
        // The cross-process lock every writer of this file (other brokers, kaasctl)
        // holds: the stamp check and the write below are one read-modify-write.
        // Tried for at most a few seconds (a paused holder).
        let _file_lock = lock_group_file(&self.volume, group_id)?;
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        if !create && !group_file_exists(&path)? {
            return Ok(None);
        }
        self.refresh_cached(group_id, &mut cached)?;
        let mut next = cached.offsets.clone();
        let (result, changed) = f(&mut next);
        if changed {
            guard()?;
            next.save(&self.volume).inspect_err(|e| {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, e)
            })?;
            cached.offsets = next;
            cached.stamp = file_stamp(&path);
        }
        Ok(Some(result))
    }

    /// Writes committed offsets (topic, partition, offset, leader epoch, metadata) durably.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        entries: &[(String, i32, i64, i32, Option<String>)],
    ) -> Result<(), VolumeError> {
        self.commit_offsets_checked(group_id, entries, None, &|| true)?
            .expect("no member check, no refusal");
        Ok(())
    }

    /// [`Self::commit_offsets`] of a commit by `member` (id, epoch, whether the
    /// request's version predates v9): if the group is a KIP-848 consumer group when
    /// the file is rewritten, the member is checked again there
    /// ([`consumer_groups::member_check`]), under the group's lock — a member fenced
    /// or expired since the request's first check commits nothing. Err(volume) when
    /// the file could not be written; Ok(Err(code)) when the member was refused.
    pub fn commit_offsets_checked(
        &self,
        group_id: &str,
        entries: &[(String, i32, i64, i32, Option<String>)],
        member: Option<(&str, i32, bool)>,
        still_ours: &(dyn Fn() -> bool + Sync),
    ) -> Result<Result<(), ResponseError>, VolumeError> {
        let now = now_ms();
        let result = self.with_offsets(group_id, |offsets| {
            // Under the group's file lock, right before the write: a broker paused
            // while it waited for the lock (SIGSTOP; its lease went stale and another
            // broker took the group and wrote newer offsets) writes nothing of its
            // stale request over them.
            if !still_ours() {
                return (Err(ResponseError::NotCoordinator), false);
            }
            if let (Some((id, epoch, old)), Some(consumer)) = (member, &offsets.consumer) {
                if let Err(code) = consumer_groups::member_check(consumer, id, epoch, old) {
                    return (Err(code), false);
                }
            }
            for (topic, partition, offset, leader_epoch, metadata) in entries {
                offsets.set(
                    topic,
                    *partition,
                    CommittedOffset {
                        offset: *offset,
                        leader_epoch: *leader_epoch,
                        metadata: metadata.clone(),
                        commit_ms: now,
                    },
                );
            }
            (Ok(()), true)
        })?;
        if result.is_ok() {
            debug!(group = group_id, partitions = entries.len(), "committed offsets");
        }
        Ok(result)
    }

    /// Stages offsets for a transactional producer (TxnOffsetCommit), durably, once
    /// `member` (run under the group's lock, on the group's file as it is now) accepts
    /// the committing member. Err(volume) when the file could not be written;
    /// Ok(Err(code)) when the member was refused and nothing was staged.
    #[allow(clippy::too_many_arguments)]
    pub fn stage_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        transactional_id: &str,
        entries: &[(String, i32, i64, i32, Option<String>)],
        guard: &dyn Fn() -> Result<(), VolumeError>,
        member: &(dyn Fn(&GroupOffsets) -> Result<(), ResponseError> + Sync),
    ) -> Result<Result<(), ResponseError>, VolumeError> {
        let now = now_ms();
        self.with_offsets_guarded(group_id, guard, |offsets| {
            if let Err(code) = member(offsets) {
                return (Err(code), false);
            }
            for (topic, partition, offset, leader_epoch, metadata) in entries {
                let committed = CommittedOffset {
                    offset: *offset,
                    leader_epoch: *leader_epoch,
                    metadata: metadata.clone(),
                    commit_ms: now,
                };
                offsets.stage(
                    producer_id,
                    producer_epoch,
                    transactional_id,
                    topic,
                    *partition,
                    committed,
                );
            }
            (Ok(()), true)
        })
    }

    /// The transaction's offset hook: commit (or discard) what (`producer_id`,
    /// `producer_epoch`) staged. Idempotent, so a recovered coordinator may run it again.
    pub fn finish_pending(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        guard: &dyn Fn() -> Result<(), VolumeError>,
    ) -> Result<(), VolumeError> {
        // A group with no record, here or on the volume, has nothing staged (staging
        // writes its file): no lock taken, no entry made. AddOffsetsToTxn names any
        // string, and each such group left a `.lock` file and a cache entry for good
        // (`finishing_a_transaction_for_a_group_with_nothing_staged_leaves_no_trace`).
        if !self.group_has_a_record(group_id) {
            return Ok(());
        }
        let changed = self.with_offsets_guarded(group_id, guard, |offsets| {
            let changed = if commit {
                offsets.commit_pending(producer_id, producer_epoch)
            } else {
                offsets.discard_pending(producer_id, producer_epoch)
            };
            (changed, changed)
        })?;
        if changed {
            debug!(group = group_id, producer_id, commit, "staged offsets finished");
        }
        Ok(())
    }

    /// A group's committed offsets. A group this broker has not written is read
    /// without its lock (files are replaced atomically) and not cached, so fetches
    /// for ids nobody commits to leave neither lock files nor memory behind.
    pub fn fetch_offsets(&self, group_id: &str) -> Result<GroupOffsets, VolumeError> {
        let cached = self
            .offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(group_id);
        if cached {
            self.with_offsets(group_id, |offsets| (offsets.clone(), false))
        } else {
            GroupOffsets::load(&self.volume, group_id)
        }
    }

    /// Drops the offsets of a deleted topic from every group (each group's file
    /// rewritten durably). Every group is tried, each failure logged; the first that
    /// the disk or a lock held elsewhere caused is returned. A group file that does
    /// not read (unparsable, of a newer version, inconsistent) is skipped: it serves
    /// no offsets to anyone until it is repaired, and must not hold up every topic's
    /// deletion meanwhile.
    pub fn forget_topic(&self, topic: &str) -> Result<(), VolumeError> {
        let ids = list_groups(&self.volume)?;
        let mut first = None;
        for id in ids {
            if let Err(e) = self.with_offsets(&id, |o| {
                let changed = o.remove_topic(topic);
                ((), changed)
            }) {
                warn!(group = %id, topic, error = %e, "cannot drop offsets of deleted topic");
                if matches!(e, VolumeError::Io { .. } | VolumeError::Busy { .. }) {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// What one offsets-retention pass did ([`GroupCoordinator::expire_offsets`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPass {
    /// Committed offsets removed.
    pub offsets_expired: usize,
    /// Groups whose file was removed: nothing was left of them.
    pub groups_removed: usize,
    /// Groups the pass could not judge or change (logged; the next pass tries again).
    pub failed: usize,
}

impl GroupCoordinator {
    /// Offsets retention (`--offsets-retention-ms`, Kafka's `offsets.retention.minutes`
    /// with KIP-211's rule: [`GroupOffsets::expire`]; docs/consumer-groups.md#offsets-retention):
    /// one pass over every group with a file on the volume that `owns` says this
    /// broker coordinates. A group's committed offsets expire once it has had no
    /// members for the retention and they were committed at least that long ago; a
    /// group with nothing left goes, file and all. A group that fails (its lock held
    /// elsewhere for the whole wait, an unreadable file, a failed write) is logged and
    /// counted, and the next pass tries it again; the others go on. Blocking file work.
    ///
    /// Nothing expires until this broker has coordinated under the current live set
    /// for the longest session a member may have (`--group-max-session-timeout-ms`),
    /// or the retention if that is shorter; the passes meanwhile only record. A
    /// classic group's members are in its coordinator's memory alone: a group that
    /// came active after the previous coordinator's last pass, and whose members have
    /// not rejoined here yet, would otherwise look empty since that pass. Its members
    /// rejoin within their session.
    pub fn expire_offsets(&self, owns: &dyn Fn(&str) -> bool, now_ms: i64) -> Result<RetentionPass, VolumeError> {
        let mut pass = RetentionPass::default();
        for id in list_groups(&self.volume)? {
            if !owns(&id) {
                continue;
            }
            // After `owns`: the cluster bumps the generation before it publishes a
            // changed live set, so a group that came to this broker under a new set
            // is judged under the new generation's grace.
            let retention = self.retention_now(now_ms);
            match self.expire_group_offsets(&id, retention, now_ms) {
                Ok((expired, removed)) => {
                    pass.offsets_expired += expired;
                    pass.groups_removed += usize::from(removed);
                }
                Err(e) => {
                    pass.failed += 1;
                    warn!(group = %id, error = %e, "offsets retention could not judge the group; tried again at the next pass");
                }
            }
        }
        Ok(pass)
    }

    /// The retention a pass applies now: `i64::MAX` (record only) until this broker
    /// has coordinated under the current live set for the grace of
    /// [`Self::expire_offsets`].
    fn retention_now(&self, now_ms: i64) -> i64 {
        let generation = self.generation();
        let mut since = self.retention_since.lock().unwrap_or_else(|p| p.into_inner());
        if since.0 != generation {
            *since = (generation, now_ms);
        }
        let grace = self.max_session_ms.min(self.offsets_retention_ms);
        if now_ms.saturating_sub(since.1) < grace {
            i64::MAX
        } else {
            self.offsets_retention_ms
        }
    }

    /// Writes to each group's file (`active_ms`) when its last member left, for the
    /// classic groups this broker saw emptied since the last call: a coordinator that
    /// restarts, or a group that moves, before the next retention pass then keeps
    /// it. Run every second (blocking file work). A group without a file has no
    /// offsets to keep. A write that fails for the volume (an I/O error, the group's
    /// lock held elsewhere) is logged and tried again, after 1 s, then pauses doubling
    /// up to a minute; one refused for the file itself (unreadable, a newer format,
    /// too large) is logged once and left to the retention pass, which reports the
    /// group as failed at each pass and expires nothing of it. Returns how many files
    /// were written.
    pub fn persist_departures(&self, now_ms: i64) -> usize {
        let due: Vec<(String, Departure)> = self
            .departures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, d)| d.retry.is_none_or(|(next, _)| next <= now_ms))
            .map(|(id, d)| (id.clone(), *d))
            .collect();
        let mut written = 0;
        for (id, d) in due {
            let outcome = self.record_active(&id, d.at_ms);
            let mut departures = self.departures.lock().unwrap_or_else(|p| p.into_inner());
            match outcome {
                Err(e @ (VolumeError::Io { .. } | VolumeError::Busy { .. })) => {
                    let pause = d.retry.map_or(1_000, |(_, pause)| (pause * 2).min(60_000));
                    if let Some(entry) = departures.get_mut(&id) {
                        entry.retry = Some((now_ms + pause, pause));
                    }
                    warn!(group = %id, error = %e, retry_in_ms = pause, "cannot record when the group's last member left (offsets retention); tried again");
                    continue;
                }
                Err(e) => {
                    tracing::error!(group = %id, error = %e, "cannot record when the group's last member left (offsets retention): the group's file is refused; the retention pass reports it and expires nothing of it")
                }
                Ok(wrote) => written += usize::from(wrote),
            }
            // Done with; a later departure recorded meanwhile is written next time.
            match departures.get_mut(&id) {
                Some(now) if now.at_ms == d.at_ms => {
                    departures.remove(&id);
                }
                Some(now) => now.retry = None,
                None => {}
            }
        }
        written
    }

    /// Sets the group's `active_ms` to `at` unless it is later already; Ok(false) when
    /// nothing was written (no file, or nothing to change).
    fn record_active(&self, group_id: &str, at: i64) -> Result<bool, VolumeError> {
        let wrote = self.with_offsets_blocking(group_id, false, &|| Ok(()), |o| {
            let later = o.active_ms < Some(at);
            if later {
                o.active_ms = Some(at);
            }
            (later, later)
        })?;
        Ok(wrote.unwrap_or(false))
    }

    /// One group of [`Self::expire_offsets`] at `retention` (`i64::MAX`: record only):
    /// (offsets expired, whether the file was removed). Under the group's cache entry lock, which a classic JoinGroup holds
    /// while it joins ([`Self::admit_classic`]), and the file's lock: a member that
    /// joins either is seen here (nothing expires) or joins after the pass.
    pub(super) fn expire_group_offsets(
        &self,
        group_id: &str,
        retention: i64,
        now_ms: i64,
    ) -> Result<(usize, bool), VolumeError> {
        let entry = self.cache_entry(group_id);
        let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
        // A classic group's members are in this broker's memory: now, or when the
        // last one left (kept past the group's eviction until written to the file).
        // Read before the file lock: a holder of the group's mutex may wait for the
        // file lock (DeleteGroups), never the other way round.
        let (members_now, left) = self
            .with_group(group_id, |g| (!g.members.is_empty(), g.members_left_ms))
            .unwrap_or((false, None));
        let remembered = self
            .departures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(group_id)
            .map(|d| d.at_ms);
        let _file_lock = lock_group_file(&self.volume, group_id)?;
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        if !group_file_exists(&path)? {
            // Deleted since the listing (DeleteGroups, kaasctl): nothing to judge, and
            // no file to write, which would bring the group back.
            return Ok((0, false));
        }
        self.refresh_cached(group_id, &mut cached)?;
        let seen = if members_now {
            Some(now_ms)
        } else {
            left.max(remembered)
        };
        let mut next = cached.offsets.clone();
        let expiry = next.expire(now_ms, retention, seen, members_now);
        let write = || -> Result<bool, VolumeError> {
            if expiry.gone {
                GroupOffsets::delete_locked(&self.volume, group_id)?;
                return Ok(true);
            }
            if expiry.changed {
                next.save(&self.volume)?;
            }
            Ok(false)
        };
        let removed = write()
            .inspect_err(|e| crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, e))?;
        if removed {
            cached.offsets = GroupOffsets::new(group_id);
            cached.consumer = None;
            cached.stamp = None;
            self.offsets.lock().unwrap_or_else(|p| p.into_inner()).remove(group_id);
        } else if expiry.changed {
            cached.offsets = next;
            cached.stamp = file_stamp(&path);
        }
        // What memory held is on the volume now (or the group is gone).
        if let Some(at) = remembered {
            let mut departures = self.departures.lock().unwrap_or_else(|p| p.into_inner());
            if departures.get(group_id).is_some_and(|d| d.at_ms == at) {
                departures.remove(group_id);
            }
        }
        if !expiry.expired.is_empty() {
            info!(
                group = group_id,
                offsets = expiry.expired.len(),
                retention_ms = retention,
                "committed offsets expired: the group had no members for the retention (--offsets-retention-ms)"
            );
        }
        if removed {
            info!(
                group = group_id,
                "group removed: its committed offsets expired and it has had no members for the retention"
            );
        }
        Ok((expiry.expired.len(), removed))
    }
}

/// Whether a group's offsets file exists (the caller holds its lock): only "not
/// found" says no; any other failure to look is an error, never taken for a deleted
/// group.
fn group_file_exists(path: &std::path::Path) -> Result<bool, VolumeError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(VolumeError::io(path, e)),
    }
}

/// The cross-process lock of a group's offsets file ([`GroupOffsets::lock`]): a
/// failure of the file system under it (not the lock held elsewhere, which is
/// [`VolumeError::Busy`]) counts in `kaas_volume_write_errors_total{file="offsets"}`,
/// as a failed write of the file would, since what it guards fails the same way
/// (`test_a_failing_disk_under_a_groups_offsets_lock_is_refused_counted_and_the_next_commit_lands`).
pub(super) fn lock_group_file(volume: &Volume, group_id: &str) -> Result<std::fs::File, VolumeError> {
    GroupOffsets::lock(volume, group_id)
        .inspect_err(|e| crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, e))
}

/// The wire error for a failed read-modify-write of a group's offsets asked by an
/// admin request (DeleteGroups, OffsetDelete, DescribeGroups): a group lock held
/// elsewhere for the whole wait ([`VolumeError::Busy`]) is
/// COORDINATOR_LOAD_IN_PROGRESS, which every client retries at the same coordinator;
/// anything else is KAFKA_STORAGE_ERROR, which admin clients report to the operator.
/// A member's requests answer [`member_error`].
pub fn offsets_error(e: &VolumeError) -> ResponseError {
    if e.is_busy() {
        ResponseError::CoordinatorLoadInProgress
    } else {
        ResponseError::KafkaStorageError
    }
}

/// The wire error for a member's request (JoinGroup, OffsetCommit, OffsetFetch of a
/// consumer group's member) whose group file could not be read or written: a lock
/// held elsewhere is COORDINATOR_LOAD_IN_PROGRESS, and a failure of the volume
/// (EIO, ENOSPC, a stale handle) COORDINATOR_NOT_AVAILABLE: Java's consumer takes
/// KAFKA_STORAGE_ERROR for a fatal error in a join, a commit, a heartbeat or a
/// SyncGroup ("Unexpected error in commit"), which would end a Kafka Streams thread
/// for a moment's disk fault; Apache answers a coordinator error there too. A file
/// refused for what it holds (unparseable, too large, of a newer format) stays
/// KAFKA_STORAGE_ERROR: no retry mends it, an operator does (`kaasctl groups` names
/// it). (`a_commit_the_volume_fails_is_retriable`,
/// `a_commit_to_a_group_whose_file_is_refused_is_a_storage_error`.)
pub fn member_error(e: &VolumeError) -> ResponseError {
    match e {
        VolumeError::Busy { .. } => ResponseError::CoordinatorLoadInProgress,
        VolumeError::Io { .. } if !e.is_invalid_data() => ResponseError::CoordinatorNotAvailable,
        _ => ResponseError::KafkaStorageError,
    }
}
