//! The broker's state: the topic registry and the partitions this broker opened, each
//! with its log and producer state under one lock, and why a partition or a topic is
//! not served. What fills and changes the registry (placement, take-over, hand-over,
//! the volume sync) is `cluster`'s; this module only holds the state and its locks.

use kaas_core::log::{LogConfig, LogError, PartitionLog};
use kaas_core::partition::{AppendError, PartitionState};
use kaas_core::topic::{PartitionOwner, TopicMeta};
use kaas_core::{now_ms, Volume, VolumeError};
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::{debug, error, warn};
use uuid::Uuid;

pub struct Partition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
    pub leader_epoch: i32,
    /// This broker's id and the partition's `owner.json`: every fsync an
    /// acknowledgment waits for is followed by a read of that file, which must still
    /// name this leadership (see [`Partition::wait_durable`]).
    broker_id: i32,
    owner_path: std::path::PathBuf,
    state: Mutex<PartitionState>,
    /// Highest log end offset known to be fsynced.
    durable: AtomicI64,
    /// Where the active segment stood at the last fsync that succeeded here (at the
    /// open: the recovered files): what a failed fsync cuts the log back to
    /// ([`Partition::cut_back_to_durable`]).
    synced: Mutex<(i64, u64)>,
    flush_lock: tokio::sync::Mutex<()>,
    /// A background flush for readers is under way ([`Partition::flush_for_readers`]).
    flush_for_readers: AtomicBool,
    /// An fsync of this log failed: sticky, set where the fsync ran (also when nobody
    /// waits for it any more). Linux reports a writeback error once per open file, so
    /// a later fsync of the same file succeeds over the lost pages: nothing past
    /// `durable` is ever confirmed here again; the partition is opened again from its
    /// files ([`Partition::wait_durable`]).
    failed: Arc<AtomicBool>,
    /// Who led the partition before this leadership, as `owner.json` said when it was
    /// taken: (broker id, whether it let go). None for a partition nobody led. For the
    /// take-over's log line.
    pub(crate) taken_from: Option<(i32, bool)>,
    /// Set, under the partition lock, when this broker lets the partition go (hand-over,
    /// step-down, shutdown): nothing is appended after the final snapshot, even by a
    /// request that looked the partition up before.
    retired: AtomicBool,
    /// A cleaning pass of this partition is under way (set and cleared under the
    /// partition lock): retention leaves the partition alone meanwhile, as Apache's
    /// retention of a compacted log runs on the cleaner's thread. Deleting a segment
    /// the pass read dropped the pass ([`Partition::cleaning`]).
    cleaning: AtomicBool,
    /// Bumped whenever what a reader of this partition gets may have changed (an
    /// append, a marker, a flush that confirmed records): a long poll woken by another
    /// partition's change looks again only if one of its own changed.
    reader_changes: std::sync::atomic::AtomicU64,
    /// `owner.lock`, held for as long as this broker may append here: no other
    /// process (another broker, kaasctl) writes this log meanwhile. Declared last, so
    /// it is dropped after the log files are closed.
    _owner_lock: std::fs::File,
}

/// A cleaning pass under way ([`Partition::cleaning`]); ends when dropped.
pub struct CleaningPass<'a>(&'a AtomicBool);

