"""A broker paused while it holds a transaction slot lock (issue 25 item 8;
docs/transactions.md, "A paused lock holder"): three brokers on one volume under
transactional load, markers delivered through the queue; the broker found holding the
lock of a slot it does not coordinate — a leader writing the markers of one of the
slot's queue entries — is
stopped with SIGSTOP for 30 s. A bystander transaction of that slot, whose coordinator
and partitions are on the two other brokers, must keep committing: its gap is bounded
by the session timeout (the paused holder's lease is confirmed dead, then its lock is
taken over), not by the pause. After SIGCONT every check of the run holds: each
committed record read once with read_committed, no aborted or half transaction
visible, every partition's transactions closed by exactly one marker, every marker
queue drained."""
import os
import signal
import threading
import time

from confluent_kafka import KafkaException, Producer

from conftest import wait_for
from test_cluster import _txn_slot, placement, rendezvous
from test_cluster_markers import FAST_POLL, PARTITIONS, drained, markers_exactly_once, spread_topic, three_brokers
from txn_helpers import read_all

SESSION_S = 4
PAUSE_S = 30
# A bystander may wait for the holder's lease to be confirmed dead (the session
# timeout, seen by the coordinator's own lease watch), the take-over, and the
# client's retry backoff.
GAP_BOUND_S = SESSION_S + 8
TOPIC = "ps"


def slot_lock_holders(data, slot, name="lock"):
    """The pids holding a flock on slot `slot`'s lock file (or its `gate`) now
    (/proc/locks)."""
    try:
        ino = os.stat(data / "__cluster" / "txn_state" / f"slot-{slot}.{name}").st_ino
    except FileNotFoundError:
        return set()
    pids = set()
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a "->" marks waiters)
            if "->" in fields or "FLOCK" not in fields:
                continue
            at = fields.index("FLOCK")
            pid, dev_ino = fields[at + 3], fields[at + 4]
            if int(dev_ino.rsplit(":", 1)[1]) == ino:
                pids.add(int(pid))
    return pids


def stopped_within(pid, timeout=1.0):
    """Whether every thread of `pid` is stopped within `timeout`: kill(SIGSTOP) returns
    once the signal is queued, and a thread running meanwhile goes on for a moment (it
    may take the slot's gate in that moment); one in an uninterruptible system call
    (an fsync under load) stops only when the call returns."""
    def stopped():
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:  # a thread that ended
                continue
            if state not in ("T", "t"):
                return False
        return True
    try:
        wait_for(stopped, timeout=timeout, interval=0.001, what=f"every thread of {pid} stopped")
    except AssertionError:
        return False
    return True


class TxnLoop:
    """One transactional producer committing one record per partition of `partitions`
    in a loop; records each transaction's outcome (committed, aborted, or unknown:
    all or nothing) and when each commit returned."""

    def __init__(self, bootstrap, tid, partitions):
        self.bootstrap, self.tid, self.partitions = bootstrap, tid, partitions
        self.outcomes = []
        self.commits = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.p = None

    def new_producer(self):
        self.p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid,
                           "transaction.timeout.ms": 60000, "message.timeout.ms": 60000, "linger.ms": 0})
        deadline = time.time() + 120
        while True:
            try:
                self.p.init_transactions(5)
                return
            except KafkaException as e:
                if e.args[0].fatal() or time.time() > deadline:
                    raise
                time.sleep(0.1)

    def retry(self, fn):
        deadline = time.time() + 90
        while True:
            try:
                return fn()
            except KafkaException as e:
                err = e.args[0]
                if err.fatal() or err.txn_requires_abort() or not err.retriable() or time.time() > deadline:
                    raise
                time.sleep(0.05)

    def run(self):
        self.new_producer()
        n = 0
        while not self.stop.is_set():
            values = [f"{self.tid}-{n}-{part}" for part in self.partitions]
            n += 1
            try:
                self.p.begin_transaction()
                for v, part in zip(values, self.partitions):
                    self.p.produce(TOPIC, value=v.encode(), partition=part)
                self.retry(lambda: self.p.commit_transaction(5))
                self.outcomes.append((values, "committed"))
                self.commits.append(time.time())
            except KafkaException as e:
                if e.args[0].txn_requires_abort():
                    try:
                        self.retry(lambda: self.p.abort_transaction(5))
                        self.outcomes.append((values, "aborted"))
                        continue
                    except KafkaException:
                        pass
                self.outcomes.append((values, "unknown"))
                self.new_producer()


