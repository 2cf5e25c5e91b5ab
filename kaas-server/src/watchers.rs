//! The two volume pollers every broker runs (inotify does not see other NFS clients'
//! writes, so they poll): the fence watcher applies other brokers' epoch bumps to the
//! partitions this broker leads, and the marker watcher writes the COMMIT/ABORT markers
//! queued for this broker and deletes each entry once its markers are durable.

use crate::broker::Broker;
use kaas_core::fence_log::FenceWatcher;
use kaas_core::marker_queue;
use tracing::{error, info};

pub fn apply_peer_fences(broker: &Broker, watcher: &mut FenceWatcher) {
    let (fresh, errors) = watcher.poll(&broker.volume);
    for e in errors {
        error!(error = %e, "unreadable fence log; its fences are not applied until it is repaired");
    }
    for (pid, epoch) in fresh {
        info!(producer_id = pid, epoch, "applying a peer's fence");
        broker.fence_producer_epoch(pid, epoch);
    }
}

pub async fn process_marker_queue(broker: &Broker) {
    let me = broker.config.broker_id;
    let live = broker.live_brokers();
    let targets = match marker_queue::targets(&broker.volume) {
        Ok(t) => t,
        Err(e) => {
            error!(error = %e, "cannot list marker queues");
            return;
        }
    };
    // This broker's own queue, and the queues of brokers that are gone: their entries
    // are applied by whoever leads the partitions now.
    for target in targets.into_iter().filter(|t| *t == me || !live.contains_key(t)) {
        let entries = match marker_queue::list(&broker.volume, target) {
            Ok(e) => e,
            Err(e) => {
                error!(target, error = %e, "cannot read a marker queue");
                continue;
            }
        };
        for (path, entry) in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    error!(path = %path.display(), error = %e, "unreadable marker queue entry left in place");
                    continue;
                }
            };
            if target != me
                && !entry
                    .partitions
                    .iter()
                    .all(|tp| broker.partition_leader(&tp.topic, tp.partition) == Some(me))
            {
                continue;
            }
            match broker.txn.apply_queued(broker, &path, &entry).await {
                Ok(true) => {
                    info!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, result = ?entry.result, partitions = entry.partitions.len(), queue = target, "applied queued markers")
                }
                Ok(false) => {}
                // Left in place: retried at the next poll.
                Err(e) => {
                    error!(path = %path.display(), error = %e, "applying a queued marker failed; retried at the next poll")
                }
            }
        }
    }
}
