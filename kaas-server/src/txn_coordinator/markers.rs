//! Finishing a transaction: the markers of a PrepareCommit/PrepareAbort entry
//! written to the partitions this broker leads and queued for the others
//! ([`TransactionCoordinator::finish`]), Complete* once every one is durable, and the
//! queue entries other coordinators left for this broker applied
//! ([`TransactionCoordinator::apply_queued`]).

use super::*;
use crate::WATCHERS_LOG_TARGET;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A tagged field of a WriteTxnMarkers marker, kaas's own: the transaction's number
/// at its coordinator (`txn_seq`, 8 bytes big-endian), so the leader can apply the
/// marker from the notice itself (docs/cluster.md, "Markers from a notice"); the
/// leader's answer echoes it when every marker is applied ([`NotifiedMarkers`]). Other
/// Kafka brokers skip tags they do not know; "KAAS" in ASCII, far from Apache's.
pub const TXN_SEQ_TAG: i32 = 0x4B41_4153;

/// The transaction number in a message's tagged fields ([`TXN_SEQ_TAG`]), if any.
pub fn txn_seq_in(tags: &BTreeMap<i32, bytes::Bytes>) -> Option<u64> {
    let bytes = tags.get(&TXN_SEQ_TAG)?;
    Some(u64::from_be_bytes(bytes.as_ref().try_into().ok()?))
}

/// `seq` as the value of [`TXN_SEQ_TAG`].
pub fn txn_seq_tag(seq: u64) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(&seq.to_be_bytes())
}

/// When a fast finish's Prepare* was made durable (the delivery histogram's start),
/// and whether it waits for its leaders' answers with the slot held
/// ([`super::NOTICE_ANSWER_WAIT`]).
#[derive(Debug, Clone, Copy)]
struct FinishTiming {
    prepared_at: Instant,
    wait_for_answers: bool,
}

/// The queue entries of a fast finish: the other leaders' partitions, and the entries
/// already written for them under the same hold of the slot, if any
/// ([`TransactionCoordinator::finish_held_queued`]).
struct QueueEntries {
    remote: BTreeMap<i32, Vec<TopicPartition>>,
    queued: Option<Vec<(i32, MarkerEntry)>>,
}

/// A fast finish's notices, one per other leader, and whether this finish wrote
/// their queue entries itself — Some(whether it widened one): the queues are then
/// settled to this set once its own markers are durable ([`settle_fast_entries`]) — or
/// found them written with the Prepare* it made (None: nothing else can be queued).
struct Notices {
    set: Vec<(i32, MarkerEntry)>,
    written_here: Option<bool>,
}

/// A leader's answer to one notice ([`TransactionCoordinator::apply_notified`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifiedMarkers {
    /// Each asked partition's error code.
    pub codes: Vec<(TopicPartition, i16)>,
    /// Whether every partition answered 0 has its marker durable here (or had none
    /// to write) by the notice's own transaction number — what lets the coordinator
    /// remove the queue entry. False for a notice without a number, and where a
    /// partition found no entry to apply: 0 then only says nothing queued was seen.
    pub applied: bool,
}

/// How a leader answered a notice, as the coordinator acts on it
/// ([`TransactionCoordinator::notice_answered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeAnswer {
    /// Every marker durable at the leader, by the notice's transaction number (the
    /// answer carries it back): the entry may go.
    Applied,
    /// Answered without an error, but not [`Self::Applied`] (a leader of an older
    /// version, or one that found no entry): nothing is known of the entry.
    Answered,
    /// Lost or refused.
    Failed,
}

impl TransactionCoordinator {
    /// Finishes the Prepare* transaction `expected` if the entry still is it (see the
    /// module comment), taking the slot's locks. Idempotent.
    pub async fn finish(&self, broker: &Cluster, expected: &TxnEntry) -> Result<Finished, CoordError> {
        self.finish_at(broker, expected, None).await
    }

    /// [`Self::finish`] of a Prepare* made durable at `prepared_at` (the delivery
    /// histogram's start), if the caller knows.
    pub async fn finish_at(
        &self,
        broker: &Cluster,
        expected: &TxnEntry,
        prepared_at: Option<Instant>,
    ) -> Result<Finished, CoordError> {
        let held = self.lock_slot(slot_for(&expected.transactional_id)).await?;
        self.finish_held(broker, &held, expected, prepared_at, prepared_at.is_some())
            .await
    }

    /// The compare-and-set finish, with the slot held: re-check, offset hook, markers,
    /// Complete*. Any failure leaves the entry in its Prepare state.
    ///
    /// With peer links, the other leaders get their queue entries (unsynced) and a
    /// notice each ([`Self::finish_by_notices`]); an entry is made durable only when
    /// its notice was not answered "applied". Without them, queue entries are written
    /// durably and marked on the slot entry, and the leaders' polls find them. A
    /// finish that finds marked entries still queued announces them again.
    /// `prepared_at` is when the Prepare* was made durable by the caller, if it was
    /// (the delivery histogram's start). `wait_for_answers`: a fast finish keeps the
    /// slot for its leaders' answers a little ([`super::NOTICE_ANSWER_WAIT`]) — for
    /// one transaction just prepared, not for a sweep finishing many under one lock.
    pub(super) async fn finish_held(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        expected: &TxnEntry,
        prepared_at: Option<Instant>,
        wait_for_answers: bool,
    ) -> Result<Finished, CoordError> {
        self.finish_held_queued(broker, held, expected, prepared_at, wait_for_answers, None)
            .await
    }