def test_a_broker_paused_holding_a_slot_lock_stalls_its_slot_only_until_its_lease_is_confirmed_dead(
        kaas_factory, tmp_path):
    # Markers through the queue and the polls: a leader applying a queue entry holds the
    # coordinator's slot lock (one notified writes its markers without it, docs/cluster.md
    # "Markers from a notice", so it would never be caught holding one).
    data, brokers = three_brokers(kaas_factory, tmp_path, *FAST_POLL, "--inter-broker-notifications", "false")
    led_by = spread_topic(brokers, TOPIC)
    assert led_by == placement(TOPIC, PARTITIONS, [0, 1, 2])
    everyone = ",".join(b.bootstrap for b in brokers)
    # One slot for everything: its coordinator, and ids that hash to it.
    slot = _txn_slot("ps-0")
    same_slot = [t for t in (f"ps-{i}" for i in range(5000)) if _txn_slot(t) == slot]
    coordinator = rendezvous(f"txn-slot-{slot}", [0, 1, 2])
    # Busy transactions over every partition, so every leader writes markers of the
    # slot (under its lock); and for each possible victim (not the coordinator), a
    # bystander over the partitions the two other brokers lead.
    busy = [TxnLoop(everyone, t, list(range(PARTITIONS))) for t in same_slot[:4]]
    bystanders = {}
    for victim, tid in zip([b for b in (0, 1, 2) if b != coordinator], same_slot[4:6]):
        parts = [p for p, leader in led_by.items() if leader != victim]
        bystanders[victim] = TxnLoop(everyone, tid, parts)
    loops = busy + list(bystanders.values())
    for loop in loops:
        loop.thread.start()
    paused = None
    try:
        wait_for(lambda: all(len(loop.commits) >= 3 for loop in loops), timeout=90,
                 what="every producer committing")
        pid_of = {b.proc.pid: i for i, b in enumerate(brokers)}
        # Catch a non-coordinator holding the slot's lock: stop it, and keep it
        # stopped only if it still holds the lock (a stopped process cannot let go)
        # and not the slot's gate (held for the few ms of a fold's renames: a holder
        # stopped there stalls its slot for its pause, a gap transactions.md argues).
        deadline = time.time() + 90
        while paused is None:
            assert time.time() < deadline, "no leader was caught holding the slot lock"
            holders = [pid_of[p] for p in slot_lock_holders(data, slot) if pid_of.get(p) in bystanders]
            if not holders:
                time.sleep(0.0005)
                continue
            victim = holders[0]
            os.kill(brokers[victim].proc.pid, signal.SIGSTOP)
            pid = brokers[victim].proc.pid
            # Judged only once stopped: kill returns when the signal is queued, and a
            # thread still running may take the gate in that moment. (Judged at once,
            # CI and a local run each caught a victim that held the gate through the
            # pause: its slot stalled, the others logging "slot lock held, and its gate
            # too", the gap transactions.md leaves open.) Not stopped within 1 s (well
            # inside the session timeout, so nothing is taken over meanwhile): let go
            # and catch another.
            if stopped_within(pid) and pid in slot_lock_holders(data, slot) \
                    and pid not in slot_lock_holders(data, slot, "gate"):
                paused = victim
            else:
                os.kill(brokers[victim].proc.pid, signal.SIGCONT)
        stopped = time.time()
        try:
            time.sleep(PAUSE_S)
            # The premise, checked again at the end: stopped all along, the victim
            # never took the gate.
            gate_at_end = slot_lock_holders(data, slot, "gate")
        finally:
            os.kill(brokers[paused].proc.pid, signal.SIGCONT)
        assert brokers[paused].proc.pid not in gate_at_end, "the paused broker holds the slot's gate"
        thawed = time.time()
        time.sleep(SESSION_S + 6)
        committed_after = {victim: len(loop.commits) for victim, loop in bystanders.items()}
        time.sleep(3)
    finally:
        for loop in loops:
            loop.stop.set()
        for loop in loops:
            loop.thread.join(120)
    assert not any(loop.thread.is_alive() for loop in loops), "a producer hung"
    assert all(b.alive() for b in brokers), "every broker lives on"
    # Stopped while its line named it, the paused broker is judged by its lease;
    # stopped in the few calls around its line (CI caught it between marking its line
    # released and the unlock), the lock is taken over once it named nobody for a
    # session timeout.
    assert "took over a transaction slot lock" in \
        "".join(b.log_text() for i, b in enumerate(brokers) if i != paused)

    # The bystander of the paused broker's slot went on committing during the pause.
    by = bystanders[paused]
    times = [stopped] + [t for t in by.commits if stopped < t < thawed] + [thawed]
    gap = max(b - a for a, b in zip(times, times[1:]))
    print(f"\nbystander {by.tid} (coordinator {coordinator}, partitions {by.partitions}, broker {paused} "
          f"paused {PAUSE_S} s holding slot {slot}'s lock): {len(times) - 2} commits during the pause, "
          f"longest gap {gap:.1f} s")
    assert gap <= GAP_BOUND_S, f"the bystander committed nothing for {gap:.1f} s while broker {paused} was paused"
    assert all(len(loop.commits) > committed_after[v] for v, loop in bystanders.items()), \
        "every bystander commits after the pause"

    # Every check holds afterwards.
    outcomes = [o for loop in loops for o in loop.outcomes]
    committed = [v for vals, o in outcomes if o == "committed" for v in vals]
    got = read_all(everyone, TOPIC, PARTITIONS, "read_committed", expect=len(committed), timeout=90)
    seen = set(got)
    assert len(got) == len(seen), "no record twice"
    assert seen >= set(committed), f"lost committed records: {sorted(set(committed) - seen)[:5]}"
    for vals, o in outcomes:
        hit = seen & set(vals)
        if o == "aborted":
            assert not hit, f"aborted records visible: {sorted(hit)}"
        elif o == "unknown":
            assert not hit or hit == set(vals), f"a transaction partly visible: {sorted(hit)}"
    wait_for(lambda: drained(data), timeout=30, what="every marker queue drained")
    markers_exactly_once(data, TOPIC)
