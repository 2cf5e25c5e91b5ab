//! `Broker`: one broker, composed of its parts — the cluster as it takes part in it
//! (`cluster`: volume, registry, membership, ownership, sync, fences and markers,
//! configs), the two coordinators and the authorizer — and the operations that need
//! more than one of them: an append verified against the transaction coordinator, a
//! volume sync that also reloads the ACLs and drops deleted topics' offsets, a change
//! of live brokers that forgets groups coordinated elsewhere, the gauges. Handlers
//! reach everything through an `Arc<Broker>`; what a `Cluster` offers, a `Broker`
//! offers too (it dereferences to its cluster).

pub use crate::cluster::{BrokenTopic, Cluster, ConfigChange, MarkerError, Offline, Partition, Topic, TopicError};
use crate::groups::GroupCoordinator;
use crate::listeners::Endpoints;
use crate::txn_coordinator::TransactionCoordinator;
use kaas_core::now_ms;
use kaas_core::partition::{AppendError, AppendOutcome};
use kaas_core::txn::TxnError;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tracing::{error, info, warn};
use uuid::Uuid;

pub struct Broker {
    pub cluster: Cluster,
    /// Consumer groups this broker coordinates (shared with the transaction
    /// coordinator, which commits staged offsets to it).
    pub groups: Arc<GroupCoordinator>,
    pub txn: TransactionCoordinator,
    /// Who may do what (`--authorizer`), over the ACLs on the volume.
    pub authz: crate::authz::Authorizer,
    /// Client quotas (`__cluster/client-quotas.json`) and what clients used of them.
    pub quotas: crate::quotas::Quotas,
}

impl std::ops::Deref for Broker {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

/// Why a batch was not appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendRejected {
    /// Transaction verification refused a transactional batch.
    #[error(transparent)]
    Txn(crate::txn_coordinator::CoordError),
    #[error(transparent)]
    Append(AppendError),
    /// This broker could not renew its lease for half the session timeout: it no
    /// longer appends (another broker may soon be entitled to).
    #[error("this broker's lease is not renewed; it does not append")]
    LeaseExpired,
    /// This broker let the partition go (hand-over or step-down) after the request
    /// looked it up.
    #[error("this broker no longer leads the partition")]
    NotLeader,
    /// The segment roll the append needed found the partition taken over (it is
    /// retired here), or could not read `owner.json` under its gate: nothing written.
    #[error(transparent)]
    Unled(crate::registry::DurableError),
}

/// The marker watcher's poll for this broker
/// ([`crate::txn_coordinator::process_marker_queue`]).
pub async fn process_marker_queue(broker: &Broker) {
    crate::txn_coordinator::process_marker_queue(&broker.cluster, &broker.txn).await
}

impl Broker {
    /// Opens the authorizer, the volume (see [`Cluster::open`]) and the coordinators,
    /// and applies every fence log to the partitions before anything is served. The
    /// ACLs are read first: a broker whose ACL file is unreadable stops before it takes
    /// any partition over.
    pub fn open(config: crate::config::Config, advertised: Endpoints) -> anyhow::Result<Arc<Broker>> {
        let authz = crate::authz::Authorizer::load(&kaas_core::Volume::new(&config.data_dir), &config)?;
        let quotas = crate::quotas::Quotas::load(
            &kaas_core::Volume::new(&config.data_dir),
            std::time::Duration::from_secs(config.quota_window_size_seconds.into()),
        )?;
        let cluster = Cluster::open(config, advertised)?;
        let groups = Arc::new(
            GroupCoordinator::new(cluster.volume.clone(), &cluster.config)
                .with_live_generation(cluster.live_generation.clone()),
        );
        let txn = TransactionCoordinator::new(&cluster.volume, cluster.config.broker_id, groups.clone());
        // The rule partitions are taken over by: a lease this broker watched stand
        // still for a whole session timeout (or marked stopped).
        let (volume, tracker, timeout) = (
            cluster.volume.clone(),
            cluster.lease_tracker.clone(),
            cluster.config.broker_session_timeout_ms,
        );
        // A lock held under no holder's line: its holder stopped in the few calls
        // around its line, for as long as a lease would take to be confirmed dead.
        // Looks at a slot only the reaper asks for come one reaper interval apart.
        let unnamed = kaas_core::txn_store::UnnamedHold {
            after: std::time::Duration::from_millis(timeout.max(0) as u64),
            gap: std::time::Duration::from_secs(15)
                .max(2 * std::time::Duration::from_millis(cluster.config.txn_reaper_interval_ms)),
        };
        txn.take_over_locks_of_dead_brokers(
            Box::new(move |id| {
                let tracker = tracker.lock().unwrap_or_else(|p| p.into_inner());
                crate::cluster::lease_confirmed_dead(&volume, &tracker, id, timeout)
            }),
            unnamed,
        );
        let broker = Arc::new(Broker {
            cluster,
            groups,
            txn,
            quotas,
            authz,
        });
        let fences = broker.apply_fence_logs()?;
        info!(raised = fences, "fence logs applied to the partitions' producers");
        Ok(broker)
    }

