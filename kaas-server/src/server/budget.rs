//! `queued.max.request.bytes`: the memory request frames may take, all connections
//! together, charged as the bytes arrive (issue 27).
//!
//! A frame is charged only for room it is about to fill with bytes that have arrived
//! (`read_frame`), and a non-Produce request's decode allowance only once its frame is
//! whole, so a sender that announces a large frame and stalls, or trickles it, holds
//! (almost) nothing. A charge that does not fit waits, but only for its own room: a
//! release wakes, share by share from a rotating start, the waiters whose need fits
//! what is free now, the smallest first (no queue: a waiting large frame never holds
//! up a small one that fits; and a release does not wake thousands of waiters to find
//! that none fits). One frame — one connection's share, as a connection reads and
//! answers one request at a time — is charged at most [`CONNECTION_SHARE`] of the
//! budget, and one principal's frames together at most [`PRINCIPAL_SHARE`];
//! anonymous clients share the anonymous principal's, each address (an IPv6 /64) at
//! most half of it ([`Payer`]). A frame past those is charged up to them (its
//! remaining bytes ride uncharged, as a frame larger than the whole budget always did).
//! Every wait has the frame's deadline ([`frame_deadline`]), after which the
//! connection is closed and its charge given back: charges held while waiting for
//! more can then never wedge the budget for good.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The part of the budget one frame (one connection) may be charged: a quarter.
pub const CONNECTION_SHARE: u64 = 4;
/// The part of the budget one principal's frames together may be charged: a half.
pub const PRINCIPAL_SHARE: u64 = 2;

/// How long a frame has to arrive whole (and to be charged), from its length prefix:
/// 5 s, plus 2 s per MiB. A client on a slow link sending the largest Produce
/// (100 MiB) has 205 s; a sender trickling a byte at a time is cut off there instead
/// of at `connections.max.idle.ms`.
pub fn frame_deadline(size: usize) -> Duration {
    Duration::from_secs(5) + Duration::from_millis((size as u64).div_ceil(1 << 20) * 2_000)
}

#[derive(Debug)]
pub struct RequestBudget {
    total: u64,
    state: Mutex<Usage>,
}

/// Who a frame is charged to: its principal, and for an anonymous client also its
/// address (an IPv6 /64), whose share is a part of the anonymous principal's.
#[derive(Debug, Clone)]
pub struct Payer {
    principal: Arc<str>,
    address: Option<Arc<str>>,
}

impl Payer {
    pub fn principal(principal: &Arc<str>) -> Payer {
        Payer {
            principal: principal.clone(),
            address: None,
        }
    }

    /// An anonymous client at `address` (a key no principal can be: principals are
    /// `User:...`).
    pub fn anonymous_at(principal: &Arc<str>, address: &Arc<str>) -> Payer {
        Payer {
            principal: principal.clone(),
            address: Some(address.clone()),
        }
    }

    /// The share its waiters wait under: the narrowest.
    fn key(&self) -> &Arc<str> {
        self.address.as_ref().unwrap_or(&self.principal)
    }
}

/// The waiting charges of one share, by (what they need, arrival), with their wake-up.
#[derive(Debug)]
struct Waiters {
    payer: Payer,
    by_need: BTreeMap<(u64, u64), oneshot::Sender<()>>,
}

#[derive(Debug, Default)]
struct Usage {
    used: u64,
    /// Per principal, and per anonymous address.
    by_share: HashMap<Arc<str>, u64>,
    /// Charges waiting for room, per share ([`Payer::key`]).
    waiting: BTreeMap<Arc<str>, Waiters>,
    /// Where the last release's wake-ups began: the next begins after it, so no
    /// share's waiters are always served last.
    cursor: Option<Arc<str>>,
    arrivals: u64,
}

impl Usage {
    fn held(&self, key: &Arc<str>) -> u64 {
        self.by_share.get(key).copied().unwrap_or(0)
    }

    fn add(&mut self, key: &Arc<str>, n: u64) {
        *self.by_share.entry(key.clone()).or_insert(0) += n;
    }

    fn sub(&mut self, key: &Arc<str>, n: u64) {
        if let Some(held) = self.by_share.get_mut(key) {
            *held -= n;
            if *held == 0 {
                self.by_share.remove(key);
            }
        }
    }
}

/// What one frame holds of the budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<RequestBudget>,
    payer: Payer,
    bytes: u64,
}

/// The frame's deadline passed while it waited for room.
#[derive(Debug)]
pub struct Expired;

