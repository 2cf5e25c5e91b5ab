//! The two volume pollers every broker runs (inotify does not see other NFS clients'
//! writes, so they poll): the fence watcher applies other brokers' epoch bumps to the
//! partitions this broker leads, and the marker watcher writes the COMMIT/ABORT markers
//! queued for this broker and deletes each entry once its markers are durable.

use crate::broker::Broker;
use kaas_core::fence_log::{FenceDeliveries, FenceWatcher};
use kaas_core::marker_queue;
use kaas_core::txn::TopicPartition;
use tracing::{debug, error, info, warn};

/// One fence-watcher poll: applies the peers' new fences, then records them in this
/// broker's `applied-by-<id>.json` (what reached it, and when) for `kaasctl fence show`.
///
/// The watcher's first poll returns every fence the logs hold (the opening broker
/// applied them already); `counting` is false for it, so
/// `kaas_fence_events_applied_total` counts fences as they arrive, not that backlog.
pub fn apply_peer_fences(
    broker: &Broker,
    watcher: &mut FenceWatcher,
    deliveries: &mut Option<FenceDeliveries>,
    counting: &mut bool,
) {
    let (fresh, errors) = watcher.poll_fences(&broker.volume);
    let count = std::mem::replace(counting, true);
    for e in errors {
        error!(error = %e, "unreadable fence log; its fences are not applied until it is repaired");
    }
    if fresh.is_empty() {
        return;
    }
    let now = kaas_core::now_ms();
    if count {
        crate::metrics::metrics()
            .fence_events_applied
            .inc_by(fresh.len() as u64);
    }
    for f in &fresh {
        info!(
            producer_id = f.producer_id,
            epoch = f.epoch,
            writer = f.writer,
            delay_ms = now - f.recorded_ms,
            "applying a peer's fence"
        );
        broker.fence_producer_epoch(f.producer_id, f.epoch);
    }
    let record = match deliveries {
        Some(d) => d,
        None => match FenceDeliveries::load(&broker.volume, broker.config.broker_id) {
            Ok(d) => deliveries.insert(d),
            Err(e) => {
                // Start afresh rather than never record again; the file is replaced.
                warn!(error = %e, "fence delivery record unreadable; starting a new one");
                deliveries.insert(FenceDeliveries {
                    version: kaas_core::fence_log::FENCE_FORMAT_VERSION,
                    broker: broker.config.broker_id,
                    updated_ms: 0,
                    applied: Default::default(),
                })
            }
        },
    };
    if let Err(e) = record.record(
        &broker.volume,
        &fresh,
        now,
        broker.config.transactional_id_expiration_ms,
    ) {
        warn!(error = %e, "cannot record applied fences (kaasctl fence show will not list them for this broker)");
    }
}

pub async fn process_marker_queue(broker: &Broker) {
    let me = broker.config.broker_id;
    let targets = match marker_queue::targets(&broker.volume) {
        Ok(t) => t,
        Err(e) => {
            error!(error = %e, "cannot list marker queues");
            return;
        }
    };
    // Every queue: an entry's partitions may be led elsewhere by now (its addressee
    // died, restarted, or its partitions were taken over by several brokers); each
    // broker applies the partitions it leads.
    for target in targets {
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
                    if target == me {
                        error!(path = %path.display(), error = %e, "unreadable marker queue entry left in place");
                    }
                    continue;
                }
            };
            let mine: Vec<TopicPartition> = entry
                .partitions
                .iter()
                .filter(|tp| broker.partition_leader(&tp.topic, tp.partition) == Some(me) || gone(broker, tp))
                .cloned()
                .collect();
            if mine.is_empty() {
                continue;
            }
            match broker.txn.apply_queued(broker, &path, &entry, &mine).await {
                // Per transaction (thousands a second): debug, not info.
                Ok(true) => {
                    debug!(transactional_id = %entry.transactional_id, producer_id = entry.producer_id, result = ?entry.result, partitions = mine.len(), queue = target, "applied queued markers")
                }
                Ok(false) => {}
                // Left in place: retried at the next poll.
                Err(e) => {
                    error!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, partitions = ?mine, error = %e, "applying a queued marker failed; retried at the next poll")
                }
            }
        }
    }
}

/// A partition that no longer exists on the volume (its topic was deleted, or it
/// never had that many partitions): its marker has nothing left to end.
fn gone(broker: &Broker, tp: &TopicPartition) -> bool {
    match kaas_core::topic::TopicMeta::read(&broker.volume.topic_file(&tp.topic)) {
        Ok(meta) => tp.partition < 0 || tp.partition >= meta.partitions,
        Err(e) => e.is_not_found(),
    }
}