impl Drop for CleaningPass<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Partition {
    /// The partition's log and producer state, under the partition lock.
    pub fn state(&self) -> std::sync::MutexGuard<'_, PartitionState> {
        // A panic while holding the lock cannot leave the log half-written in memory
        // in a way later appends would trust (recovery re-checks on restart), so a
        // poisoned lock is taken over rather than propagated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a cleaning pass under way until the returned guard is dropped; call
    /// with the partition lock held (`_state`), so retention, which checks
    /// [`Partition::being_cleaned`] under the same lock, never deletes between a
    /// pass's plan and its swap.
    pub fn cleaning(&self, _state: &PartitionState) -> CleaningPass<'_> {
        self.cleaning.store(true, Ordering::Release);
        CleaningPass(&self.cleaning)
    }

    /// Notes a change readers may see (see `Cluster::wake_readers`, which also wakes
    /// the long polls).
    pub fn note_reader_change(&self) {
        self.reader_changes.fetch_add(1, Ordering::SeqCst);
    }

    /// How many changes readers may see there have been ([`Partition::note_reader_change`]).
    pub fn reader_changes(&self) -> u64 {
        self.reader_changes.load(Ordering::SeqCst)
    }

    /// Whether a cleaning pass is under way (see [`Partition::cleaning`]).
    pub fn being_cleaned(&self) -> bool {
        self.cleaning.load(Ordering::Acquire)
    }

    /// Whether this broker let the partition go.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// The partition lock for a write: None once this broker let the partition go.
    pub fn writable(&self) -> Option<std::sync::MutexGuard<'_, PartitionState>> {
        let state = self.state();
        (!self.retired.load(Ordering::Acquire)).then_some(state)
    }

    /// Lets the partition go: under the partition lock, no more writes, the producer
    /// state written to `producer-state.snapshot` and the log fsynced; then
    /// `owner.json` marked released so the next owner need not wait for this
    /// broker's lease. `owner.lock` itself is dropped with the last reference.
    /// Failures are logged: the next owner then replays more of the log (from an
    /// older snapshot) or waits for this broker's lease to expire, never less safe.
    ///
    /// With `write` false (a broker stepping down because its lease went stale) it
    /// only stops writing: such a broker may already have been declared dead and the
    /// partition taken over (on NFS its lock may have lapsed meanwhile), so it must
    /// not touch the partition's files; the next owner waits for its lease instead.
    ///
    /// `fresh` is asked under the partition lock, right before the first write: a
    /// broker whose lease went stale meanwhile writes nothing. The snapshot is written
    /// by path, so only under the partition's `owner.gate` with `owner.json` naming
    /// this leadership ([`Self::while_led`]): a leader deposed while its clock was
    /// frozen (its lease fresh by its own reckoning) writes nothing more and releases
    /// nothing. `owner.json` is marked released only if it still names this broker at
    /// this leader epoch, and only if the log reached the disk (a next owner taking
    /// over at once must find it whole).
    pub(crate) fn retire(&self, volume: &Volume, broker_id: i32, reason: &str, fresh: &dyn Fn() -> bool) {
        let now = now_ms();
        {
            let mut state = self.state();
            if self.retired.swap(true, Ordering::AcqRel) || !fresh() {
                return;
            }
            // The snapshot, and any `.txnindex` entry an earlier failure left to write
            // first, are written by path: only while this broker leads the partition
            // (a frozen clock keeps `fresh` true for a leader deposed meanwhile, whose
            // writes would land in its successor's files).
            match self.while_led(|| state.write_snapshot(now)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Snapshot, &e);
                    error!(topic = %self.topic, partition = self.index, error = %e, "cannot write producer-state snapshot; the next owner replays the log instead");
                }
                // Taken over: its files are the successor's (logged by the check).
                Err(DurableError::Deposed { .. }) => return,
                Err(e) => {
                    warn!(topic = %self.topic, partition = self.index, error = %e, "cannot confirm this leadership to write the producer-state snapshot; the next owner replays the log instead");
                }
            }
            if self.failed.load(Ordering::Acquire) {
                warn!(topic = %self.topic, partition = self.index, "an fsync of the log failed earlier; not marking the partition released (others take it over once this lease expires)");
                return;
            }
            let synced = state
                .log
                .sync_handle()
                .map_err(std::io::Error::other)
                .and_then(|(file, _)| {
                    file.sync(false).inspect_err(|_| {
                        self.failed.store(true, Ordering::Release);
                        forget_cached_pages(&file);
                    })
                });
            if let Err(e) = synced {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Log, &e);
                error!(topic = %self.topic, partition = self.index, error = %e, "cannot fsync the log while letting the partition go; not marking it released (others take it over once this lease expires)");
                self.cut_back_to_durable(&mut state.log);
                return;
            }
        }
        match PartitionOwner::release(volume, &self.topic, self.index, broker_id, self.leader_epoch, now) {
            Ok(true) => {}
            Ok(false) => {
                warn!(topic = %self.topic, partition = self.index, leader_epoch = self.leader_epoch, "owner.json no longer names this leadership (or the partition is changing hands); leaving it alone");
                return;
            }
            Err(e) => {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Owner, &e);
                warn!(topic = %self.topic, partition = self.index, error = %e, "cannot mark the partition released; others take it over once this lease expires");
                return;
            }
        }
        debug!(topic = %self.topic, partition = self.index, leader_epoch = self.leader_epoch, reason, "partition let go");
    }

    /// Waits until everything up to `offset` (exclusive) is fsynced **and** this
    /// broker still led the partition once it was: what an acknowledgment (acks=all,
    /// a marker, a DeleteRecords answer) waits for. Concurrent callers share one
    /// fsync and one check: whoever gets the lock syncs up to the current log end,
    /// and the others find their offset already covered (group commit).
    ///
    /// The check reads `owner.json` through a fresh open after the fsync. A broker
    /// taking the partition over writes its leadership there before it reads the log
    /// (`cluster::ownership::open_partition`), so either the take-over came first —
    /// this check sees it, nothing is acknowledged, and the partition is given up
    /// here ([`DurableError::Deposed`]) — or it comes after the check, and the new
    /// leader's recovery reads the fsynced write. No clock and no lock is trusted for
    /// this: a broker frozen with its clock (a paused VM) finds out here.
    pub async fn wait_durable(self: &Arc<Self>, offset: i64) -> Result<(), DurableError> {
        if self.durable.load(Ordering::Acquire) >= offset {
            return Ok(());
        }
        let _turn = self.flush_lock.lock().await;
        if self.durable.load(Ordering::Acquire) >= offset {
            return Ok(());
        }
        if self.failed.load(Ordering::Acquire) {
            return Err(DurableError::Failed);
        }
        let (file, end, point) = {
            let state = self.state();
            let (file, end) = state.log.sync_handle().map_err(std::io::Error::other)?;
            (file, end, state.log.sync_point())
        };
        let started = std::time::Instant::now();
        let this = Arc::clone(self);
        let synced = tokio::task::spawn_blocking(move || {
            let synced = file.sync(false);
            if let Err(e) = synced {
                // Handled here, where the fsync ran, and not by the waiter: its request
                // may have timed out and dropped the wait meanwhile, and the partition
                // must be failed all the same (kaas-server/tests/log_fsync_abandoned.rs).
                this.fail_after_sync(&file, &e);
                return Err(e);
            }
            Ok(PartitionOwner::read(&this.owner_path))
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r);
        let owner = match synced {
            Ok(owner) => owner,
            Err(e) => return Err(DurableError::Sync(e)),
        };
        crate::metrics::metrics()
            .log_fsync
            .observe(started.elapsed().as_secs_f64());
        // The file reached the disk up to `point` — unless the log failed meanwhile (an
        // append or a roll, under the partition lock while this fsync ran): its cut
        // back reads `synced` under this mutex after marking the log failed, so either
        // it finds `point` and keeps what this fsync covers, or this finds the log
        // failed and acknowledges nothing it may have cut.
        {
            let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
            if self.failed.load(Ordering::Acquire) {
                return Err(DurableError::Failed);
            }
            *synced = point;
        }
        self.confirm_leadership(owner)?;
        self.durable.fetch_max(end, Ordering::AcqRel);
        Ok(())
    }

    /// After a failed fsync or write of the log (the partition already marked failed
    /// here; blocking file work, off the async workers): cuts off what no fsync here
    /// made durable, so that the partition's reopen from its files does not find
    /// records that may be readable yet gone from the disk
    /// (tests/integration/test_disk_faults.py, the segment fsync test).
    ///
    /// Only while `owner.json`, read under `owner.gate`, names this leadership
    /// ([`Self::while_led`]): a leader deposed or released meanwhile never cuts a file
    /// its successor reads or appends to. `synced` is held through the cut, so an
    /// fsync that succeeds meanwhile acknowledges nothing past it (see
    /// [`Self::wait_durable`]). A cut not made is logged: the reopen then reads
    /// whatever is there, as before.
    pub(crate) fn cut_back_to_durable(&self, log: &mut PartitionLog) {
        let synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        let point = *synced;
        match self.while_led(|| log.cut_back_to_durable(point)) {
            Ok(Ok(true)) => {
                warn!(topic = %self.topic, partition = self.index, segment = point.0, bytes = point.1, "the log was cut back to its last good fsync")
            }
            Ok(Ok(false)) => {
                debug!(topic = %self.topic, partition = self.index, "nothing past the log's last good fsync to cut back")
            }
            Ok(Err(e)) => {
                crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Log, &e);
                error!(topic = %self.topic, partition = self.index, error = %e, "cannot cut the log back to its last good fsync; its reopen may find records the disk lost")
            }
            Err(e) => {
                warn!(topic = %self.topic, partition = self.index, error = %e, "the log is not cut back: this broker may no longer lead the partition, and its successor's files are not touched")
            }
        }
        drop(synced);
    }

    /// After a failed fsync of the log (blocking: where the fsync ran). The kernel may
    /// have dropped the dirty pages (or, on NFS, left a hole) while this process still
    /// believes the records are there: an idempotent retry would be answered as a
    /// duplicate and the next fsync would succeed over the gap. So the partition is
    /// failed here: it takes no more writes, is cut back to what an fsync made durable,
    /// and the volume sync opens it again from its files (recovery re-validates the
    /// log, cuts what is not whole, rebuilds the producer state), at a new leader epoch.
    fn fail_after_sync(&self, file: &kaas_core::log::LogFile, e: &std::io::Error) {
        self.mark_failed();
        forget_cached_pages(file);
        crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Log, e);
        error!(topic = %self.topic, partition = self.index, leader_epoch = self.leader_epoch, error = %e, "fsync of the partition log failed; the partition is failed here and will be opened again from its files");
        self.cut_back_to_durable(&mut self.state().log);
    }

    /// After a write or a roll of the log that failed (blocking; the partition lock
    /// held, `log` its log), counted: one that failed with an I/O error leaves what the
    /// log holds on disk perhaps not what this process believes (see
    /// [`Self::mark_failed`]), so the partition is failed here and cut back, to be
    /// opened again from its files. A full volume is not that: a write refused for
    /// space is cut off again by the segment, and nothing else changed (the partition
    /// keeps serving reads and takes writes once space returns).
    pub(crate) fn write_failed(&self, log: &mut PartitionLog, e: &AppendError) {
        let out_of_space = matches!(e, AppendError::Log(l) if l.is_out_of_space());
        let io = matches!(e, AppendError::Log(LogError::Segment(_) | LogError::Volume(_)));
        crate::metrics::metrics().volume_write_failed(crate::metrics::VolumeFile::Log, e);
        if !out_of_space && io {
            error!(topic = %self.topic, partition = self.index, error = %e, "writing the partition log failed; the partition is failed here and will be opened again from its files");
            self.mark_failed();
            crate::blocking::off_worker(|| self.cut_back_to_durable(log));
        }
    }

    /// Marks the log failed (an fsync or a roll of it failed elsewhere): see `failed`.
    pub(crate) fn mark_failed(&self) {
        self.failed.store(true, Ordering::Release);
        self.retired.store(true, Ordering::Release);
    }

    /// Confirms through the volume, now, that this broker still leads the partition:
    /// for an answer that follows no append of its own (a marker found already
    /// written, a DeleteRecords), which `wait_durable`'s group commit may not check.
    pub async fn confirm_led(&self) -> Result<(), DurableError> {
        let path = self.owner_path.clone();
        let owner = tokio::task::spawn_blocking(move || PartitionOwner::read(&path))
            .await
            .map_err(std::io::Error::other)?;
        self.confirm_leadership(owner)
    }

    /// Whether `owner` (this partition's `owner.json`, just read) still names this
    /// leadership: this broker at this leader epoch, released or not (a release by
    /// this leadership came after its last fsync). When it names another, the
    /// partition was taken over: it is retired here, writing nothing (its files are
    /// the new leader's now), and the volume sync stops serving it.
    pub(crate) fn confirm_leadership(&self, owner: Result<PartitionOwner, VolumeError>) -> Result<(), DurableError> {
        match owner {
            Ok(o)
                if o.broker == self.broker_id
                    && o.leader_epoch == self.leader_epoch
                    && o.topic_id.is_none_or(|id| id == self.topic_id) =>
            {
                Ok(())
            }
            Err(e) if !e.is_not_found() => Err(DurableError::Unconfirmed(e)),
            found => {
                self.retired.store(true, Ordering::Release);
                let now = match found {
                    Ok(o) => format!("broker {} at leader epoch {}", o.broker, o.leader_epoch),
                    Err(_) => "no broker (it is gone)".to_string(),
                };
                warn!(topic = %self.topic, partition = self.index, leader_epoch = self.leader_epoch, now = %now, "the partition was taken over while this broker led it (it was paused or cut off); it writes and acknowledges nothing more");
                Err(DurableError::Deposed {
                    partition: format!("{}-{}", self.topic, self.index),
                    leader_epoch: self.leader_epoch,
                    now,
                })
            }
        }
    }

    /// Runs `change` (blocking file work: off the async workers) only while this
    /// broker leads the partition, by `owner.json` read under the partition's
    /// `owner.gate` ([`PartitionOwner::with_gate`]): for a change that creates, removes
    /// or rewrites files a successor reads (a roll, an ABORT marker's `.txnindex`
    /// entry, a producer-state snapshot, retention, DeleteRecords, a cleaner's swap).
    /// A deposed leader is retired as by [`Self::confirm_led`]; a busy gate (the
    /// partition is changing hands) is [`DurableError::Unconfirmed`].
    pub(crate) fn while_led<T>(&self, change: impl FnOnce() -> T) -> Result<T, DurableError> {
        let dir = self.owner_path.parent().unwrap_or(std::path::Path::new("."));
        match PartitionOwner::with_gate(dir, |owner| self.confirm_leadership(owner).map(|()| change())) {
            Ok(Some(done)) => done,
            Ok(None) => Err(DurableError::Unconfirmed(VolumeError::Invalid {
                path: dir.join("owner.gate"),
                detail: "held by another process for over 200 ms (the partition is changing hands); nothing changed"
                    .into(),
            })),
            Err(e) => Err(DurableError::Unconfirmed(e)),
        }
    }

    /// Re-reads `owner.json` (the volume sync, for each partition led here, when this
    /// broker's deposed notice changed or at the backstop): a leader that was frozen,
    /// or cut off, while another broker took the partition over learns it here even
    /// when no write asks. Ok(false): it was
    /// taken over (and is now retired).
    pub(crate) fn still_led_here(&self) -> Result<bool, VolumeError> {
        match self.confirm_leadership(PartitionOwner::read(&self.owner_path)) {
            Ok(()) => Ok(true),
            Err(DurableError::Unconfirmed(e)) => Err(e),
            Err(_) => Ok(false),
        }
    }

    /// The offset below which every record is durable and was confirmed led here
    /// ([`Partition::wait_durable`]): reads are capped there, so no client ever reads
    /// a record a take-over or a crash can still remove (Kafka's high watermark, with
    /// the fsync and the check in place of replication).
    pub fn confirmed_end(&self) -> i64 {
        self.durable.load(Ordering::Acquire)
    }

    /// The high watermark and the last stable offset as readers are given them
    /// (Fetch, ListOffsets, the partition gauges): the log end and the stable point of
    /// its transactions, each capped at [`Self::confirmed_end`].
    pub fn read_bounds(&self, state: &PartitionState) -> (i64, i64) {
        let high_watermark = state.log.log_end_offset().min(self.confirmed_end());
        (high_watermark, state.last_stable_offset().min(high_watermark))
    }

    /// Makes the log end durable and confirmed for readers waiting past
    /// [`Partition::confirmed_end`] (data appended with acks=0/1 is otherwise only
    /// flushed every `--flush-interval-ms`): one background flush at a time, sharing
    /// its fsync with acknowledgments (group commit); `done` is called once it
    /// succeeded, so waiting readers look again. A failure is logged and wakes nobody
    /// (waiting readers answer at their deadline, with what is confirmed); the next
    /// reader asks again.
    pub fn flush_for_readers(self: &Arc<Self>, done: impl FnOnce() + Send + 'static) {
        if self.flush_for_readers.swap(true, Ordering::AcqRel) {
            return;
        }
        let partition = self.clone();
        tokio::spawn(async move {
            let end = partition.state().log.log_end_offset();
            let flushed = partition.wait_durable(end).await;
            partition.flush_for_readers.store(false, Ordering::Release);
            match flushed {
                Ok(()) => done(),
                Err(e) => {
                    warn!(topic = %partition.topic, partition = partition.index, error = %e, "flush for readers failed; reads stay capped at the confirmed end")
                }
            }
        });
    }

    /// The log end offset: past the last record appended here (durable or not).
    pub fn log_end_offset(&self) -> i64 {
        self.state().log.log_end_offset()
    }
}

