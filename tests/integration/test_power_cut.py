"""Power cuts (issue 26): brokers on kaas-faultfs, which keeps every write that was not
fsync'd in memory and drops it when the power is cut. Each test cuts at many points,
at random moments and at the Nth fsync from a moment (`cut-at-fsync`), half of the
cuts keeping a random prefix of what was pending (a disk that wrote part of its queue);
then restarts the brokers on what survived and checks that nothing acknowledged was
lost, nothing appears twice or half, and `kaasctl doctor` finds the volume healthy.

KAAS_POWER_CUTS sets the number of cuts per test (default: a few, for CI; the long
run in docs/testing.md sets more), KAAS_POWER_CUT_SEED the seed. With
KAAS_POWER_CUT_EVERY_FSYNC=1 cut N falls at the Nth fsync from the start of its round,
for N = 1, 2, ... KAAS_POWER_CUTS: every fsync of a round's first stretch of work."""
import os
import random
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KaasBroker, run_kaasctl
from faultfs import FAULTFS, NO_REBOOTSTRAP, FaultFs, needs_fuse
from txn_helpers import read_all

pytestmark = needs_fuse

CUTS = int(os.environ.get("KAAS_POWER_CUTS", "6"))
SEED = int(os.environ.get("KAAS_POWER_CUT_SEED", str(int(time.time()))))
EVERY_FSYNC = os.environ.get("KAAS_POWER_CUT_EVERY_FSYNC") == "1"


SHORT = ["--broker-session-timeout-ms", "4000", "--volume-poll-interval-ms", "300"]


class Cluster:
    """`size` brokers on one kaas-faultfs volume (the whole volume server and every
    broker lose power together)."""

    def __init__(self, tmp_path, size):
        assert FAULTFS.exists(), f"{FAULTFS} is not built (cargo build --workspace)"
        self.fs = FaultFs(tmp_path / "fs")
        self.fs.mount()
        self.data = self.fs.mnt / "data"
        flags = SHORT if size > 1 else []
        self.brokers = [KaasBroker(self.data, tmp_path / f"broker{i}.log", ["--broker-id", str(i), *flags])
                        for i in range(size)]
        try:
            for b in self.brokers:
                b.start()
        except BaseException:
            self.close()
            raise
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)

    def create_topics(self, *names, partitions):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for f in admin.create_topics([NewTopic(n, partitions) for n in names]).values():
            f.result(timeout=30)

    def close(self):
        for b in self.brokers:
            b.kill9()
        self.fs.close()
        # After the last cut too (each cut checks the rounds before it).
        panicked = [i for i, b in enumerate(self.brokers) if "panicked" in b.log_text()]
        assert not panicked, f"brokers {panicked} panicked: {self.brokers[panicked[0]].log_text()[-3000:]}"


@pytest.fixture(params=[1, 3], ids=["one-broker", "three-brokers"])
def cluster(request, tmp_path):
    c = Cluster(tmp_path, request.param)
    try:
        yield c
    finally:
        c.close()