    /// [`Self::finish_held`] of a Prepare* whose queue entries `queued` were written,
    /// under this same hold of the slot, once it was durable
    /// ([`enqueue_fast_entries`]): a finish that would write the same set
    /// notifies with them instead of writing them again.
    pub(super) async fn finish_held_queued(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        expected: &TxnEntry,
        prepared_at: Option<Instant>,
        wait_for_answers: bool,
        queued: Option<Vec<(i32, MarkerEntry)>>,
    ) -> Result<Finished, CoordError> {
        let Some(current) = self.held_entry(held, &expected.transactional_id)? else {
            return Ok(Finished::Stale);
        };
        if !txn::is_same_prepared(&current, expected) {
            return Ok(Finished::Stale);
        }
        // The decision is durable before anything acts on it. A Prepare* the caller
        // made durable itself (EndTxn: `prepared_at`) is known so; one read from the
        // files — appended by a coordinator that died before its fdatasync, by
        // another broker, or by this broker before a restart — is synced here first:
        // otherwise a host crash could take it back to Ongoing after some of its
        // markers landed (and a timeout then abort the rest). Not judged by the
        // generations this process knows durable: another writer's lines, or a slot
        // that started its history again, are not among them.
        if prepared_at.is_none() {
            self.durable_now(held.lock.id()).await?;
        }
        let commit = current.state == TxnState::PrepareCommit;
        let (pid, epoch) = (current.producer_id, current.producer_epoch);
        for group in &current.groups {
            self.groups
                .finish_pending(group, pid, epoch, commit, &|| self.store.check_held(held.lock.id()))?;
        }
        let (local, remote) = self.split_by_leader(broker, &current);
        let prepared_at_or_now = prepared_at.unwrap_or_else(Instant::now);
        if self.notices.get().is_some() && !remote.is_empty() && !current.markers_queued {
            return self
                .finish_by_notices(
                    broker,
                    held,
                    &current,
                    &local,
                    QueueEntries { remote, queued },
                    FinishTiming {
                        prepared_at: prepared_at_or_now,
                        wait_for_answers,
                    },
                )
                .await;
        }
        // The markers of the partitions led here and the queue entries for the other
        // leaders are written side by side: none depends on another, only on the
        // durable Prepare* line. The entries are written and fsynced beside their
        // places one after another, renamed in under the slot's gate, checked held (no
        // take-over falls in between: a paused broker's late entries could replace the
        // next holder's), and their directories fsynced after. Any failure
        // leaves the entry in Prepare*; what did land is idempotent for the retry (a
        // marker with no transaction open is a no-op, an entry is rewritten by name).
        let queue = async {
            if remote.is_empty() || current.markers_queued {
                return Ok(());
            }
            let (volume, store, lock) = (broker.volume.clone(), self.store.clone(), held.lock.id());
            let entries = self.entries_of(&current, remote.clone());
            crate::blocking::run_blocking_held(
                move || {
                    let written = write_entries_held(&volume, (&store, lock), &entries, true, || Ok(()))?;
                    marker_queue::sync_queue_dirs(&written).inspect_err(count_queue_failure)
                },
                || broker.volume.cluster_dir().join("marker_queue"),
            )
            .await
        };
        let markers =
            futures_util::future::join_all(local.iter().map(|tp| broker.write_marker(tp, pid, epoch, commit)));
        let (markers, queued) = futures_util::future::join(markers, queue).await;
        let mut failed: Option<CoordError> = None;
        // Every failure is logged; the first is returned (the finish is retried whole).
        let mut fail = |e: CoordError| {
            warn!(transactional_id = %current.transactional_id, producer_id = pid, epoch, error = %e, "a marker or queue entry of a finish failed; the transaction stays prepared");
            failed.get_or_insert(e);
        };
        for written in markers {
            if let Err(e) = written {
                fail(e.into());
            }
        }
        if let Err(e) = queued {
            fail(e.into())
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if !remote.is_empty() && !current.markers_queued {
            // This finish wrote the transaction's whole set of entries; nothing relies
            // on an older one yet. One left in a queue this set does not use (its
            // partitions are led elsewhere now, or it was torn by a power cut) would
            // be counted as still pending forever.
            let keep: Vec<i32> = remote.keys().copied().collect();
            crate::blocking::off_worker(|| {
                self.store.while_held(held.lock.id(), || {
                    marker_queue::remove_others(&broker.volume, pid, epoch, current.txn_seq, &keep)
                        .inspect_err(count_queue_failure)
                })
            })?;
            let mut next = current.clone();
            next.markers_queued = true;
            // Not waited for: lost, the queue entries are simply written again.
            self.record(held, &[SlotOp::Put(next)], now_ms(), Durable::Later)
                .await?;
            kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_QUEUED);
            // No peer links to tell anyone: the leaders' polls find the entries.
            return Ok(Finished::Queued);
        }
        if !remote.is_empty() {
            let pending = pending(broker, &current)?;
            if !pending.is_empty() {
                let queued = pending
                    .iter()
                    .filter_map(|path| {
                        let leader = queue_target(path)?;
                        // Unreadable or gone since: the poll reports or skips it.
                        let entry = kaas_core::error::read_versioned_json::<MarkerEntry>(
                            path,
                            "marker queue entry",
                            marker_queue::MARKER_FORMAT_VERSION,
                        )
                        .ok()?;
                        Some((leader, entry))
                    })
                    .collect();
                self.announce(&current, queued, prepared_at_or_now);
                return Ok(Finished::Queued);
            }
        }
        kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_MARKERS);
        self.complete_held(held, &current)?;
        // Queued markers are measured where their delivery is seen (notice answered, poll).
        if let Some(at) = prepared_at.filter(|_| !current.markers_queued) {
            crate::metrics::metrics().markers_delivered(crate::metrics::MarkerPath::Local, at.elapsed());
        }
        Ok(Finished::Completed)
    }

    /// Hands a notice for each (leader, markers) to the peer links (when there are
    /// any); returns the leaders whose notice could not be handed over. Either the
    /// entries' files are durable and the slot entry's `markers_queued` is appended
    /// (a leader reading the slot sees it) but not yet synced, or nothing is on the
    /// volume but the Prepare* line (a fast finish: [`Self::finish_by_notices`]) — a
    /// crash loses nothing either way: recovery finds the entries by name and
    /// announces them again, or notifies again from the Prepare* line.
    fn announce(&self, prepared: &TxnEntry, queued: Vec<(i32, MarkerEntry)>, prepared_at: Instant) -> Vec<i32> {
        let Some(sender) = self.notices.get() else {
            return queued.into_iter().map(|(leader, _)| leader).collect();
        };
        let mut not_handed = Vec::new();
        for (leader, entry) in queued {
            let notice = MarkerNotice {
                leader,
                entry,
                prepared: prepared.clone(),
                prepared_at,
                announced_at: Instant::now(),
            };
            match sender.try_send(PeerNotice::Markers(Box::new(notice))) {
                Ok(()) => {}
                Err(e) => {
                    // Full (the links are far behind) or closed (shutdown): the
                    // leaders' polls deliver.
                    crate::metrics::metrics().marker_notification(crate::metrics::NotificationOutcome::Lost);
                    debug!(leader, error = %e, "marker notice not handed to the peer links; left to the leader's poll");
                    not_handed.push(leader);
                }
            }
        }
        not_handed
    }

    pub(super) fn unsynced_finishes(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<UnsyncedKey, Unanswered>> {
        self.unsynced.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The finish of a Prepare* whose partitions are led by other brokers too, with
    /// peer links (docs/cluster.md, "Markers from a notice"). The queue entries are
    /// written first — whole, renamed into place, but without their fsyncs (nothing
    /// relies on them yet: see [`Self::spill`]) — then each other leader is sent a
    /// notice naming the transaction, before this broker's own markers, which are
    /// written meanwhile. The transaction completes once this broker's markers are
    /// durable and every leader answered [`NoticeAnswer::Applied`] (its entry then
    /// removed: after the completion by this finish, which still holds the slot;
    /// before it, under the slot lock, by a later answer): [`Self::conclude`], here or in
    /// [`Self::notice_answered`], whichever sees both last. The entries of leaders
    /// that did not are made durable and `markers_queued` recorded ([`Self::spill`]).
    /// A crash before either leaves the transaction in Prepare* without the line, and
    /// the next finish writes the entries and notifies again (markers are idempotent:
    /// a leader writes one only while that very transaction is open on the partition,
    /// or from an entry under the slot lock).
    async fn finish_by_notices(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        current: &TxnEntry,
        local: &[&TopicPartition],
        QueueEntries { remote, queued }: QueueEntries,
        timing: FinishTiming,
    ) -> Result<Finished, CoordError> {
        let notices = self.entries_of(current, remote);
        match queued {
            // Written already, under this hold, since the Prepare* was durable: the
            // same set (the leaders have not moved meanwhile).
            Some(queued) if same_entries(&queued, &notices) => {
                let notices = Notices {
                    set: queued,
                    written_here: None,
                };
                return self
                    .notify_and_wait(broker, held, current, local, notices, timing)
                    .await;
            }
            _ => {}
        }
        // On the blocking pool (a worker handing its tasks to another thread for this
        // cost a tenth of a cluster's throughput), held: a finish dropped meanwhile (a
        // connection aborted at shutdown) waits for it, so this removal never runs
        // after the slot lock is let go, where it could remove entries another finish
        // wrote since; and under the slot's gate, checked held, so it never runs after
        // a take-over either (a broker paused past its lease).
        let (volume, to_write) = (broker.volume.clone(), notices.clone());
        let (store, lock) = (self.store.clone(), held.lock.id());
        let widened = crate::blocking::run_blocking_held(
            move || write_fast_entries(&volume, (&store, lock), &to_write),
            || broker.volume.cluster_dir().join("marker_queue"),
        )
        .await?;
        let notices = Notices {
            set: notices,
            written_here: Some(widened),
        };
        self.notify_and_wait(broker, held, current, local, notices, timing)
            .await
    }

    /// The rest of [`Self::finish_by_notices`], its entries written: each leader
    /// notified, this broker's own markers written meanwhile, the answers waited for.
    async fn notify_and_wait(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        current: &TxnEntry,
        local: &[&TopicPartition],
        Notices {
            set: notices,
            written_here,
        }: Notices,
        timing: FinishTiming,
    ) -> Result<Finished, CoordError> {
        let FinishTiming {
            prepared_at,
            wait_for_answers,
        } = timing;
        let to_settle = written_here.map(|widened| (notices.clone(), widened));
        let commit = current.state == TxnState::PrepareCommit;
        let (pid, epoch) = (current.producer_id, current.producer_epoch);
        let key = unsynced_key(current);
        let woken = Arc::new(tokio::sync::Notify::new());
        // Registered before the notices go: an answer may come back at once. Set, not
        // merged: this finish's notices are the ones waited for (an earlier one's
        // answer still counts for its leader when it covers the same partitions).
        self.unsynced_finishes().insert(
            key.clone(),
            Unanswered {
                leaders: notices
                    .iter()
                    .map(|(leader, entry)| (*leader, (entry.clone(), None)))
                    .collect(),
                holder: Some(woken.clone()),
                prepared_at,
            },
        );
        kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_QUEUED);
        let not_handed = self.announce(current, notices, prepared_at);
        if !not_handed.is_empty() {
            if let Some(waiting) = self.unsynced_finishes().get_mut(&key) {
                for leader in not_handed {
                    if let Some((_, answer)) = waiting.leaders.get_mut(&leader) {
                        answer.get_or_insert(NoticeAnswer::Failed);
                    }
                }
            }
        }
        let mut failed: Option<CoordError> = None;
        for written in
            futures_util::future::join_all(local.iter().map(|tp| broker.write_marker(tp, pid, epoch, commit))).await
        {
            if let Err(e) = written {
                warn!(transactional_id = %current.transactional_id, producer_id = pid, epoch, error = %e, "a marker of a finish failed; the transaction stays prepared");
                failed.get_or_insert(e.into());
            }
        }
        if failed.is_none() {
            if let Some((set, widened)) = to_settle {
                let (volume, store, lock) = (broker.volume.clone(), self.store.clone(), held.lock.id());
                let prepared = (pid, epoch, current.txn_seq);
                if let Err(e) = crate::blocking::run_blocking_held(
                    move || settle_fast_entries(&volume, (&store, lock), prepared, &set, widened),
                    || broker.volume.cluster_dir().join("marker_queue"),
                )
                .await
                {
                    warn!(transactional_id = %current.transactional_id, producer_id = pid, epoch, error = %e, "the queue entries of a finish could not be settled; the transaction stays prepared");
                    failed = Some(e.into());
                }
            }
        }
        if let Some(e) = failed {
            // Answers that come now find nothing waiting for them: the finish is
            // retried whole, and writes the entries and notifies again.
            self.unsynced_finishes().remove(&key);
            return Err(e);
        }
        // Every answer in: concluded here, under the slot this finish holds. Else it
        // waits for them a little, still holding it ([`NOTICE_ANSWER_WAIT`]), and then
        // lets the record go: the answer that completes the set concludes.
        let answered_all = |release: bool| {
            let mut finishes = self.unsynced_finishes();
            let all = finishes.get_mut(&key).map(|waiting| {
                let all = waiting.all_answered();
                if release && !all {
                    waiting.holder = None;
                }
                all
            });
            match all {
                Some(true) => finishes.remove(&key),
                _ => None,
            }
        };
        // Not waiting: let go at once if the set is not complete.
        let mut ready = answered_all(!wait_for_answers);
        // Only a finish right after the Prepare* it made durable (EndTxn, or
        // InitProducerId aborting the open transaction) waits: recovery and the sweep
        // finish many transactions in a row under one slot lock.
        if ready.is_none() && wait_for_answers && self.unsynced_finishes().contains_key(&key) {
            let wait = Duration::from_millis(self.answer_wait.load(std::sync::atomic::Ordering::Relaxed));
            let _ = tokio::time::timeout(wait, woken.notified()).await;
            ready = answered_all(true);
        }
        match ready {
            Some(waited) => self.conclude(broker, held, current, waited, true).await,
            None => Ok(Finished::Queued),
        }
    }

    /// The queue entries a fast finish of the Prepare* `prepared` would write now, one
    /// per other leader ([`Self::finish_by_notices`]); None when its finish would not
    /// notify (no peer links, no partition led elsewhere, entries already durable).
    pub(super) fn fast_entries(&self, broker: &Cluster, prepared: &TxnEntry) -> Option<Vec<(i32, MarkerEntry)>> {
        if self.notices.get().is_none() || prepared.markers_queued {
            return None;
        }
        let (_, remote) = self.split_by_leader(broker, prepared);
        (!remote.is_empty()).then(|| self.entries_of(prepared, remote))
    }

    /// `current`'s partitions: those led here (or by nobody known: written here, or
    /// found gone), and the others by leader.
    fn split_by_leader<'a>(
        &self,
        broker: &Cluster,
        current: &'a TxnEntry,
    ) -> (Vec<&'a TopicPartition>, BTreeMap<i32, Vec<TopicPartition>>) {
        let mut local: Vec<&TopicPartition> = Vec::new();
        let mut remote: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for tp in &current.partitions {
            match broker.partition_leader(&tp.topic, tp.partition) {
                Some(leader) if leader != self.broker_id => remote.entry(leader).or_default().push(tp.clone()),
                _ => local.push(tp),
            }
        }
        (local, remote)
    }

    /// The queue entry of the Prepare* `current` for each other leader in `remote`.
    fn entries_of(&self, current: &TxnEntry, remote: BTreeMap<i32, Vec<TopicPartition>>) -> Vec<(i32, MarkerEntry)> {
        let commit = current.state == TxnState::PrepareCommit;
        remote
            .into_iter()
            .map(|(leader, partitions)| {
                let entry = MarkerEntry::new(
                    &current.transactional_id,
                    current.producer_id,
                    current.producer_epoch,
                    commit,
                    partitions,
                    Some(current.txn_seq),
                    self.broker_id,
                    now_ms(),
                );
                (leader, entry)
            })
            .collect()
    }

    /// The end of a fast finish, with the slot held and `current` still the Prepare*
    /// it notified for, without `markers_queued`, its own markers durable and every
    /// leader answered (or given up on). The entry of each leader that answered
    /// [`NoticeAnswer::Applied`] is removed (its markers are durable); with every
    /// leader so, the transaction completes. Otherwise what is left goes to the
    /// polls ([`Self::spill`]).
    ///
    /// `same_hold`: the finish that wrote the entries still holds the slot, as it has
    /// since it wrote them, so nobody has rewritten them (entries are written only
    /// under the slot lock). Then, with every leader answered applied, every marker
    /// of the transaction is durable: it completes at once, and its entries are
    /// removed after, off the finish's path ([`Self::remove_after_completion`]).
    async fn conclude(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        current: &TxnEntry,
        waited: Unanswered,
        same_hold: bool,
    ) -> Result<Finished, CoordError> {
        let applied: Vec<(i32, MarkerEntry)> = waited
            .leaders
            .iter()
            .filter(|(_, (_, answer))| *answer == Some(NoticeAnswer::Applied))
            .map(|(leader, (entry, _))| (*leader, entry.clone()))
            .collect();
        let mut all_applied = applied.len() == waited.leaders.len();
        if same_hold && all_applied {
            kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_MARKERS);
            self.complete_held(held, current)?;
            self.remove_after_completion(broker, &applied);
            crate::metrics::metrics()
                .markers_delivered(crate::metrics::MarkerPath::Notified, waited.prepared_at.elapsed());
            return Ok(Finished::Completed);
        }
        // Held, as the writes are: a removal cut loose from a dropped finish could
        // read an entry, then unlink the wider one another finish (or kaasctl) wrote
        // over it after the slot lock was let go; and under the slot's gate, checked
        // held, for the same reason after a take-over.
        let (volume, store, lock) = (broker.volume.clone(), self.store.clone(), held.lock.id());
        let removed = crate::blocking::run_blocking_held(
            move || {
                store.while_held(lock, || {
                    let mut all = true;
                    for (leader, entry) in &applied {
                        // Widened since (kaasctl merges its entries in under this lock):
                        // the entry stays for the polls, so not all applied.
                        if !marker_queue::remove_if_covered(&volume, *leader, entry)?
                            && marker_queue::entry_path(&volume, *leader, entry).exists()
                        {
                            all = false;
                        }
                    }
                    Ok::<_, VolumeError>(all)
                })
            },
            || broker.volume.cluster_dir().join("marker_queue"),
        )
        .await?;
        all_applied &= removed;
        if !all_applied {
            return self.spill(broker, held, current).await;
        }
        kaas_core::failpoint::hit(kaas_core::failpoint::TXN_AFTER_MARKERS);
        self.complete_held(held, current)?;
        crate::metrics::metrics().markers_delivered(crate::metrics::MarkerPath::Notified, waited.prepared_at.elapsed());
        Ok(Finished::Completed)
    }

    /// Removes the queue entries of a transaction that has just completed, on the
    /// blocking pool, without waiting: nothing waits for their removal, and the
    /// producer's next request waits for the slot this finish holds.
    ///
    /// Why no lock is needed (docs/cluster.md, "Markers from a notice"): the caller
    /// recorded Complete* because every marker of the transaction is durable, so any
    /// file of its name (`<pid>-<epoch>-<txn>.json`) now asks only for markers
    /// already written — whoever wrote it, whenever this runs. The name is not used
    /// again by a later transaction (its number differs), and this process never
    /// finishes the transaction again (it is Complete* under the slot lock); another
    /// broker might, after taking the slot over before the Complete* line reached
    /// it, and then finds its entries applied or gone: both complete it. A removal
    /// that fails (or a crash before it) leaves the entry to its leader's poll, which
    /// drops an entry of a transaction that is no longer being finished.
    fn remove_after_completion(&self, broker: &Cluster, entries: &[(i32, MarkerEntry)]) {
        if entries.is_empty() {
            return;
        }
        let paths: Vec<PathBuf> = entries
            .iter()
            .map(|(leader, entry)| marker_queue::entry_path(&broker.volume, *leader, entry))
            .collect();
        tokio::task::spawn_blocking(move || {
            for path in paths {
                if let Err(e) = marker_queue::remove(&path) {
                    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::MarkerQueue, &e);
                    warn!(path = %path.display(), error = %e, "the queue entry of a completed transaction could not be removed; its leader's poll drops it");
                }
            }
        });
    }

    /// A fast finish's entries handed to the leaders' polls: a notice was lost or
    /// refused, or answered without saying its markers were applied. Each entry left
    /// is made durable — its bytes, then its name — and only then is `markers_queued`
    /// recorded: from that line on, whoever finds the entries gone completes the
    /// transaction, so none may vanish in a crash. With none left, every leader
    /// applied its own (this process wrote them, in this life, and an entry is only
    /// removed once its markers are durable, or dropped once its transaction is over):
    /// the transaction completes here. A crash before the line leaves Prepare*
    /// without it: the next finish writes the entries and notifies again.
    ///
    /// Every queue file of the transaction is kept and made durable, whoever wrote it:
    /// another finish of it (a retry, the reaper, another process) may have rewritten
    /// this one's entries since, or put some in other queues.
    async fn spill(&self, broker: &Cluster, held: &HeldSlot<'_>, current: &TxnEntry) -> Result<Finished, CoordError> {
        let (pid, epoch, txn_seq) = (current.producer_id, current.producer_epoch, current.txn_seq);
        let left =
            crate::blocking::off_worker(|| marker_queue::make_pending_durable(&broker.volume, pid, epoch, txn_seq))
                .inspect_err(|e| {
                    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::MarkerQueue, e)
                })?;
        if left == 0 {
            self.complete_held(held, current)?;
            return Ok(Finished::Completed);
        }
        let mut next = current.clone();
        next.markers_queued = true;
        // Not waited for: lost, the next finish writes the entries again.
        self.record(held, &[SlotOp::Put(next)], now_ms(), Durable::Later)
            .await?;
        debug!(transactional_id = %current.transactional_id, producer_id = current.producer_id, entries = left, "queue entries of a finish made durable for the leaders' polls");
        Ok(Finished::Queued)
    }

    /// Prepare* → Complete* of the held entry `current` once its markers were queued
    /// and no queue entry of it is left (every leader applied its own): whoever sees
    /// that first — the leader removing the last entry, or the coordinator told so —
    /// completes it. Returns whether this call did.
    fn complete_if_drained(
        &self,
        broker: &Cluster,
        held: &HeldSlot<'_>,
        current: &TxnEntry,
    ) -> Result<bool, CoordError> {
        if !current.markers_queued || !pending(broker, current)?.is_empty() {
            return Ok(false);
        }
        self.complete_held(held, current)?;
        Ok(true)
    }

    /// At a clean stop, once no more notices go out (a link may still be waiting for
    /// an answer; that answer then finds the transaction handed over): every fast
    /// finish still waiting for an answer is concluded with what it has
    /// ([`Self::conclude`]: the leaders that did not answer get durable queue
    /// entries), so the leaders complete it rather than the slot's next owner, which
    /// would notify again. Each failure is logged; the next owner finishes those.
    pub async fn hand_unanswered_to_polls(&self, broker: &Cluster) {
        let waiting: Vec<UnsyncedKey> = self.unsynced_finishes().keys().cloned().collect();
        for key in waiting {
            let (tid, pid) = (&key.0, key.1);
            let handed = async {
                let held = self
                    .lock_slot_within(slot_for(tid), super::SLOT_LOCK_WAIT_BACKGROUND)
                    .await?;
                let Some(waited) = self.unsynced_finishes().remove(&key) else {
                    return Ok(None);
                };
                match self.held_entry(&held, tid)? {
                    Some(current)
                        if current.state.is_prepare()
                            && !current.markers_queued
                            && unsynced_key(&current) == key
                            && waited.let_go() =>
                    {
                        self.conclude(broker, &held, &current, waited, false).await.map(Some)
                    }
                    _ => Ok(None),
                }
            };
            match handed.await {
                Ok(Some(finished)) => {
                    debug!(transactional_id = %tid, producer_id = pid, ?finished, "stopping: an unanswered finish handed to the leaders' polls")
                }
                Ok(None) => {}
                Err(e) => {
                    warn!(transactional_id = %tid, producer_id = pid, error = %e, "stopping: an unanswered finish could not be handed to the leaders' polls; the slot's next owner finishes it")
                }
            }
        }
    }

    /// A leader's answer to a notice, from the peer links ([`NoticeAnswer`]).
    ///
    /// A fast finish ([`Self::finish_by_notices`]) records each leader's answer; the
    /// answer that finds every leader answered and this broker's markers durable
    /// concludes it ([`Self::conclude`]) under the slot lock: one look at the slot per
    /// transaction, not one per leader. An answer that finds the Prepare* already
    /// concluded, or from an older round (another life, a failed finish), changes
    /// nothing: what is left, its next finish or the polls do.
    ///
    /// Durable entries (`markers_queued` recorded, and announced again by a later
    /// finish): a leader that answered [`NoticeAnswer::Applied`] has its markers
    /// durable, so its entry is removed here under the slot lock unless it was
    /// rewritten since with more partitions ([`marker_queue::remove_if_covered`]);
    /// if no entry of the transaction is queued any more, the coordinator completes
    /// it — a compare-and-set, a no-op when the leader that removed the last entry
    /// did it already. A lost or refused notice changes nothing.
    ///
    /// An answer that leaves its fast finish still waiting (another leader, this
    /// broker's own markers, or the finish's wait with the slot held) is only
    /// recorded: it neither takes nor waits for the slot lock. Otherwise the
    /// producer's request waiting for the transaction is woken. Never announces again:
    /// what is left, its poll applies.
    pub async fn notice_answered(&self, broker: &Cluster, notice: &MarkerNotice, answer: NoticeAnswer) {
        let recorded = self.record_answer(notice, answer);
        self.act_on_answer(broker, notice, answer, recorded).await
    }

    /// The first part of [`Self::notice_answered`], which takes no lock but a mutex
    /// held for a few instructions: the answer recorded with its fast finish, and
    /// what is left to do. The peer links call it on their own task and hand the rest
    /// to a task of its own only when there is something left
    /// ([`AnswerRecorded::Recorded`] leaves nothing).
    pub(crate) fn record_answer(&self, notice: &MarkerNotice, answer: NoticeAnswer) -> AnswerRecorded {
        let key = unsynced_key(&notice.prepared);
        let mut finishes = self.unsynced_finishes();
        let all = finishes.get_mut(&key).map(|waiting| {
            if let Some((asked, got)) = waiting.leaders.get_mut(&notice.leader) {
                if got.is_none() && covers(&notice.entry, asked) {
                    *got = Some(answer);
                }
            }
            if let Some(holder) = waiting.holder.as_ref().filter(|_| waiting.all_answered()) {
                // The finish still holds the slot: it concludes.
                holder.notify_one();
            }
            waiting.let_go() && waiting.all_answered()
        });
        match all {
            Some(true) => match finishes.remove(&key) {
                Some(waited) => AnswerRecorded::Ready(waited),
                None => AnswerRecorded::NotWaiting,
            },
            // The finish still waits for another leader, or for its own markers
            // (woken above if it holds the slot and the set is complete): the answer
            // is recorded, and whoever completes the set concludes it. Nothing to
            // look at in the slot.
            Some(false) => AnswerRecorded::Recorded,
            None => AnswerRecorded::NotWaiting,
        }
    }

    /// The rest of [`Self::notice_answered`], after [`Self::record_answer`].
    pub(crate) async fn act_on_answer(
        &self,
        broker: &Cluster,
        notice: &MarkerNotice,
        answer: NoticeAnswer,
        recorded: AnswerRecorded,
    ) {
        let prepared = &notice.prepared;
        let slot = slot_for(&prepared.transactional_id);
        let ready = match recorded {
            AnswerRecorded::Recorded => return,
            AnswerRecorded::Ready(waited) => Some(waited),
            AnswerRecorded::NotWaiting => None,
        };
        let completed = async {
            if ready.is_none() && answer == NoticeAnswer::Failed {
                return Ok(false);
            }
            if !broker.owns_txn_slot(slot) {
                // The slot moved on: its new owner finishes the transaction from the
                // files (notifying again, or finding the entries marked).
                return Ok(false);
            }
            let held = self.lock_slot(slot).await?;
            let current = match self.held_entry(&held, &prepared.transactional_id)? {
                Some(current) if txn::is_same_prepared(&current, prepared) => current,
                _ => return Ok(false),
            };
            if !current.markers_queued {
                return match ready {
                    Some(waited) => {
                        Ok(self.conclude(broker, &held, &current, waited, false).await? == Finished::Completed)
                    }
                    // Not waited for (a failed finish, another life): the next finish
                    // notifies again.
                    None => Ok(false),
                };
            }
            // Marked meanwhile (kaasctl), or durable entries announced again.
            let applied: Vec<(i32, MarkerEntry)> = match ready {
                Some(waited) => waited
                    .leaders
                    .into_iter()
                    .filter(|(_, (_, got))| *got == Some(NoticeAnswer::Applied))
                    .map(|(leader, (entry, _))| (leader, entry))
                    .collect(),
                None if answer == NoticeAnswer::Applied => vec![(notice.leader, notice.entry.clone())],
                None => Vec::new(),
            };
            crate::blocking::off_worker(|| {
                self.store.while_held(held.lock.id(), || {
                    applied.iter().try_for_each(|(leader, entry)| {
                        marker_queue::remove_if_covered(&broker.volume, *leader, entry).map(|_| ())
                    })
                })
            })?;
            let done = self.complete_if_drained(broker, &held, &current)?;
            if done {
                crate::metrics::metrics()
                    .markers_delivered(crate::metrics::MarkerPath::Notified, notice.prepared_at.elapsed());
            }
            Ok(done)
        };
        let completed: Result<bool, CoordError> = completed.await;
        if let Err(e) = completed {
            warn!(transactional_id = %prepared.transactional_id, error = %e, "completing a transaction after its leaders answered failed; the sweep finishes it")
        }
        // Completed here or by the leader: either way the waiters look again.
        self.completed[slot as usize].notify_waiters();
    }

    /// WriteTxnMarkers at a partition's leader (a coordinator's notice), for the asked
    /// partitions this broker leads. A notice naming its transaction (`txn_seq`, sent
    /// by coordinators of this version) is applied from the notice itself where the
    /// partition knows which transaction is open there
    /// ([`Cluster::write_notified_marker`]): the marker is written only while that
    /// very transaction is open, so a late or repeated notice writes nothing. The
    /// rest — a notice without the number (an older coordinator), a partition that
    /// cannot tell — go through this broker's queue entries for (`producer_id`,
    /// `epoch`) with `commit`'s result ([`TransactionCoordinator::apply_queued`],
    /// under the coordinator's slot lock), so only what a coordinator queued is
    /// written. Returns each asked partition's error code: 0 when its marker is
    /// durable here or there is none to write, NOT_LEADER_OR_FOLLOWER when it is led
    /// elsewhere, or the failure's.
    pub async fn apply_notified(
        &self,
        broker: &Cluster,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        txn_seq: Option<u64>,
        asked: &[TopicPartition],
    ) -> NotifiedMarkers {
        const NOT_LEADER_OR_FOLLOWER: i16 = 6;
        // A partition open here is led here (memory alone tells); the leadership of
        // one led elsewhere reads its owner.json, and a missing one its topic file:
        // file reads, off the runtime's workers — only for those (a notice sent
        // where the partition is not led is rare).
        let mut codes: BTreeMap<TopicPartition, i16> = asked
            .iter()
            .filter(|tp| broker.leads_here(&tp.topic, tp.partition))
            .map(|tp| (tp.clone(), 0))
            .collect();
        let elsewhere: Vec<&TopicPartition> = asked.iter().filter(|tp| !codes.contains_key(*tp)).collect();
        if !elsewhere.is_empty() {
            let me = self.broker_id;
            codes.extend(crate::blocking::off_worker(|| {
                elsewhere
                    .into_iter()
                    .map(|tp| {
                        let led_here = broker.partition_leader(&tp.topic, tp.partition) == Some(me) || gone(broker, tp);
                        (tp.clone(), if led_here { 0 } else { NOT_LEADER_OR_FOLLOWER })
                    })
                    .collect::<Vec<_>>()
            }));
        }
        let Some(txn_seq) = txn_seq else {
            let (codes, from_entries) = self
                .apply_notified_entries(broker, producer_id, epoch, commit, None, codes)
                .await;
            let codes = if commit {
                codes
            } else {
                self.abort_hanging_asked(broker, producer_id, epoch, codes, &from_entries)
                    .await
            };
            return NotifiedMarkers { codes, applied: false };
        };
        let direct: Vec<TopicPartition> = codes
            .iter()
            .filter(|(_, c)| **c == 0)
            .map(|(tp, _)| tp.clone())
            .collect();
        let written = futures_util::future::join_all(
            direct
                .iter()
                .map(|tp| broker.write_notified_marker(tp, producer_id, epoch, commit, txn_seq)),
        )
        .await;
        let mut unknown = BTreeMap::new();
        for (tp, written) in direct.into_iter().zip(written) {
            match written {
                Ok(Some(wrote)) => {
                    // Per transaction (thousands a second): debug, not info.
                    debug!(target: WATCHERS_LOG_TARGET, topic = %tp.topic, partition = tp.partition, producer_id, epoch, txn_seq, wrote, "applied notified markers");
                }
                Ok(None) => {
                    let code = codes.remove(&tp).unwrap_or(0);
                    unknown.insert(tp, code);
                }
                Err(e) => {
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, txn_seq, error = %e, "writing a notified marker failed; the coordinator hands it to the poll");
                    codes.insert(tp, KAFKA_STORAGE_ERROR);
                }
            }
        }
        let mut applied = true;
        if !unknown.is_empty() {
            debug!(
                producer_id,
                epoch,
                txn_seq,
                partitions = unknown.len(),
                "a notified transaction not known open here; applied from the queue entry under the slot lock"
            );
            let (answered, from_entries) = self
                .apply_notified_entries(broker, producer_id, epoch, commit, Some(txn_seq), unknown)
                .await;
            // A partition no entry was found for (gone, or not seen yet through an
            // NFS attribute cache) is answered 0, but its marker is not known durable.
            applied = answered
                .iter()
                .all(|(tp, code)| *code != 0 || from_entries.contains(tp));
            codes.extend(answered);
        }
        // Applied only if every partition is: an error anywhere and the coordinator
        // hands the notice to the poll anyway.
        let applied = applied && codes.values().all(|code| *code == 0);
        NotifiedMarkers {
            codes: codes.into_iter().collect(),
            applied,
        }
    }

    /// An ABORT that names no transaction, for the partitions of `codes` led here
    /// (still 0) that no queue entry of the producer covered (`from_entries`): what
    /// Kafka's tools send (`kafka-transactions.sh abort`, an admin client's
    /// `abortTransaction`) to end a hanging transaction. Where the producer has a
    /// transaction open at `epoch`, it goes through the reconcile backstop's own last
    /// step ([`Self::reconcile_one`]: the producer's slot locked, the partition read
    /// again, judged): ended if it hangs with ABORT as its outcome; refused with
    /// INVALID_TXN_STATE if its coordinator covers it (a live transaction: Kafka's
    /// leader would close its batches here while its coordinator may still commit
    /// it) or recorded it committed. Nothing open there: answered 0, nothing written
    /// (an abort retried after it landed). Open at another epoch:
    /// INVALID_PRODUCER_EPOCH. Each refusal is logged with what to do instead
    /// (docs/transactions.md, "Aborting from Kafka's tools").
    async fn abort_hanging_asked(
        &self,
        broker: &Cluster,
        producer_id: i64,
        epoch: i16,
        codes: Vec<(TopicPartition, i16)>,
        from_entries: &BTreeSet<TopicPartition>,
    ) -> Vec<(TopicPartition, i16)> {
        const INVALID_PRODUCER_EPOCH: i16 = 47;
        const INVALID_TXN_STATE: i16 = 48;
        let mut answered = Vec::with_capacity(codes.len());
        for (tp, code) in codes {
            if code != 0 || from_entries.contains(&tp) {
                answered.push((tp, code));
                continue;
            }
            // As `apply_hanging` finds its partition: gone (the topic unknown, or
            // fewer partitions) is nothing open there; a partition or topic this
            // broker cannot serve is an error, never "nothing open".
            let partition = match broker.topic(&tp.topic).map(|t| t.partition(tp.partition).cloned()) {
                Ok(Some(Ok(p))) => p,
                Ok(Some(Err(e))) => {
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, error = %e, "an abort asked for a partition that is offline here");
                    answered.push((tp, KAFKA_STORAGE_ERROR));
                    continue;
                }
                Ok(None) | Err(crate::registry::TopicError::Unknown(_)) => {
                    answered.push((tp, 0));
                    continue;
                }
                Err(e) => {
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, error = %e, "an abort asked for a topic this broker cannot serve");
                    answered.push((tp, KAFKA_STORAGE_ERROR));
                    continue;
                }
            };
            let open = partition
                .state()
                .producers
                .get(producer_id)
                .and_then(|e| e.txn_first_offset.map(|first| (e.epoch, first)));
            let Some((open_epoch, first)) = open else {
                debug!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, "an abort asked for a producer with no transaction open here; nothing written");
                answered.push((tp, 0));
                continue;
            };
            if open_epoch != epoch {
                warn!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, open_epoch, "an abort asked at an epoch other than the one of the producer's transaction open here; nothing written");
                answered.push((tp, INVALID_PRODUCER_EPOCH));
                continue;
            }
            use super::recovery::Reconciled;
            let code = match self
                .reconcile_one(broker, &partition, &tp, None, (producer_id, epoch, first), Some(false))
                .await
            {
                Ok(Reconciled::Ended) => {
                    info!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, first_offset = first, "a hanging transaction ended by an abort asked through WriteTxnMarkers");
                    0
                }
                Ok(Reconciled::NotOpen) => 0,
                Ok(Reconciled::Covered { transactional_id }) => {
                    let tid = transactional_id.unwrap_or_default();
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, first_offset = first, transactional_id = %tid, "an abort asked through WriteTxnMarkers refused: the transaction is live at its coordinator, which ends it (or its reaper at its timeout); to end it now: kaasctl txn abort {tid}");
                    INVALID_TXN_STATE
                }
                Ok(Reconciled::OtherOutcome { transactional_id, .. }) => {
                    let tid = transactional_id.unwrap_or_default();
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, first_offset = first, transactional_id = %tid, "an abort asked through WriteTxnMarkers refused: the transaction's coordinator committed it, so this partition's marker is COMMIT (written by the reconcile backstop, or now by kaasctl txn repair --fix)");
                    INVALID_TXN_STATE
                }
                Err(e) => {
                    warn!(topic = %tp.topic, partition = tp.partition, producer_id, epoch, error = %e, "an abort asked through WriteTxnMarkers failed");
                    notice_code(&e)
                }
            };
            answered.push((tp, code));
        }
        answered
    }

    /// [`Self::apply_notified`] through this broker's queue entries, for the
    /// partitions of `codes` still at 0 (led here): with `only`, the entries of that
    /// transaction alone (never another's, nor a hanging-transaction repair). Returns
    /// the codes and the partitions an entry's markers were applied to (or whose entry
    /// was dropped because its transaction is over).
    #[allow(clippy::too_many_arguments)]
    async fn apply_notified_entries(
        &self,
        broker: &Cluster,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        only: Option<u64>,
        mut codes: BTreeMap<TopicPartition, i16>,
    ) -> (Vec<(TopicPartition, i16)>, BTreeSet<TopicPartition>) {
        let me = self.broker_id;
        let mut applied = BTreeSet::new();
        let wanted = if commit {
            MarkerResult::Commit
        } else {
            MarkerResult::Abort
        };
        let entries = match crate::blocking::off_worker(|| {
            marker_queue::entries_of(&broker.volume, me, producer_id, epoch)
        }) {
            Ok(e) => e,
            Err(e) => {
                warn!(producer_id, epoch, error = %e, "cannot read this broker's marker queue for a notice; left to the poll");
                for code in codes.values_mut().filter(|c| **c == 0) {
                    *code = KAFKA_STORAGE_ERROR;
                }
                return (codes.into_iter().collect(), applied);
            }
        };
        for (path, entry) in entries {
            let entry = match entry {
                Ok(e) if only.is_some() && (e.txn_seq != only || e.hanging_since.is_some()) => continue,
                Ok(e) if e.result == wanted => e,
                Ok(_) => continue,
                Err(e) => {
                    warn!(path = %path.display(), error = %e, "unreadable marker queue entry named by a notice; left in place");
                    for code in codes.values_mut().filter(|c| **c == 0) {
                        *code = KAFKA_STORAGE_ERROR;
                    }
                    continue;
                }
            };
            let mine: Vec<TopicPartition> = entry
                .partitions
                .iter()
                .filter(|tp| codes.get(*tp) == Some(&0))
                .cloned()
                .collect();
            if mine.is_empty() {
                continue;
            }
            match self
                .apply_queued(broker, &path, &entry, &mine, crate::metrics::MarkerPath::Notified)
                .await
            {
                Ok(done) => {
                    if done {
                        applied.extend(mine.iter().cloned());
                    }
                    debug!(target: WATCHERS_LOG_TARGET, transactional_id = %entry.transactional_id, producer_id, result = ?entry.result, partitions = mine.len(), "applied notified markers")
                }
                Err(e) => {
                    warn!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id, epoch, error = %e, "applying notified markers failed; the entry stays for the poll");
                    let code = notice_code(&e);
                    for tp in &mine {
                        codes.insert(tp.clone(), code);
                    }
                }
            }
        }
        (codes.into_iter().collect(), applied)
    }
}

