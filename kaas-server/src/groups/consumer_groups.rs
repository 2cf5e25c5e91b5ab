//! KIP-848 consumer groups in the coordinator: the state machine of
//! [`super::consumer`] kept in the group's offsets cache entry and recorded in its
//! offsets file (`GroupOffsets::consumer`), so every change is durable before its
//! answer, is written under the group's cross-process lock, and survives a
//! coordinator moving to another broker.
//!
//! The in-memory group is valid while the file's stamp is the one it was built from:
//! a file changed by anyone else (another broker, kaasctl, a transaction's offsets)
//! is read again and the group rebuilt from it, keeping only what the file does not
//! record (members' session deadlines, what each was last told) for members still
//! at the same epoch.

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
    /// The error code on the wire.
    pub fn code(&self) -> ResponseError {
        match self {
            ConsumerError::Refused(r) => r.error,
            ConsumerError::Volume(e) => offsets::offsets_error(e),
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
                }))
            })
            .clone()
    }

    /// Reads the group's file again if it changed since it was cached (the caller
    /// holds the group's file lock), rebuilding the consumer group from it. A record
    /// that does not hold together is an error naming the file, never a reset.
    pub(super) fn refresh_cached(&self, group_id: &str, cached: &mut CachedOffsets) -> Result<(), VolumeError> {
        let path = kaas_core::offsets::offsets_file(&self.volume, group_id);
        let stamp = file_stamp(&path);
        if stamp.is_some() && stamp == cached.stamp {
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
                if let Some(before) = &cached.consumer {
                    g.carry_over(before);
                }
                Some(g)
            }
        };
        cached.offsets = offsets;
        cached.consumer = consumer;
        cached.stamp = stamp;
        Ok(())
    }

    /// Runs `f` on the group's consumer group (a new, empty one if the group has
    /// none) under its locks; what `f` changed that the file records is written
    /// durably before this returns, and if that write fails the change did not happen
    /// (memory stays equal to the volume) and the error is returned instead of `f`'s
    /// answer. Runs off the async workers.
    fn with_consumer<R>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut ConsumerGroup) -> Result<R, ConsumerError>,
    ) -> Result<R, ConsumerError> {
        crate::blocking::off_worker(|| {
            let entry = self.cache_entry(group_id);
            let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
            let _file_lock = GroupOffsets::lock(&self.volume, group_id)?;
            self.refresh_cached(group_id, &mut cached)?;
            let mut group = cached.consumer.clone().unwrap_or_else(|| ConsumerGroup::new(group_id));
            let result = f(&mut group)?;
            let record = group.to_record();
            if cached.offsets.consumer.as_ref() != Some(&record) {
                let mut next = cached.offsets.clone();
                next.consumer = Some(record);
                next.save(&self.volume).inspect_err(|e| {
                    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Offsets, e)
                })?;
                cached.offsets = next;
                cached.stamp = file_stamp(&kaas_core::offsets::offsets_file(&self.volume, group_id));
            }
            cached.consumer = Some(group);
            Ok(result)
        })
    }

    /// The classic group of this id has members: a consumer-protocol member may not
    /// join it (Apache converts only an empty classic group).
    fn classic_in_use(&self, group_id: &str) -> bool {
        self.group(group_id).is_some_and(|g| {
            let g = lock_group(&g);
            !g.removed && !g.members.is_empty()
        })
    }

    /// ConsumerGroupHeartbeat: a member joins, heartbeats, reports what it owns, or
    /// leaves. `new_member_id` names a member joining without one (version 0).
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
        topics: &TopicsView,
        now_ms: i64,
    ) -> Result<HeartbeatReply, ConsumerError> {
        if hb.member_epoch == 0 && self.classic_in_use(group_id) {
            return Err(refused(
                ResponseError::GroupIdNotFound,
                format!(
                    "group {group_id:?} is a classic group with members (group.protocol=classic); \
                     a member with group.protocol=consumer may join it once it is empty"
                ),
            ));
        }
        let settings = self.consumer_settings;
        let member_epoch = hb.member_epoch;
        let joining_id = hb.member_id.clone();
        let reply = self.with_consumer(group_id, |g| {
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
    /// coordinator is elsewhere.
    pub fn expire_consumer_members(&self, topics: &dyn Fn() -> TopicsView, owns: &dyn Fn(&str) -> bool, now_ms: i64) {
        let due: Vec<String> = {
            let cache = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .iter()
                .filter(|(id, entry)| {
                    owns(id)
                        && entry.try_lock().is_ok_and(|c| {
                            c.consumer
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
            match self.with_consumer(&id, |g| Ok(g.expire(&topics, now_ms))) {
                Ok(gone) => {
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

    /// Whether the group is a consumer group (KIP-848) now, with or without members.
    pub fn is_consumer_group(&self, group_id: &str) -> Result<bool, VolumeError> {
        Ok(self.fetch_offsets(group_id)?.consumer.is_some())
    }

    /// A JoinGroup (classic protocol) for `group_id`: refused while a consumer group
    /// of that id has members (INCONSISTENT_GROUP_PROTOCOL, as Apache); an empty one
    /// is converted: its record is dropped, its committed offsets stay.
    pub fn admit_classic(&self, group_id: &str) -> Result<(), ResponseError> {
        // Unlocked first: most classic groups never were consumer groups, and a join
        // must not leave a lock file behind for them.
        match GroupOffsets::load(&self.volume, group_id) {
            Ok(o) if o.consumer.is_none() => return Ok(()),
            Ok(_) => {}
            Err(e) => {
                warn!(group = group_id, error = %e, "cannot read the group's offsets file");
                return Err(offsets::offsets_error(&e));
            }
        }
        let converted = crate::blocking::off_worker(|| -> Result<bool, ConsumerError> {
            let entry = self.cache_entry(group_id);
            let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
            let _file_lock = GroupOffsets::lock(&self.volume, group_id)?;
            self.refresh_cached(group_id, &mut cached)?;
            match &cached.consumer {
                None => Ok(false),
                Some(g) if !g.is_empty() => Err(refused(ResponseError::InconsistentGroupProtocol, "")),
                Some(_) => {
                    let mut next = cached.offsets.clone();
                    next.consumer = None;
                    next.save(&self.volume)?;
                    cached.offsets = next;
                    cached.consumer = None;
                    cached.stamp = file_stamp(&kaas_core::offsets::offsets_file(&self.volume, group_id));
                    Ok(true)
                }
            }
        });
        match converted {
            Ok(true) => {
                info!(group = group_id, "empty consumer group converted to a classic group");
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => Err(e.code()),
        }
    }

    /// An offset commit (or fetch) of a consumer group's member: None when the group
    /// is not a consumer group (the classic checks apply), else Apache's checks — a
    /// member epoch below zero passes only while the group is empty (an admin tool),
    /// the member must be in the group and at its epoch (above: FENCED_MEMBER_EPOCH,
    /// below: STALE_MEMBER_EPOCH), and a non-transactional commit of a
    /// consumer-protocol member must use OffsetCommit v9 or later.
    pub fn check_consumer_member(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        old_commit_version: bool,
    ) -> Option<Result<(), ResponseError>> {
        let load = crate::blocking::off_worker(|| -> Result<Option<Result<(), ResponseError>>, VolumeError> {
            if !kaas_core::offsets::offsets_file(&self.volume, group_id).exists() {
                return Ok(None);
            }
            let entry = self.cache_entry(group_id);
            let mut cached = entry.lock().unwrap_or_else(|p| p.into_inner());
            let _file_lock = GroupOffsets::lock(&self.volume, group_id)?;
            self.refresh_cached(group_id, &mut cached)?;
            let Some(g) = &cached.consumer else {
                return Ok(None);
            };
            if member_epoch < 0 && g.is_empty() {
                return Ok(Some(Ok(())));
            }
            let Some(m) = g.members.get(member_id) else {
                return Ok(Some(Err(ResponseError::UnknownMemberId)));
            };
            if old_commit_version {
                return Ok(Some(Err(ResponseError::UnsupportedVersion)));
            }
            Ok(Some(if member_epoch > m.epoch {
                Err(ResponseError::FencedMemberEpoch)
            } else if member_epoch < m.epoch {
                Err(ResponseError::StaleMemberEpoch)
            } else {
                Ok(())
            }))
        });
        load.unwrap_or_else(|e| {
            warn!(group = group_id, error = %e, "cannot read the consumer group to check a member's offsets request");
            Some(Err(offsets::offsets_error(&e)))
        })
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

    /// Drops the in-memory consumer groups `owns` no longer claims: a coordinator that
    /// gets one back later reads it from the volume, with fresh session deadlines.
    pub(super) fn forget_unowned_consumer_groups(&self, owns: &dyn Fn(&str) -> bool) {
        let unowned: Vec<Arc<Mutex<CachedOffsets>>> = {
            let cache = self.offsets.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .iter()
                .filter(|(id, _)| !owns(id))
                .map(|(_, e)| e.clone())
                .collect()
        };
        for entry in unowned {
            let mut c = entry.lock().unwrap_or_else(|p| p.into_inner());
            c.consumer = None;
            c.stamp = None;
        }
    }
}