    /// The topic, for a client that may do `op` on it; TOPIC_AUTHORIZATION_FAILED
    /// otherwise, whether or not it exists (Kafka's answer: no probing for names).
    pub fn topic_as(
        &self,
        ctx: &dyn crate::authz::Requester,
        op: kaas_core::acl::Operation,
        name: &str,
    ) -> Result<Arc<Topic>, i16> {
        if !self.authz.authorize(ctx, op, kaas_core::acl::ResourceType::Topic, name) {
            return Err(kafka_protocol::error::ResponseError::TopicAuthorizationFailed.code());
        }
        self.topic(name).map_err(|e| e.code())
    }

    /// [`Broker::topic_or_create`] on a client's behalf: creating the topic needs
    /// CREATE on the cluster or on the topic (Kafka's rule for auto-creation); without
    /// it a missing topic is TOPIC_AUTHORIZATION_FAILED, as Kafka answers (a client
    /// then fails at once instead of waiting for a topic that will not come).
    pub async fn topic_or_create_for(
        &self,
        ctx: &dyn crate::authz::Requester,
        name: &str,
    ) -> Result<Arc<Topic>, TopicError> {
        // One lookup on the produce path; only a missing topic (rare) goes on to
        // topic_or_create.
        match self.topic(name) {
            Err(TopicError::Unknown(_)) if self.config.auto_create_topics => {
                if self.may_create_topic(ctx, name) {
                    let created = self.topic_or_create(name).await;
                    // Created here (or just found, made by another broker): the peers
                    // pick it up now rather than at their next sync
                    // (docs/cluster.md#cluster-notices).
                    if created.is_ok() {
                        self.txn.announce_change(&self.cluster);
                    }
                    created
                } else {
                    Err(TopicError::CreateDenied(name.to_string()))
                }
            }
            found => found,
        }
    }

    /// READ on the group: what JoinGroup, SyncGroup, Heartbeat and LeaveGroup need.
    pub fn may_read_group(&self, ctx: &dyn crate::authz::Requester, group: &str) -> bool {
        self.authz.authorize(
            ctx,
            kaas_core::acl::Operation::Read,
            kaas_core::acl::ResourceType::Group,
            group,
        )
    }

    /// WRITE on the transactional id: what every transactional API needs.
    pub fn may_write_txn(&self, ctx: &dyn crate::authz::Requester, transactional_id: &str) -> bool {
        self.authz.authorize(
            ctx,
            kaas_core::acl::Operation::Write,
            kaas_core::acl::ResourceType::TransactionalId,
            transactional_id,
        )
    }

    /// CREATE on the cluster or on the topic. The cluster is asked quietly (Kafka's
    /// logIfDenied = false): a client allowed by its topic (or prefix) CREATE, the usual
    /// grant, logged a cluster denial at every creation; the topic's denial is the one
    /// logged when both refuse.
    pub fn may_create_topic(&self, ctx: &dyn crate::authz::Requester, name: &str) -> bool {
        use kaas_core::acl::{Operation, ResourceType};
        self.authz
            .authorize_quietly(ctx, Operation::Create, ResourceType::Cluster, crate::authz::CLUSTER)
            || self.authz.authorize(ctx, Operation::Create, ResourceType::Topic, name)
    }

    /// Deletes the topic ([`Cluster::delete_topic`]) and its groups' committed offsets;
    /// `id`: asked for by this topic id (only the topic of that id is deleted).
    pub async fn delete_topic(&self, name: &str, id: Option<Uuid>) -> Result<Uuid, TopicError> {
        self.cluster
            .delete_topic(name, id, &|t| self.groups.forget_topic(t))
            .await
    }

    /// The volume sync ([`Cluster::sync_with_volume`]), with the ACLs (and the client
    /// quotas) reloaded first —
    /// whatever the lease and the admin lock: a broker that still answers requests must
    /// not go on enforcing revoked ACLs — and the committed offsets of topics deleted
    /// elsewhere dropped.
    pub fn sync_with_volume(&self) {
        self.sync(true)
    }

    /// [`Self::sync_with_volume`] rung by a cluster notice between the once-a-second
    /// rounds ([`Cluster::sync_with_volume_between_rounds`]).
    pub fn sync_with_volume_between_rounds(&self) {
        self.sync(false)
    }

    fn sync(&self, round: bool) {
        self.authz.reload(&self.volume);
        self.quotas.reload();
        // A failure is logged by `forget_topic`; the topic is not found deleted again.
        let on_deleted = |t: &str| {
            let _ = self.groups.forget_topic(t);
        };
        if round {
            self.cluster.sync_with_volume(&on_deleted)
        } else {
            self.cluster.sync_with_volume_between_rounds(&on_deleted)
        }
    }

