"""Group, cluster, offsets-by-time and retention APIs through confluent-kafka's clients."""
import time

from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_for


def test_groups_are_listed_described_and_deleted(kaas):
    a = AdminClient({"bootstrap.servers": kaas.bootstrap})
    p = Producer({"bootstrap.servers": kaas.bootstrap})
    p.produce("gtopic", b"x")
    p.flush(10)
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "described", "auto.offset.reset": "earliest"})
    c.subscribe(["gtopic"])
    wait_for(lambda: c.poll(0.2) is not None or c.assignment(), what="assignment")
    listed = a.list_consumer_groups().result(10)
    assert "described" in {g.group_id for g in listed.valid}
    desc = a.describe_consumer_groups(["described"])["described"].result(10)
    assert desc.state == ConsumerGroupState.STABLE
    assert len(desc.members) == 1 and desc.members[0].assignment.topic_partitions[0].topic == "gtopic"
    # A group with members cannot be deleted.
    try:
        a.delete_consumer_groups(["described"])["described"].result(10)
        raise AssertionError("deleted a non-empty group")
    except Exception as e:  # noqa: BLE001
        assert "NON_EMPTY_GROUP" in str(e) or "not empty" in str(e).lower()
    c.commit(asynchronous=False) if c.assignment() else None
    c.close()
    a.delete_consumer_groups(["described"])["described"].result(10)
    assert "described" not in {g.group_id for g in a.list_consumer_groups().result(10).valid}


def test_static_member_restart_keeps_its_assignment(kaas):
    a = AdminClient({"bootstrap.servers": kaas.bootstrap})
    a.create_topics([NewTopic("static", 2)])["static"].result(10)
    conf = {"bootstrap.servers": kaas.bootstrap, "group.id": "static-g", "group.instance.id": "pod-0",
            "session.timeout.ms": 30000, "auto.offset.reset": "earliest"}
    c = Consumer(conf)
    c.subscribe(["static"])
    wait_for(lambda: (c.poll(0.2), len(c.assignment()) == 2)[1], what="first assignment")
    gen_before = a.describe_consumer_groups(["static-g"])["static-g"].result(10)
    c.close()  # a static member's close does not leave the group
    c2 = Consumer(conf)
    c2.subscribe(["static"])
    wait_for(lambda: (c2.poll(0.2), len(c2.assignment()) == 2)[1], what="assignment after restart")
    after = a.describe_consumer_groups(["static-g"])["static-g"].result(10)
    assert len(after.members) == 1
    assert after.members[0].group_instance_id == "pod-0"
    assert gen_before.members[0].member_id != after.members[0].member_id
    c2.close()


def test_describe_cluster_and_offsets_for_times(kaas):
    a = AdminClient({"bootstrap.servers": kaas.bootstrap})
    cluster = a.describe_cluster().result(10)
    assert len(cluster.nodes) == 1 and cluster.nodes[0].port == kaas.port
    assert cluster.cluster_id
    p = Producer({"bootstrap.servers": kaas.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for i in range(5):
        p.produce("times", value=str(i).encode(), timestamp=base + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "t"})
    found = c.offsets_for_times([TopicPartition("times", 0, base + 2500)], timeout=10)
    assert found[0].offset == 3
    lo, hi = c.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
    assert (lo, hi) == (0, 5)
    c.close()


def test_timestamp_lookups_of_a_read_committed_reader_stop_at_the_last_stable_offset(kaas):
    """As Kafka's `lastFetchableOffset`: a read_committed ListOffsets by timestamp (and
    max timestamp, -3) answers only offsets below the last stable offset. Before, it
    answered an offset inside an open transaction, which that reader cannot read."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec
    a = AdminClient({"bootstrap.servers": kaas.bootstrap})
    a.create_topics([NewTopic("stamps", 1)])["stamps"].result(10)
    base = int(time.time() * 1000) - 100_000
    plain = Producer({"bootstrap.servers": kaas.bootstrap, "linger.ms": 0})
    plain.produce("stamps", value=b"committed", partition=0, timestamp=base)
    assert plain.flush(10) == 0
    tx = Producer({"bootstrap.servers": kaas.bootstrap, "transactional.id": "stamps-tx", "linger.ms": 0})
    tx.init_transactions(20)
    tx.begin_transaction()
    tx.produce("stamps", value=b"open", partition=0, timestamp=base + 5000)
    assert tx.flush(10) == 0
    tp = TopicPartition("stamps", 0, base + 1000)
    for level, expected in (("read_committed", -1), ("read_uncommitted", 1)):
        c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "stamps", "isolation.level": level})
        try:
            assert c.offsets_for_times([tp], timeout=10)[0].offset == expected, level
        finally:
            c.close()
    spec = {TopicPartition("stamps", 0): OffsetSpec.max_timestamp()}
    committed = a.list_offsets(spec, isolation_level=IsolationLevel.READ_COMMITTED)
    uncommitted = a.list_offsets(spec, isolation_level=IsolationLevel.READ_UNCOMMITTED)
    assert [f.result(10).offset for f in committed.values()] == [-1]
    assert [(f.result(10).offset, f.result(10).timestamp) for f in uncommitted.values()] == [(1, base + 5000)]
    tx.commit_transaction(20)
    committed = a.list_offsets(spec, isolation_level=IsolationLevel.READ_COMMITTED)
    assert [(f.result(10).offset, f.result(10).timestamp) for f in committed.values()] == [(1, base + 5000)]


def test_retention_by_size_moves_the_log_start(kaas_factory):
    b = kaas_factory("--retention-check-interval-ms", "200")
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic("small", 1, config={"segment.bytes": "2000", "retention.bytes": "4000"})])["small"].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(100):
        p.produce("small", value=b"x" * 200)
        p.flush(10)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "r"})
    lo, hi = wait_for(lambda: (lambda w: w if w[0] > 0 else None)(c.get_watermark_offsets(TopicPartition("small", 0), timeout=5)),
                      what="log start to move")
    assert hi == 100 and 0 < lo < 100
    # Retention runs every 200 ms; a run during the produce loop may already have moved
    # the log start, so wait for the run after the last append.
    size = lambda: sum(s.stat().st_size for s in (b.data_dir / "small-0").glob("*.log"))
    wait_for(lambda: size() <= 4000 + 2000 + 400, timeout=10, what="retention to bring the log within retention.bytes")
    c.close()