/// The code a notice's partition is answered when its marker could not be written.
const KAFKA_STORAGE_ERROR: i16 = 56;

/// The code a WriteTxnMarkers partition is answered for `e`: a marker or volume
/// failure is KAFKA_STORAGE_ERROR, anything else its own code.
fn notice_code(e: &CoordError) -> i16 {
    match e {
        CoordError::Marker(_) | CoordError::Volume(_) => KAFKA_STORAGE_ERROR,
        other => other.code(),
    }
}

impl TransactionCoordinator {
    /// Prepare* → Complete* of the entry `current` (already checked by the caller).
    pub(super) fn complete_held(&self, held: &HeldSlot<'_>, current: &TxnEntry) -> Result<(), CoordError> {
        let now = now_ms();
        if let Some(done) = txn::complete(current, now, &self.actor()) {
            // Not waited for: the outcome is durable (Prepare*) and every marker is in
            // its log; lost in a crash, recovery finishes the Prepare* entry again.
            self.append(held, &[SlotOp::Put(done)], now)?;
            self.completed[held.slot as usize].notify_waiters();
            crate::metrics::metrics().transaction_completed(current.state == TxnState::PrepareCommit);
            debug!(transactional_id = %current.transactional_id, producer_id = current.producer_id, state = current.state.as_str(), "transaction completed");
        }
        Ok(())
    }

