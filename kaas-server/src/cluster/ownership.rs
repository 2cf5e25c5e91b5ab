//! Partition ownership: which broker may open a partition (placement and the
//! take-over gate), opening it under `owner.lock` at a new leader epoch, letting it go
//! (hand-over to its rendezvous owner, step-down, shutdown, reopen), and who leads a
//! partition now.

use super::*;
use kaas_core::partition::PartitionState;
/// Whether this broker may open partition (topic, index), last led by the given owner
/// (None: never led); Err says why not.
pub(super) type PlaceRule<'a> = dyn Fn(&str, i32, Option<&PartitionOwner>) -> Result<(), String> + Sync + 'a;

/// The take-over rule over one view of the live brokers.
pub(super) struct Gate<'a> {
    place: Box<PlaceRule<'a>>,
    /// Whether broker `id`'s lease, re-read now, is confirmed dead (only then may a
    /// lock it holds be stolen).
    confirm_dead: Box<dyn Fn(i32) -> bool + Sync + 'a>,
    /// Run once a take-over's leadership is recorded, before its recovery: nothing
    /// in production; tests pause the take-over there.
    recorded: Box<dyn Fn() + Sync + 'a>,
}

/// The placement rule (`kaas_core::ownership::place`) over one view of the live
/// brokers: this broker is the partition's rendezvous owner, and the last owner let
/// it go, or is this broker id (an earlier incarnation), or is not live.
/// The lock of the last owner may be stolen only if its lease is positively dead —
/// `confirm_dead` re-reads it and asks the lease tracker (seen, same incarnation and
/// heartbeat, unchanged for the session timeout) — never merely because this broker
/// has not seen it yet, or saw it dead before it restarted. A leadership marked
/// released whose lock is still held is judged the same way: its broker still holds
/// it (nobody else locks it without recording a leadership of its own first, under
/// `owner.gate`), stopped between its release and the unlock, or still answering a
/// request that looked the partition up before.
///
/// A last owner that did not let go counts as gone only while its lease, read again
/// now, is the one the live set was built from (`unchanged_since_seen`): a live set
/// kept across a freeze of this process (a paused VM: no time passed by its clocks)
/// would otherwise hand it the partition of a broker that renewed all along — whose
/// lock, on NFS, may have lapsed meanwhile.
pub(super) fn take_over_gate<'a>(
    me: i32,
    live: &BTreeMap<i32, Endpoints>,
    opening: &[i32],
    unchanged_since_seen: impl Fn(i32) -> bool + Sync + 'a,
    confirm_dead: impl Fn(i32) -> bool + Sync + 'a,
) -> Gate<'a> {
    let live: Vec<i32> = live.keys().copied().collect();
    let opening = opening.to_vec();
    Gate {
        place: Box::new(move |topic, index, last| {
            match kaas_core::ownership::place_with(me, &live, &opening, topic, index, false, last) {
                kaas_core::ownership::Placement::Wait(why) => Err(why),
                _ => match last {
                    Some(o) if !o.released && o.broker != me && !unchanged_since_seen(o.broker) => Err(format!(
                        "partition {topic}-{index} is led by broker {} (leader epoch {}), whose lease was renewed since this broker last looked",
                        o.broker, o.leader_epoch
                    )),
                    _ => Ok(()),
                },
            }
        }),
        confirm_dead: Box::new(confirm_dead),
        recorded: Box::new(|| {}),
    }
}

/// Reads broker `id`'s lease now and asks `tracker` whether it is the one its last
/// observation saw. A lease that is missing or cannot be read shows no renewal: the
/// live set decides, as it does for such a lease (not live).
pub(crate) fn lease_unchanged_since_seen(volume: &Volume, tracker: &kaas_core::broker::LeaseTracker, id: i32) -> bool {
    kaas_core::broker::BrokerLease::read(volume, id)
        .map_or(true, |l| l.stands_down() || tracker.unchanged_since_seen(&l))
}

/// Reads broker `id`'s lease now and asks `tracker` whether it is still the one it
/// judged dead.
pub(crate) fn lease_confirmed_dead(
    volume: &Volume,
    tracker: &kaas_core::broker::LeaseTracker,
    id: i32,
    timeout_ms: i64,
) -> bool {
    kaas_core::broker::BrokerLease::read(volume, id)
        .is_ok_and(|l| tracker.confirms_dead(&l, std::time::Instant::now(), timeout_ms))
}

impl Cluster {
    /// Opens a topic's partitions here, under the take-over rule.
    pub(super) fn open_topic_here(&self, meta: TopicMeta) -> Topic {
        open_topic(
            &self.volume,
            &self.log_defaults(),
            meta,
            self.config.broker_id,
            now_ms(),
            &self.gate(),
        )
    }

