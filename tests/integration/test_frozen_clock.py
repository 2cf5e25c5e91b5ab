"""A broker frozen with its clocks, as a paused VM is (issue 25 item 1; docs/cluster.md,
"Safety rules"): three brokers on one volume, one of them under libfaketime. It is
stopped with SIGSTOP past the session timeout while its fake clock is set back by as
long, so after SIGCONT neither its wall clock nor its monotonic clock shows that any
time passed: by its own clock its lease is fresh. The others have taken its partitions
over meanwhile. Every acknowledged record must be read back exactly once, and no
partition may stay unavailable longer than the session timeout plus a few seconds
after SIGCONT."""
import collections
import glob
import os
import signal
import threading
import time

import pytest
from confluent_kafka import Producer

from conftest import wait_for
from test_cluster import leaders
from txn_helpers import create_topic, read_all

SESSION_MS = 4000
FREEZE_S = 8
PARTITIONS = 6
# How long a partition may go without an acknowledged record after SIGCONT.
UNAVAILABLE_BOUND_S = SESSION_MS / 1000 + 5


def libfaketime():
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


@pytest.mark.skipif(libfaketime() is None, reason="libfaketime is not installed (scripts/test.sh installs it)")
@pytest.mark.parametrize("run", range(2))
def test_a_broker_frozen_with_its_clock_loses_no_acknowledged_record_and_strands_no_partition(
        kaas_factory, tmp_path, run):
    data = tmp_path / "shared"
    clock = tmp_path / "faketime"
    clock.write_text("+0\n")
    flags = ["--broker-session-timeout-ms", str(SESSION_MS), "--volume-poll-interval-ms", "300"]
    b0 = kaas_factory(*flags, data_dir=data)
    b1 = kaas_factory("--broker-id", "1", *flags, data_dir=data)
    frozen = kaas_factory("--broker-id", "2", *flags, data_dir=data, env={
        "LD_PRELOAD": libfaketime(),
        "FAKETIME_TIMESTAMP_FILE": str(clock),
        # Re-read the file at most every second (by the real clock).
        "FAKETIME_CACHE_DURATION": "1",
    })
    everyone = f"{b0.bootstrap},{b1.bootstrap},{frozen.bootstrap}"
    create_topic(b0.bootstrap, "fz", PARTITIONS)
    wait_for(lambda: leaders(b0.bootstrap, "fz")[0] == [0, 1, 2]
             and 2 in leaders(b0.bootstrap, "fz")[1].values(), timeout=30,
             what="three brokers listed, broker 2 leading some partitions")

    acked = []  # (value, partition, when)
    failed = []
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": everyone, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 120000, "linger.ms": 5})

        def done(err, msg):
            if err:
                failed.append(str(err))
            else:
                acked.append((msg.value().decode(), msg.partition(), time.time()))
        i = 0
        while not stop.is_set():
            p.produce("fz", value=f"f{run}-{i}".encode(), partition=i % PARTITIONS, on_delivery=done)
            i += 1
            p.poll(0.005)
        p.flush(120)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        wait_for(lambda: len(acked) > 300, timeout=30, what="records acknowledged before the freeze")
        stopped = time.time()
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        try:
            # The others notice the unchanged lease and take broker 2's partitions.
            wait_for(lambda: 2 not in leaders(b0.bootstrap, "fz")[1].values(), timeout=FREEZE_S + 10,
                     what="the others leading broker 2's partitions")
            time.sleep(max(0.0, stopped + FREEZE_S - time.time()))
            # Its clocks are set back by as long as it was stopped: after SIGCONT no
            # time has passed for it.
            clock.write_text(f"-{round(time.time() - stopped)}\n")
        finally:
            os.kill(frozen.proc.pid, signal.SIGCONT)
        thawed = time.time()
        time.sleep(UNAVAILABLE_BOUND_S + 8)
    finally:
        stop.set()
        t.join(150)
    assert not t.is_alive()
    assert not failed, failed[:5]
    assert frozen.alive(), "the frozen broker lives on"
    # The freeze did what it should: the others took partitions over, and the thawed
    # broker found out through owner.json, not by its clock.
    assert "holder's lease expired while it held the lock" in b0.log_text() + b1.log_text()
    assert "gave up partitions other brokers took over" in frozen.log_text() \
        or "was taken over while this broker led it" in frozen.log_text()

    # Availability: after SIGCONT, no partition went longer than the bound without an
    # acknowledged record.
    for part in range(PARTITIONS):
        times = [thawed] + sorted(w for _, p, w in acked if p == part and w > thawed) + [time.time() - 1]
        gap = max(b - a for a, b in zip(times, times[1:]))
        assert gap <= UNAVAILABLE_BOUND_S, f"partition {part} had no acknowledged record for {gap:.1f} s after SIGCONT"

    # Safety: every acknowledged record is read back, once.
    got = read_all(everyone, "fz", PARTITIONS, "read_uncommitted", expect=len(acked), timeout=60)
    counts = collections.Counter(got)
    assert not [v for v, n in counts.items() if n > 1], "no record twice"
    missing = {v for v, _, _ in acked} - set(got)
    assert not missing, f"{len(missing)} acknowledged records missing, e.g. {sorted(missing)[:5]}"
