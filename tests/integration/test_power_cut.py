"""Power cuts (issue 26): brokers on kaas-faultfs, which keeps every write that was not
fsync'd in memory and drops it when the power is cut. Each test cuts at many points,
at random moments and at the Nth fsync from a moment (`cut-at-fsync`), half of the
cuts keeping a random prefix of what was pending (a disk that wrote part of its queue);
then restarts the brokers on what survived and checks that nothing acknowledged was
lost, nothing appears twice or half, and `kaasctl doctor` finds the volume healthy.

KAAS_POWER_CUTS sets the number of cuts per test (default: a few, for CI; the long
run in docs/testing.md sets more), KAAS_POWER_CUT_SEED the seed."""
import os
import random
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KaasBroker, run_kaasctl
from faultfs import FAULTFS, FaultFs
from txn_helpers import read_all

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a FUSE file system needs root"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse"),
]

# librdkafka 2.16 re-bootstraps when every broker it knows is gone at once (the whole
# cluster lost power), and a transactional call under way then never returns: its old
# broker handle stays "terminating" for good (seen in a debug log: FindCoordinator answered,
# no request after it). Not re-bootstrapping keeps the clients on the brokers' fixed
# addresses, which is all these tests need.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}

CUTS = int(os.environ.get("KAAS_POWER_CUTS", "6"))
SEED = int(os.environ.get("KAAS_POWER_CUT_SEED", str(int(time.time()))))


@pytest.fixture
def volume(tmp_path):
    assert FAULTFS.exists(), f"{FAULTFS} is not built (cargo build --workspace)"
    fs = FaultFs(tmp_path / "fs")
    brokers = []
    try:
        yield fs, brokers
    finally:
        for b in brokers:
            b.kill9()
        fs.close()


class Cutter:
    """Chooses where each cut falls and carries it out while the workload runs; says
    what it did, for the failure message."""

    def __init__(self, fs, brokers, seed):
        self.fs = fs
        self.brokers = brokers
        self.rng = random.Random(seed)
        self.seed = seed
        self.done = []

    def round(self, work):
        """Runs `work()` again and again until this round's cut is over. The cut comes
        from a thread, at a random fsync from now or at a random moment, so it can fall
        while `work` waits on the cluster. An exception from `work` (the cluster went
        away under it) ends the round's work early; the cut still comes."""
        at_fsync = self.rng.randint(1, 60) if self.rng.random() < 0.5 else None
        moment = self.rng.uniform(0.2, 2.0)
        keep = self.rng.randrange(1 << 32) if self.rng.random() < 0.5 else None
        if at_fsync:
            self.fs.command(f"cut-at-fsync {at_fsync}")
        over = threading.Event()
        failure = []

        def watch():
            try:
                started = time.time()
                while True:
                    status = self.fs.status()
                    if status["frozen"] or (time.time() - started > (20 if at_fsync else moment)):
                        break
                    time.sleep(0.01)
                print(f"{time.strftime('%X')} cutting {at_fsync} {status['frozen']}", flush=True)
                self.cut(dict(at_fsync=at_fsync, keep_seed=keep, frozen=status["frozen"], fsyncs=status["fsyncs"],
                              pending_entries=status["pending_entry_changes"],
                              pending_files=status["files_with_pending_data"]), keep)
            except BaseException as e:  # surfaced by the test's thread below
                failure.append(e)
            finally:
                over.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        error = None
        while not over.is_set():
            try:
                work()
            except KafkaException as e:
                error = e
                over.wait(60)
        watcher.join(60)
        if failure:
            raise failure[0]
        return error

    def cut(self, what, keep):
        """The power goes for the volume and every broker on it; then the volume
        comes back with what survived, and the brokers restart on it."""
        self.fs.cut(keep)
        for b in self.brokers:
            b.kill9()
        self.done.append(what)
        self.fs.mount()
        for b in self.brokers:
            b.start()
        print(f"{time.strftime('%X')} cut over {what}", flush=True)

    def __str__(self):
        return f"seed {self.seed}, cuts: {self.done}"


def doctor_is_happy(data_dir):
    out = run_kaasctl(data_dir, "doctor")
    assert out.returncode == 0, f"kaasctl doctor after the cuts:\n{out.stdout}\n{out.stderr}"


