//! KIP-848 consumer groups in the coordinator: the state machine of
//! [`super::consumer`] kept in the group's offsets cache entry and recorded in its
//! offsets file (`GroupOffsets::consumer`), so every change is durable before its
//! answer, is written under the group's cross-process lock, and survives a
//! coordinator moving to another broker.
//!
//! The in-memory group is valid while the file's stamp is the one it was built from
//! and the live set has not changed since (the coordination generation): a file
//! changed by anyone else (another broker, kaasctl, a transaction's offsets) is read
//! again and the group rebuilt from it, keeping what the file does not record
//! (members' session deadlines, what each was last told) for members still at the
//! same epoch; after a live-set change it is rebuilt with fresh sessions, as a
//! coordinator taking a group over does — deadlines kept by a broker that was not
//! coordinating the group then would expire live members.
//!
//! Lock order: a group's cache entry, then a classic group (the clash checks), then
//! the group's file lock — never the file lock before a classic group, nor a classic
//! group before a cache entry.

use super::consumer::{ConsumerGroup, Heartbeat, HeartbeatReply, Refusal, TopicsView};
use super::*;
use uuid::Uuid;

/// A consumer-group request that could not be served.
#[derive(Debug)]
pub enum ConsumerError {
    /// The group's rules refused it (the error code for the client, and why).
    Refused(Refusal),
    /// The group's file could not be read or written.
    Volume(VolumeError),
}

impl From<VolumeError> for ConsumerError {
    fn from(e: VolumeError) -> Self {
        ConsumerError::Volume(e)
    }
}

impl ConsumerError {
    /// The error code on the wire. The volume failing is the coordinator being
    /// unavailable (COORDINATOR_NOT_AVAILABLE; a lock held elsewhere
    /// COORDINATOR_LOAD_IN_PROGRESS): errors every client retries, where
    /// KAFKA_STORAGE_ERROR is fatal to a heartbeat manager.
    pub fn code(&self) -> ResponseError {
        match self {
            ConsumerError::Refused(r) => r.error,
            ConsumerError::Volume(e) if e.is_busy() => ResponseError::CoordinatorLoadInProgress,
            ConsumerError::Volume(_) => ResponseError::CoordinatorNotAvailable,
        }
    }
    pub fn message(&self) -> String {
        match self {
            ConsumerError::Refused(r) => r.message.clone(),
            ConsumerError::Volume(e) => e.to_string(),
        }
    }
}

fn refused(error: ResponseError, message: impl Into<String>) -> ConsumerError {
    ConsumerError::Refused(Refusal {
        error,
        message: message.into(),
    })
}

/// One member as ConsumerGroupDescribe and kaasctl show it.
pub struct ConsumerMemberView {
    pub member: consumer::Member,
    pub target: consumer::Assignment,
}

/// A consumer group as ConsumerGroupDescribe shows it.
pub struct ConsumerGroupView {
    pub state: &'static str,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: &'static str,
    pub members: Vec<ConsumerMemberView>,
}

