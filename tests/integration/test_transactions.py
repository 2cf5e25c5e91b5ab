"""Transactions end to end with confluent-kafka (librdkafka) against a real kaas-server."""
import json
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from conftest import wait_for
from txn_helpers import create_topic, read_all, txn_entries


def txn_producer(bootstrap, tid, **conf):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **conf})
    p.init_transactions(30)
    return p


def test_commit_and_abort_interleaved_across_three_partitions(kaas):
    create_topic(kaas.bootstrap, "tx", 3)
    p = txn_producer(kaas.bootstrap, "interleave")
    committed = []
    for r in range(6):
        p.begin_transaction()
        values = [f"r{r}-{i}" for i in range(30)]
        for i, v in enumerate(values):
            p.produce("tx", value=v.encode(), partition=i % 3)
        p.flush(15)  # the records reach the log before an abort, so it has something to hide
        if r % 2 == 0:
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
    rc = read_all(kaas.bootstrap, "tx", 3, "read_committed", expect=len(committed))
    ru = read_all(kaas.bootstrap, "tx", 3, "read_uncommitted", expect=180)
    assert sorted(rc) == sorted(committed)
    assert len(ru) == 180 and len(set(ru)) == 180


def test_consume_transform_produce_is_exactly_once_with_send_offsets(kaas):
    create_topic(kaas.bootstrap, "in", 3)
    create_topic(kaas.bootstrap, "out", 3)
    n = 10_000
    src = Producer({"bootstrap.servers": kaas.bootstrap, "linger.ms": 5})
    for i in range(n):
        src.produce("in", value=str(i).encode(), partition=i % 3)
        if i % 2000 == 0:
            src.poll(0)
    assert src.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": kaas.bootstrap,
        "group.id": "ctp",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    consumer.subscribe(["in"])
    producer = txn_producer(kaas.bootstrap, "ctp-tx")
    processed = 0
    deadline = time.time() + 120
    while processed < n and time.time() < deadline:
        msgs = consumer.consume(500, 1.0)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("out", value=f"x{m.value().decode()}".encode(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        processed += len(msgs)
    consumer.close()
    assert processed == n
    out = read_all(kaas.bootstrap, "out", 3, "read_committed", expect=n)
    assert len(out) == n
    assert sorted(int(v[1:]) for v in out) == list(range(n))
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "ctp"})
    committed = c.committed([TopicPartition("in", p) for p in range(3)], timeout=10)
    c.close()
    assert sum(tp.offset for tp in committed) == n


def test_a_second_producer_with_the_same_id_fences_the_first(kaas):
    create_topic(kaas.bootstrap, "fence", 1)
    zombie = txn_producer(kaas.bootstrap, "same-id")
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce("fence", value=f"zombie-{i}".encode())
    zombie.flush(15)
    fresh = txn_producer(kaas.bootstrap, "same-id")  # aborts the zombie's open transaction
    fresh.begin_transaction()
    for i in range(5):
        fresh.produce("fence", value=f"fresh-{i}".encode())
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as err:
        zombie.produce("fence", value=b"zombie-late")
        zombie.commit_transaction(15)
    e = err.value.args[0]
    assert e.fatal() or e.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), e
    rc = read_all(kaas.bootstrap, "fence", 1, "read_committed", expect=5)
    assert sorted(rc) == [f"fresh-{i}" for i in range(5)]


def test_a_silent_producer_is_aborted_by_the_reaper_and_consumers_move_on(kaas_factory):
    b = kaas_factory("--txn-reaper-interval-ms", "300")
    create_topic(b.bootstrap, "silent", 1)
    p = txn_producer(b.bootstrap, "goes-quiet", **{"transaction.timeout.ms": 3000, "message.timeout.ms": 3000})
    p.begin_transaction()
    for i in range(5):
        p.produce("silent", value=f"stuck-{i}".encode())
    p.flush(15)
    plain = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(5):
        plain.produce("silent", value=f"after-{i}".encode())
    plain.flush(15)
    # Pinned behind the open transaction at first...
    assert read_all(b.bootstrap, "silent", 1, "read_committed", settle=0.5, timeout=1.0) == []
    # ...then the reaper aborts it and the records behind it are delivered.
    got = read_all(b.bootstrap, "silent", 1, "read_committed", expect=5, timeout=30)
    assert sorted(got) == [f"after-{i}" for i in range(5)]
    assert "aborting transaction past its timeout" in b.log_text()
    entry = txn_entries(b.data_dir)["goes-quiet"]
    assert entry["state"] == "CompleteAbort" and entry["producer_epoch"] == 1


