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
    /// `on_deleted` is told each topic found deleted, right after its partitions were
    /// let go and before anything of a topic recreated under its name is opened (the
    /// broker drops the topic's committed offsets there: `Broker::sync_with_volume`).
    pub fn sync_with_volume(&self, on_deleted: &dyn Fn(&str)) {
        if !self.lease_fresh() {
            return;
        }
        let _admin = self.admin_lock.blocking_lock();
        let retry_broken = self
            .sync_rounds
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(BROKEN_RETRY_ROUNDS);
        self.give_up_taken_over();
        self.hand_over_misplaced();
        let defaults_changed = self.reload_dynamic_configs();
        let listed = match list_topics(&self.volume) {
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
            on_deleted(&topic.meta.name);
        }
        for meta in listed.into_iter().flatten() {
            let current = self.registry().topics.get(&meta.name).cloned();
            let topic = match current {
                Some(t) if t.meta.topic_id == meta.topic_id => {
                    // Configs changed by another broker (or new log defaults).
                    let t = if defaults_changed || meta.configs != t.meta.configs {
                        let mut m = t.meta.clone();
                        m.configs = meta.configs.clone();
                        self.reconfigure(&t, m)
                    } else {
                        t
                    };
                    let mut partitions = t.partitions.clone();
                    let mut changed = false;
                    for (i, slot) in partitions.iter_mut().enumerate() {
                        // Broken ones too, now and then: the cause may have been
                        // transient (an unreadable owner.json, a failed write), and
                        // only this broker may take the partition while it owns it.
                        // A partition retired but still in the registry (let go by a path
                        // that lost a race with this copy) is opened again too.
                        if matches!(slot, Err(o) if o.elsewhere || retry_broken)
                            || matches!(slot, Ok(p) if p.is_retired())
                        {
                            // A broker that went stale meanwhile takes nothing more.
                            if !self.lease_fresh() {
                                break;
                            }
                            match self.open_partition_here(&t.log_config, &meta.name, meta.topic_id, i as i32) {
                                Ok(p) => {
                                    info!(topic = %meta.name, partition = i, leader_epoch = p.leader_epoch, "took over a partition whose writer is gone");
                                    self.apply_fences_to(&p);
                                    *slot = Ok(p);
                                    changed = true;
                                }
                                // A retired one not taken back is not served from here.
                                Err(o) if slot.is_ok() => {
                                    *slot = Err(o);
                                    changed = true;
                                }
                                Err(_) => {}
                            }
                        }
                    }
                    for p in t.meta.partitions..meta.partitions {
                        partitions.push(self.open_partition_here(&t.log_config, &meta.name, meta.topic_id, p));
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
                    self.open_topic_here(meta)
                }
            };
            let topic = Arc::new(topic);
            let mut reg = self.registry_mut();
            reg.by_id.insert(topic.meta.topic_id, topic.meta.name.clone());
            reg.topics.insert(topic.meta.name.clone(), topic);
            if self.appended.receiver_count() > 0 {
                self.appended.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
}