impl Partition {
    /// A partition opened here: its recovered state, with `owner.lock` held (see
    /// `cluster::ownership`). Everything up to the recovered log end is on disk.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn opened(
        topic: &str,
        topic_id: Uuid,
        index: i32,
        leader_epoch: i32,
        broker_id: i32,
        owner_path: std::path::PathBuf,
        state: PartitionState,
        owner_lock: std::fs::File,
    ) -> Partition {
        let end = state.log.log_end_offset();
        let synced = state.log.sync_point();
        Partition {
            topic: topic.to_string(),
            topic_id,
            index,
            leader_epoch,
            broker_id,
            owner_path,
            state: Mutex::new(state),
            durable: AtomicI64::new(end),
            synced: Mutex::new(synced),
            flush_lock: tokio::sync::Mutex::new(()),
            flush_for_readers: AtomicBool::new(false),
            cleaning: AtomicBool::new(false),
            reader_changes: std::sync::atomic::AtomicU64::new(0),
            failed: Arc::new(AtomicBool::new(false)),
            retired: AtomicBool::new(false),
            taken_from: None,
            _owner_lock: owner_lock,
        }
    }
}

pub struct Topic {
    pub meta: TopicMeta,
    pub log_config: LogConfig,
    /// One entry per partition; an Err is a partition whose log could not be opened
    /// (it is reported, never served empty).
    pub partitions: Vec<Result<Arc<Partition>, Offline>>,
}

