"""Exactly-once holes of issue 8, driven from outside against a real kaas-server:
a late transactional batch after EndTxn (raw protocol, as the issue reproduced it), and
a marker append that fails and heals (confluent-kafka, with the marker-append
failpoint). The KIP-360 replaced-instance claim is in the wire probe
(test_txn_coordinator_script.py)."""
from confluent_kafka import Producer

from conftest import wait_for
from txn_helpers import create_topic, read_all
from wire import TxnWire, txn_batch


def test_a_late_transactional_batch_after_end_txn_is_refused_and_nothing_hangs(kaas):
    create_topic(kaas.bootstrap, "late", 1)
    w = TxnWire(kaas.port, "late-tx")
    try:
        err, pid, epoch = w.init_producer_id()
        assert err == 0
        assert w.add_partitions(pid, epoch, "late", 0) == 0
        assert w.produce("late", 0, txn_batch([b"aborted"], pid, epoch, 0))[0] == 0
        assert w.end_txn(pid, epoch, commit=False) == 0
        # The same identity's next batch, after the transaction ended: INVALID_TXN_STATE.
        assert w.produce("late", 0, txn_batch([b"late"], pid, epoch, 1))[0] == 48
        # A committed transaction afterwards is readable: the partition is not stuck.
        assert w.add_partitions(pid, epoch, "late", 0) == 0
        assert w.produce("late", 0, txn_batch([b"committed"], pid, epoch, 1))[0] == 0
        assert w.end_txn(pid, epoch, commit=True) == 0
        assert w.produce("late", 0, txn_batch([b"late again"], pid, epoch, 2))[0] == 48
    finally:
        w.close()
    assert read_all(kaas.bootstrap, "late", 1, "read_committed", expect=1) == ["committed"]


def test_a_failing_marker_append_is_retried_until_the_commit_lands(kaas_factory, tmp_path):
    b = kaas_factory(data_dir=tmp_path / "mf", env={"KAAS_FAILPOINTS": "marker-append=error*3"})
    create_topic(b.bootstrap, "heal", 2)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "heal-tx", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("heal", value=f"h{i}".encode(), partition=i % 2)
    # Answered once PrepareCommit is durable (as Kafka does); the first three marker
    # appends after it fail, and the coordinator's retries land the commit.
    p.commit_transaction(60)
    wait_for(lambda: b.log_text().count("failpoint reached: injecting an I/O error") == 3, timeout=20,
             what="three failed marker appends")
    assert "EndTxn answered, its markers not all written; the transaction stays prepared and is retried" in b.log_text()
    got = read_all(b.bootstrap, "heal", 2, "read_committed", expect=10)
    assert sorted(got) == sorted(f"h{i}" for i in range(10))
    # Healed: the next transactions commit and abort normally.
    p.begin_transaction()
    p.produce("heal", value=b"dropped", partition=0)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("heal", value=b"kept", partition=1)
    p.commit_transaction(30)
    got = read_all(b.bootstrap, "heal", 2, "read_committed", expect=11)
    assert sorted(got) == sorted([f"h{i}" for i in range(10)] + ["kept"])