    /// Replaces the live-broker list ([`Cluster::set_live_brokers`]); when the set
    /// changed, forgets the groups now coordinated elsewhere.
    pub fn set_live_brokers(&self, live: BTreeMap<i32, Endpoints>) {
        if self.cluster.set_live_brokers(live) {
            self.forget_groups_coordinated_elsewhere();
        }
    }

    /// After the live set changed: forgets the groups now coordinated elsewhere.
    pub fn forget_groups_coordinated_elsewhere(&self) {
        let dropped = self.groups.forget_unowned(|g| self.owns_group(g));
        if dropped > 0 {
            info!(
                groups = dropped,
                "live brokers changed: forgot groups now coordinated elsewhere"
            );
        }
    }

    /// Classifies and appends validated records to a partition (idempotence checks
    /// under the partition lock) and wakes long-polling fetches.
    /// Returns the outcome and the log start offset, read under the same lock.
    ///
    /// Transactional batches are verified under the same lock, against the
    /// coordinator's current entry (KIP-890 part 1): their (producer id, epoch) must
    /// have an Ongoing transaction that includes this partition. Because markers are
    /// written under this lock too, a batch verified here lands before the marker of
    /// its transaction, and a batch arriving after the transaction moved on is refused
    /// — it can never open a transaction nobody will finish.
    pub fn append(
        &self,
        partition: &Partition,
        records: &mut [u8],
        headers: &[kaas_core::batch::BatchHeader],
        transactional_id: Option<&str>,
    ) -> Result<(AppendOutcome, i64), AppendRejected> {
        if !self.lease_fresh() {
            return Err(AppendRejected::LeaseExpired);
        }
        let (outcome, log_start) = {
            let mut state = partition.writable().ok_or(AppendRejected::NotLeader)?;
            // Every transactional batch, not just the first: a records set may carry
            // batches of several producers.
            let mut verified: Option<(i64, i16)> = None;
            // Each verified producer's transaction number, and whether it had a
            // transaction open here before this append (`PartitionState::note_txn_seq`).
            let mut seqs: Vec<(i64, u64, bool)> = Vec::new();
            for h in headers.iter().filter(|h| h.is_transactional()) {
                if verified == Some((h.producer_id, h.producer_epoch)) {
                    continue;
                }
                let tp = kaas_core::txn::TopicPartition {
                    topic: partition.topic.clone(),
                    partition: partition.index,
                };
                let seq = match transactional_id {
                    Some(tid) => self
                        .txn
                        .verify_produce(tid, h.producer_id, h.producer_epoch, &tp)
                        .map_err(AppendRejected::Txn)?,
                    None => return Err(AppendRejected::Txn(TxnError::InvalidTxnState.into())),
                };
                if !seqs.iter().any(|(pid, ..)| *pid == h.producer_id) {
                    seqs.push((h.producer_id, seq, state.has_open_txn(h.producer_id)));
                }
                verified = Some((h.producer_id, h.producer_epoch));
            }
            // Again under the partition lock, right before the write: verification
            // may have waited on the volume, and a stale broker must not write.
            let stepdowns = self.stepdowns.load(Ordering::Acquire);
            if !self.lease_fresh() {
                return Err(AppendRejected::LeaseExpired);
            }
            let now = now_ms();
            let started = std::time::Instant::now();
            let offsets = headers.iter().map(|h| h.last_offset_delta as i64 + 1).sum();
            let appended = if state.log.would_roll(records.len() as u64, offsets, now) {
                // A roll seals (fsyncs) a segment and creates files — the new segment by
                // path, at this broker's log end: only while this broker leads the
                // partition, by `owner.json` read under its gate, which a take-over
                // holds from the stolen lock to its new `owner.json`. A deposed leader
                // (paused with its clock, thawed before its next volume sync) that
                // rolled would create its segment inside its successor's, and the next
                // open would end the successor's segment at that base, cutting
                // acknowledged records (`a_deposed_leader_whose_append_would_roll_creates_no_segment`).
                // The roll's producer snapshot (written by path too) follows the append
                // under the same gate.
                crate::blocking::off_worker(|| {
                    partition.while_led(|| {
                        let appended = state
                            .roll(now)
                            .and_then(|()| state.append(records, headers, partition.leader_epoch, now));
                        if appended.is_ok() {
                            state.snapshot_after_roll(now);
                        }
                        appended
                    })
                })
            } else {
                Ok(state.append(records, headers, partition.leader_epoch, now))
            };
            let outcome = appended
                .map_err(|e| {
                    warn!(topic = %partition.topic, partition = partition.index, error = %e, "the segment roll this append needs could not confirm that this broker leads the partition; nothing written");
                    AppendRejected::Unled(e)
                })?
                .map_err(|e| {
                    partition.write_failed(&mut state.log, &e);
                    AppendRejected::Append(e)
                })?;
            if matches!(outcome, AppendOutcome::Appended(_)) {
                for (pid, seq, was_open) in seqs {
                    state.note_txn_seq(pid, seq, was_open);
                }
            }
            crate::metrics::metrics()
                .produce_append
                .observe(started.elapsed().as_secs_f64());
            // And after it: a process paused between the check and the write (SIGSTOP)
            // may have lost the partition meanwhile, its batch landing where the new
            // leader never reads. Not acknowledged; a retry goes to the new leader.
            if !self.still_fresh_since(stepdowns) {
                warn!(topic = %partition.topic, partition = partition.index, "the lease went stale during an append; not acknowledging it");
                return Err(AppendRejected::LeaseExpired);
            }
            (outcome, state.log.log_start_offset())
        };
        if matches!(outcome, AppendOutcome::Appended(_)) {
            self.wake_readers(Some(partition));
        }
        Ok((outcome, log_start))
    }