    /// Opens one partition here, under the take-over rule.
    pub(super) fn open_partition_here(
        &self,
        config: &LogConfig,
        topic: &str,
        topic_id: Uuid,
        index: i32,
    ) -> Result<Arc<Partition>, Offline> {
        open_partition(
            &self.volume,
            config,
            topic,
            topic_id,
            index,
            self.config.broker_id,
            now_ms(),
            &self.gate(),
        )
    }

    /// The take-over rule over this broker's current view of the live brokers.
    pub(super) fn gate(&self) -> Gate<'_> {
        let tracker = || self.lease_tracker.lock().unwrap_or_else(|p| p.into_inner());
        // The live set and the sightings it was built from, as one view (the lease
        // watch sets the live set with the tracker held): a renewal seen after the
        // live set was built must not pass for one it was built from.
        let (live, opening, seen) = {
            let t = tracker();
            let live = self.live_brokers.read().unwrap_or_else(|p| p.into_inner());
            (live.clone(), self.opening_brokers(), t.clone())
        };
        take_over_gate(
            self.config.broker_id,
            &live,
            &opening,
            move |id| lease_unchanged_since_seen(&self.volume, &seen, id),
            move |id| lease_confirmed_dead(&self.volume, &tracker(), id, self.config.broker_session_timeout_ms),
        )
    }

    /// Lets every partition go (see [`Partition::retire`]): clean shutdown, and a
    /// broker stepping down because it could not renew its lease (which lets them go
    /// without writing anything: see `retire`).
    pub fn release_partitions(&self, reason: &str) {
        let _admin = self.admin_lock.blocking_lock();
        let released = self.let_go(reason, |_, _| true);
        if released > 0 {
            info!(partitions = released, reason, "released partitions");
        }
    }

    /// Hands every partition this broker leads but is no longer the rendezvous owner
    /// of (a broker joined, or came back) to its owner: the partition is let go
    /// cleanly, and the owner takes it over at its next volume sync. Caller holds
    /// the admin lock.
    pub(super) fn hand_over_misplaced(&self) -> usize {
        let live: Vec<i32> = self.live_brokers().into_keys().collect();
        let me = self.config.broker_id;
        let moved = self.let_go("handed over to its rendezvous owner", |topic, index| {
            matches!(
                kaas_core::ownership::place(me, &live, topic, index, true, None),
                kaas_core::ownership::Placement::HandOver(_)
            )
        });
        if moved > 0 {
            info!(
                partitions = moved,
                "handed partitions over to the brokers that own them now"
            );
            self.handed_over
                .fetch_add(moved as u64, std::sync::atomic::Ordering::Relaxed);
        }
        moved
    }

    /// Lets one partition go so that the next volume sync opens it again (recovery
    /// from its files, at a new leader epoch): for a partition whose state in memory
    /// no longer matches its files.
    pub fn reopen_partition(&self, topic: &str, index: i32, reason: &str) {
        // As every registry rewrite of partitions: under the admin lock, so no sync or
        // admin call puts back a copy that still holds the retired partition.
        let _admin = self.admin_lock.blocking_lock();
        self.let_go(reason, |t, i| t == topic && i == index);
    }

    /// Retires the partitions this broker leads that `pick` selects, and marks them
    /// led elsewhere in the registry. Returns how many.
    pub(super) fn let_go(&self, reason: &str, pick: impl Fn(&str, i32) -> bool) -> usize {
        self.give_up(reason, |p| {
            if !pick(&p.topic, p.index) {
                return false;
            }
            p.retire(&self.volume, self.config.broker_id, reason, &|| self.lease_fresh());
            true
        })
    }

    /// Stops serving the partitions led here that another broker took over meanwhile
    /// (this broker was paused, frozen with its clock, or cut off from the volume):
    /// each one's `owner.json`, re-read now, must still name its leadership
    /// ([`Partition::still_led_here`]). They are given up without writing anything;
    /// the placement rule then decides, like for any partition led elsewhere, whether
    /// this broker takes them back. So are the ones found retired but still listed
    /// (a failed fsync retires its partition), so the sync can open them again from
    /// their files at once. Caller holds the admin lock. Returns how many.
    ///
    /// The `owner.json` files are re-read only when this broker's deposed notice
    /// changed since the last time, or [`LEADERSHIP_RECHECK`] after it: a taker of a
    /// leadership that did not let go leaves the notice after recording its own.
    pub(super) fn give_up_taken_over(&self) -> usize {
        // The notice's stamp before the re-reads: one left during them is seen next time.
        let notice = kaas_core::topic::DeposedNotice::stamp(&self.volume, self.config.broker_id);
        let (full, retry) = {
            let watch = self.deposed_watch.lock().unwrap_or_else(|e| e.into_inner());
            let full = watch.seen != notice || watch.full_at.is_none_or(|at| at.elapsed() >= LEADERSHIP_RECHECK);
            (full, watch.retry.clone())
        };
        // A partition whose owner.json could not be read is read again at the next
        // sync (the note may have been about it), alone.
        let failed = std::cell::RefCell::new(std::collections::HashSet::new());
        let deposed = self.give_up("taken over by another broker, or failed here", |p| {
            if p.is_retired() {
                return true;
            }
            if !full && !retry.contains(&(p.topic_id, p.index)) {
                return false;
            }
            self.leadership_rechecks.fetch_add(1, Ordering::Relaxed);
            match p.still_led_here() {
                Ok(led) => !led,
                Err(e) => {
                    // Unknown: keep serving (every acknowledgment checks again).
                    warn!(topic = %p.topic, partition = p.index, error = %e, "cannot re-read the partition's owner.json");
                    failed.borrow_mut().insert((p.topic_id, p.index));
                    false
                }
            }
        });
        {
            let mut watch = self.deposed_watch.lock().unwrap_or_else(|e| e.into_inner());
            if full {
                watch.seen = notice;
                watch.full_at = Some(std::time::Instant::now());
            }
            watch.retry = failed.into_inner();
        }
        if deposed > 0 {
            warn!(
                partitions = deposed,
                "gave up partitions other brokers took over while this one led them, or that failed here"
            );
        }
        deposed
    }

    /// Marks the partitions led here that `retire` retired (it returns true) as led
    /// elsewhere in the registry, to be revisited by the volume sync. Returns how many.
    fn give_up(&self, reason: &str, retire: impl Fn(&Partition) -> bool) -> usize {
        let mut count = 0;
        for t in self.topics() {
            let mut partitions = t.partitions.clone();
            let mut changed = false;
            for slot in partitions.iter_mut() {
                let Ok(p) = slot else { continue };
                if !retire(p) {
                    continue;
                }
                self.revisit
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((p.topic_id, p.index));
                *slot = Err(Offline {
                    reason: format!("partition {}-{} was let go by this broker: {reason}", p.topic, p.index),
                    elsewhere: true,
                });
                changed = true;
                count += 1;
            }
            if changed {
                let topic = Arc::new(Topic {
                    meta: t.meta.clone(),
                    log_config: t.log_config.clone(),
                    partitions,
                });
                self.registry_mut().topics.insert(t.meta.name.clone(), topic);
            }
        }
        count
    }

    /// `owner.json` of a partition led elsewhere (None: none, or unreadable), read
    /// again only when it was replaced: every write renames a new file into place, so
    /// a stamp taken through an open that matches the last read's means the copy
    /// read then is current.
    pub(super) fn foreign_owner(&self, topic: &str, partition: i32) -> Option<PartitionOwner> {
        let path = PartitionOwner::path(&self.volume, topic, partition);
        // The stamp before the read: a replace in between only makes the next look
        // read it again.
        let stamp = kaas_core::fsutil::file_stamp(&path)?;
        let key = (topic.to_string(), partition);
        if let Some((seen, owner)) = self.foreign_owners.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            if *seen == stamp {
                return Some(owner.clone());
            }
        }
        let owner = PartitionOwner::read(&path).ok()?;
        let mut cache = self.foreign_owners.lock().unwrap_or_else(|e| e.into_inner());
        // Entries of deleted topics do not pile up past a bound.
        if cache.len() >= 1 << 16 {
            cache.clear();
        }
        cache.insert(key, (stamp, owner.clone()));
        Some(owner)
    }

    /// Whether the volume sync tries partition `index` of topic `topic_id` every
    /// round (see `revisit`).
    pub(crate) fn must_revisit(&self, topic_id: Uuid, index: i32) -> bool {
        self.revisit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(topic_id, index))
    }

    /// After the volume sync tried a partition: one it took, or whose `owner.json`
    /// names no leadership of this broker id that did not let go, is not revisited
    /// (the placement rule then gives it to this broker only where it is assigned);
    /// one whose `owner.json` does name such a leadership — left by an attempt that
    /// recorded it and then failed to recover the log after a deposed leader, or
    /// failed to let it go again — is revisited every round, wherever it is
    /// assigned, since no other broker takes it while this one is live.
    pub(super) fn revisited(&self, topic: &str, topic_id: Uuid, index: i32, taken: bool) {
        let still_mine = !taken
            && match PartitionOwner::read(&PartitionOwner::path(&self.volume, topic, index)) {
                Ok(o) => o.broker == self.config.broker_id && !o.released && !of_other_topic(&o, topic_id),
                // Never led: nobody's leadership.
                Err(e) if e.is_not_found() => false,
                // Unknown: tried again.
                Err(_) => true,
            };
        let mut revisit = self.revisit.lock().unwrap_or_else(|e| e.into_inner());
        if still_mine {
            revisit.insert((topic_id, index));
        } else {
            revisit.remove(&(topic_id, index));
        }
    }

    /// The broker leading a partition: this one when it holds the partition's
    /// `owner.lock`; else the live broker `owner.json` names, when another process
    /// holds the lock — one still opening the volume included (a coordinator queues
    /// its markers for it, applied once it serves). None when the partition does not
    /// exist or has no live leader.
    pub fn partition_leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.partition_leadership(topic, partition).map(|(b, _)| b)
    }

    /// Whether this broker leads the partition: [`Cluster::partition_leader`] is this
    /// broker exactly when the partition is open here, which memory alone tells (no
    /// file is read, so no need to leave the async worker).
    pub fn leads_here(&self, topic: &str, partition: i32) -> bool {
        self.topic(topic)
            .ok()
            .is_some_and(|t| matches!(t.partition(partition), Some(Ok(_))))
    }

    /// [`Cluster::partition_leader`] with the leader epoch.
    pub fn partition_leadership(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        self.leadership(topic, partition, false)
    }

    /// [`Cluster::partition_leadership`] for telling clients (Metadata): the
    /// `owner.json` of a partition led elsewhere is read and parsed again only when
    /// it was replaced (a stamp through an open), so a Metadata request over
    /// thousands of partitions parses none of them most of the time. A leader still
    /// opening the volume serves nothing yet: no leader for clients.
    pub fn partition_leadership_for_clients(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        self.leadership(topic, partition, true)
    }

    /// `cached`: for clients ([`Self::partition_leadership_for_clients`]).
    fn leadership(&self, topic: &str, partition: i32, cached: bool) -> Option<(i32, i32)> {
        let t = self.topic(topic).ok()?;
        match t.partition(partition)? {
            Ok(p) => Some((self.config.broker_id, p.leader_epoch)),
            Err(o) if o.elsewhere => {
                let owner = if cached {
                    self.foreign_owner(topic, partition)?
                } else {
                    PartitionOwner::read(&PartitionOwner::path(&self.volume, topic, partition)).ok()?
                };
                // An `owner.json` of another topic of the name (deleted and created
                // again, the old one's leader not yet gone from it) names no leader
                // of this one.
                (owner.broker != self.config.broker_id
                    && !owner.released
                    && !of_other_topic(&owner, t.meta.topic_id)
                    && (self.live_brokers().contains_key(&owner.broker)
                        || (!cached && self.opening_brokers().contains(&owner.broker))))
                .then_some((owner.broker, owner.leader_epoch))
            }
            Err(_) => None,
        }
    }
}