impl Topic {
    pub fn partition(&self, index: i32) -> Option<&Result<Arc<Partition>, Offline>> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }
}

/// After a failed fsync the kernel keeps the pages it could not write in its cache,
/// marked clean (ext4, xfs): a reader would find records the disk does not hold. They
/// are dropped, so the reopen's recovery reads what the disk holds. Best effort: a
/// failure is logged (the reopen then trusts the cache, as before).
fn forget_cached_pages(file: &kaas_core::log::LogFile) {
    if let Err(e) = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed) {
        warn!(error = %e, "cannot drop the cached pages of a log whose fsync failed");
    }
}

/// Why an acknowledgment's wait for durability failed.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    #[error("fsync: {0}")]
    Sync(#[from] std::io::Error),
    /// `owner.json` names another leadership: the partition was taken over while
    /// this broker led it. Nothing more is acknowledged here; clients are sent to the
    /// new leader.
    #[error("partition {partition} was taken over while this broker led it at leader epoch {leader_epoch}: owner.json now names {now}")]
    Deposed {
        partition: String,
        leader_epoch: i32,
        now: String,
    },
    /// An fsync of this log failed before: the partition is being opened again from
    /// its files.
    #[error("an fsync of this partition's log failed; it is being opened again from its files")]
    Failed,
    /// `owner.json` could not be read after the fsync: the write may be durable, but
    /// whether this broker still led the partition is unknown, so it is not acknowledged.
    #[error("cannot confirm this broker still leads the partition: {0}")]
    Unconfirmed(VolumeError),
}

