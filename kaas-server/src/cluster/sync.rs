//! The volume sync, every second: what other processes changed on the shared volume
//! — topics created, grown, reconfigured or deleted elsewhere, partitions whose writer
//! died or let go — picked up here.

use super::*;
impl Cluster {
    /// Picks up what other processes changed on the volume — topics another broker
    /// created or grew, and partitions whose `owner.lock` was freed because their
    /// writer died or let go, which this broker then takes over (recovery from the
    /// snapshot and the log tail, leader epoch + 1). Blocking file work: run it off the
    /// runtime threads, every second, and only while this broker's lease is fresh.
    ///
    /// `on_deleted` is told each topic found deleted and not created again under its
    /// name, right after its partitions were let go (the broker drops the topic's
    /// offsets there: `Broker::sync_with_volume`).
    pub fn sync_with_volume(&self, on_deleted: &dyn Fn(&str)) {
        self.sync(on_deleted, true)
    }

    /// [`Self::sync_with_volume`] between the rounds of the once-a-second sync, rung by
    /// a cluster notice (docs/cluster.md#cluster-notices): the same but for what is
    /// done every so many rounds (the sweep of orphaned directories, the retry of
    /// broken partitions), which rings, however frequent, must not make more frequent.
    pub fn sync_with_volume_between_rounds(&self, on_deleted: &dyn Fn(&str)) {
        self.sync(on_deleted, false)
    }

