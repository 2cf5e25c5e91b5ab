//! Membership: this broker's own lease (fresh or not, by its monotonic clock; how
//! often it stepped down) and the live brokers its lease task last read, from which
//! every broker computes the same owner of each transaction slot and group
//! (rendezvous hashing, `kaas_core::ownership`).

use super::*;
impl Cluster {
    /// Records a successful renewal of this broker's lease (the lease task).
    pub fn lease_renewed(&self) {
        self.renewed_at(std::time::Instant::now());
    }

    /// Records a renewal at `at` (tests use a past instant).
    pub fn renewed_at(&self, at: std::time::Instant) {
        *self.lease_renewed_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(at);
    }

    /// Records that this broker is stepping down (the lease task, before it lets its
    /// partitions go).
    pub fn stepping_down(&self) {
        self.stepdowns.fetch_add(1, Ordering::AcqRel);
    }

    /// How many times this broker stepped down so far; with
    /// [`Cluster::still_fresh_since`], a request tells whether the broker may have lost
    /// its partitions while it was being served.
    pub fn stepdown_count(&self) -> u64 {
        self.stepdowns.load(Ordering::Acquire)
    }

    /// Whether the lease is fresh now and this broker did not step down since it
    /// read `stepdowns`.
    pub fn still_fresh_since(&self, stepdowns: u64) -> bool {
        self.lease_fresh() && self.stepdowns.load(Ordering::Acquire) == stepdowns
    }

    /// Whether this broker may append: its own lease was renewed less than half the
    /// session timeout ago by its monotonic clock. Peers declare it dead after the
    /// whole timeout by theirs, so it stops writing well before anyone may take over.
    pub fn lease_fresh(&self) -> bool {
        let half = std::time::Duration::from_millis((self.config.broker_session_timeout_ms.max(0) / 2) as u64);
        self.lease_renewed_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none_or(|at| at.elapsed() < half)
    }

    /// Whether this broker coordinates transaction slot `slot` (rendezvous hashing
    /// over the live brokers).
    pub fn owns_txn_slot(&self, slot: u32) -> bool {
        self.owner_of(&kaas_core::ownership::txn_slot_key(slot)) == Some(self.config.broker_id)
    }

    /// Whether this broker coordinates consumer group `group`.
    pub fn owns_group(&self, group: &str) -> bool {
        self.owner_of(&kaas_core::ownership::group_key(group)) == Some(self.config.broker_id)
    }

    /// Why a request for group `group` is refused here: COORDINATOR_LOAD_IN_PROGRESS
    /// while this broker, just started beside others, waits to take the group
    /// (`coordinating`: its peers may still coordinate it) — clients retry that in
    /// place, as while Apache loads a group — else NOT_COORDINATOR.
    pub fn group_refusal(&self, group: &str) -> kafka_protocol::error::ResponseError {
        if self.takes_soon(&kaas_core::ownership::group_key(group)) {
            kafka_protocol::error::ResponseError::CoordinatorLoadInProgress
        } else {
            kafka_protocol::error::ResponseError::NotCoordinator
        }
    }

    /// Whether this broker will coordinate `key` once it coordinates at all: it
    /// waits for its peers to see it serve (`coordinating`), and `key` is its own
    /// over the live brokers with it.
    pub fn takes_soon(&self, key: &str) -> bool {
        if !self.loading_its_share() {
            return false;
        }
        let live: Vec<i32> = self.live_brokers().into_keys().collect();
        kaas_core::ownership::owner(key, &live) == Some(self.config.broker_id)
    }

    /// Whether this broker waits to take its share of groups and slots (it started
    /// beside others: `coordinating`): a listing of what it coordinates would leave
    /// its share out, so ListGroups and ListTransactions answer
    /// COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Apache does while it loads.
    pub fn loading_its_share(&self) -> bool {
        !self.coordinating.load(Ordering::Acquire) && self.lease_fresh()
    }

    /// The broker FindCoordinator names for `key`: [`Self::owner_of`], or this
    /// broker for a key it takes soon ([`Self::takes_soon`]), which it answers
    /// COORDINATOR_LOAD_IN_PROGRESS until then — not a peer that may already have
    /// let the key go to it (clients would go back and forth on NOT_COORDINATOR).
    pub fn routed_owner_of(&self, key: &str) -> Option<i32> {
        if self.takes_soon(key) {
            Some(self.config.broker_id)
        } else {
            self.owner_of(key)
        }
    }