impl RequestBudget {
    pub fn new(total: u64) -> Arc<Self> {
        Arc::new(RequestBudget {
            total: total.max(1),
            state: Mutex::new(Usage::default()),
        })
    }

    /// The most one frame of a connection is ever charged.
    pub fn frame_cap(&self) -> u64 {
        (self.total / CONNECTION_SHARE).max(1)
    }

    /// Bytes charged now (also the `kaas_request_budget_used_bytes` gauge).
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).used
    }

    /// A charge of nothing yet, for a frame of `payer`.
    pub fn charge(self: &Arc<Self>, payer: Payer) -> Charge {
        Charge {
            budget: self.clone(),
            payer,
            bytes: 0,
        }
    }

    fn principal_cap(&self) -> u64 {
        (self.total / PRINCIPAL_SHARE).max(1)
    }

    /// What `payer` may still be charged: the room left in the budget, in its
    /// principal's half, and in its address's quarter — less what a release has just
    /// promised to waiters it woke (`promised` in all, `promised_to` its principal).
    fn room(&self, usage: &Usage, payer: &Payer, promised: u64, promised_to: u64) -> u64 {
        let mut room = (self.total - usage.used).saturating_sub(promised).min(
            self.principal_cap()
                .saturating_sub(usage.held(&payer.principal))
                .saturating_sub(promised_to),
        );
        if let Some(address) = &payer.address {
            room = room.min((self.principal_cap() / 2).max(1).saturating_sub(usage.held(address)));
        }
        room
    }

    /// Adds `n` for `payer` if it fits; else registers a waiter and returns its
    /// wake-up and its key.
    fn try_add(&self, payer: &Payer, n: u64) -> Result<(), (oneshot::Receiver<()>, (u64, u64))> {
        let mut usage = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if n > self.room(&usage, payer, 0, 0) {
            let (tx, rx) = oneshot::channel();
            usage.arrivals += 1;
            let key = (n, usage.arrivals);
            usage
                .waiting
                .entry(payer.key().clone())
                .or_insert_with(|| Waiters {
                    payer: payer.clone(),
                    by_need: BTreeMap::new(),
                })
                .by_need
                .insert(key, tx);
            return Err((rx, key));
        }
        usage.used += n;
        usage.add(&payer.principal, n);
        if let Some(address) = &payer.address {
            usage.add(address, n);
        }
        crate::metrics::metrics().request_budget_used.set(usage.used as i64);
        Ok(())
    }

    /// Forgets a waiter that stopped waiting (its deadline, its connection gone).
    fn forget(&self, payer: &Payer, key: (u64, u64)) {
        let mut usage = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = usage.waiting.get_mut(payer.key()) {
            w.by_need.remove(&key);
            if w.by_need.is_empty() {
                usage.waiting.remove(payer.key());
            }
        }
    }

    fn release(&self, payer: &Payer, n: u64) {
        if n == 0 {
            return;
        }
        let mut usage = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let usage = &mut *usage;
        usage.used -= n;
        usage.sub(&payer.principal, n);
        if let Some(address) = &payer.address {
            usage.sub(address, n);
        }
        crate::metrics::metrics().request_budget_used.set(usage.used as i64);
        if usage.waiting.is_empty() {
            return;
        }
        // Wake, share by share from after the last release's first, the smallest
        // waiters that fit the room left (each then tries for itself: a wake is a
        // chance, not a grant). What is handed out is counted against the room of
        // the shares that follow.
        let keys: Vec<Arc<str>> = match &usage.cursor {
            Some(c) => {
                let after = usage
                    .waiting
                    .range::<Arc<str>, _>((std::ops::Bound::Excluded(c), std::ops::Bound::Unbounded));
                let upto = usage.waiting.range::<Arc<str>, _>(..=c);
                after.chain(upto).map(|(k, _)| k.clone()).collect()
            }
            None => usage.waiting.keys().cloned().collect(),
        };
        usage.cursor = keys.first().cloned();
        let mut promised = 0u64;
        let mut promised_to: HashMap<Arc<str>, u64> = HashMap::new();
        for key in keys {
            if promised >= self.total - usage.used {
                break;
            }
            let Some(w) = usage.waiting.get(&key) else { continue };
            let payer = w.payer.clone();
            let mut room = self.room(
                usage,
                &payer,
                promised,
                promised_to.get(&payer.principal).copied().unwrap_or(0),
            );
            let w = usage.waiting.get_mut(&key).expect("looked up above");
            while let Some(entry) = w.by_need.first_entry() {
                let need = entry.key().0;
                if need > room {
                    break;
                }
                if entry.remove().send(()).is_ok() {
                    room -= need;
                    promised += need;
                    *promised_to.entry(payer.principal.clone()).or_insert(0) += need;
                }
            }
            if w.by_need.is_empty() {
                usage.waiting.remove(&key);
            }
        }
    }
}