impl GroupCoordinator {
    pub(super) fn generation(&self) -> u64 {
        self.coordination_generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The live set changed: every in-memory consumer group is rebuilt from the
    /// volume before its next use, and the groups this broker now coordinates are
    /// loaded at the next expiry pass. Takes no lock of its own (it runs in the lease
    /// renewal). The cluster bumps the same generation before it publishes a changed
    /// live set; this second bump, after the groups coordinated elsewhere are
    /// forgotten, only costs one more rebuild.
    pub(super) fn coordination_changed(&self) {
        self.coordination_generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Before [`Self::coordination_changed`], after a live-set change: a consumer group
    /// this broker coordinated since the previous change (its entry's `coordinated`
    /// at or after `settled_generation`, which that change left; the cluster's own
    /// bump before it publishes a set comes after it) and still coordinates (`owns`,
    /// under the new set) keeps its members' session and rebalance deadlines: its
    /// entry moves on to the generation this change is about to make. Any other entry
    /// is rebuilt from the volume with fresh sessions before its next use, as before:
    /// a group that was elsewhere had its members heartbeat to another coordinator
    /// (its entry may still have been refreshed here meanwhile, by a transaction's
    /// staged offsets, which is not coordinator work). Before, every change rebuilt
    /// every group: with changes more often than the session timeout, a dead member
    /// was never removed
    /// (`a_live_set_change_that_leaves_a_group_here_keeps_its_members_deadlines`).
    /// An entry busy now is left to be rebuilt.
    pub(super) fn keep_sessions_of_groups_still_here(&self, owns: &dyn Fn(&str) -> bool) {
        let generation = self.generation();
        let settled = self.settled_generation.load(std::sync::atomic::Ordering::SeqCst);
        let cache = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
        for (id, entry) in cache.iter() {
            if !owns(id) {
                continue;
            }
            if let Ok(mut c) = entry.try_lock() {
                let current = (settled..=generation).contains(&c.generation) && c.coordinated >= settled;
                if c.consumer.is_some() && current {
                    c.generation = generation + 1;
                    c.coordinated = generation + 1;
                }
            }
        }
    }

    /// The group's offsets cache entry, made empty (to be loaded) if there is none.
    pub(super) fn cache_entry(&self, group_id: &str) -> Arc<Mutex<CachedOffsets>> {
        self.offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(group_id.to_string())
            .or_insert_with(|| {
                Arc::new(Mutex::new(CachedOffsets {
                    offsets: GroupOffsets::new(group_id),
                    stamp: None,
                    consumer: None,
                    generation: 0,
                    coordinated: 0,
                }))
            })
            .clone()
    }

    /// Drops `entry` (locked by the caller as `cached`) from the offsets cache if it
    /// holds nothing — no file read, no consumer group, no offsets — and nobody else
    /// has it: clones are made only under the cache's mutex, held here, so a count of
    /// two (the cache's and the caller's) means no other caller can be waiting on it.
    /// A classic join made one per group id, kept until restart, and the group's next
    /// OffsetFetch then went through the file lock, leaving a `.lock` file
    /// (`classic_joins_for_groups_without_a_record_leave_no_cache_entry_or_lock_file`).
    fn drop_blank_entry(&self, group_id: &str, entry: &Arc<Mutex<CachedOffsets>>, cached: &CachedOffsets) {
        let blank =
            cached.stamp.is_none() && cached.consumer.is_none() && cached.offsets == GroupOffsets::new(group_id);
        if !blank {
            return;
        }
        let mut cache = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
        if Arc::strong_count(entry) == 2 && cache.get(group_id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            cache.remove(group_id);
        }
    }

    /// Reads the group's file again if it changed since it was cached (the caller
    /// holds the group's file lock), rebuilding the consumer group from it; a
    /// consumer group cached under an older coordination generation is rebuilt too,
    /// with fresh sessions. A record that does not hold together is an error naming
    /// the file, never a reset.
    pub(super) fn refresh_cached(&self, group_id: &str, cached: &mut CachedOffsets) -> Result<(), VolumeError> {
        let generation = self.generation();
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        let stamp = file_stamp(&path);
        let current = cached.consumer.is_none() || cached.generation == generation;
        if stamp.is_some() && stamp == cached.stamp && current {
            cached.generation = generation;
            return Ok(());
        }
        let offsets = GroupOffsets::load(&self.volume, group_id)?;
        let consumer = match &offsets.consumer {
            None => None,
            Some(record) => {
                let mut g = ConsumerGroup::from_record(group_id, record, &self.consumer_settings, now_ms()).map_err(
                    |detail| VolumeError::Invalid {
                        path: path.clone(),
                        detail,
                    },
                )?;
                if let Some(before) = cached.consumer.as_ref().filter(|_| cached.generation == generation) {
                    g.carry_over(before);
                }
                Some(g)
            }
        };
        cached.offsets = offsets;
        cached.consumer = consumer;
        cached.stamp = stamp;
        cached.generation = generation;
        Ok(())
    }

    /// Runs `f` on the group's consumer group (a new, empty one if the group has
    /// none) under its locks; what `f` changed that the file records is written
    /// durably before this returns, and if that write fails the change did not happen
    /// (memory stays equal to the volume) and the error is returned instead of `f`'s
    /// answer. `pre` runs first, under the cache entry's lock but before the file
    /// lock (the clash check with a classic group). Runs off the async workers.
    fn with_consumer<R>(
        &self,
        group_id: &str,
        pre: impl FnOnce() -> Result<(), ConsumerError>,
        f: impl FnOnce(&mut ConsumerGroup) -> Result<R, ConsumerError>,
    ) -> Result<R, ConsumerError> {
        self.with_consumer_if(group_id, true, pre, f)
            .map(|r| r.expect("a group is made when there is none"))
    }

    /// [`Self::with_consumer`]; with `create` false, a group that is not a consumer
    /// group when its file is read under the lock (deleted, or converted to a classic
    /// group since an unlocked look) is left alone: None, nothing written.
    pub(super) fn with_consumer_if<R>(
        &self,
        group_id: &str,
        create: bool,
        pre: impl FnOnce() -> Result<(), ConsumerError>,
        f: impl FnOnce(&mut ConsumerGroup) -> Result<R, ConsumerError>,
    ) -> Result<Option<R>, ConsumerError> {
        crate::blocking::off_worker(|| {
            let entry = self.cache_entry(group_id);
            let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
            pre()?;
            let _file_lock = offsets::lock_group_file(&self.volume, group_id)?;
            self.refresh_cached(group_id, &mut cached)?;
            cached.coordinated = cached.generation;
            let mut group = match cached.consumer.clone() {
                Some(g) => g,
                None if create => ConsumerGroup::new(group_id),
                None => return Ok(None),
            };
            let result = f(&mut group)?;
            let record = group.to_record();
            if cached.offsets.consumer.as_ref() != Some(&record) {
                let mut next = cached.offsets.clone();
                // Offsets retention counts from the last time the group had members:
                // a change with members before or after it is such a time.
                if next.has_consumer_members() || !record.members.is_empty() {
                    next.active_ms = next.active_ms.max(Some(now_ms()));
                }
                next.consumer = Some(record);
                next.save(&self.volume).inspect_err(|e| {
                    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, e)
                })?;
                cached.offsets = next;
                cached.stamp = file_stamp(&kaas_core::offsets::offsets_file(&self.volume, group_id));
            }
            cached.consumer = Some(group);
            Ok(Some(result))
        })
    }

    /// Whether the group may have a record: in the offsets cache, or a file on the
    /// volume (a file that cannot be looked at counts: the locked path then says why).
    pub(super) fn group_has_a_record(&self, group_id: &str) -> bool {
        if self
            .offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(group_id)
        {
            return true;
        }
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        crate::blocking::off_worker(|| !matches!(path.try_exists(), Ok(false)))
    }

    /// The classic group of this id has members: a consumer-protocol member may not
    /// join it (Apache converts only an empty classic group).
    /// Err when the group's record could not be loaded ([`Self::load_group`]).
    fn classic_in_use(&self, group_id: &str) -> Result<bool, ResponseError> {
        Ok(self.load_group(group_id)?.is_some_and(|g| {
            let g = lock_group(&g);
            !g.removed && !g.members.is_empty()
        }))
    }

    /// ConsumerGroupHeartbeat: a member joins, heartbeats, reports what it owns, or
    /// leaves. A member joining without an id (version 0) is given one.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
        topics: &TopicsView,
        now_ms: i64,
    ) -> Result<HeartbeatReply, ConsumerError> {
        let settings = self.consumer_settings;
        let member_epoch = hb.member_epoch;
        let joining_id = hb.member_id.clone();
        // A join is checked against a classic group of the same id under the cache
        // entry's lock, which a classic join holds too (`admit_classic`): one of the
        // two comes first and the other sees it.
        let clash = || {
            let in_use = || {
                self.classic_in_use(group_id).map_err(|code| {
                    refused(
                        code,
                        format!("the classic group {group_id:?} recorded on the volume could not be loaded now"),
                    )
                })
            };
            if member_epoch == 0 && in_use()? {
                return Err(refused(
                    ResponseError::GroupIdNotFound,
                    format!(
                        "group {group_id:?} is a classic group with members (group.protocol=classic); \
                         a member with group.protocol=consumer may join it once it is empty"
                    ),
                ));
            }
            Ok(())
        };
        // A group with no record, here or on the volume, is made only by a join that
        // is admitted: a heartbeat or a leave for it, or a join it must refuse, is
        // refused before its file lock is taken (the lock file stays on the volume)
        // and before a cache entry is made. Random group ids left both behind, one
        // each, without end (`refused_heartbeats_for_groups_without_a_record_leave_no_trace`).
        if !self.group_has_a_record(group_id) {
            if member_epoch != 0 {
                return Err(refused(
                    ResponseError::UnknownMemberId,
                    format!("member {joining_id:?} is not in group {group_id:?}"),
                ));
            }
            ConsumerGroup::check_request(&hb).map_err(ConsumerError::Refused)?;
        }
        let reply = self.with_consumer(group_id, clash, |g| {
            let before = g.epoch;
            let reply = g
                .heartbeat(hb, topics, &settings, now_ms, || Uuid::new_v4().simple().to_string())
                .map_err(ConsumerError::Refused)?;
            if g.epoch != before {
                debug!(group = group_id, epoch = g.epoch, member = %reply.member_id, "consumer group epoch bumped");
            }
            Ok(reply)
        })?;
        if member_epoch == 0 {
            info!(group = group_id, member = %reply.member_id, epoch = reply.member_epoch, "consumer group member joined");
        } else if member_epoch < 0 {
            info!(group = group_id, member = %joining_id, "consumer group member left");
        }
        Ok(reply)
    }