pub(super) fn open_topic(
    volume: &Volume,
    defaults: &LogConfig,
    meta: TopicMeta,
    broker_id: i32,
    now: i64,
    gate: &Gate<'_>,
) -> Topic {
    let (log_config, problems) = kaas_core::topic::stored_log_config(defaults, &meta.configs);
    for problem in problems {
        warn!(topic = %meta.name, problem = %problem, "a topic config stored on the volume does not apply as written");
    }
    // Side by side, a bounded number at a time (each a recovery from its files).
    let indexes: Vec<i32> = (0..meta.partitions).collect();
    let partitions = crate::blocking::parallel_map(&indexes, TAKE_OVER_WORKERS, |&p| {
        open_partition(volume, &log_config, &meta.name, meta.topic_id, p, broker_id, now, gate)
    });
    Topic {
        meta,
        log_config,
        partitions,
    }
}

/// Whether `owner.json` describes a partition of another topic of the same name (one
/// that was deleted): its leadership means nothing to this topic.
pub(super) fn of_other_topic(owner: &PartitionOwner, topic_id: Uuid) -> bool {
    owner.topic_id.is_some_and(|id| id != topic_id)
}

/// Removes what a deleted topic left in a partition directory, everything but
/// `owner.lock` and `owner.gate` (which the caller holds) and `owner.json` (which
/// still names the deleted topic), and makes the removal durable: a power cut after it
/// leaves nothing of the old partition but its `owner.*`, which every reader takes for
/// another topic's. Before a new topic of the same name records itself in `owner.json`
/// ([`open_partition`]), and before a deleted partition's directory goes
/// ([`remove_deleted_partition_dir`]).
pub(super) fn clear_leftovers(dir: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if ["owner.lock", "owner.gate", "owner.json"]
            .iter()
            .any(|keep| entry.file_name() == *keep)
        {
            continue;
        }
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    kaas_core::fsutil::sync_dir(dir)
}

