"""A full volume (issue 11): the broker's data directory on a small tmpfs mounted by the
test; a ballast file fills it. While it is full, writes fail with a clear error and
everything else keeps being served; nothing acknowledged is lost and nothing
half-written is ever read; once space returns, the same broker process recovers."""
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KaasBroker
from txn_helpers import read_all

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_volume(tmp_path):
    mnt = tmp_path / "vol"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], check=True)
    brokers = []
    try:
        yield mnt, brokers
    finally:
        for b in brokers:
            b.kill9()
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def start_with_topic(small_volume, tmp_path, topic):
    """A broker on the small volume, with `topic` (one partition) created."""
    mnt, brokers = small_volume
    b = KaasBroker(mnt / "data", tmp_path / "broker.log")
    brokers.append(b)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout=20)
    return mnt, b


def fill(mnt) -> Path:
    """Writes a ballast file until the volume is full; returns it."""
    ballast = mnt / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 64 << 10, 4 << 10, 512):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(fd, chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return ballast


def free(ballast: Path):
    ballast.unlink()


def read_back(bootstrap, topic, isolation="read_uncommitted", expect=None):
    """Every value of partition 0, CRCs checked."""
    return read_all(bootstrap, topic, 1, isolation, settle=1.0, expect=expect, decode=False, check_crcs=True)


def produce(bootstrap, topic, values, **conf):
    acked, failed = [], []

    def cb(err, msg):
        (failed if err else acked).append((msg.value(), err))

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 6000, **conf})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=cb)
        p.poll(0)
    p.flush(30)
    return [v for v, _ in acked], failed


def test_produce_on_a_full_volume_fails_clearly_loses_nothing_acked_and_recovers(small_volume, tmp_path):
    mnt, broker = start_with_topic(small_volume, tmp_path, "full")
    before, failed = produce(broker.bootstrap, "full", [b"a%05d" % i + b"." * 4000 for i in range(500)])
    assert len(before) == 500 and not failed
    ballast = fill(mnt)
    during, failed = produce(broker.bootstrap, "full", [b"b%05d" % i + b"." * 4000 for i in range(300)])
    assert failed, "a full volume acknowledged everything"
    # Reads keep being served while the volume is full, and the broker keeps its lease.
    assert len(read_back(broker.bootstrap, "full", expect=500 + len(during))) == 500 + len(during)
    assert "No space left on device" in broker.log_text()
    time.sleep(6)  # longer than half the session timeout: a broker that lost its lease steps down
    assert "stepping down" not in broker.log_text(), broker.log_text()[-3000:]
    free(ballast)
    after, failed = produce(broker.bootstrap, "full", [b"c%05d" % i + b"." * 4000 for i in range(300)])
    assert len(after) == 300 and not failed
    everything = read_back(broker.bootstrap, "full", expect=500 + len(during) + 300)
    assert everything == before + during + after, "acknowledged records lost, reordered or duplicated"
    assert "torn" not in broker.log_text()
    assert broker.alive()


def test_transactions_on_a_full_volume_fail_and_the_next_ones_commit_once_space_returns(small_volume, tmp_path):
    mnt, broker = start_with_topic(small_volume, tmp_path, "txfull")
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": "full-tx", "transaction.timeout.ms": 10000, "message.timeout.ms": 8000}
    p = Producer(conf)
    p.init_transactions(20)
    committed = []
    for t in range(5):
        p.begin_transaction()
        vals = [b"t%d-%d" % (t, i) + b"." * 2000 for i in range(20)]
        for v in vals:
            p.produce("txfull", v, partition=0)
        p.commit_transaction(20)
        committed += vals
    ballast = fill(mnt)
    failed_txn = False
    try:
        p.begin_transaction()
        for i in range(200):
            p.produce("txfull", b"lost-%d" % i + b"." * 2000, partition=0)
        p.commit_transaction(20)
    except KafkaException as e:
        failed_txn = True
        err = e.args[0]
        if err.txn_requires_abort():
            try:
                p.abort_transaction(20)
            except KafkaException:
                pass
    assert failed_txn, "a transaction committed on a full volume"
    free(ballast)
    # The same producer, or after a fatal error a new one with the same id, commits.
    try:
        p.begin_transaction()
    except KafkaException:
        p = Producer(conf)
        p.init_transactions(30)
        p.begin_transaction()
    vals = [b"after-%d" % i for i in range(20)]
    for v in vals:
        p.produce("txfull", v, partition=0)
    p.commit_transaction(30)
    committed += vals
    seen = read_back(broker.bootstrap, "txfull", isolation="read_committed", expect=len(committed))
    assert seen == committed, "read_committed saw records of the failed transaction or lost committed ones"
    assert broker.alive()


def test_offset_commits_on_a_full_volume_fail_retriably_and_work_again(small_volume, tmp_path):
    """A commit the full volume refuses is answered COORDINATOR_NOT_AVAILABLE, which
    every client retries (KAFKA_STORAGE_ERROR before 2026-12-07: Java's consumer
    raises that from a commit as fatal); librdkafka hands it to a synchronous commit's
    caller. The previous commit stays, and the next one lands once space returns."""
    mnt, broker = start_with_topic(small_volume, tmp_path, "ofull")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-full", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("ofull", 0, 5)], asynchronous=False)
    ballast = fill(mnt)
    with pytest.raises(KafkaException) as err:
        c.commit(offsets=[TopicPartition("ofull", 0, 9)], asynchronous=False)
    assert err.value.args[0].code() == KafkaError.COORDINATOR_NOT_AVAILABLE, err.value
    assert c.committed([TopicPartition("ofull", 0)], timeout=20)[0].offset == 5
    free(ballast)
    c.commit(offsets=[TopicPartition("ofull", 0, 11)], asynchronous=False)
    assert c.committed([TopicPartition("ofull", 0)], timeout=20)[0].offset == 11
    c.close()
    assert broker.alive()