    /// Removes the members of the consumer groups this broker coordinates whose
    /// session or rebalance timeout passed (Apache fences them), and brings their
    /// groups' targets up to date. Groups `owns` does not claim are left alone: their
    /// coordinator is elsewhere. After a live-set change, the consumer groups this
    /// broker now coordinates are first loaded from the volume (their members get a
    /// full session from then), so a group taken over expires its members even if
    /// none of them ever heartbeats here.
    pub fn expire_consumer_members(&self, topics: &dyn Fn() -> TopicsView, owns: &dyn Fn(&str) -> bool, now_ms: i64) {
        let generation = self.generation();
        if self
            .scanned_generation
            .swap(generation, std::sync::atomic::Ordering::SeqCst)
            != generation
        {
            self.load_owned_consumer_groups(owns);
        }
        let due: Vec<String> = {
            let cache = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .iter()
                .filter(|(id, entry)| {
                    owns(id)
                        && entry.try_lock().is_ok_and(|c| {
                            c.generation == generation
                                && c.consumer
                                    .as_ref()
                                    .is_some_and(|g| g.members.values().any(|m| m.deadline_ms() <= now_ms))
                        })
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let topics = topics();
        for id in due {
            match self.with_consumer_if(&id, false, || Ok(()), |g| Ok(g.expire(&topics, now_ms))) {
                Ok(gone) => {
                    let gone = gone.unwrap_or_default();
                    for member in gone {
                        info!(group = %id, member = %member, "consumer group member removed: its session or rebalance timeout passed");
                    }
                }
                Err(e) => {
                    warn!(group = %id, error = %e.message(), "cannot expire consumer group members; tried again later")
                }
            }
        }
    }

    /// Loads every consumer group with members this broker coordinates from the
    /// volume, and every classic group whose record names members (a file that
    /// cannot be read is logged, and tried again at the next live-set change or use).
    fn load_owned_consumer_groups(&self, owns: &dyn Fn(&str) -> bool) {
        let ids = match list_groups(&self.volume) {
            Ok(ids) => ids,
            Err(e) => {
                warn!(error = %e, "cannot list the groups to load the consumer groups this broker coordinates");
                return;
            }
        };
        for id in ids.into_iter().filter(|id| owns(id)) {
            let generation = self.generation();
            // Unlocked first: most groups are classic (files are replaced atomically).
            let (has_members, classic) = match GroupOffsets::load(&self.volume, &id) {
                Ok(o) => (o.has_consumer_members(), o.classic.filter(|c| !c.members.is_empty())),
                Err(e) => {
                    warn!(group = %id, error = %e, "cannot read the group's offsets file");
                    continue;
                }
            };
            // A classic group recorded with members: loaded too, so its members expire
            // here (and the record is cleared) even if none of them comes back.
            if let Some(record) = classic {
                // Refused only when the live set changed during the scan: the pass
                // after that change scans again.
                let _loaded_or_moved = self.insert_loaded(&id, record, generation, Instant::now());
            }
            if has_members {
                if let Err(e) = self.with_consumer_if(&id, false, || Ok(()), |_| Ok(())) {
                    warn!(group = %id, error = %e.message(), "cannot load the consumer group this broker now coordinates");
                }
            }
        }
    }

    /// A JoinGroup (classic protocol) for `group_id`: runs `join` unless a consumer
    /// group of that id has members (INCONSISTENT_GROUP_PROTOCOL, as Apache); an
    /// empty one is converted first (its record dropped, its committed offsets kept).
    /// `join` runs under the group's cache entry lock, which a consumer-protocol
    /// join's clash check holds too. Runs off the async workers.
    pub fn admit_classic<R>(&self, group_id: &str, join: impl FnOnce() -> R) -> Result<R, ResponseError> {
        crate::blocking::off_worker(|| {
            let entry = self.cache_entry(group_id);
            let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
            // Without the file lock first: most classic groups never were consumer
            // groups, and a join must not take a file lock (or leave a lock file) for
            // them.
            let has_members = self
                .with_consumer_record(group_id, Some(&cached), |c| c.map(|c| !c.members.is_empty()))
                .map_err(|e| {
                    warn!(group = group_id, error = %e, "cannot read the group's offsets file");
                    // The volume failed the read: retriable; a file refused for what
                    // it holds stays KAFKA_STORAGE_ERROR.
                    offsets::member_error(&e)
                })?;
            match has_members {
                None => {
                    let joined = join();
                    self.drop_blank_entry(group_id, &entry, &cached);
                    return Ok(joined);
                }
                Some(true) => return Err(ResponseError::InconsistentGroupProtocol),
                Some(false) => {}
            }
            let converted = (|| -> Result<bool, ConsumerError> {
                let _file_lock = offsets::lock_group_file(&self.volume, group_id)?;
                self.refresh_cached(group_id, &mut cached)?;
                match &cached.consumer {
                    None => Ok(false),
                    Some(g) if !g.is_empty() => Err(refused(ResponseError::InconsistentGroupProtocol, "")),
                    Some(_) => {
                        let mut next = cached.offsets.clone();
                        next.consumer = None;
                        next.save(&self.volume).inspect_err(|e| {
                            crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, e)
                        })?;
                        cached.offsets = next;
                        cached.consumer = None;
                        cached.stamp = file_stamp(&kaas_core::offsets::offsets_file(&self.volume, group_id));
                        Ok(true)
                    }
                }
            })()
            .map_err(|e| match e {
                ConsumerError::Volume(v) => offsets::member_error(&v),
                refused => refused.code(),
            })?;
            if converted {
                info!(group = group_id, "empty consumer group converted to a classic group");
            }
            // The file lock is let go before the classic group's lock is taken.
            Ok(join())
        })
    }

    /// An offset commit (or fetch) of a consumer group's member: None when the group
    /// is not a consumer group (the classic checks apply), else Apache's checks
    /// ([`member_check`]). OffsetCommit checks again as it writes
    /// ([`Self::commit_offsets_checked`]).
    pub fn check_consumer_member(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        old_commit_version: bool,
    ) -> Option<Result<(), ResponseError>> {
        let checked = crate::blocking::off_worker(|| {
            // The cached copy if nobody holds it (a writer may hold it for a lock's
            // wait), else the file.
            let entry = self
                .offsets
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(group_id)
                .cloned();
            let cached = entry.as_ref().and_then(|e| e.try_lock().ok());
            self.with_consumer_record(group_id, cached.as_deref(), |c| {
                c.map(|c| member_check(c, member_id, member_epoch, old_commit_version))
            })
        });
        match checked {
            Ok(checked) => checked,
            Err(e) => {
                warn!(group = group_id, error = %e, "cannot read the consumer group to check a member's offsets request");
                Some(Err(offsets::member_error(&e)))
            }
        }
    }

    /// `f` of the group's consumer record (None: not a consumer group) as its file
    /// holds it now, without the file's lock: the cached copy when the file's stamp
    /// is the one cached (a stat, no read), else the file (replaced atomically, so a
    /// read sees one whole version).
    fn with_consumer_record<R>(
        &self,
        group_id: &str,
        cached: Option<&CachedOffsets>,
        f: impl FnOnce(Option<&kaas_core::consumer_group::ConsumerGroupRecord>) -> R,
    ) -> Result<R, VolumeError> {
        if let Some(c) = cached {
            let stamp = file_stamp(&kaas_core::offsets::offsets_file(&self.volume, group_id));
            if stamp.is_some() && stamp == c.stamp {
                return Ok(f(c.offsets.consumer.as_ref()));
            }
        }
        Ok(f(GroupOffsets::load(&self.volume, group_id)?.consumer.as_ref()))
    }

    /// The consumer group as ConsumerGroupDescribe shows it; None when the group is
    /// not a consumer group.
    pub fn describe_consumer(&self, group_id: &str) -> Result<Option<ConsumerGroupView>, VolumeError> {
        crate::blocking::off_worker(|| {
            if !kaas_core::offsets::offsets_file(&self.volume, group_id).exists() {
                return Ok(None);
            }
            let entry = self.cache_entry(group_id);
            let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
            // A read: a failure here is not a failed write of the offsets file.
            let _file_lock = GroupOffsets::lock(&self.volume, group_id)?;
            self.refresh_cached(group_id, &mut cached)?;
            Ok(cached.consumer.as_ref().map(|g| ConsumerGroupView {
                state: g.state(),
                epoch: g.epoch,
                assignment_epoch: g.assignment_epoch,
                assignor: g.assignor_name(),
                members: g
                    .members
                    .values()
                    .map(|m| ConsumerMemberView {
                        member: m.clone(),
                        target: g.target.get(&m.id).cloned().unwrap_or_default(),
                    })
                    .collect(),
            }))
        })
    }
}

/// Apache's checks of an offsets request of a consumer group's member, on the group's
/// record: a member epoch below zero passes only while the group is empty (an admin
/// tool); the member must be in the group (UNKNOWN_MEMBER_ID) and at its epoch (above:
/// FENCED_MEMBER_EPOCH, below: STALE_MEMBER_EPOCH); a non-transactional commit of a
/// consumer-protocol member must use OffsetCommit v9 or later (UNSUPPORTED_VERSION).
pub fn member_check(
    group: &kaas_core::consumer_group::ConsumerGroupRecord,
    member_id: &str,
    member_epoch: i32,
    old_commit_version: bool,
) -> Result<(), ResponseError> {
    if member_epoch < 0 && group.members.is_empty() {
        return Ok(());
    }
    let Some(m) = group.members.get(member_id) else {
        return Err(ResponseError::UnknownMemberId);
    };
    if old_commit_version {
        return Err(ResponseError::UnsupportedVersion);
    }
    // Any mismatch is STALE_MEMBER_EPOCH, as Apache's `validateMemberEpoch` for
    // offsets: Java's commit manager takes FENCED_MEMBER_EPOCH on a commit for an
    // unexpected, fatal error.
    if member_epoch != m.epoch {
        Err(ResponseError::StaleMemberEpoch)
    } else {
        Ok(())
    }
}