def test_kill_9_mid_transaction_then_commit_loses_and_duplicates_nothing(kaas):
    create_topic(kaas.bootstrap, "crash", 2)
    p = txn_producer(kaas.bootstrap, "crash-tx", **{"message.timeout.ms": 60000, "transaction.timeout.ms": 60000})
    p.begin_transaction()
    for i in range(20):
        p.produce("crash", value=f"c{i}".encode(), partition=i % 2)
    p.flush(15)
    kaas.kill9()
    kaas.restart()
    p.commit_transaction(60)
    got = read_all(kaas.bootstrap, "crash", 2, "read_committed", expect=20)
    assert sorted(got) == sorted(f"c{i}" for i in range(20))
    # The producer keeps working after the restart.
    p.begin_transaction()
    p.produce("crash", value=b"next", partition=0)
    p.commit_transaction(30)
    assert len(read_all(kaas.bootstrap, "crash", 2, "read_committed", expect=21)) == 21


def test_failed_journal_appends_are_retried_by_the_client_and_record_nothing_twice(kaas_factory, tmp_path):
    """The slot journal's append fails twice (failpoint): those requests get a retriable
    error, the client retries, and the transactions commit exactly once."""
    b = kaas_factory(data_dir=tmp_path / "jf", env={"KAAS_FAILPOINTS": "txn-journal-append=error*2"})
    create_topic(b.bootstrap, "jf", 1)
    p = txn_producer(b.bootstrap, "journal-fails")
    for t in range(3):
        p.begin_transaction()
        for i in range(4):
            p.produce("jf", value=f"t{t}-{i}".encode())
        p.commit_transaction(30)
    got = read_all(b.bootstrap, "jf", 1, "read_committed", expect=12)
    assert sorted(got) == sorted(f"t{t}-{i}" for t in range(3) for i in range(4))
    assert b.log_text().count("injecting an I/O error") == 2
    entry = txn_entries(tmp_path / "jf")["journal-fails"]
    assert entry["state"] == "CompleteCommit"


def test_a_volume_of_the_version_1_slot_format_opens_and_is_migrated_in_place(kaas_factory, tmp_path):
    """A slot file written before the journal existed (version 1, the whole slot in
    slot-N.json): the broker reads it, a real client's InitProducerId bumps the stored
    producer's epoch, and the slot is rewritten as a version-2 checkpoint plus journal."""
    tid = "legacy-tx"
    h = 0x811C9DC5
    for byte in tid.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    slot = h % 50
    data = tmp_path / "legacy"
    (data / "__cluster" / "txn_state").mkdir(parents=True)
    entry = {
        "transactional_id": tid, "producer_id": 5000, "producer_epoch": 3, "last_epoch": 2,
        "last_producer_id": -1, "state": "CompleteCommit", "timeout_ms": 60000, "partitions": [],
        "groups": [], "txn_start_ms": -1, "txn_seq": 9, "markers_queued": False,
        "last_update_ms": 1_700_000_000_000,
        "history": [{"at_ms": 1_700_000_000_000, "from": "PrepareCommit", "to": "CompleteCommit",
                     "producer_id": 5000, "epoch": 3, "reason": "EndTxn(commit)", "by": {"kind": "broker", "id": 0}}],
    }
    path = data / "__cluster" / "txn_state" / f"slot-{slot}.json"
    path.write_text(json.dumps({"version": 1, "slot": slot, "generation": 41, "updated_ms": 1_700_000_000_000,
                                "entries": {tid: entry}}, indent=2))
    b = kaas_factory(data_dir=data)
    create_topic(b.bootstrap, "legacy", 1)
    p = txn_producer(b.bootstrap, tid)
    p.begin_transaction()
    p.produce("legacy", value=b"after-migration")
    p.commit_transaction(30)
    assert read_all(b.bootstrap, "legacy", 1, "read_committed", expect=1) == ["after-migration"]
    after = txn_entries(data)[tid]
    assert (after["producer_id"], after["producer_epoch"], after["state"]) == (5000, 4, "CompleteCommit")
    checkpoint = json.loads(path.read_text())
    assert checkpoint["version"] == 2 and checkpoint["generation"] >= 41
    assert (data / "__cluster" / "txn_state" / f"slot-{slot}.journal").exists()