class Cutter:
    """Chooses where each cut falls and carries it out while the workload runs; says
    what it did, for the failure message."""

    def __init__(self, cluster, seed):
        self.fs = cluster.fs
        self.brokers = cluster.brokers
        self.rng = random.Random(seed)
        self.seed = seed
        self.done = []

    def round(self, work):
        """Runs `work()` again and again until this round's cut is over. The cut comes
        from a thread, at a random fsync from now or at a random moment, so it can fall
        while `work` waits on the cluster. An exception from `work` (the cluster went
        away under it) ends the round's work early; the cut still comes."""
        at_fsync = self.rng.randint(1, 60) if self.rng.random() < 0.5 else None
        if EVERY_FSYNC:
            at_fsync = len(self.done) + 1
        moment = self.rng.uniform(0.2, 2.0)
        keep = self.rng.randrange(1 << 32) if self.rng.random() < 0.5 else None
        if at_fsync:
            self.fs.command(f"cut-at-fsync {at_fsync}")
        over, stop = threading.Event(), threading.Event()
        failure = []

        def watch():
            try:
                started = time.time()
                while True:
                    if stop.is_set():
                        return  # the test failed: no cut behind its back
                    status = self.fs.status()
                    if status["frozen"] or (time.time() - started > (20 if at_fsync else moment)):
                        break
                    time.sleep(0.01)
                self.cut(dict(at_fsync=at_fsync, keep_seed=keep, frozen=status["frozen"], fsyncs=status["fsyncs"],
                              after_s=round(time.time() - started, 1),
                              pending_entries=status["pending_entry_changes"],
                              pending_files=status["files_with_pending_data"]), keep, stop)
            except BaseException as e:  # surfaced by the test's thread below
                failure.append(e)
            finally:
                over.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        error = None
        try:
            while not over.is_set():
                try:
                    work()
                except KafkaException as e:
                    error = e
                    over.wait(60)
        finally:
            stop.set()
            watcher.join(60)
        if failure:
            raise failure[0]
        return error

    def cut(self, what, keep, stop=None):
        """The power goes for the volume and every broker on it; then the volume
        comes back with what survived, and the brokers restart on it. The brokers
        die first: once the volume is unmounted its path is a bare directory, and a
        broker still running there would write to it (and acknowledge) what no
        volume keeps. Killed first, they leave nothing behind that the cut would not
        treat as a dead broker's unsynced writes. Once `stop` is set (the test failed
        and is closing the cluster), nothing is mounted or started again behind it.
        Every broker must have stayed up and never panicked since it started: a
        broker that died, or a task that panicked and was retried (a torn file read
        every period), would otherwise pass unseen, covered by the others or by the
        next restart."""
        if stop is None or not stop.is_set():
            for i, b in enumerate(self.brokers):
                assert b.proc is not None and b.proc.poll() is None, \
                    f"broker {i} died before cut {len(self.done) + 1} ({self}): {b.log_text()[-3000:]}"
                assert "panicked" not in b.log_text(), \
                    f"broker {i} panicked before cut {len(self.done) + 1} ({self}): {b.log_text()[-3000:]}"
        for b in self.brokers:
            b.kill9()
        self.fs.cut(keep)
        self.done.append(what)
        if stop is not None and stop.is_set():
            return
        self.fs.mount()
        for b in self.brokers:
            if stop is not None and stop.is_set():
                return
            b.start()

    def __str__(self):
        return f"seed {self.seed}, cuts: {self.done}"


def doctor_is_happy(data_dir):
    out = run_kaasctl(data_dir, "doctor")
    assert out.returncode == 0, f"kaasctl doctor after the cuts:\n{out.stdout}\n{out.stderr}"