    /// `round`: whether this is one of the once-a-second rounds (counted).
    fn sync(&self, on_deleted: &dyn Fn(&str), round: bool) {
        if !self.lease_fresh() {
            return;
        }
        let round = round.then(|| self.sync_rounds.fetch_add(1, Ordering::Relaxed));
        // Partition directories no topic names (a delete a crash cut short): at the
        // first round and every minute, without the admin lock (each is removed under
        // its own lock).
        if round.is_some_and(|r| r == 1 || r.is_multiple_of(super::SWEEP_ROUNDS)) {
            self.sweep_orphan_partition_dirs();
        }
        let _admin = self.admin_lock.blocking_lock();
        let retry_broken = round.is_some_and(|r| r.is_multiple_of(BROKEN_RETRY_ROUNDS));
        self.give_up_taken_over();
        self.hand_over_misplaced();
        // New log defaults stay due until a round has reconfigured every topic with
        // them: a round whose listing failed, or that could not read a topic's file,
        // left those topics on the old defaults until restart
        // (`a_changed_broker_default_reaches_the_topics_after_a_sync_that_failed`).
        if self.reload_dynamic_configs() {
            self.defaults_pending.store(true, Ordering::SeqCst);
        }
        let defaults_changed = self.defaults_pending.load(Ordering::SeqCst);
        let listed = match self
            .topic_files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .list(&self.volume)
        {
            Ok(l) => l,
            Err(e) => {
                error!(error = %e, "cannot list topics on the volume");
                return;
            }
        };
        // Topics another broker deleted: let their partitions go (locks released with
        // the last reference) and remove the directories this broker held.
        // A topic deleted and created again under the same name (another topic id) is
        // let go too, so its old logs never come back under the new id.
        let on_volume: BTreeMap<String, Option<Uuid>> = listed
            .iter()
            .map(|t| match t {
                Ok(meta) => (meta.name.clone(), Some(meta.topic_id)),
                Err(e) => (topic_name_of(e), None),
            })
            .collect();
        crate::metrics::metrics().forget_topics(|name| on_volume.contains_key(name));
        // A topic found unreadable at start stays refused only while its file is: one
        // repaired is picked up below (and served), one removed may be created again.
        self.registry_mut()
            .broken
            .retain(|name, _| matches!(on_volume.get(name), Some(None)));
        let gone: Vec<Arc<Topic>> = {
            let mut reg = self.registry_mut();
            let names: Vec<String> = reg
                .topics
                .iter()
                .filter(|(n, t)| match on_volume.get(*n) {
                    None => true,
                    Some(Some(id)) => *id != t.meta.topic_id,
                    Some(None) => false,
                })
                .map(|(n, _)| n.clone())
                .collect();
            let mut gone = Vec::new();
            for n in names {
                if let Some(t) = reg.topics.remove(&n) {
                    reg.by_id.remove(&t.meta.topic_id);
                    gone.push(t);
                }
            }
            gone
        };
        for topic in gone {
            info!(topic = %topic.meta.name, "topic deleted by another broker; its partitions are let go");
            self.remove_partition_dirs(&topic);
            // The groups' offsets go by the name: dropped again here (a backstop; the
            // deleting broker dropped them before it removed the file) only while no
            // topic of the name is on the volume. One created again since has offsets
            // of its own, committed or staged, which are not the old topic's
            // (`a_sync_finding_a_topic_created_again_keeps_the_new_topics_offsets`).
            if !on_volume.contains_key(&topic.meta.name) {
                on_deleted(&topic.meta.name);
            }
        }
        // A peer still opening the volume counts here: the partitions it will own are
        // not tried every round while it recovers (they would only wait for it, or
        // for their last owner's lease, reading owner.json each time) — except those
        // this broker owns over the brokers that serve whose `owner.json` (a stat
        // while unchanged) does not name that peer still leading them: a dead
        // broker's partition left for a peer that opens the volume for minutes had no
        // leader all that time. Led meanwhile, it is handed over once the peer serves.
        let serving: Vec<i32> = self.live_brokers().keys().copied().collect();
        let opening = self.opening_brokers();
        let mut live = serving.clone();
        live.extend(opening.iter().copied());
        let me = self.config.broker_id;
        let assigned = |topic: &str, index: i32| {
            let key = kaas_core::ownership::partition_key(topic, index);
            kaas_core::ownership::owner(&key, &live) == Some(me)
                || (!opening.is_empty()
                    && kaas_core::ownership::owner(&key, &serving) == Some(me)
                    && self
                        .foreign_owner(topic, index)
                        .is_none_or(|o| o.released || !opening.contains(&o.broker)))
        };
        // The fence logs, read once for every partition taken over this round.
        let fences = RoundFences::default();
        let every_topic_read = listed.iter().all(Result::is_ok);
        for meta in listed.into_iter().flatten() {
            let current = self.registry().topics.get(&meta.name).cloned();
            let topic = match current {
                Some(t) if t.meta.topic_id == meta.topic_id => {
                    // Configs changed by another broker, or new log defaults this
                    // topic does not run with yet (compared without logging: while a
                    // topic file stays unreadable the defaults stay due, and the
                    // topics already on them are not reconfigured every round).
                    let stale_defaults = defaults_changed
                        && kaas_core::topic::stored_log_config(&self.log_defaults(), &meta.configs).0 != t.log_config;
                    let t = if stale_defaults || meta.configs != t.meta.configs {
                        let mut m = t.meta.clone();
                        m.configs = meta.configs.clone();
                        self.reconfigure(&t, m)
                    } else {
                        t
                    };
                    let mut partitions = t.partitions.clone();
                    let mut changed = false;
                    // Only the partitions an attempt could take are tried: the
                    // placement rule takes a partition led elsewhere only if this
                    // broker is its rendezvous owner over the live set, or if
                    // `owner.json` names a leadership of this broker id that did not
                    // let go (`revisit`: partitions this process let go, and each
                    // partition once after start or a topic's pickup) — so an idle
                    // broker reads no other broker's `owner.json` at all.
                    // Broken ones every `BROKEN_RETRY_ROUNDS` rounds: the cause may
                    // have been transient (an unreadable owner.json, a failed write),
                    // and only this broker may take the partition while it owns it.
                    // A partition retired but still in the registry (let go by a path
                    // that lost a race with this copy) is opened again too.
                    let tries: Vec<usize> = partitions
                        .iter()
                        .enumerate()
                        .filter(|(i, slot)| match slot {
                            Ok(p) => p.is_retired(),
                            Err(o) if o.elsewhere => {
                                assigned(&meta.name, *i as i32) || self.must_revisit(meta.topic_id, *i as i32)
                            }
                            Err(_) => retry_broken,
                        })
                        .map(|(i, _)| i)
                        .collect();
                    // Side by side, a bounded number at a time: each is a recovery
                    // from the files (fsyncs, a scan of the active segment).
                    let opened = crate::blocking::parallel_map(&tries, TAKE_OVER_WORKERS, |&i| {
                        // A broker that went stale meanwhile takes nothing more.
                        self.lease_fresh().then(|| {
                            self.take_over_attempts.fetch_add(1, Ordering::Relaxed);
                            self.open_partition_here(&t.log_config, &meta.name, meta.topic_id, i as i32)
                        })
                    });
                    for (i, result) in tries.into_iter().zip(opened) {
                        let slot = &mut partitions[i];
                        match result {
                            None => {}
                            Some(Ok(p)) => {
                                say_taken_over(&self.volume, &p, self.config.broker_id);
                                fences.apply_to(self, &p);
                                self.revisited(&meta.name, meta.topic_id, i as i32, true);
                                *slot = Ok(p);
                                changed = true;
                            }
                            Some(Err(o)) => {
                                self.revisited(&meta.name, meta.topic_id, i as i32, false);
                                // A retired one not taken back is not served from here;
                                // a broken one found led elsewhere is no longer broken
                                // here: its leader is named again. Kept broken, its
                                // Metadata said KAFKA_STORAGE_ERROR, no leader, for a
                                // partition another broker served, until a restart
                                // (`a_broken_partition_found_led_elsewhere_heals`).
                                let replace = match &*slot {
                                    Ok(_) => true,
                                    Err(old) => !old.elsewhere && o.elsewhere,
                                };
                                if replace {
                                    *slot = Err(o);
                                    changed = true;
                                }
                            }
                        }
                    }
                    let grown: Vec<i32> = (t.meta.partitions..meta.partitions).collect();
                    if !grown.is_empty() {
                        let opened = crate::blocking::parallel_map(&grown, TAKE_OVER_WORKERS, |&p| {
                            self.open_partition_here(&t.log_config, &meta.name, meta.topic_id, p)
                        });
                        opened.iter().flatten().for_each(|p| fences.apply_to(self, p));
                        partitions.extend(opened);
                        changed = true;
                    }
                    if !changed {
                        continue;
                    }
                    Topic {
                        meta: if meta.partitions > t.meta.partitions {
                            meta
                        } else {
                            t.meta.clone()
                        },
                        log_config: t.log_config.clone(),
                        partitions,
                    }
                }
                // New here (created by another broker), or deleted and created again.
                _ => {
                    info!(topic = %meta.name, partitions = meta.partitions, "picked up a topic from the volume");
                    let topic = self.open_topic_here(meta);
                    topic.partitions.iter().flatten().for_each(|p| fences.apply_to(self, p));
                    // Tried once more at the next sync (as at start: see `Cluster::open`).
                    self.revisit
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(elsewhere(&topic));
                    topic
                }
            };
            let topic = Arc::new(topic);
            let mut reg = self.registry_mut();
            reg.by_id.insert(topic.meta.topic_id, topic.meta.name.clone());
            reg.topics.insert(topic.meta.name.clone(), topic);
            if self.appended.receiver_count() > 0 {
                self.wake_readers(None);
            }
        }
        if defaults_changed && every_topic_read {
            self.defaults_pending.store(false, Ordering::SeqCst);
        }
        fences.settle(self);
    }
}

