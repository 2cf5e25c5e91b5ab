"""kaasctl against a real broker: a producer dies mid-transaction; the operator finds it,
force-aborts it, and everything downstream moves on."""
import json
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import run_kaasctl
from txn_helpers import create_topic, read_all

# Each test runs without COLUMNS and with COLUMNS=80 (conftest.kaasctl_columns).
pytestmark = pytest.mark.kaasctl


def kaasctl(broker, *args):
    return run_kaasctl(broker.data_dir, *args)


def test_force_abort_of_a_dead_producers_transaction_unblocks_read_committed(kaas):
    create_topic(kaas.bootstrap, "orders", 2)
    # A producer process begins a transaction, writes, and is killed.
    script = textwrap.dedent(f"""
        import os
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": "{kaas.bootstrap}", "transactional.id": "orders-tx"}})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(6):
            p.produce("orders", value=f"lost-{{i}}".encode(), partition=i % 2)
        p.flush(15)
        os.kill(os.getpid(), 9)
    """)
    subprocess.run([sys.executable, "-c", script], timeout=60)
    plain = Producer({"bootstrap.servers": kaas.bootstrap})
    for i in range(4):
        plain.produce("orders", value=f"after-{i}".encode(), partition=i % 2)
    plain.flush(15)

    listed = kaasctl(kaas, "txn", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["transactional_id"]: r for r in json.loads(listed.stdout)["transactions"]}
    row = rows["orders-tx"]
    assert row["state"] == "Ongoing" and row["partitions"] == 2 and row["producer_epoch"] == 0
    assert row["transaction_start"]["epoch_ms"] > 0 and row["transaction_start"]["rfc3339"].endswith("Z")

    # A read_committed consumer is stuck at the LSO.
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "stuck-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("orders", p, 0) for p in range(2)])
    assert [m for m in c.consume(10, 2.0) if not m.error()] == []

    explain = kaasctl(kaas, "lso", "explain", "orders", "0", "--json")
    assert explain.returncode == 3
    pin = json.loads(explain.stdout)["pinned_by"]
    assert pin["transactional_id"] == "orders-tx" and pin["coordinator_state"] == "Ongoing"

    aborted = kaasctl(kaas, "txn", "abort", "orders-tx", "--yes")
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert "Ongoing -> CompleteAbort (epoch 0 -> 1)" in aborted.stdout

    got = []
    deadline = time.time() + 30
    while len(got) < 4 and time.time() < deadline:
        got += [m.value().decode() for m in c.consume(10, 0.5) if not m.error()]
    c.close()
    assert sorted(got) == [f"after-{i}" for i in range(4)]

    # A new producer with the same transactional.id works.
    p = Producer({"bootstrap.servers": kaas.bootstrap, "transactional.id": "orders-tx"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("orders", value=b"new-session", partition=0)
    p.commit_transaction(30)
    assert "new-session" in read_all(kaas.bootstrap, "orders", 2, "read_committed", expect=5)

    fences = json.loads(kaasctl(kaas, "fence", "show", "--json").stdout)["fences"]
    admin = [f for f in fences if f["writer"] == "admin"]
    assert admin and admin[0]["epoch"] == 1 and admin[0]["transactional_id"] == "orders-tx"
    audit = json.loads(kaasctl(kaas, "audit", "--json").stdout)
    assert audit[0]["target"] == "orders-tx" and audit[0]["state_before"] == "Ongoing" and audit[0]["state_after"] == "CompleteAbort"
    assert kaasctl(kaas, "txn", "find-hanging").returncode == 0


def test_a_cleanly_stopped_broker_is_gone_at_once_and_kaasctl_writes_markers_itself(kaas_factory):
    """A broker that stops cleanly marks its lease stopped and its partitions released:
    kaasctl sees it gone at once — not after the session timeout (60 s here) — so an
    abort or repair right after the stop writes its markers itself instead of queueing
    them for the stopped broker (issue 13)."""
    b = kaas_factory("--broker-session-timeout-ms", "60000")
    create_topic(b.bootstrap, "orders", 2)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "left-open"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce("orders", value=f"open-{i}".encode(), partition=i % 2)
    p.flush(15)
    assert b.stop() == 0
    started = time.time()

    brokers = json.loads(kaasctl(b, "brokers", "--json").stdout)
    assert [(r["broker_id"], r["alive"], r["stopped"]) for r in brokers] == [(0, False, True)]
    doctor = json.loads(kaasctl(b, "doctor", "--json").stdout)
    assert any(f["check"] == "leases" and "stopped cleanly" in f["detail"] for f in doctor["findings"]), doctor

    aborted = kaasctl(b, "txn", "abort", "left-open", "--yes", "--wait", "0s", "--json")
    assert aborted.returncode == 0, aborted.stderr
    assert json.loads(kaasctl(b, "markers", "list", "--json").stdout) == [], "nothing queued for the stopped broker"
    for part in ("0", "1"):
        explain = kaasctl(b, "lso", "explain", "orders", part, "--json")
        assert explain.returncode == 0 and json.loads(explain.stdout)["pinned_by"] is None, explain.stdout
    repaired = kaasctl(b, "txn", "repair", "--fix", "--yes", "--wait", "0s")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert json.loads(kaasctl(b, "markers", "list", "--json").stdout) == []
    assert time.time() - started < 30, "all of it well within the session timeout"
    entry = json.loads(kaasctl(b, "txn", "show", "left-open", "--json").stdout)
    assert entry["state"] == "CompleteAbort", entry


def test_doctor_finds_nothing_wrong_with_a_busy_transactional_cluster(kaas_factory):
    """Producers committing and aborting back to back while kaasctl doctor reads the
    volume: a transaction that ends, or a new one that begins, while doctor reads is
    never reported as hanging, and in-progress transactions are not problems."""
    import threading

    b = kaas_factory()
    create_topic(b.bootstrap, "busy", 4)
    stop = threading.Event()
    done = []

    def work(tid):
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "linger.ms": 1})
        p.init_transactions(30)
        n = 0
        while not stop.is_set() and n < 2000:
            p.begin_transaction()
            for i in range(4):
                p.produce("busy", value=f"{tid}-{n}-{i}".encode(), partition=i)
            p.flush(10)
            (p.commit_transaction if n % 5 else p.abort_transaction)(30)
            n += 1
        done.append(n)

    threads = [threading.Thread(target=work, args=(f"busy-{k}",)) for k in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        for _ in range(8):
            r = run_kaasctl(b.data_dir, "doctor", "--json", env={"KAASCTL_STATVFS": "1048576,524288,1000000,900000"})
            report = json.loads(r.stdout)
            bad = [f for f in report["findings"] if f["severity"] == "problem"]
            assert r.returncode == 0 and not bad, bad
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert len(done) == 3 and min(done) > 5, f"the producers kept working: {done}"