def test_acknowledged_records_and_offset_commits_survive_power_cuts_and_the_idempotent_producer_goes_on(cluster):
    cluster.create_topics("pc", partitions=6)
    acked, failed = set(), []

    def delivered(err, msg):
        if err is None:
            acked.add(msg.value().decode())
        else:
            failed.append(str(err))

    # One producer and one consumer for the whole test: they live through every cut,
    # as applications on other machines would. The producer must neither fail nor
    # write anything twice; every offset commit the consumer saw succeed must stay.
    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 2, "message.timeout.ms": 180000, "reconnect.backoff.max.ms": 200, **NO_REBOOTSTRAP})
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **NO_REBOOTSTRAP})
    c.assign([TopicPartition("pc", i, OFFSET_BEGINNING) for i in range(6)])
    committed = {}
    cutter = Cutter(cluster, SEED)
    n = 0

    def work():
        nonlocal n
        for _ in range(20):
            p.produce("pc", value=f"v{n}", partition=n % 6, on_delivery=delivered)
            n += 1
        p.poll(0.01)
        if [m for m in c.consume(num_messages=200, timeout=0) if not m.error()]:
            for tp in c.commit(asynchronous=False):
                assert tp.error is None, tp
                committed[tp.partition] = tp.offset

    for _ in range(CUTS):
        cutter.round(work)
        kept = {tp.partition: tp.offset for tp in c.committed([TopicPartition("pc", i) for i in range(6)], timeout=60)}
        lost = {i: (kept.get(i), o) for i, o in committed.items() if kept.get(i, -1) < o}
        assert not lost, f"acknowledged offset commits lost (kept, acknowledged): {lost}; {cutter}"
    c.close()
    assert p.flush(120) == 0, f"records still unsent after the last restart; {cutter}"
    assert not failed, f"the idempotent producer failed: {failed[:5]}; {cutter}"

    values = read_all(cluster.bootstrap, "pc", 6, "read_uncommitted", expect=len(acked), settle=1.0, timeout=60)
    twice = [v for v, c in Counter(values).items() if c > 1]
    missing = acked - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}; {cutter}"
    assert not twice, f"{len(twice)} records twice, e.g. {twice[:5]}; {cutter}"
    assert len(acked) == n, f"every record sent was acknowledged in the end ({len(acked)} of {n}); {cutter}"
    doctor_is_happy(cluster.data)