/// Removes a deleted topic's partition directory so that a power cut at any point
/// leaves either none of it or a directory whose `owner.json` names the deleted topic
/// (which a topic created again under the name clears first): everything else goes,
/// durably, before `owner.json` does. `std::fs::remove_dir_all` alone removes in the
/// order the file system lists (ext4: by hash), so a cut could keep the segments and
/// lose `owner.json`, and a new topic of the same name would take the old records for
/// its own (`test_a_topic_created_again_after_power_cuts_mid_delete_starts_empty`).
///
/// The caller holds the partition's `owner.gate` and `owner.lock`. What is left (the
/// `owner.*` files) is not removed by name in place: a process taking the partition
/// of a topic created again under the name meanwhile (waiting for the gate) found the
/// directory gone and failed (the partition offline until the next sync), or made its
/// own `owner.gate` and `owner.lock` there the moment ours were unlinked, which a
/// removal whose listing returned entries made after it began took too — it would
/// lead with a lock on a file nobody else opens, and the next locker (kaasctl writing
/// a marker) would get a fresh one beside it. The directory is renamed whole into
/// [`Volume::deleted_dir`] first (one atomic step; a waiter finds the path gone and
/// makes it again, `PartitionOwner::acquire`), and removed there
/// (`a_partition_created_again_while_the_deleted_ones_directory_goes_keeps_its_lock_files`).
/// A crash between the two leaves it there, for the volume sync's sweep.
pub(super) fn remove_deleted_partition_dir(volume: &Volume, dir: &std::path::Path) -> std::io::Result<()> {
    clear_leftovers(dir)?;
    let deleted = volume.deleted_dir();
    kaas_core::fsutil::create_dir_durable(&deleted)?;
    // Named by a fresh id alone: a topic name may take 249 of a name's 255 bytes.
    let gone = deleted.join(Uuid::new_v4().simple().to_string());
    std::fs::rename(dir, &gone)?;
    // Dated now, so the sweep leaves it to us ([`Cluster::sweep_orphan_partition_dirs`]).
    if let Err(e) = std::fs::File::open(&gone).and_then(|f| f.set_modified(std::time::SystemTime::now())) {
        debug!(dir = %gone.display(), error = %e, "cannot date a deleted partition's directory");
    }
    if let Some(parent) = dir.parent() {
        kaas_core::fsutil::sync_dir(parent)?;
    }
    // Out of every live path now: what is left there is only disk space. Removed
    // best effort — on NFS the `owner.*` files still open here are renamed to
    // `.nfsXXXX` rather than removed, and the directory stays until they are closed —
    // and otherwise by the volume sync's sweep.
    match std::fs::remove_dir_all(&gone).and_then(|()| kaas_core::fsutil::sync_dir(&deleted)) {
        Ok(()) => {}
        Err(e) => debug!(dir = %gone.display(), error = %e, "a deleted partition's directory is left for the sweep"),
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn open_partition(
    volume: &Volume,
    config: &LogConfig,
    topic: &str,
    topic_id: Uuid,
    index: i32,
    broker_id: i32,
    now: i64,
    gate: &Gate<'_>,
) -> Result<Arc<Partition>, Offline> {
    let dir = volume.partition_dir(topic, index);
    // A partition another broker led is taken only once that broker let it go or
    // its lease expired: a free lock alone is not enough (on NFS it can be freed
    // before a dead writer's last pages reach the server). The leadership of a
    // deleted topic's partition of the same name does not count.
    let owner_path = PartitionOwner::path(volume, topic, index);
    let read_owner = || match PartitionOwner::read(&owner_path) {
        Ok(o) => Ok(Some(o)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => {
            error!(topic, partition = index, error = %e, "partition owner file unreadable; partition is offline");
            Err(Offline::broken(e))
        }
    };
    let last = read_owner()?.filter(|o| !of_other_topic(o, topic_id));
    (gate.place)(topic, index, last.as_ref()).map_err(|reason| Offline {
        reason,
        elsewhere: true,
    })?;
    // The lock first: recovery itself writes (truncates torn tails, re-indexes). A
    // lock whose holder is paused is stolen only if, read under the partition's gate,
    // `owner.json` names a leadership whose broker's lease is confirmed dead now — let
    // go or not: a broker stopped between marking it released and its unlock would
    // keep the partition from everyone for its whole pause.
    // A deleted topic's leadership is judged the same way: its holder, thawed, finds
    // the topic gone and itself deposed (`Cluster::remove_partition_dirs`).
    let steal_from =
        |o: Option<&PartitionOwner>| o.is_some_and(|o| o.broker != broker_id && (gate.confirm_dead)(o.broker));
    let mut owner_lock = PartitionOwner::acquire(volume, topic, index, Some(&steal_from)).map_err(|e| match e {
        kaas_core::topic::OwnerLockError::Held { .. } => Offline {
            reason: e.to_string(),
            elsewhere: true,
        },
        e => {
            error!(topic, partition = index, error = %e, "cannot lock partition; it is offline");
            Offline::broken(e)
        }
    })?;
    // Again with the lock in hand: another broker may have taken the partition (and
    // died, freeing the lock) between the first read and the lock.
    let current = read_owner()?;
    let leftovers = current.as_ref().is_some_and(|o| of_other_topic(o, topic_id));
    match current.clone() {
        Some(o) if of_other_topic(&o, topic_id) => {}
        Some(o) if last.as_ref() != Some(&o) => {
            (gate.place)(topic, index, Some(&o)).map_err(|reason| Offline {
                reason,
                elsewhere: true,
            })?;
        }
        _ => {}
    }
    if owner_lock.stolen {
        warn!(topic, partition = index, last_owner = ?current.as_ref().map(|o| o.broker), "took the owner.lock of a partition whose holder's lease expired while it held the lock (paused or cut off); it no longer writes");
    }
    // What a deleted topic of the same name left is gone, durably, before this topic
    // records itself in `owner.json`: until then the old `owner.json` marks the files
    // as the old topic's, so no power cut leaves the old records under this topic's
    // name (`test_a_topic_created_again_after_power_cuts_mid_delete_starts_empty`).
    if leftovers {
        warn!(topic, partition = index, old_topic_id = ?current.as_ref().and_then(|o| o.topic_id), "removing what a deleted topic of the same name left in the partition directory");
        clear_leftovers(&dir).map_err(|e| {
            error!(topic, partition = index, error = %e, "cannot clear a deleted topic's files; partition is offline");
            Offline::broken(VolumeError::io(&dir, e))
        })?;
    }
    // Every take-over (another broker's, or this id's after a restart) is a new
    // leadership: the leader epoch goes up. Recorded before the gate opens, so no
    // other process judges the lock's holder by the previous leadership.
    let same_topic = current.as_ref().filter(|o| !of_other_topic(o, topic_id));
    let leader_epoch = same_topic.map_or(0, |o| o.leader_epoch + 1);
    let owner = PartitionOwner {
        version: kaas_core::topic::OWNER_FORMAT_VERSION,
        broker: broker_id,
        leader_epoch,
        released: false,
        updated_ms: now,
        topic_id: Some(topic_id),
    };
    owner.write(&owner_path).map_err(|e| {
        crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Owner, &e);
        error!(topic, partition = index, leader_epoch, error = %e, "cannot record this broker's leadership in owner.json; not leading the partition (tried again at the next sync)");
        Offline::broken(e)
    })?;
    (gate.recorded)();
    // Also to this broker id: a process of it that lost its id lock (lapsed on NFS)
    // may still run; this one only re-reads what it leads once more.
    if let Some(o) = same_topic.filter(|o| !o.released && o.broker >= 0) {
        kaas_core::topic::tell_deposed(volume, o.broker, &owner, topic, index);
    }
    // A leader that did not let go may still be writing (paused): start a segment of
    // our own, so nothing it appends through its open file is ever read. (One that let
    // go wrote nothing after its release; its lock taken over, a segment of our own
    // all the same.)
    let deposed = owner_lock.stolen || same_topic.is_some_and(|o| !o.released);
    // A failure from here on leaves this broker's leadership recorded: it is let go
    // again, so the broker the partition is assigned to may take it (no other broker
    // takes a live broker's leadership that did not let go). Not after a deposed
    // leader: the next one must start a segment of its own too.
    let failed = |e: Offline| {
        if !deposed {
            if let Err(re) = PartitionOwner::release(volume, topic, index, broker_id, leader_epoch, now_ms()) {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Owner, &re);
                warn!(topic, partition = index, error = %re, "cannot let go of a partition whose recovery failed; this broker tries it again at every sync");
            }
        }
        e
    };
    // Recovery writes to files a successor would read (a torn tail cut, indexes
    // rebuilt, a deposed leader's segment sealed and one of our own started): made
    // with the gate still held, which every take-over needs to record its leadership
    // (cluster.md, rule 2). A taker paused after recording its leadership and deposed
    // meanwhile would otherwise, resumed, seal its successor's live segment and start
    // one past it, and the next open would cut the successor's acknowledged records
    // there (`a_take_over_recovers_under_the_gate_it_recorded_its_leadership_under`).
    let recovered = PartitionState::open(&dir, config.clone(), now)
        .map_err(|e| {
            error!(topic, partition = index, error = %e, "cannot open partition; it is offline until the file is repaired");
            Offline::broken(e)
        })
        .and_then(|mut state| {
            if deposed {
                state.log.start_fresh_segment(now).map_err(|e| {
                    error!(topic, partition = index, error = %e, "cannot start a fresh segment after a take-over; partition is offline");
                    Offline::broken(e)
                })?;
            }
            Ok(state)
        });
    owner_lock.open_gate();
    // (A failure lets go of the leadership it recorded, under the gate, open again.)
    let state = recovered.map_err(failed)?;
    for cut in &state.log.truncations {
        warn!(
            topic,
            partition = index,
            path = %cut.path.display(),
            valid_bytes = cut.valid_bytes,
            cut_bytes = cut.cut_bytes,
            reason = %cut.reason,
            "recovery truncated a corrupt or torn log tail"
        );
    }
    let mut partition = Partition::opened(
        topic,
        topic_id,
        index,
        leader_epoch,
        broker_id,
        owner_path,
        state,
        owner_lock.lock,
    );
    partition.taken_from = same_topic.map(|o| (o.broker, o.released && !owner_lock.stolen));
    Ok(Arc::new(partition))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_core::topic::PartitionOwner;

    /// A topic name may take 249 bytes, its partition directory's name 255: the
    /// directory renamed away for removal is named by a fresh id alone (named
    /// `<dir>.<id>` it was past 255 bytes for any name of over 220 characters, and the
    /// rename failed with ENAMETOOLONG after the files were cleared: the directory
    /// stayed for good, found a review).
    #[test]
    fn a_deleted_partition_of_a_topic_with_the_longest_name_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let v = Volume::new(root.path());
        let topic = "t".repeat(249);
        assert!(kaas_core::layout::valid_topic_name(&topic));
        let dir = v.partition_dir(&topic, 99);
        let held = PartitionOwner::lock(&v, &topic, 99).unwrap();
        std::fs::write(dir.join("00000000000000000000.log"), b"deleted records").unwrap();
        remove_deleted_partition_dir(&v, &dir).unwrap();
        drop(held);
        assert!(!dir.exists());
        assert_eq!(std::fs::read_dir(v.deleted_dir()).unwrap().count(), 0);
    }

    /// A deleted topic's partition directory went while a process waited for its gate
    /// to take the partition of the topic created again under the name. The remover
    /// removed the directory's `owner.*` by name where they were: the waiter found the
    /// directory gone and failed with an I/O error, the new topic's partition offline
    /// until the next sync (seen: every round, on the code before). When its poll fell
    /// between two of the removals it made its own `owner.gate` and `owner.lock` there,
    /// which a removal whose listing returned entries made after it began (ext4's
    /// linear directories, NFS) took too: it then led with a lock on a file nobody else
    /// opens, and the next locker got a fresh one beside it (argued from the code, not
    /// reproduced). The directory is renamed away whole first; the waiter makes it
    /// again and takes its fresh gate and lock, the ones every later locker finds.
    /// Rounds with the removal at different points of the waiter's 10 ms polls.
    #[test]
    fn a_partition_created_again_while_the_deleted_ones_directory_goes_keeps_its_lock_files() {
        use kaas_core::topic::OwnerLockError;
        let root = tempfile::tempdir().unwrap();
        let v = Volume::new(root.path());
        let dir = v.partition_dir("t", 0);
        for round in 0..12u64 {
            // The remover: the deleted topic's leader, its gate and lock held.
            let held = PartitionOwner::lock(&v, "t", 0).unwrap();
            PartitionOwner {
                version: kaas_core::topic::OWNER_FORMAT_VERSION,
                broker: 1,
                leader_epoch: 4,
                released: false,
                updated_ms: 1,
                topic_id: Some(Uuid::from_u128(1)),
            }
            .write(&dir.join("owner.json"))
            .unwrap();
            std::fs::write(dir.join("00000000000000000000.log"), b"deleted records").unwrap();
            let taker = {
                let v = v.clone();
                std::thread::spawn(move || PartitionOwner::lock(&v, "t", 0))
            };
            std::thread::sleep(std::time::Duration::from_millis(15 + round));
            remove_deleted_partition_dir(&v, &dir).unwrap();
            drop(held);
            let mut taken = taker
                .join()
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: the taker could not take the partition: {e}"));
            assert!(
                kaas_core::fsutil::same_file(&taken.lock, &dir.join("owner.lock")).unwrap(),
                "round {round}: the taker's lock is the file at the path"
            );
            assert!(!dir.join("00000000000000000000.log").exists(), "round {round}");
            assert!(
                !dir.join("owner.json").exists(),
                "round {round}: the deleted topic's leadership is gone"
            );
            taken.open_gate();
            assert!(
                matches!(PartitionOwner::lock(&v, "t", 0), Err(OwnerLockError::Held { .. })),
                "round {round}: every later locker finds the taker's lock"
            );
            drop(taken);
            assert_eq!(
                std::fs::read_dir(v.deleted_dir()).unwrap().count(),
                0,
                "round {round}: nothing left on the way out"
            );
        }
    }

    /// A broker paused (SIGSTOP, a frozen VM) holding a partition's lock while its topic
    /// was deleted and created again: the new topic's partition was refused to every
    /// other broker for as long as the pause lasted, even with the holder's lease
    /// confirmed dead, because `owner.json` named the old topic. Its leadership is
    /// judged like any other's: stolen once its broker is confirmed dead (the holder,
    /// thawed, finds its topic gone and itself deposed, and removes nothing:
    /// `a_thawed_leader_never_removes_the_directory_a_topic_created_again_took`).
    /// A broker taking a partition over records its leadership in `owner.json` under
    /// the partition's gate, then recovers the log. The gate was let go before the
    /// recovery: a taker paused there and judged dead meanwhile was taken over in
    /// turn, and, resumed, went on to recover the files its successor now wrote — it
    /// sealed the successor's live segment and started one past it, and the next open
    /// cut the successor's acknowledged records at that base. Recovery runs with the
    /// gate held, so no other take-over falls in between.
    #[test]
    fn a_take_over_recovers_under_the_gate_it_recorded_its_leadership_under() {
        use kaas_core::batch::{build_batch, validate_all};
        use kaas_core::partition::PartitionState;
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let id = Uuid::from_u128(7);
        // A topic whose partition 0 is broker 1's beside broker 2.
        let t = (0..)
            .map(|n| format!("t{n}"))
            .find(|t| kaas_core::ownership::owner(&kaas_core::ownership::partition_key(t, 0), &[1, 2]) == Some(1))
            .unwrap();
        let t = t.as_str();
        // Broker 3 led it, wrote two records and died without letting go.
        {
            let mut held = PartitionOwner::acquire(&v, t, 0, None).unwrap();
            PartitionOwner {
                version: kaas_core::topic::OWNER_FORMAT_VERSION,
                broker: 3,
                leader_epoch: 0,
                released: false,
                updated_ms: 1,
                topic_id: Some(id),
            }
            .write(&PartitionOwner::path(&v, t, 0))
            .unwrap();
            held.open_gate();
            let mut p = PartitionState::open(&v.partition_dir(t, 0), LogConfig::default(), 1).unwrap();
            for value in [&b"a"[..], b"b"] {
                let mut b = build_batch(0, 1, None, 0, &[(None, Some(value))]);
                let h = validate_all(&b).unwrap();
                p.append(&mut b, &h, 0, 1).unwrap();
            }
        }
        let live: BTreeMap<i32, Endpoints> = [1, 2]
            .into_iter()
            .map(|b| (b, Endpoints::plaintext("127.0.0.1", 9092)))
            .collect();
        let (recorded_tx, recorded_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let go_rx = std::sync::Mutex::new(go_rx);
        let recorded_tx = std::sync::Mutex::new(recorded_tx);
        std::thread::scope(|scope| {
            // Broker 1 takes it over (3 is dead), and is paused right after recording.
            let taker = scope.spawn(|| {
                let mut gate = take_over_gate(1, &live, &[], |_| true, |b| b == 3);
                gate.recorded = Box::new(|| {
                    recorded_tx.lock().unwrap().send(()).unwrap();
                    go_rx.lock().unwrap().recv().unwrap();
                });
                open_partition(&v, &LogConfig::default(), t, id, 0, 1, 2, &gate)
            });
            recorded_rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("broker 1 recorded its leadership");
            let owner = PartitionOwner::read(&PartitionOwner::path(&v, t, 0)).unwrap();
            assert_eq!(
                (owner.broker, owner.leader_epoch),
                (1, 1),
                "broker 1's leadership is recorded"
            );
            // Broker 2, which sees broker 1 dead meanwhile (it alone is live, by its
            // view), tries too: no take-over while 1 recovers.
            let alone: BTreeMap<i32, Endpoints> = [(2, Endpoints::plaintext("127.0.0.1", 9092))].into();
            let judge_dead = take_over_gate(2, &alone, &[], |_| true, |b| b == 1 || b == 3);
            let second = open_partition(&v, &LogConfig::default(), t, id, 0, 2, 3, &judge_dead);
            let refused = second.is_err();
            drop(second);
            go_tx.send(()).unwrap();
            let first = taker.join().unwrap();
            assert!(refused, "taken over in the middle of broker 1's take-over");
            let first = first.map_err(|o| o.reason).expect("broker 1 leads it");
            assert_eq!(first.leader_epoch, 1);
        });
        let p = PartitionState::open(&v.partition_dir(t, 0), LogConfig::default(), 4).unwrap();
        assert_eq!(p.log.log_end_offset(), 2);
    }

    #[test]
    fn a_dead_holder_of_a_deleted_topics_partition_lock_is_taken_over_for_the_new_topic() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let (old_id, new_id) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut held = PartitionOwner::acquire(&v, "t", 0, None).unwrap();
        held.open_gate();
        PartitionOwner {
            version: kaas_core::topic::OWNER_FORMAT_VERSION,
            broker: 5,
            leader_epoch: 3,
            released: false,
            updated_ms: 1,
            topic_id: Some(old_id),
        }
        .write(&PartitionOwner::path(&v, "t", 0))
        .unwrap();
        let live: BTreeMap<i32, Endpoints> = [(0, Endpoints::plaintext("127.0.0.1", 9092))].into();
        let alive = take_over_gate(0, &live, &[], |_| true, |_| false);
        let refused = open_partition(&v, &LogConfig::default(), "t", new_id, 0, 0, 1, &alive);
        assert!(refused.is_err(), "a holder not confirmed dead keeps it");
        let dead = take_over_gate(0, &live, &[], |_| true, |id| id == 5);
        let taken = open_partition(&v, &LogConfig::default(), "t", new_id, 0, 0, 1, &dead);
        let taken = taken.map_err(|o| o.reason).expect("taken from a holder confirmed dead");
        assert_eq!(taken.leader_epoch, 0, "a new topic's first leadership");
        let owner = PartitionOwner::read(&PartitionOwner::path(&v, "t", 0)).unwrap();
        assert_eq!((owner.broker, owner.topic_id), (0, Some(new_id)));
        drop(held);
    }
}