impl DurableError {
    /// The error code for the request that waited.
    pub fn code(&self) -> i16 {
        match self {
            DurableError::Deposed { .. } => ResponseError::NotLeaderOrFollower.code(),
            DurableError::Sync(_) | DurableError::Failed | DurableError::Unconfirmed(_) => {
                ResponseError::KafkaStorageError.code()
            }
        }
    }
}

/// Why a partition is not served by this broker.
#[derive(Debug, Clone)]
pub struct Offline {
    pub reason: String,
    /// Another process holds the partition's `owner.lock`: it leads the partition
    /// (clients get NOT_LEADER_OR_FOLLOWER and are pointed at it). Otherwise the
    /// partition is broken here (KAFKA_STORAGE_ERROR until repaired).
    pub elsewhere: bool,
}

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl Offline {
    pub(crate) fn broken(reason: impl ToString) -> Offline {
        Offline {
            reason: reason.to_string(),
            elsewhere: false,
        }
    }
    /// The error code for a request that needs this partition's leader.
    pub fn code(&self) -> i16 {
        if self.elsewhere {
            ResponseError::NotLeaderOrFollower.code()
        } else {
            ResponseError::KafkaStorageError.code()
        }
    }
}

/// A topic file that could not be read: the topic is refused, not recreated.
#[derive(Debug, Clone)]
pub struct BrokenTopic {
    pub error: String,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) topics: BTreeMap<String, Arc<Topic>>,
    pub(crate) by_id: HashMap<Uuid, String>,
    pub(crate) broken: BTreeMap<String, BrokenTopic>,
}