def _broker_died_mid_commit(kaas_factory, data, topic, tid, values, *flags):
    """A broker on `data` (with `flags`) that died at `txn-after-prepare` while
    committing `values` to `topic` (one record each, over 2 partitions, or 1 when
    there is one value): its slot holds PrepareCommit. Returns the dead broker."""
    b = kaas_factory(*flags, data_dir=data, env={"KAAS_FAILPOINTS": "txn-after-prepare"})
    partitions = 2 if len(values) > 1 else 1
    create_topic(b.bootstrap, topic, partitions)
    p = txn_producer(b.bootstrap, tid)
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    p.flush(15)
    with pytest.raises(KafkaException):
        p.commit_transaction(3)  # the broker dies mid-commit
    wait_for(lambda: not b.alive(), what="failpoint abort")
    return b


def test_a_crash_between_prepare_commit_and_the_markers_completes_the_commit(kaas_factory, tmp_path):
    b = _broker_died_mid_commit(kaas_factory, tmp_path / "fp", "prep", "prep-tx", [f"p{i}" for i in range(10)])
    states = [e["state"] for e in txn_entries(tmp_path / "fp").values()]
    assert states == ["PrepareCommit"]
    b.env = {}
    b.restart()
    # The listener is bound before the volume is opened and recovered: wait for it.
    wait_for(lambda: "finished a transaction left in a Prepare state" in b.log_text(), timeout=20,
             what="the restarted broker finishing the Prepare entry")
    got = read_all(b.bootstrap, "prep", 2, "read_committed", expect=10)
    assert sorted(got) == sorted(f"p{i}" for i in range(10))
    wait_for(lambda: [e["state"] for e in txn_entries(tmp_path / "fp").values()] == ["CompleteCommit"],
             what="the entry completed")


def test_a_long_recovery_of_prepared_transactions_keeps_the_lease_renewed(kaas_factory, tmp_path):
    """Finishing the transactions the last run left in Prepare* runs before the broker
    serves and can take long (each finish writes markers and fsyncs; a 3 s delay at
    `txn-after-markers` here, longer than half the 4 s session timeout). The lease is
    renewed throughout: before, nothing renewed it between opening the volume and the
    lease task's start, so the broker stepped down right after start, letting go of
    every partition it had just recovered (found by a review; seen failing)."""
    flags = ["--broker-session-timeout-ms", "4000"]
    b = _broker_died_mid_commit(kaas_factory, tmp_path / "slow", "slowrec", "slowrec-tx",
                                [f"r{i}" for i in range(10)], *flags)
    b.env = {"KAAS_FAILPOINTS": "txn-after-markers=delay:3000"}
    b.restart()
    assert "finished a transaction left in a Prepare state" in b.log_text()
    got = read_all(b.bootstrap, "slowrec", 2, "read_committed", expect=10)
    assert sorted(got) == sorted(f"r{i}" for i in range(10))
    time.sleep(2)
    assert "stepping down" not in b.log_text(), b.log_text()
    assert b.alive()


def test_a_stop_during_a_long_recovery_is_clean_and_never_says_it_serves(kaas_factory, tmp_path):
    """SIGTERM while the broker still finishes its last run's transactions (a 3 s
    delay at `txn-after-markers`, 4 s session): the lease stays renewed until the
    clean stop marks it stopped — before, the lease task ended with the signal, the
    recovery went on unrenewed and the stop stepped down instead (found by a review) —
    and the lease never says it serves (no `opening_ms` and no `stopped_ms`)."""
    import signal

    flags = ["--broker-session-timeout-ms", "4000"]
    b = _broker_died_mid_commit(kaas_factory, tmp_path / "stopping", "stoprec", "stoprec-tx", ["x"], *flags)
    b.env = {"KAAS_FAILPOINTS": "txn-after-markers=delay:3000"}
    delays = b.log_text().count("failpoint reached: delaying")
    lease_file = tmp_path / "stopping" / "__cluster" / "brokers" / "0.json"
    import subprocess

    from conftest import BIN, process_env

    # Started by hand: the fixture's start waits for "ready", which this run never logs.
    b.proc = subprocess.Popen([str(BIN), "--data-dir", str(tmp_path / "stopping"), "--listen", b.bootstrap,
                               "--broker-id", "0", *flags], stdout=open(b.log_path, "ab"), stderr=subprocess.STDOUT,
                              env=process_env({"RUST_LOG": "info", **b.env}))
    wait_for(lambda: b.log_text().count("failpoint reached: delaying") > delays, timeout=20, what="recovery held up")
    b.proc.send_signal(signal.SIGTERM)
    seen = []
    while b.proc.poll() is None:
        try:
            seen.append(json.loads(lease_file.read_text()))
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    assert b.proc.returncode == 0, b.log_text()
    seen.append(json.loads(lease_file.read_text()))
    assert "stepping down" not in b.log_text(), b.log_text()
    assert not [l for l in seen if "opening_ms" not in l and "stopped_ms" not in l], "a stopping broker said it serves"
    assert "stopped_ms" in seen[-1]