    /// A hanging-transaction repair queued by `kaasctl txn repair --fix` (an entry
    /// with `hanging_since`): each of its partitions this broker leads goes through
    /// the reconcile backstop's own last step ([`Self::reconcile_one`]), which locks
    /// the producer's slot, reads the partition again and judges again — so the marker
    /// ends only the transaction open there since `first`, if it still hangs with the
    /// outcome the entry asks for, and never the early batches of a later transaction
    /// at the same epoch (issue 25 item 12a). The entry is done either way: written,
    /// or not hanging as it was shown (a new `txn repair` looks again).
    async fn apply_hanging(
        &self,
        broker: &Cluster,
        path: &Path,
        first: i64,
        mine: &[TopicPartition],
    ) -> Result<bool, CoordError> {
        let Some(entry) = marker_queue::read_entry(path)? else {
            return Ok(false);
        };
        let (here, rest): (Vec<TopicPartition>, Vec<TopicPartition>) =
            entry.partitions.iter().cloned().partition(|tp| mine.contains(tp));
        if here.is_empty() {
            return Ok(false);
        }
        for tp in &here {
            let partition = match broker.topic(&tp.topic) {
                Ok(t) => match t.partition(tp.partition) {
                    Some(Ok(p)) => p.clone(),
                    Some(Err(e)) => {
                        return Err(CoordError::Marker(crate::cluster::MarkerError {
                            topic: tp.topic.clone(),
                            partition: tp.partition,
                            detail: format!("partition offline: {e}"),
                        }))
                    }
                    None => continue,
                },
                Err(crate::registry::TopicError::Unknown(_)) => continue,
                Err(e) => {
                    return Err(CoordError::Marker(crate::cluster::MarkerError {
                        topic: tp.topic.clone(),
                        partition: tp.partition,
                        detail: e.to_string(),
                    }))
                }
            };
            let ended = self
                .reconcile_one(
                    broker,
                    &partition,
                    tp,
                    None,
                    (entry.producer_id, entry.producer_epoch, first),
                    Some(entry.result == MarkerResult::Commit),
                )
                .await?;
            if ended != super::recovery::Reconciled::Ended {
                info!(path = %path.display(), topic = %tp.topic, partition = tp.partition, producer_id = entry.producer_id, epoch = entry.producer_epoch, first_offset = first, "queued hanging-transaction repair: not hanging with the outcome asked for when judged again; nothing written");
            }
        }
        if rest.is_empty() {
            marker_queue::remove(path)?;
        } else {
            let mut left = entry.clone();
            left.partitions = rest;
            kaas_core::fsutil::write_json(path, &left).map_err(|e| VolumeError::io(path, e))?;
        }
        Ok(true)
    }