    /// The live broker that owns an ownership key (rendezvous hashing): the coordinator
    /// of a group or transaction slot. This broker counts only while its lease is
    /// fresh — judged now, not only when the lease task last set the live set: a
    /// renewal hung on the volume (a hard NFS mount cut off) stops the task's ticks,
    /// and this broker would go on coordinating groups and slots its peers, seeing its
    /// lease expire, have taken over. (Partitions have their own checks through the
    /// volume, and their placement follows the live set as the lease task sets it.)
    pub fn owner_of(&self, key: &str) -> Option<i32> {
        let counts_itself = self.lease_fresh() && self.coordinating.load(Ordering::Acquire);
        let live: Vec<i32> = self
            .live_brokers()
            .into_keys()
            .filter(|b| counts_itself || *b != self.config.broker_id)
            .collect();
        kaas_core::ownership::owner(key, &live)
    }

    /// Live brokers and their advertised addresses by listener; this broker is in it while its
    /// lease is fresh.
    pub fn live_brokers(&self) -> BTreeMap<i32, Endpoints> {
        self.live_brokers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The brokers Metadata and DescribeCluster list: the live ones, and always this
    /// one, which is answering. A broker that stepped down (its lease stale) left
    /// itself out, and with no other broker live (one broker, or all of them stepping
    /// down through a volume stall) answered an empty list with every topic:
    /// librdkafka then forgot every broker it knew and bootstrapped again, failing the
    /// requests in flight. Its partitions still say LEADER_NOT_AVAILABLE (leaders are
    /// judged by [`Self::live_brokers`]).
    pub fn listed_brokers(&self) -> BTreeMap<i32, Endpoints> {
        let mut listed = self.live_brokers();
        listed
            .entry(self.config.broker_id)
            .or_insert_with(|| self.advertised.clone());
        listed
    }

    /// Starts or stops coordinating groups and transaction slots (see
    /// `coordinating`). A change moves groups and slots: the live generation goes up
    /// (as for a changed live set), so the groups' state is loaded again.
    pub fn set_coordinating(&self, on: bool) {
        let _live = self.live_brokers.write().unwrap_or_else(|p| p.into_inner());
        if self.coordinating.swap(on, Ordering::AcqRel) != on {
            self.live_generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Whether another broker is live here, serving or opening the volume: a broker
    /// that starts beside one waits for it to see it serve before it coordinates.
    pub fn has_live_peers(&self) -> bool {
        let me = self.config.broker_id;
        self.live_brokers().keys().any(|b| *b != me) || !self.opening_brokers().is_empty()
    }

    /// Peers alive but still opening the volume (see `opening_brokers`).
    pub fn opening_brokers(&self) -> Vec<i32> {
        self.opening_brokers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// [`Self::set_live_and_opening`] with no peer opening.
    pub fn set_live_brokers(&self, live: BTreeMap<i32, Endpoints>) -> bool {
        self.set_live_and_opening(live, Vec::new())
    }

    /// Replaces the live-broker list (from the lease files): the live peers that
    /// serve, and those still opening the volume, which are left out of the live set
    /// (routed nothing) and kept apart (their partitions are not taken from them).
    /// This broker is in the live set exactly while its own lease is fresh: one that
    /// stepped down owns nothing. Returns whether the set of live brokers changed
    /// (`Broker::set_live_brokers` then forgets the groups now coordinated elsewhere).
    pub fn set_live_and_opening(&self, mut live: BTreeMap<i32, Endpoints>, mut opening: Vec<i32>) -> bool {
        opening.retain(|id| *id != self.config.broker_id);
        for id in &opening {
            live.remove(id);
        }
        if self.lease_fresh() {
            live.insert(self.config.broker_id, self.advertised.clone());
        } else {
            live.remove(&self.config.broker_id);
        }
        let mut current = self.live_brokers.write().unwrap_or_else(|p| p.into_inner());
        let changed = current.keys().ne(live.keys());
        if changed {
            self.live_generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        *current = live;
        *self.opening_brokers.write().unwrap_or_else(|p| p.into_inner()) = opening;
        changed
    }
}