def test_kip_664_admin_apis_list_and_describe_transactions_and_producers(kaas):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition

    create_topic(kaas.bootstrap, "insp", 1)
    p = txn_producer(kaas.bootstrap, "inspect-me")
    p.begin_transaction()
    p.produce("insp", value=b"x")
    p.flush(15)
    a = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    try:
        listed = [t for ts in a.list_transactions().values() for t in ts]
        mine = [t for t in listed if t.transactional_id == "inspect-me"]
        assert len(mine) == 1 and str(mine[0].state.value) == "Ongoing"
        assert [t.transactional_id for ts in a.list_transactions(state_filters=["CompleteCommit"]).values() for t in ts] == []
        desc = a.describe_transactions(["inspect-me"])["inspect-me"]
        assert str(desc.state.value) == "Ongoing"
        assert desc.producer_id == mine[0].producer_id and desc.producer_epoch == 0
        assert desc.topic_partitions == {KTopicPartition("insp", 0)}
        assert desc.transaction_start_time_ms > 0
        producers = a.describe_producers([KTopicPartition("insp", 0)])[KTopicPartition("insp", 0)]
        active = [s for s in producers.active_producers if s.producer_id == desc.producer_id]
        assert len(active) == 1 and active[0].current_transaction_start_offset == 0
        p.commit_transaction(30)
        # Answered once PrepareCommit is durable (as Kafka); CompleteCommit follows
        # when the marker is.
        desc = wait_for(lambda: (lambda d: d if str(d.state.value) == "CompleteCommit" else None)(
            a.describe_transactions(["inspect-me"])["inspect-me"]), timeout=10, what="CompleteCommit")
        assert desc.topic_partitions == set()
        with pytest.raises(Exception) as missing:
            a.describe_transactions(["never-seen"])
        assert "TransactionalIdNotFound" in type(missing.value).__name__ or "105" in str(missing.value)
    finally:
        a.close()


def test_an_admin_abort_of_a_live_transaction_is_refused_and_of_nothing_open_writes_nothing(kaas):
    """kafka-transactions.sh abort, through kafka-python's `abort_transaction` (the
    admin client's WriteTxnMarkers ABORT to the partition's leader, naming no
    transaction): kaas ends a transaction there only if it hangs — open on the
    partition while its coordinator does not cover it (docs/transactions.md, "Aborting
    from Kafka's tools"). A live transaction is refused with INVALID_TXN_STATE, not
    answered success with nothing done, and it commits afterwards as if never asked;
    a partition where the producer has nothing open is answered success, writing
    nothing."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import AbortTransactionSpec
    from kafka.errors import InvalidTxnStateError

    create_topic(kaas.bootstrap, "live", 1)
    p = txn_producer(kaas.bootstrap, "live-one")
    p.begin_transaction()
    for i in range(3):
        p.produce("live", value=f"v{i}".encode())
    p.flush(15)
    a = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    tp = KTopicPartition("live", 0)
    try:
        # What an operator's tool sees on the partition, then asks.
        producers = a.describe_producers([tp])[tp]
        (open_one,) = [s for s in producers.active_producers if s.current_transaction_start_offset >= 0]
        spec = AbortTransactionSpec(tp, open_one.producer_id, open_one.producer_epoch)
        with pytest.raises(InvalidTxnStateError):
            a.abort_transaction(spec)
        assert "is live at its coordinator" in kaas.log_text(), kaas.log_text()[-3000:]
        # Untouched: the producer goes on and commits it whole.
        p.produce("live", value=b"v3")
        p.commit_transaction(30)
        assert read_all(kaas.bootstrap, "live", 1, "read_committed", expect=4) == ["v0", "v1", "v2", "v3"]
        # Nothing open there now: success, and nothing written (the high watermark
        # stays: three records, the fourth, one COMMIT marker).
        a.abort_transaction(spec)
        c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "hw"})
        assert c.get_watermark_offsets(TopicPartition("live", 0), timeout=10) == (0, 5)
        c.close()
        assert read_all(kaas.bootstrap, "live", 1, "read_committed", expect=4) == ["v0", "v1", "v2", "v3"]
    finally:
        a.close()