    /// Removes a queue entry whose bytes cannot be read if the transaction its name
    /// names is over: no slot holds that producer, at that epoch, in a Prepare state of
    /// that transaction. A power cut can leave an entry's name durable without its
    /// bytes (the fast finish of the version before wrote entries without fsyncs, and
    /// another entry's directory fsync could make the name durable); while its
    /// transaction is being finished the coordinator's next finish notifies again or
    /// writes it again, and once it is over nobody would. Over is for good (a
    /// transaction's number is never prepared twice), so no lock is needed. Returns
    /// whether it was removed; what it could not judge is logged and left.
    pub fn remove_if_over(&self, path: &Path) -> bool {
        let Some((pid, epoch, txn_seq)) = marker_queue::transaction_named(path) else {
            return false;
        };
        let mut being_finished = false;
        for slot in 0..kaas_core::txn::SLOTS {
            let found = self.visit(slot, |st| {
                st.entries().values().any(|e| {
                    e.producer_id == pid && e.producer_epoch == epoch && e.txn_seq == txn_seq && e.state.is_prepare()
                })
            });
            match found {
                Ok(false) => {}
                Ok(true) => {
                    being_finished = true;
                    break;
                }
                Err(e) => {
                    error!(target: WATCHERS_LOG_TARGET, path = %path.display(), slot, error = %e, "cannot read a transaction slot to judge an unreadable queue entry; left in place");
                    return false;
                }
            }
        }
        if being_finished {
            return false;
        }
        match marker_queue::remove(path) {
            Ok(()) => {
                warn!(target: WATCHERS_LOG_TARGET, path = %path.display(), producer_id = pid, epoch, txn_seq, "removed an unreadable marker queue entry (torn by a power cut?) of a transaction that is over");
                true
            }
            Err(e) => {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::MarkerQueue, &e);
                error!(target: WATCHERS_LOG_TARGET, path = %path.display(), error = %e, "cannot remove an unreadable queue entry of a transaction that is over");
                false
            }
        }
    }

    /// Applies, from one marker-queue entry (in any broker's queue), the markers of
    /// the partitions in `mine` — those this broker leads now, or that no longer
    /// exist — and rewrites the entry with the partitions left, or deletes it when
    /// none are. So a marker reaches its partition wherever the partition moved:
    /// to a broker restarted at once, to several survivors of a dead one.
    ///
    /// An entry naming its transaction is applied only while that transaction is
    /// still in its Prepare state at the coordinator (checked under the slot lock,
    /// held while the markers are written and the entry rewritten); a stale one is
    /// dropped unwritten. Whoever removes the last entry of a transaction completes it, once
    /// `markers_queued` says its entries were durable (before that, the coordinator
    /// does on its leaders' answers: [`Self::notice_answered`]).
    /// Returns whether anything was applied or dropped.
    ///
    /// `via` says who asked: the poll, or a coordinator's notice; a transaction this
    /// completes is counted in the delivery histogram under it (from its entry's
    /// enqueue time). Completion is a compare-and-set under the slot lock, so each
    /// transaction is counted once, by whoever completes it.
    pub async fn apply_queued(
        &self,
        broker: &Cluster,
        path: &Path,
        entry: &MarkerEntry,
        mine: &[TopicPartition],
        via: crate::metrics::MarkerPath,
    ) -> Result<bool, CoordError> {
        if let Some(first) = entry.hanging_since {
            return self.apply_hanging(broker, path, first, mine).await;
        }
        let commit = entry.result == MarkerResult::Commit;
        // A slot held elsewhere for long: the poll moves on to other slots, a notice
        // answers an error (its entry stays for the poll).
        let held = if entry.transactional_id.is_empty() {
            None
        } else {
            Some(
                self.lock_slot_within(slot_for(&entry.transactional_id), super::SLOT_LOCK_WAIT_BACKGROUND)
                    .await?,
            )
        };
        // Re-read under the lock: another broker may have applied part of it.
        let Some(entry) = marker_queue::read_entry(path)? else {
            return Ok(false);
        };
        let mine: Vec<TopicPartition> = entry
            .partitions
            .iter()
            .filter(|tp| mine.contains(tp))
            .cloned()
            .collect();
        if mine.is_empty() {
            return Ok(false);
        }
        let current = match &held {
            Some(h) => self.held_entry(h, &entry.transactional_id)?,
            None => None,
        };
        let wanted = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        let live = current.as_ref().filter(|c| {
            c.producer_id == entry.producer_id
                && c.producer_epoch == entry.producer_epoch
                && c.state == wanted
                && entry.txn_seq.is_none_or(|n| n == c.txn_seq)
        });
        if held.is_some() && live.is_none() {
            match entry.txn_seq {
                Some(seq) => {
                    // Completed with every marker durable, its entries removed just
                    // after (`remove_after_completion`): a poll may come between.
                    // Or a later transaction of the producer began, which it does only
                    // once this one completed.
                    let completed = current.as_ref().is_some_and(|c| {
                        c.producer_id == entry.producer_id
                            && c.producer_epoch == entry.producer_epoch
                            && (c.txn_seq > seq
                                || (c.txn_seq == seq
                                    && matches!(c.state, TxnState::CompleteCommit | TxnState::CompleteAbort)
                                    && (c.state == TxnState::CompleteCommit) == commit))
                    });
                    if completed {
                        debug!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, "queued marker of a completed transaction; dropped");
                    } else {
                        warn!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, partitions = ?entry.partitions, "queued marker of a transaction that is no longer being finished; dropped unwritten");
                    }
                    marker_queue::remove(path)?;
                    return Ok(true);
                }
                None => {
                    // An entry of an older version, which names no transaction: while
                    // the producer has a newer transaction active at the same epoch on
                    // one of these partitions, its marker could close that one instead;
                    // wait until it is over.
                    let ambiguous = current.as_ref().is_some_and(|c| {
                        c.producer_id == entry.producer_id
                            && c.producer_epoch == entry.producer_epoch
                            && c.state.is_in_flight()
                            && mine.iter().any(|tp| c.partitions.contains(tp))
                    });
                    if ambiguous {
                        debug!(path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, "legacy queue entry waits until the producer's open transaction ends");
                        return Ok(false);
                    }
                }
            }
        }
        // The slot stays held through the markers' fsyncs and the entry's removal:
        // a finish of the coordinator's may rewrite the entry (with partitions added,
        // their leadership moved here) the moment it is let go, and a removal after
        // that would take markers never written with it.
        for tp in &mine {
            // A partition that knows a later transaction of the producer open there
            // writes nothing: this one completed before it began, every marker of it
            // durable (an entry can outlive its transaction's completion:
            // `remove_after_completion`). One that cannot tell writes it, as the slot
            // says the transaction is still being finished.
            let judged = match entry.txn_seq {
                Some(seq) => {
                    broker
                        .write_notified_marker(tp, entry.producer_id, entry.producer_epoch, commit, seq)
                        .await?
                }
                None => None,
            };
            if judged.is_none() {
                broker
                    .write_marker(tp, entry.producer_id, entry.producer_epoch, commit)
                    .await?;
            }
        }
        let rest: Vec<TopicPartition> = entry
            .partitions
            .iter()
            .filter(|tp| !mine.contains(tp))
            .cloned()
            .collect();
        // By path, what is left of the entry: under the slot's gate, checked held, so
        // it never replaces or removes what the slot's next holder wrote after a
        // take-over (this broker paused past its lease meanwhile).
        let by_path = || {
            if rest.is_empty() {
                marker_queue::remove(path).inspect_err(count_queue_failure)
            } else {
                let mut left = entry.clone();
                left.partitions = rest.clone();
                kaas_core::fsutil::write_json(path, &left)
                    .map_err(|e| VolumeError::io(path, e))
                    .inspect_err(count_queue_failure)
            }
        };
        match &held {
            Some(h) => crate::blocking::off_worker(|| self.store.while_held(h.lock.id(), by_path))?,
            None => by_path()?,
        }
        if !rest.is_empty() {
            return Ok(true);
        }
        if let (Some(held), Some(c)) = (held, live.cloned()) {
            if self.complete_if_drained(broker, &held, &c)? {
                // By the wall clock from the entry's enqueue time (written by the
                // coordinator, maybe on another host: docs/cluster.md's clock bound).
                let queued_for = Duration::from_millis(now_ms().saturating_sub(entry.enqueued_ms).max(0) as u64);
                crate::metrics::metrics().markers_delivered(via, queued_for);
            }
        }
        Ok(true)
    }
}