def test_acknowledged_records_survive_power_cuts_and_the_idempotent_producer_goes_on(volume, tmp_path):
    fs, brokers = volume
    fs.mount()
    b = KaasBroker(fs.mnt / "data", tmp_path / "broker.log")
    brokers.append(b)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("pc", 3)])["pc"].result(timeout=20)

    acked, failed = set(), []

    def delivered(err, msg):
        if err is None:
            acked.add(msg.value().decode())
        else:
            failed.append(str(err))

    # One producer for the whole test: it lives through every cut, as an application
    # on another machine would, and must neither fail nor write anything twice.
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                  "message.timeout.ms": 180000, "reconnect.backoff.max.ms": 200, **NO_REBOOTSTRAP})
    cutter = Cutter(fs, brokers, SEED)
    n = 0

    def work():
        nonlocal n
        for _ in range(20):
            p.produce("pc", value=f"v{n}", partition=n % 3, on_delivery=delivered)
            n += 1
        p.poll(0.01)

    for _ in range(CUTS):
        assert cutter.round(work) is None
    assert p.flush(120) == 0, f"records still unsent after the last restart; {cutter}"
    assert not failed, f"the idempotent producer failed: {failed[:5]}; {cutter}"

    values = read_all(b.bootstrap, "pc", 3, "read_uncommitted", expect=len(acked), settle=1.0, timeout=60)
    twice = [v for v, c in Counter(values).items() if c > 1]
    missing = acked - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}; {cutter}"
    assert not twice, f"{len(twice)} records twice, e.g. {twice[:5]}; {cutter}"
    assert len(acked) == n, f"every record sent was acknowledged in the end ({len(acked)} of {n}); {cutter}"
    doctor_is_happy(fs.mnt / "data")


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

    def start(self):
        self.p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "pipeline",
                           "transaction.timeout.ms": 20000, "message.timeout.ms": 20000,
                           "reconnect.backoff.max.ms": 200, **NO_REBOOTSTRAP})
        self.p.init_transactions(60)
        self.c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "pipeline", "enable.auto.commit": False,
                           "isolation.level": "read_committed", "auto.offset.reset": "earliest", **NO_REBOOTSTRAP})
        committed = self.c.committed([TopicPartition("in", i) for i in range(3)], timeout=30)
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

    def stop(self):
        """Drops both clients without waiting for anything (the cluster may be gone)."""
        if self.p is not None:
            self.p.purge()
            self.p.flush(0)
        if self.c is not None:
            self.c.close()
        self.p = self.c = None

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


def test_transactions_and_their_offsets_survive_power_cuts_exactly_once(volume, tmp_path):
    fs, brokers = volume
    fs.mount()
    b = KaasBroker(fs.mnt / "data", tmp_path / "broker.log")
    brokers.append(b)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("in", 3), NewTopic("out", 3)]).values():
        f.result(timeout=20)
    inputs = [f"i{n}" for n in range(400)]
    feeder = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True})
    for n, v in enumerate(inputs):
        feeder.produce("in", value=v, partition=n % 3)
    assert feeder.flush(30) == 0

    pipeline = Pipeline(b.bootstrap)
    cutter = Cutter(fs, brokers, SEED)
    rng = random.Random(SEED)
    for _ in range(CUTS):
        pipeline.start()
        cutter.round(lambda: pipeline.step(rng))
        pipeline.stop()
    # Power stays on: the job finishes its input.
    pipeline.start()
    deadline = time.time() + 120
    idle = 0
    while idle < 3 and time.time() < deadline:
        idle = 0 if pipeline.step(rng) else idle + 1
    pipeline.stop()

    out = read_all(b.bootstrap, "out", 3, "read_committed", expect=len(inputs), settle=1.0, timeout=60)
    seen = Counter(out)
    twice = [v for v, c in seen.items() if c > 1]
    missing = [v for v in inputs if seen["o:" + v] == 0]
    aborted = [v for v in out if v in pipeline.aborted]
    strangers = [v for v in out if not v.startswith("o:") and v not in pipeline.aborted]
    what = f"{pipeline.commits} commits, {pipeline.unknown} cut short; {cutter}"
    assert not aborted, f"aborted records visible to read_committed: {aborted[:5]}; {what}"
    assert not twice, f"records written twice: {twice[:5]}; {what}"
    assert not missing, f"inputs never in the output: {missing[:5]} ({len(missing)}); {what}"
    assert not strangers, f"records nobody committed: {strangers[:5]}; {what}"
    doctor_is_happy(fs.mnt / "data")