#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("topic {0} already exists")]
    AlreadyExists(String),
    #[error("invalid topic name {0:?}: 1-249 characters of [A-Za-z0-9._-], not . or ..")]
    InvalidName(String),
    #[error("number of partitions must be 1 to {max}, got {0}", max = kaas_core::layout::MAX_PARTITIONS_PER_TOPIC)]
    InvalidPartitions(i32),
    #[error("{0}")]
    PartitionLimit(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("topic {0} is unreadable on the volume: {1}")]
    Broken(String, String),
    #[error("unknown topic {0}")]
    Unknown(String),
    #[error("unknown topic id {0}")]
    UnknownId(Uuid),
    #[error("topic {0} does not exist, and the client may not create it")]
    CreateDenied(String),
    /// The topic file changed through another broker since this one last synced
    /// (partitions added there): nothing done; the client retries once this broker
    /// has synced (NOT_CONTROLLER, which Java's admin client retries).
    #[error("topic {0} changed through another broker; retry")]
    ChangedElsewhere(String),
    #[error(transparent)]
    Volume(#[from] VolumeError),
    #[error(transparent)]
    Log(#[from] LogError),
}

impl TopicError {
    pub fn code(&self) -> i16 {
        match self {
            TopicError::AlreadyExists(_) => ResponseError::TopicAlreadyExists.code(),
            TopicError::InvalidName(_) => ResponseError::InvalidTopicException.code(),
            TopicError::InvalidPartitions(_) => ResponseError::InvalidPartitions.code(),
            TopicError::InvalidConfig(_) => ResponseError::InvalidConfig.code(),
            TopicError::PartitionLimit(_) => ResponseError::PolicyViolation.code(),
            TopicError::Unknown(_) => ResponseError::UnknownTopicOrPartition.code(),
            TopicError::UnknownId(_) => ResponseError::UnknownTopicId.code(),
            TopicError::CreateDenied(_) => ResponseError::TopicAuthorizationFailed.code(),
            TopicError::ChangedElsewhere(_) => ResponseError::NotController.code(),
            // A lock held elsewhere for the whole wait, nothing done: NOT_CONTROLLER,
            // which Java's admin client retries; REQUEST_TIMED_OUT means "accepted,
            // still in progress" to librdkafka (reported done with operation_timeout 0).
            TopicError::Volume(e) if e.is_busy() => ResponseError::NotController.code(),
            TopicError::Broken(..) | TopicError::Volume(_) | TopicError::Log(_) => {
                ResponseError::KafkaStorageError.code()
            }
        }
    }
}

#[cfg(test)]
mod tests;