/// The marker watcher's poll (every `--volume-poll-interval-ms`): the markers other
/// coordinators queued for the partitions this broker leads, written
/// ([`TransactionCoordinator::apply_queued`]) and each entry removed once its markers
/// are durable.
pub async fn process_marker_queue(broker: &Cluster, txn: &TransactionCoordinator) {
    let me = broker.config.broker_id;
    let targets = match marker_queue::targets(&broker.volume) {
        Ok(t) => t,
        Err(e) => {
            error!(target: WATCHERS_LOG_TARGET, error = %e, "cannot list marker queues");
            return;
        }
    };
    // Every queue: an entry's partitions may be led elsewhere by now (its addressee
    // died, restarted, or its partitions were taken over by several brokers); each
    // broker applies the partitions it leads.
    let mut by_slot: BTreeMap<Option<u32>, Vec<QueuedHere>> = BTreeMap::new();
    for target in targets {
        let entries = match marker_queue::list(&broker.volume, target) {
            Ok(e) => e,
            Err(e) => {
                error!(target: WATCHERS_LOG_TARGET, target, error = %e, "cannot read a marker queue");
                continue;
            }
        };
        for (path, entry) in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    if !txn.remove_if_over(&path) && target == me {
                        error!(target: WATCHERS_LOG_TARGET, path = %path.display(), error = %e, "unreadable marker queue entry left in place");
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
            let slot = (!entry.transactional_id.is_empty()).then(|| slot_for(&entry.transactional_id));
            by_slot.entry(slot).or_default().push((path, entry, mine, target));
        }
    }
    // The slots side by side, each slot's entries in order (oldest first): a slot whose
    // lock another process holds (paused, stuck) costs its own entries a round, not
    // everyone's ([`super::SLOT_LOCK_WAIT_BACKGROUND`]).
    let rounds = by_slot.into_values().map(|entries| async move {
        let mut entries = entries.into_iter();
        while let Some((path, entry, mine, target)) = entries.next() {
            match txn
                .apply_queued(broker, &path, &entry, &mine, crate::metrics::MarkerPath::Poll)
                .await
            {
                // Per transaction (thousands a second): debug, not info.
                Ok(true) => {
                    debug!(target: WATCHERS_LOG_TARGET, transactional_id = %entry.transactional_id, producer_id = entry.producer_id, result = ?entry.result, partitions = mine.len(), queue = target, "applied queued markers")
                }
                Ok(false) => {}
                // Held elsewhere for the whole wait: the slot's other entries would
                // wait as long; all of them are tried again at the next poll.
                Err(e @ CoordError::SlotBusy { .. }) => {
                    let left = entries.len();
                    warn!(target: WATCHERS_LOG_TARGET, path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, later_entries_of_the_slot = left, error = %e, "queued markers wait for the next poll");
                    break;
                }
                // Left in place: retried at the next poll.
                Err(e) => {
                    error!(target: WATCHERS_LOG_TARGET, path = %path.display(), transactional_id = %entry.transactional_id, producer_id = entry.producer_id, epoch = entry.producer_epoch, partitions = ?mine, error = %e, "applying a queued marker failed; retried at the next poll")
                }
            }
        }
    });
    futures_util::future::join_all(rounds).await;
}

