//! Fences and markers on the partitions this broker leads: a producer's epoch raised
//! everywhere it is known (from this broker's coordinator, the fence logs at start,
//! the fence watcher: [`apply_peer_fences`], polled because inotify does not see other
//! NFS clients' writes), and a transaction marker written and made durable.

use super::*;
use crate::WATCHERS_LOG_TARGET;
use kaas_core::fence_log::{FenceDeliveries, FenceWatcher};
/// A transaction marker that could not be written durably.
#[derive(Debug, thiserror::Error)]
#[error("marker for {topic}-{partition} not written: {detail}")]
pub struct MarkerError {
    pub topic: String,
    pub partition: i32,
    pub detail: String,
}

impl Cluster {
    /// Raises a producer's epoch and clears its dedupe window on every partition this
    /// broker leads that knows the producer. A partition that never saw it takes no
    /// state for it: a zombie's transactional batch there is refused by produce-time
    /// verification with the coordinator, which knows the new epoch, and a plain batch
    /// under a transactional producer id is refused anyway. Entries made for it in
    /// every partition piled up with each restart of a transactional id, in memory and
    /// in every snapshot (`a_fence_takes_no_state_in_partitions_that_never_saw_the_producer`).
    pub fn fence_producer_epoch(&self, producer_id: i64, epoch: i16) {
        let now = now_ms();
        for p in self.partitions() {
            let mut state = p.state();
            if state.producers.get(producer_id).is_some() {
                state.producers.fence_at(producer_id, epoch, now);
            }
        }
    }

    /// Applies every fence log on the volume — this broker's own, its peers' and the
    /// admin tool's — to every partition. Run at open, before serving: a fence raised
    /// an epoch on partitions that may never have seen a batch of the new epoch, and
    /// nothing in their logs or snapshots remembers it after a kill -9.
    pub fn apply_fence_logs(&self) -> Result<usize, VolumeError> {
        // Refusing to start would take every partition down for one unreadable log;
        // the watcher keeps reporting it until it is repaired.
        let latest = self.latest_fences()?;
        // Only producers a partition knows: a partition that never saw a producer
        // takes no state for it (its transactional batches are refused by produce-time
        // verification anyway), so fences recorded long ago do not pile up in every
        // partition at every start.
        let now = now_ms();
        let mut applied = 0;
        for p in self.partitions() {
            let mut state = p.state();
            for (pid, epoch) in &latest {
                if state.producers.get(*pid).is_some() && state.producers.fence_at(*pid, *epoch, now) {
                    applied += 1;
                }
            }
        }
        Ok(applied)
    }

    /// The highest epoch every fence log records for each producer. An unreadable
    /// log is skipped and said so (the fence watcher keeps reporting it until it is
    /// repaired); only a directory that cannot be listed is an error.
    fn latest_fences(&self) -> Result<BTreeMap<i64, i16>, VolumeError> {
        let mut latest: BTreeMap<i64, i16> = BTreeMap::new();
        for (writer, log) in kaas_core::fence_log::list_fence_logs(&self.volume)? {
            match log {
                Ok(log) => {
                    for (pid, rec) in log.fences {
                        let e = latest.entry(pid).or_insert(rec.epoch);
                        *e = (*e).max(rec.epoch);
                    }
                }
                Err(e) => {
                    error!(writer, error = %e, "fence log unreadable; its fences are not applied until it is repaired")
                }
            }
        }
        Ok(latest)
    }
}

/// The fence logs as one volume sync read them, at most once, for every partition it
/// takes over: the latest recorded fences are applied to each before it is served
/// (the fence watcher reports each fence once, and only to partitions registered by
/// then). Once every partition taken is registered, [`RoundFences::settle`] reads
/// them once more: a fence recorded after the first read reached neither those
/// partitions nor, as they were not registered yet, the watcher's pass.
#[derive(Default)]
pub(super) struct RoundFences {
    latest: std::sync::OnceLock<BTreeMap<i64, i16>>,
    taken: Mutex<Vec<Arc<Partition>>>,
}

impl RoundFences {
    pub(super) fn apply_to(&self, cluster: &Cluster, partition: &Arc<Partition>) {
        let latest = self.latest.get_or_init(|| cluster.latest_fences_or_none());
        apply_fences(latest, partition);
        self.taken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(partition.clone());
    }

    /// After every partition taken this round is registered.
    pub(super) fn settle(self, cluster: &Cluster) {
        let taken = self.taken.into_inner().unwrap_or_else(|e| e.into_inner());
        if taken.is_empty() {
            return;
        }
        let latest = cluster.latest_fences_or_none();
        for p in &taken {
            apply_fences(&latest, p);
        }
    }
}

fn apply_fences(latest: &BTreeMap<i64, i16>, partition: &Partition) {
    let now = now_ms();
    let mut state = partition.state();
    for (pid, epoch) in latest {
        if state.producers.get(*pid).is_some() {
            state.producers.fence_at(*pid, *epoch, now);
        }
    }
}

