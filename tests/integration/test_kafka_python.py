"""kafka-python against a real kaas-server: produce, consume, groups, admin."""
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic


def test_round_trip_keeps_keys_headers_and_order(kaas):
    a = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    a.create_topics([NewTopic("kp", 3, 1)])
    p = KafkaProducer(bootstrap_servers=kaas.bootstrap, acks="all")
    sent = []
    for i in range(900):
        part = i % 3
        p.send("kp", key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", f"{i}".encode())], partition=part)
        sent.append((part, f"k{i}".encode(), f"v{i}".encode(), [("h", f"{i}".encode())]))
    p.flush()
    p.close()
    c = KafkaConsumer("kp", bootstrap_servers=kaas.bootstrap, group_id="kpg", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=8000)
    got = list(c)
    c.close()
    assert len(got) == 900
    for part in range(3):
        msgs = [m for m in got if m.partition == part]
        assert [m.offset for m in msgs] == list(range(300))
        assert [(m.key, m.value, list(m.headers)) for m in msgs] == [(k, v, h) for pp, k, v, h in sent if pp == part]
    a.close()


def test_group_handover_resumes_from_committed_offsets(kaas):
    a = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    a.create_topics([NewTopic("kshared", 4, 1)])
    p = KafkaProducer(bootstrap_servers=kaas.bootstrap)
    for i in range(200):
        p.send("kshared", value=str(i).encode(), partition=i % 4)
    p.flush()
    common = dict(bootstrap_servers=kaas.bootstrap, group_id="kpair", auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
    c1 = KafkaConsumer("kshared", **common)
    c2 = KafkaConsumer("kshared", **common)
    seen = set()
    deadline = time.time() + 60
    while time.time() < deadline and not (len(seen) == 200 and len(c1.assignment()) == 2 and len(c2.assignment()) == 2):
        for c in (c1, c2):
            for tp, records in c.poll(timeout_ms=200).items():
                for r in records:
                    assert (tp.partition, r.offset) not in seen
                    seen.add((tp.partition, r.offset))
                c.commit()
    assert len(seen) == 200
    assert len(c1.assignment()) == 2 and len(c2.assignment()) == 2
    c1.close()
    for i in range(40):
        p.send("kshared", value=b"late", partition=i % 4)
    p.flush()
    late = set()
    deadline = time.time() + 60
    while len(late) < 40 and time.time() < deadline:
        for tp, records in c2.poll(timeout_ms=200).items():
            for r in records:
                assert (tp.partition, r.offset) not in seen, "re-read a committed record"
                late.add((tp.partition, r.offset))
            c2.commit()
    assert len(late) == 40
    assert {tp.partition for tp in c2.assignment()} == {0, 1, 2, 3}
    committed = {tp: c2.committed(TopicPartition("kshared", tp)) for tp in range(4)}
    assert committed == {0: 60, 1: 60, 2: 60, 3: 60}
    c2.close()
    p.close()
    a.close()


def test_admin_describe_configs_and_delete(kaas):
    a = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
    a.create_topics([NewTopic("kcfg", 1, 1, topic_configs={"retention.ms": "1234"})])
    res = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kcfg")])
    text = repr(res)
    assert "retention.ms" in text and "1234" in text
    groups = [g[0] if isinstance(g, tuple) else g for g in a.list_consumer_groups()] if hasattr(a, "list_consumer_groups") else []
    assert isinstance(groups, list)
    a.delete_topics(["kcfg"])
    assert "kcfg" not in a.list_topics()
    a.close()


def test_describe_log_dirs_counts_each_partition_once_over_two_brokers(kaas_factory, tmp_path):
    """kafka-log-dirs.sh --describe, through kafka-python's `describe_log_dirs`: each
    broker names its one directory, the volume, with its size, and the partitions it
    leads with their logs' sizes; over two brokers on one volume every partition is
    listed by exactly one of them, at the size of what was written to it."""
    from test_cluster import settled
    from txn_helpers import create_topic
    from conftest import wait_for

    data = tmp_path / "shared"
    b0 = kaas_factory(data_dir=data)
    b1 = kaas_factory("--broker-id", "1", data_dir=data)
    create_topic(b0.bootstrap, "sized", 4)
    leaders = wait_for(lambda: settled(b0.bootstrap, b1.bootstrap, topic="sized", brokers=[0, 1]),
                       timeout=30, what="sized placed on both brokers")
    p = KafkaProducer(bootstrap_servers=f"{b0.bootstrap},{b1.bootstrap}", acks="all")
    for i in range(40):
        p.send("sized", value=b"x" * 100, partition=i % 4)
    p.flush(15)
    p.close()
    a = KafkaAdminClient(bootstrap_servers=f"{b0.bootstrap},{b1.bootstrap}")
    try:
        answers = a.describe_log_dirs()
    finally:
        a.close()
    assert sorted(r["broker"] for r in answers) == [0, 1], answers
    listed = {}
    for r in answers:
        (log_dir,) = r["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(data), log_dir
        assert log_dir["total_bytes"] > 0 and 0 <= log_dir["usable_bytes"] <= log_dir["total_bytes"], log_dir
        for t in log_dir["topics"]:
            for part in t["partitions"]:
                key = (t["name"], part["partition_index"])
                assert key not in listed, f"{key} listed by two brokers: {answers}"
                listed[key] = (r["broker"], part["partition_size"])
    assert {p: b for (t, p), (b, _) in listed.items() if t == "sized"} == leaders
    # Ten records of 100 bytes each (whatever their batching): more than 1,000 bytes.
    assert all(size > 1000 for (t, _), (_, size) in listed.items() if t == "sized"), listed