/// A queue entry the poll found with partitions this broker leads: its path, the
/// entry, those partitions, and the queue it is in.
type QueuedHere = (PathBuf, MarkerEntry, Vec<TopicPartition>, i32);

/// Writes a fast finish's queue entries, one per other leader — whole, renamed into
/// place, but without their fsyncs (nothing relies on them yet:
/// [`TransactionCoordinator::spill`] makes them durable first). Blocking; the caller
/// holds the slot. Returns whether any was widened.
///
/// Each is widened by the partitions an entry of the transaction already in that
/// leader's queue asks for, and no other queue is touched: until this finish's own
/// markers are durable, its view of who leads what must not take a partition out of
/// the queues — were one of its markers to fail, another finish of the transaction
/// (its notices answered meanwhile) would find the partition in no entry and complete
/// without its marker
/// (`a_finish_that_fails_on_its_own_marker_leaves_every_queued_partition_queued`).
/// The queues are settled to exactly this set afterwards ([`settle_fast_entries`]).
fn write_fast_entries(
    volume: &kaas_core::Volume,
    (store, lock): (&kaas_core::txn_store::TxnStateStore, SlotLockId),
    entries: &[(i32, MarkerEntry)],
) -> Result<bool, VolumeError> {
    let mut widened = false;
    let mut to_write = Vec::with_capacity(entries.len());
    for (leader, entry) in entries {
        let mut entry = entry.clone();
        // One that cannot be read (torn) is replaced whole, as `enqueue_merged` does.
        if let Ok(Some(found)) = marker_queue::read_entry(&marker_queue::entry_path(volume, *leader, &entry)) {
            if found.result == entry.result && found.hanging_since.is_none() {
                for tp in found.partitions {
                    if !entry.partitions.contains(&tp) {
                        entry.partitions.push(tp);
                        widened = true;
                    }
                }
            }
        }
        to_write.push((*leader, entry));
    }
    write_entries_held(volume, (store, lock), &to_write, false, || Ok(()))?;
    Ok(widened)
}