impl Charge {
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Raises the charge to `to` bytes (capped at [`RequestBudget::frame_cap`]),
    /// waiting for room until `deadline`.
    pub async fn raise_to(&mut self, to: u64, deadline: Instant) -> Result<(), Expired> {
        let to = to.min(self.budget.frame_cap());
        while self.bytes < to {
            let more = to - self.bytes;
            // The waiter is registered under the same lock as the failed try, so a
            // release after it finds it.
            let (woken, key) = match self.budget.try_add(&self.payer, more) {
                Ok(()) => {
                    self.bytes = to;
                    return Ok(());
                }
                Err(waiting) => waiting,
            };
            let guard = Waiting {
                budget: &self.budget,
                payer: &self.payer,
                key,
            };
            let woke = tokio::time::timeout_at(deadline, woken).await;
            drop(guard);
            if woke.is_err() {
                return Err(Expired);
            }
        }
        Ok(())
    }
}

/// A registered waiter, forgotten when it stops waiting, however (woken, expired, or
/// its future dropped with its connection).
struct Waiting<'a> {
    budget: &'a RequestBudget,
    payer: &'a Payer,
    key: (u64, u64),
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.budget.forget(self.payer, self.key);
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(&self.payer, self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn a_waiting_large_charge_never_holds_up_a_small_one_that_fits() {
        let budget = RequestBudget::new(1000);
        let mut held = Vec::new();
        for p in ["User:a", "User:b", "User:c", "User:d"] {
            let mut c = budget.charge(Payer::principal(&p.into()));
            c.raise_to(200, soon()).await.unwrap();
            held.push(c);
        }
        // 800 used: a frame wanting 250 waits; a small one that fits goes at once.
        let mut large = budget.charge(Payer::principal(&"User:e".into()));
        let waiting = tokio::spawn(async move {
            large.raise_to(250, soon()).await.unwrap();
            large
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        let mut small = budget.charge(Payer::principal(&"User:b".into()));
        tokio::time::timeout(Duration::from_millis(100), small.raise_to(10, soon()))
            .await
            .expect("not queued behind the large one")
            .unwrap();
        assert_eq!(budget.used(), 810);
        drop(small);
        held.pop();
        let large = waiting.await.unwrap();
        assert_eq!(large.bytes(), 250);
        assert_eq!(budget.used(), 850);
        drop((large, held));
        assert_eq!(budget.used(), 0, "every charge given back");
    }

    #[tokio::test]
    async fn one_principal_is_charged_at_most_half_and_one_frame_a_quarter() {
        let budget = RequestBudget::new(1000);
        let a: Arc<str> = "User:ANONYMOUS".into();
        let mut one = budget.charge(Payer::principal(&a));
        one.raise_to(10_000, soon()).await.unwrap();
        assert_eq!(one.bytes(), 250, "a frame is charged at most a quarter");
        let mut two = budget.charge(Payer::principal(&a));
        two.raise_to(250, soon()).await.unwrap();
        let mut three = budget.charge(Payer::principal(&a));
        let late = Instant::now() + Duration::from_millis(50);
        assert!(
            three.raise_to(1, late).await.is_err(),
            "the principal's half is used up"
        );
        let mut other = budget.charge(Payer::principal(&"User:b".into()));
        other.raise_to(250, soon()).await.unwrap();
        drop(one);
        three.raise_to(1, soon()).await.unwrap();
    }

    /// A release wakes only the waiters that fit what it freed, smallest first, and a
    /// waiter that gave up (its deadline) is forgotten.
    #[tokio::test]
    async fn a_release_wakes_only_the_waiters_that_fit() {
        let budget = RequestBudget::new(1000);
        let mut full = Vec::new();
        for p in ["User:a", "User:b", "User:c", "User:d"] {
            let mut c = budget.charge(Payer::principal(&p.into()));
            c.raise_to(250, soon()).await.unwrap();
            full.push(c);
        }
        let mut waiters = Vec::new();
        for (p, need) in [("User:e", 200u64), ("User:f", 30), ("User:g", 50)] {
            let budget = budget.clone();
            waiters.push(tokio::spawn(async move {
                let mut c = budget.charge(Payer::principal(&p.into()));
                c.raise_to(need, Instant::now() + Duration::from_millis(300))
                    .await
                    .map(|()| c)
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(budget.state.lock().unwrap().waiting.len(), 3);
        // 100 freed: the 30 and the 50 fit, the 200 does not.
        // (As if a frame of d gave back 100 of its 250.)
        let mut part = full.pop().unwrap();
        part.bytes -= 100;
        budget.release(&Payer::principal(&"User:d".into()), 100);
        let big = waiters.remove(0);
        let (f, g) = (waiters.remove(0).await.unwrap(), waiters.remove(0).await.unwrap());
        assert!(f.is_ok() && g.is_ok(), "the small ones got their room");
        assert!(big.await.unwrap().is_err(), "the large one's deadline passed");
        assert!(budget.state.lock().unwrap().waiting.is_empty(), "and it was forgotten");
        drop((part, f, g, full));
        assert_eq!(budget.used(), 0);
    }

    /// Anonymous clients share the anonymous principal's half, each address (a /64)
    /// at most half of that: two addresses cannot take the whole budget, and one
    /// cannot take the other anonymous clients' room.
    #[tokio::test]
    async fn anonymous_clients_share_a_half_and_each_address_a_quarter() {
        let budget = RequestBudget::new(1000);
        let anonymous: Arc<str> = "User:ANONYMOUS".into();
        let at = |a: &str| Payer::anonymous_at(&anonymous, &format!("address:{a}").into());
        let late = || Instant::now() + Duration::from_millis(50);
        let mut first = budget.charge(at("10.0.0.1"));
        first.raise_to(250, soon()).await.unwrap();
        let mut more = budget.charge(at("10.0.0.1"));
        assert!(more.raise_to(1, late()).await.is_err(), "one address: a quarter");
        let mut second = budget.charge(at("10.0.0.2"));
        second.raise_to(250, soon()).await.unwrap();
        let mut third = budget.charge(at("10.0.0.3"));
        assert!(third.raise_to(1, late()).await.is_err(), "anonymous together: a half");
        let mut user = budget.charge(Payer::principal(&"User:alice".into()));
        user.raise_to(250, soon()).await.unwrap();
        drop(first);
        third.raise_to(1, soon()).await.unwrap();
    }

    /// What one release promises the waiters it wakes is counted once against the
    /// room of the shares after them (it was counted twice for a principal's own:
    /// a waiter that fitted was left asleep).
    #[tokio::test]
    async fn a_release_wakes_every_waiter_its_room_fits() {
        let budget = RequestBudget::new(1000);
        let anonymous: Arc<str> = "User:ANONYMOUS".into();
        let at = |a: &str| Payer::anonymous_at(&anonymous, &format!("address:{a}").into());
        let mut held = Vec::new();
        for (payer, n) in [
            (at("a"), 100),
            (at("b"), 100),
            (Payer::principal(&"User:x".into()), 250),
            (Payer::principal(&"User:y".into()), 250),
            (Payer::principal(&"User:w".into()), 100),
        ] {
            let mut c = budget.charge(payer);
            c.raise_to(n, soon()).await.unwrap();
            held.push(c);
        }
        let mut z = budget.charge(Payer::principal(&"User:z".into()));
        z.raise_to(190, soon()).await.unwrap();
        // 990 used: c's 20 and d's 180 wait.
        let mut waiters = Vec::new();
        for (address, need) in [("c", 20u64), ("d", 180)] {
            let (budget, payer) = (budget.clone(), at(address));
            waiters.push(tokio::spawn(async move {
                let mut c = budget.charge(payer);
                c.raise_to(need, Instant::now() + Duration::from_millis(300))
                    .await
                    .map(|()| c)
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        // 190 freed, 200 in all: room for both (the anonymous half has 300 left).
        drop(z);
        // Each charge kept until both are in: a charge given back would wake the other.
        let mut charged = Vec::new();
        for w in waiters {
            charged.push(w.await.unwrap());
        }
        assert!(charged.iter().all(Result::is_ok), "both woken and charged: {charged:?}");
    }

    #[test]
    fn a_frame_has_five_seconds_and_two_more_per_mib() {
        assert_eq!(frame_deadline(100), Duration::from_secs(7));
        assert_eq!(frame_deadline(8 << 20), Duration::from_secs(21));
        assert_eq!(frame_deadline(100 << 20), Duration::from_secs(205));
    }
}
