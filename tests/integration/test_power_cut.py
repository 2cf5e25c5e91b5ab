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
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KaasBroker, run_kaasctl
from faultfs import FAULTFS, FaultFs
from txn_helpers import read_all

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a FUSE file system needs root"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse"),
]

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
    """Chooses where each cut falls and carries it out; says what it did, for the
    failure message."""

    def __init__(self, fs, brokers, seed):
        self.fs = fs
        self.brokers = brokers
        self.rng = random.Random(seed)
        self.seed = seed
        self.done = []

    def arm(self):
        """Before the workload of one round: a cut at a random fsync, or none (the
        round's end is then a random moment)."""
        self.at_fsync = self.rng.randint(1, 120) if self.rng.random() < 0.5 else None
        if self.at_fsync:
            self.fs.command(f"cut-at-fsync {self.at_fsync}")

    def due(self, started) -> bool:
        """Whether the round's workload should stop: the armed fsync came (the power
        is already off), or the round's random moment passed."""
        if self.at_fsync:
            return self.fs.status()["frozen"] or time.time() - started > 20
        return time.time() - started > getattr(self, "moment", 0)

    def plan_moment(self):
        self.moment = self.rng.uniform(0.2, 2.0)

    def cut(self):
        """The power goes for the volume and every broker on it; then the volume
        comes back with what survived, and the brokers restart on it."""
        keep = self.rng.randrange(1 << 32) if self.rng.random() < 0.5 else None
        status = self.fs.status()
        self.fs.cut(keep)
        for b in self.brokers:
            b.kill9()
        self.done.append(dict(at_fsync=self.at_fsync, frozen=status["frozen"], keep_seed=keep,
                              fsyncs=status["fsyncs"], pending_entries=status["pending_entry_changes"],
                              pending_files=status["files_with_pending_data"]))
        self.fs.mount()
        for b in self.brokers:
            b.start()

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
                  "message.timeout.ms": 180000, "reconnect.backoff.max.ms": 200})
    cutter = Cutter(fs, brokers, SEED)
    n = 0
    for _ in range(CUTS):
        cutter.arm()
        cutter.plan_moment()
        started = time.time()
        while not cutter.due(started):
            for _ in range(20):
                p.produce("pc", value=f"v{n}", partition=n % 3, on_delivery=delivered)
                n += 1
            p.poll(0.01)
        cutter.cut()
    assert p.flush(120) == 0, f"records still unsent after the last restart; {cutter}"
    assert not failed, f"the idempotent producer failed: {failed[:5]}; {cutter}"

    values = read_all(b.bootstrap, "pc", 3, "read_uncommitted", expect=len(acked), settle=1.0, timeout=60)
    twice = [v for v, c in Counter(values).items() if c > 1]
    missing = acked - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}; {cutter}"
    assert not twice, f"{len(twice)} records twice, e.g. {twice[:5]}; {cutter}"
    assert len(acked) == n, f"every record sent was acknowledged in the end ({len(acked)} of {n}); {cutter}"
    doctor_is_happy(fs.mnt / "data")