impl Cluster {
    fn latest_fences_or_none(&self) -> BTreeMap<i64, i16> {
        self.latest_fences().unwrap_or_else(|e| {
            error!(error = %e, "cannot list the fence logs; partitions taken over now get no fences until the watcher's next report");
            BTreeMap::new()
        })
    }
}

impl Cluster {
    /// Writes a transaction marker to a partition this broker leads and waits until
    /// it is durable. Ok(false) when there was nothing to write: the topic or
    /// partition was deleted since, or the producer has no open transaction there
    /// (the marker landed before: markers are idempotent). Any failure is returned —
    /// the caller leaves the transaction in its Prepare state and retries.
    pub async fn write_marker(
        &self,
        tp: &kaas_core::txn::TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<bool, MarkerError> {
        let written = self.write_marker_of(tp, producer_id, epoch, commit, None).await?;
        Ok(written.unwrap_or(false))
    }

    /// [`Self::write_marker`] of transaction `txn_seq` from a coordinator's notice,
    /// judged against the transaction open here ([`kaas_core::partition::OpenTxn`]):
    /// written when that transaction is open, nothing when none is or a later one is
    /// (the named one's marker landed before it began), and None — nothing written —
    /// when the partition cannot tell which transaction is open (opened before this
    /// process loaded the partition): the caller asks the coordinator's slot instead.
    pub async fn write_notified_marker(
        &self,
        tp: &kaas_core::txn::TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        txn_seq: u64,
    ) -> Result<Option<bool>, MarkerError> {
        self.write_marker_of(tp, producer_id, epoch, commit, Some(txn_seq))
            .await
    }

    /// Whether `tp` no longer exists on the volume: its topic's file is gone, or holds
    /// fewer partitions. The volume, not this broker's registry, which picks up topics
    /// created or grown elsewhere only at its next volume sync.
    pub fn partition_gone(&self, tp: &kaas_core::txn::TopicPartition) -> Result<bool, VolumeError> {
        match kaas_core::topic::TopicMeta::read(&self.volume.topic_file(&tp.topic)) {
            Ok(meta) => Ok(tp.partition < 0 || tp.partition >= meta.partitions),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(e),
        }
    }

    async fn write_marker_of(
        &self,
        tp: &kaas_core::txn::TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        named: Option<u64>,
    ) -> Result<Option<bool>, MarkerError> {
        use kaas_core::partition::OpenTxn;
        let fail = |detail: String| MarkerError {
            topic: tp.topic.clone(),
            partition: tp.partition,
            detail,
        };
        if !self.lease_fresh() {
            return Err(fail("this broker's lease is not renewed; it does not append".into()));
        }
        // A partition this broker does not know is "nothing to end" only if the volume
        // says it is gone: the topic may have been created again (or grown) through
        // another broker since, and a transaction verified by name may have written
        // there (`a_partition_of_a_topic_created_again_elsewhere_gets_its_marker_before_the_transaction_completes`).
        let unknown_here = |what: &str| match crate::blocking::off_worker(|| self.partition_gone(tp)) {
            Ok(true) => {
                warn!(topic = %tp.topic, partition = tp.partition, producer_id, "marker for a {what}; nothing to end");
                Ok(Some(false))
            }
            Ok(false) => Err(fail(format!(
                "on the volume, not picked up here yet ({what} here); tried again after the volume sync"
            ))),
            Err(e) => Err(fail(format!("cannot tell whether the partition still exists: {e}"))),
        };
        let partition = match self.topic(&tp.topic) {
            Ok(t) => match t.partition(tp.partition) {
                Some(Ok(p)) => p.clone(),
                Some(Err(e)) => return Err(fail(format!("partition offline: {e}"))),
                None => return unknown_here("partition that no longer exists"),
            },
            Err(TopicError::Unknown(_)) => return unknown_here("deleted topic"),
            Err(e) => return Err(fail(e.to_string())),
        };
        let stepdowns = self.stepdowns.load(Ordering::Acquire);
        let written = {
            let mut state = partition
                .writable()
                .ok_or_else(|| fail("this broker let the partition go".into()))?;
            // Again under the partition lock, right before the write, and after it.
            if !self.lease_fresh() {
                return Err(fail("this broker's lease is not renewed; it does not append".into()));
            }
            let open = named.map(|seq| state.open_txn_seq(producer_id, seq));
            let written = match open {
                Some(OpenTxn::Unknown) => return Ok(None),
                // The named transaction's marker landed before this one began.
                Some(OpenTxn::Later) => None,
                Some(OpenTxn::None | OpenTxn::Named) | None => {
                    let now = now_ms();
                    let leader_epoch = partition.leader_epoch;
                    let rolled = state.marker_would_roll(producer_id, now);
                    if commit && !rolled {
                        state
                            .write_marker(producer_id, epoch, commit, 0, leader_epoch, now)
                            .map_err(|e| fail(e.to_string()))?
                    } else {
                        // Files written by path only while this broker leads the
                        // partition, by `owner.json` read under its `owner.gate`: a roll
                        // creates the next segment at this broker's log end
                        // (`a_deposed_leader_writing_a_marker_that_would_roll_creates_no_segment`),
                        // and its producer snapshot follows the marker; an ABORT writes
                        // its `.txnindex` entry into the index of the segment that holds
                        // the marker by this broker's idea of the log. A deposed
                        // leader's entry would land in a successor's index of the same
                        // base and outlive the next open
                        // (`a_deposed_leader_writing_an_abort_marker_writes_no_txnindex_entry`).
                        enum Failed {
                            Roll(kaas_core::partition::AppendError),
                            Marker(kaas_core::partition::PartitionError),
                        }
                        let led = crate::blocking::off_worker(|| {
                            partition.while_led(|| {
                                if rolled {
                                    state.roll(now).map_err(Failed::Roll)?;
                                }
                                let written = state
                                    .write_marker(producer_id, epoch, commit, 0, leader_epoch, now)
                                    .map_err(Failed::Marker)?;
                                if rolled {
                                    state.snapshot_after_roll(now);
                                }
                                Ok(written)
                            })
                        })
                        .map_err(|e| fail(e.to_string()))?;
                        match led {
                            Ok(written) => written,
                            // Outside the gate: a failed roll cuts the log back under
                            // the gate itself (`Partition::write_failed`).
                            Err(Failed::Roll(e)) => {
                                partition.write_failed(&mut state.log, &e);
                                return Err(fail(e.to_string()));
                            }
                            Err(Failed::Marker(e)) => return Err(fail(e.to_string())),
                        }
                    }
                }
            };
            if !self.still_fresh_since(stepdowns) {
                return Err(fail(
                    "the lease went stale while the marker was written; it may not count".into(),
                ));
            }
            written
        };
        match written {
            Some(info) => {
                crate::metrics::metrics().markers_written.inc();
                partition
                    .wait_durable(info.next_offset)
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                self.wake_readers(Some(&partition));
                // Durable only counts if this broker still led the partition when the
                // fsync finished (on NFS, unflushed pages are not seen by a successor).
                if !self.still_fresh_since(stepdowns) {
                    return Err(fail(
                        "the lease went stale before the marker was durable; it may not count".into(),
                    ));
                }
                Ok(Some(true))
            }
            None => {
                // Nothing open here now; but an earlier attempt may have appended the
                // marker and failed its fsync: make sure the log end is durable. And
                // "nothing to end here" is an answer from memory: it counts only if
                // this broker still leads the partition (a deposed leader's producer
                // state knows nothing of what its successor appended).
                let end = partition.log_end_offset();
                partition.wait_durable(end).await.map_err(|e| fail(e.to_string()))?;
                partition.confirm_led().await.map_err(|e| fail(e.to_string()))?;
                Ok(Some(false))
            }
        }
    }
}

/// One fence-watcher poll: applies the peers' new fences, then records them in this
/// broker's `applied-by-<id>.json` (what reached it, and when) for `kaasctl fence show`.
///
/// The watcher's first poll returns every fence the logs hold (the opening broker
/// applied them already); `counting` is false for it, so
/// `kaas_fence_events_applied_total` counts fences as they arrive, not that backlog.
pub fn apply_peer_fences(
    broker: &Cluster,
    watcher: &mut FenceWatcher,
    deliveries: &mut Option<FenceDeliveries>,
    counting: &mut bool,
) {
    let (fresh, errors) = watcher.poll_fences(&broker.volume);
    let count = std::mem::replace(counting, true);
    for e in errors {
        error!(target: WATCHERS_LOG_TARGET, error = %e, "unreadable fence log; its fences are not applied until it is repaired");
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
    if !count {
        // The backlog the logs held at start (applied once already when the volume was
        // opened): one line, not one per fence.
        info!(target: WATCHERS_LOG_TARGET, fences = fresh.len(), "re-applied the fence backlog recorded before this start");
    }
    for f in &fresh {
        if count {
            info!(target: WATCHERS_LOG_TARGET,
                producer_id = f.producer_id,
                epoch = f.epoch,
                writer = f.writer,
                delay_ms = now - f.recorded_ms,
                "applying a peer's fence"
            );
        }
        broker.fence_producer_epoch(f.producer_id, f.epoch);
    }
    let record = match deliveries {
        Some(d) => d,
        None => match FenceDeliveries::load(&broker.volume, broker.config.broker_id) {
            Ok(d) => deliveries.insert(d),
            Err(e) => {
                // Start afresh rather than never record again; the file is replaced.
                warn!(target: WATCHERS_LOG_TARGET, error = %e, "fence delivery record unreadable; starting a new one");
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
        warn!(target: WATCHERS_LOG_TARGET, error = %e, "cannot record applied fences (kaasctl fence show will not list them for this broker)");
    }
}