class Pipeline:
    """A consume-transform-produce job, as Kafka Streams runs one: reads `in`
    read_committed, writes "o:<value>" to `out` in a transaction that also commits the
    input offsets; now and then a transaction of "a<k>" records it aborts. It keeps
    what each transaction was acknowledged as: committed, aborted, or unknown (an
    error on the way: the power went)."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.acked_offsets = {}  # input partition -> offset the last acknowledged commit left
        self.aborted = set()
        self.commits = 0
        self.unknown = 0
        self.p = self.c = None
        self.k = 0
        self.abandoned = []  # clients whose close did not return (see `stop`)
        self.hung = 0  # steps given up on (see `bounded_step`)

    def start(self):
        # connections.max.idle.ms: the workaround for librdkafka #5511
        # (docs/compatibility.md), whose symptom — send_offsets_to_transaction
        # waiting past its timeout — is the hang `bounded_step` guards against; the
        # guard stays, since the hang was never reproduced after a power cut.
        self.p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "pipeline",
                           "transaction.timeout.ms": 20000, "message.timeout.ms": 20000,
                           "reconnect.backoff.max.ms": 200, "connections.max.idle.ms": 5000,
                           **NO_REBOOTSTRAP})
        self.p.init_transactions(60)
        self.c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "pipeline", "enable.auto.commit": False,
                           "isolation.level": "read_committed", "auto.offset.reset": "earliest", **NO_REBOOTSTRAP})
        committed = self._committed()
        for tp in committed:
            assert tp.error is None, f"committed offsets unreadable: {tp}"
            if tp.offset >= 0:
                kept = tp.offset
            else:
                kept = 0
            assert kept >= self.acked_offsets.get(tp.partition, 0), \
                f"in-{tp.partition}: an acknowledged offset commit was lost ({kept} < {self.acked_offsets[tp.partition]})"
        self.c.assign([TopicPartition("in", tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                       for tp in committed])

    def _committed(self):
        """The group's committed offsets of `in`, asked again while the group's
        coordinator moves (three brokers starting together see each other a renewal
        apart, and one may answer NOT_COORDINATOR meanwhile, which librdkafka's
        `committed()` does not retry; an application asks again), for at most 60 s."""
        deadline = time.time() + 60
        while True:
            try:
                return self.c.committed([TopicPartition("in", i) for i in range(3)], timeout=30)
            except KafkaException as e:
                retriable = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                                 KafkaError.COORDINATOR_NOT_AVAILABLE)
                if not retriable or time.time() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self):
        """Drops both clients, waiting at most 10 s: an application would start new
        ones. Their close runs in a thread of its own, because librdkafka 2.16 can
        block in it for minutes after a power cut (once seen in CI: ten minutes
        between two rounds, the brokers idle and answering)."""
        p, c = self.p, self.c
        self.p = self.c = None

        def close():
            if p is not None:
                p.purge()
                p.flush(0)
            if c is not None:
                c.close()

        closing = threading.Thread(target=close, daemon=True)
        closing.start()
        closing.join(10)
        if closing.is_alive():
            self.abandoned.append((p, c))  # kept referenced: no destructor runs here

    def bounded_step(self, rng, seconds=90) -> bool:
        """`step` in a thread of its own, waited for at most `seconds`. librdkafka 2.16 can
        block in a transactional call long past its own timeout after a power cut (seen
        in CI: send_offsets_to_transaction with a 30 s timeout still waiting ten minutes
        later, the brokers idle and answering). An application would give up on that
        client and start another: past the bound this raises a KafkaException, the round
        ends as after any failed step, and `stop` leaves the clients behind. The thread
        stays behind too (daemon); what it records if it ever returns is what really
        happened (a commit acknowledged, records aborted)."""
        result, error = [], []

        def run():
            try:
                result.append(self.step(rng))
            except BaseException as e:
                error.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(seconds)
        if t.is_alive():
            self.hung += 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"a pipeline step did not return in {seconds} s"))
        if error:
            raise error[0]
        return result[0]

    def step(self, rng) -> bool:
        """One transaction; False when there was no input left to process."""
        if rng.random() < 0.2:
            values = [f"a{self.k + i}" for i in range(3)]
            self.k += 3
            try:
                self.p.begin_transaction()
                for i, v in enumerate(values):
                    self.p.produce("out", value=v, partition=i)
                self.p.abort_transaction(30)
            except KafkaException:
                self.unknown += 1
                raise
            finally:
                # Aborted on purpose: must never be seen, whatever became of the abort.
                self.aborted.update(values)
            return True
        msgs = [m for m in self.c.consume(num_messages=5, timeout=0.5) if not m.error()]
        if not msgs:
            return False
        try:
            self.p.begin_transaction()
            for m in msgs:
                self.p.produce("out", value=b"o:" + m.value(), partition=m.partition())
            positions = self.c.position(self.c.assignment())
            self.p.send_offsets_to_transaction(positions, self.c.consumer_group_metadata(), 30)
            self.p.commit_transaction(30)
        except KafkaException:
            self.unknown += 1
            raise
        self.commits += 1
        for tp in positions:
            if tp.offset >= 0:
                self.acked_offsets[tp.partition] = tp.offset
        return True


def test_transactions_and_their_offsets_survive_power_cuts_exactly_once(cluster):
    cluster.create_topics("in", "out", partitions=3)
    # Input keeps coming, from an idempotent producer that lives through the cuts: the
    # job always has work, so every cut falls on a transaction somewhere in its course.
    sent, fed = [], set()

    def delivered(err, msg):
        if err is None:
            fed.add(msg.value().decode())

    feeder = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                       "linger.ms": 5, "message.timeout.ms": 180000, **NO_REBOOTSTRAP})

    def feed(count):
        for _ in range(count):
            v = f"i{len(sent)}"
            sent.append(v)
            feeder.produce("in", value=v, partition=len(sent) % 3, on_delivery=delivered)
        feeder.poll(0)

    feed(300)
    assert feeder.flush(30) == 0
    pipeline = Pipeline(cluster.bootstrap)
    cutter = Cutter(cluster, SEED)
    rng = random.Random(SEED)

    def work():
        if not pipeline.bounded_step(rng):
            feed(30)

    for _ in range(CUTS):
        pipeline.start()
        cutter.round(work)
        pipeline.stop()
    # Power stays on: the job finishes its input.
    assert feeder.flush(120) == 0, f"inputs still unsent after the last restart; {cutter}"
    pipeline.start()
    deadline = time.time() + 120
    idle = 0
    # Done once no input came for ten polls in a row (5 s): three (1.5 s) once ended it
    # before a fresh consumer had fetched the partitions it starts at their beginning
    # (ListOffsets, then Fetch), and every input of two partitions was reported
    # missing though on the volume (CI, 2026-12-07; the volume held all 110 records
    # of each). A real loss still fails below: the input never comes.
    while idle < 10 and time.time() < deadline:
        try:
            idle = 0 if pipeline.bounded_step(rng) else idle + 1
        except KafkaException:
            # Power stays on now: a client given up on is replaced, as after a cut.
            pipeline.stop()
            pipeline.start()
    pipeline.stop()

    out = read_all(cluster.bootstrap, "out", 3, "read_committed", expect=len(fed), settle=1.0, timeout=60)
    seen = Counter(out)
    twice = [v for v, c in seen.items() if c > 1]
    missing = [v for v in sorted(fed) if seen["o:" + v] == 0]
    aborted = [v for v in out if v in pipeline.aborted]
    strangers = [v for v in out if v not in pipeline.aborted and not (v.startswith("o:") and v[2:] in fed)]
    what = f"{len(fed)} inputs, {pipeline.commits} commits, {pipeline.unknown} cut short, {pipeline.hung} hung; {cutter}"
    assert len(fed) == len(sent), f"every input acknowledged in the end; {what}"
    assert not aborted, f"aborted records visible to read_committed: {aborted[:5]}; {what}"
    assert not twice, f"records written twice: {twice[:5]}; {what}"
    assert not missing, f"inputs never in the output: {missing[:5]} ({len(missing)}); {what}"
    assert not strangers, f"records nobody committed: {strangers[:5]}; {what}"
    doctor_is_happy(cluster.data)


def test_an_abort_index_entry_a_crash_left_unsynced_survives_a_later_power_cut(tmp_path):
    """A broker killed between writing an ABORT marker's `.txnindex` entry and fsyncing it
    (failpoint abort-after-txnindex-write) is started again on the same volume, with no
    power cut: it read the entry back from the page cache and took it for durable, so
    nothing fsynced it. The next producer-state snapshot (at the clean stop) covered the
    marker, a power cut then took the entry, and a read_committed consumer was served
    the aborted records (found by a review; seen failing before the fix). Open now
    fsyncs the index files holding entries past the snapshot (`recover_txn_indexes`)."""
    fs = FaultFs(tmp_path / "fs").mount()
    b = KaasBroker(fs.mnt / "data", tmp_path / "broker.log",
                   env={"KAAS_FAILPOINTS": "abort-after-txnindex-write"})
    try:
        b.start()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("t", 1)]).values():
            f.result(timeout=30)
        conf = {"bootstrap.servers": b.bootstrap, "transactional.id": "tx", "transaction.timeout.ms": 60000,
                "message.timeout.ms": 20000}
        p = Producer(conf)
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce("t", value=b"aborted-%d" % i, partition=0)
        assert p.flush(30) == 0
        try:
            p.abort_transaction(5)
        except KafkaException:
            pass  # the broker died writing the abort
        deadline = time.time() + 20
        while b.alive() and time.time() < deadline:
            time.sleep(0.1)
        assert not b.alive() and "failpoint reached" in b.log_text(), b.log_text()[-3000:]
        b.env = {}
        b.restart()  # no power cut: what the dead broker wrote is all there
        p = Producer(conf)  # fences the first; the coordinator finishes its abort
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("t", value=b"committed-%d" % i, partition=0)
        p.commit_transaction(30)
        assert b.stop() == 0  # a clean stop: its snapshot covers the marker
        fs.cut()
        fs.mount()
        b.restart()
        out = read_all(b.bootstrap, "t", 1, "read_committed", expect=3, settle=1.0)
        assert out == ["committed-0", "committed-1", "committed-2"], out
    finally:
        b.kill9()
        fs.close()