    /// fsyncs every partition up to its current end.
    pub async fn flush_all(&self) {
        for p in self.partitions() {
            let end = p.log_end_offset();
            if let Err(e) = p.wait_durable(end).await {
                error!(topic = %p.topic, partition = p.index, error = %e, "fsync failed");
            }
        }
        // Transitions the coordinator did not wait for (Complete*, expiries).
        if let Err(e) = self.txn.flush().await {
            error!(error = %e, "syncing transaction slot journals failed; retried at the next flush");
        }
    }

    /// This broker's state as the metrics' gauges show it, read now ([`crate::metrics::render`]).
    /// Reads the slots it coordinates, its marker queue and every lease: call it off
    /// the runtime's workers.
    pub fn gauges(&self) -> crate::metrics::BrokerGauges {
        use crate::metrics::{BrokerGauges, LeaseGauges, PartitionGauges};
        use kaas_core::txn::TxnState;
        const OPEN: [TxnState; 3] = [TxnState::Ongoing, TxnState::PrepareCommit, TxnState::PrepareAbort];
        let mut g = BrokerGauges {
            now_ms: now_ms(),
            lease_fresh: self.lease_fresh(),
            stepdowns: self.stepdown_count(),
            ..Default::default()
        };
        for p in self.partitions().iter().filter(|p| !p.is_retired()) {
            let state = p.state();
            // As readers are given them: the gauges said the log end, past what a
            // consumer can read while acks=0/1 records wait for the flush.
            let (high_watermark, last_stable_offset) = p.read_bounds(&state);
            g.partitions.push(PartitionGauges {
                topic: p.topic.clone(),
                partition: p.index,
                high_watermark,
                last_stable_offset,
                log_start_offset: state.log.log_start_offset(),
            });
        }
        let mut open = [0i64; OPEN.len()];
        for slot in 0..kaas_core::txn_store::SLOTS {
            if !self.owns_txn_slot(slot) {
                continue;
            }
            let visited = self.txn.visit(slot, |st| {
                for e in st.entries().values() {
                    if let Some(i) = OPEN.iter().position(|s| *s == e.state) {
                        open[i] += 1;
                        if e.txn_start_ms >= 0 {
                            g.oldest_open_start_ms =
                                Some(g.oldest_open_start_ms.map_or(e.txn_start_ms, |o| o.min(e.txn_start_ms)));
                        }
                    }
                }
            });
            if let Err(e) = visited {
                g.slots_unreadable += 1;
                warn!(slot, error = %e, "metrics: transaction slot unreadable");
            }
        }
        g.open_transactions = OPEN.iter().map(|s| s.as_str()).zip(open).collect();
        match kaas_core::marker_queue::list(&self.volume, self.config.broker_id) {
            Ok(entries) => {
                g.marker_queue_entries = Some(entries.len() as i64);
                g.marker_queue_oldest_ms = entries
                    .iter()
                    .filter_map(|(_, e)| e.as_ref().ok().map(|e| e.enqueued_ms))
                    .min();
            }
            Err(e) => warn!(error = %e, "metrics: marker queue unreadable"),
        }
        let live = self.live_brokers();
        match kaas_core::broker::list_brokers(&self.volume) {
            Ok(leases) => {
                g.leases = leases
                    .into_iter()
                    .flatten()
                    .map(|lease| LeaseGauges {
                        broker: lease.broker_id,
                        heartbeat_ms: lease.heartbeat_ms,
                        stopped: lease.stopped_ms.is_some(),
                        live: live.contains_key(&lease.broker_id),
                    })
                    .collect();
            }
            Err(e) => warn!(error = %e, "metrics: broker leases unreadable"),
        }
        g
    }
}