/// The second half of [`write_fast_entries`], once the finish's own markers are
/// durable: the queues hold exactly its set — an entry it widened rewritten to what it
/// asks of that leader, and the transaction's entries removed from every queue the
/// set does not use (one left there — its partitions led elsewhere now, or torn by a
/// power cut — would be counted as still pending forever). Every partition of the
/// transaction is then in the set or marked durable here. Under the slot lock, by the
/// finish that wrote the set: never later, when another finish may have written its
/// own. `prepared`: the transaction's (producer id, epoch, transaction number).
fn settle_fast_entries(
    volume: &kaas_core::Volume,
    (store, lock): (&kaas_core::txn_store::TxnStateStore, SlotLockId),
    (pid, epoch, txn_seq): (i64, i16, u64),
    entries: &[(i32, MarkerEntry)],
    widened: bool,
) -> Result<(), VolumeError> {
    let keep: Vec<i32> = entries.iter().map(|(leader, _)| *leader).collect();
    let remove_others =
        || marker_queue::remove_others(volume, pid, epoch, txn_seq, &keep).inspect_err(count_queue_failure);
    if widened {
        write_entries_held(volume, (store, lock), entries, false, remove_others).map(|_| ())
    } else {
        store.while_held(lock, remove_others)
    }
}

/// The first half of [`write_fast_entries`], without the removal of strays: for
/// EndTxn, which writes the entries of a transaction it has just moved from Ongoing
/// to Prepare* under the slot lock it still holds — no entry of it can exist yet
/// (entries are written only once a Prepare* is durable, and a transaction reaches
/// one Prepare* only), so there is nothing to remove, and nothing another holder of
/// the slot wrote is ever touched. Renamed in under the slot's gate
/// ([`write_entries_held`]).
pub(super) fn enqueue_fast_entries(
    volume: &kaas_core::Volume,
    (store, lock): (&kaas_core::txn_store::TxnStateStore, SlotLockId),
    entries: &[(i32, MarkerEntry)],
) -> Result<(), VolumeError> {
    write_entries_held(volume, (store, lock), entries, false, || Ok(())).map(|_| ())
}

/// Writes `entries` beside their places (fsynced when `synced`), then renames them in
/// and runs `also` under the slot's gate, checked held ([`TxnStateStore::while_held`]):
/// the gate is held for the renames (and `also`) only. The paths renamed in. A failed
/// write of an entry is counted; a lock found lost is not a volume failure.
fn write_entries_held(
    volume: &kaas_core::Volume,
    (store, lock): (&kaas_core::txn_store::TxnStateStore, SlotLockId),
    entries: &[(i32, MarkerEntry)],
    synced: bool,
    also: impl FnOnce() -> Result<(), VolumeError>,
) -> Result<Vec<PathBuf>, VolumeError> {
    let staged = marker_queue::stage_entries(volume, entries, synced).inspect_err(count_queue_failure)?;
    store.while_held(lock, || {
        let written = staged.publish().inspect_err(count_queue_failure)?;
        also()?;
        Ok(written)
    })
}

/// A failed write or removal of a queue entry, in `kaas_volume_write_errors_total`.
fn count_queue_failure(e: &VolumeError) {
    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::MarkerQueue, e)
}

/// Whether two sets of queue entries ask the same leaders for the same markers
/// (when they were made aside).
fn same_entries(a: &[(i32, MarkerEntry)], b: &[(i32, MarkerEntry)]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((la, ea), (lb, eb))| {
            la == lb
                && MarkerEntry {
                    enqueued_ms: eb.enqueued_ms,
                    ..ea.clone()
                } == *eb
        })
}

/// The broker a queue entry's file is addressed to (`…/to-<broker>/<file>`).
fn queue_target(path: &Path) -> Option<i32> {
    path.parent()?.file_name()?.to_str()?.strip_prefix("to-")?.parse().ok()
}

/// A partition that no longer exists on the volume ([`Cluster::partition_gone`]; a
/// topic file that does not read counts as there).
fn gone(broker: &Cluster, tp: &TopicPartition) -> bool {
    broker.partition_gone(tp).unwrap_or(false)
}

/// The queue files of `entry`'s transaction still waiting, in any broker's queue.
fn pending(broker: &Cluster, entry: &TxnEntry) -> Result<Vec<PathBuf>, VolumeError> {
    marker_queue::pending_files(&broker.volume, entry.producer_id, entry.producer_epoch, entry.txn_seq)
}

/// Whether a leader's answer to `answered` speaks for `asked` (this finish's notice
/// to it): the same transaction and result, and every partition asked.
fn covers(answered: &MarkerEntry, asked: &MarkerEntry) -> bool {
    answered.producer_id == asked.producer_id
        && answered.producer_epoch == asked.producer_epoch
        && answered.txn_seq == asked.txn_seq
        && answered.result == asked.result
        && asked.partitions.iter().all(|tp| answered.partitions.contains(tp))
}