/// The take-over's log line: from whom, and whether it was a planned hand-over (the
/// last leader let go at a clean stop, or for the rendezvous owner) or a leader that is
/// gone (dead, frozen past its lease — its lock taken — or stepped down, which lets go
/// too: its lease says so).
fn say_taken_over(volume: &Volume, p: &Partition, me: i32) {
    let (topic, partition, leader_epoch) = (&p.topic, p.index, p.leader_epoch);
    let Some((from, released)) = p.taken_from else {
        info!(topic = %topic, partition, leader_epoch, "took over a partition no broker had led");
        return;
    };
    if from == me {
        info!(topic = %topic, partition, leader_epoch, "took back a partition this broker id led before");
        return;
    }
    // kaasctl's direct marker writes take a leadership as writer -1.
    let who = if from < 0 {
        "kaasctl (a direct marker write)".to_string()
    } else {
        format!("broker {from}")
    };
    let stepped_down = released
        && from >= 0
        && kaas_core::broker::BrokerLease::read(volume, from)
            .is_ok_and(|l| l.stopped_ms.is_none() && l.stepped_down_ms.is_some());
    if released && !stepped_down {
        info!(topic = %topic, partition, leader_epoch, previous_leader = from, "took over a partition {who} handed over");
    } else {
        info!(
            topic = %topic,
            partition,
            leader_epoch,
            previous_leader = from,
            "took over a partition whose writer is gone: {who} {}",
            if stepped_down { "stepped down" } else { "no longer leads it" }
        );
    }
}
