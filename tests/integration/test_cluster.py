"""Two brokers on one volume, with real clients: every broker is listed, partitions are
led by the broker holding their owner.lock, coordinators spread by rendezvous hashing,
markers cross brokers through the marker queue, and when the leader is killed the
other broker takes its partitions over. (docs/cluster.md)"""
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from conftest import wait_for
from txn_helpers import create_topic, read_all

SHORT = ["--broker-session-timeout-ms", "4000", "--volume-poll-interval-ms", "300"]


def leaders(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return sorted(md.brokers), {p: m.leader for p, m in md.topics[topic].partitions.items()}


def test_two_brokers_share_one_volume_and_survive_the_leaders_death(kaas_factory, tmp_path):
    data = tmp_path / "shared"
    b0 = kaas_factory(*SHORT, data_dir=data)
    b1 = kaas_factory("--broker-id", "1", *SHORT, data_dir=data)
    both = f"{b0.bootstrap},{b1.bootstrap}"
    create_topic(b0.bootstrap, "cl", 4)
    # Both brokers are listed by either; broker 1 learns the topic from the volume
    # and points at broker 0, which holds every partition.
    wait_for(lambda: leaders(b1.bootstrap, "cl") == ([0, 1], {0: 0, 1: 0, 2: 0, 3: 0}), what="broker 1 routes to 0")
    wait_for(lambda: leaders(b0.bootstrap, "cl") == ([0, 1], {0: 0, 1: 0, 2: 0, 3: 0}), what="broker 0 lists 1")

    # Transactions whose coordinators are spread over both brokers (several ids):
    # markers for broker 0's partitions go through its queue when broker 1 coordinates.
    producers = [Producer({"bootstrap.servers": both, "transactional.id": f"cl-{i}"}) for i in range(6)]
    expected = []
    for i, p in enumerate(producers):
        p.init_transactions(30)
        p.begin_transaction()
        for k in range(4):
            p.produce("cl", value=f"t{i}-{k}".encode(), partition=k)
            expected.append(f"t{i}-{k}")
        p.commit_transaction(30)
    p = producers[0]
    p.begin_transaction()
    p.produce("cl", value=b"dropped", partition=1)
    p.abort_transaction(30)
    got = read_all(both, "cl", 4, "read_committed", expect=len(expected))
    assert sorted(got) == sorted(expected)
    assert b0.log_text().count("applied queued markers") > 0, "some markers crossed brokers via the queue"

    # A consumer group commits through its coordinator, wherever it is.
    c = Consumer({"bootstrap.servers": both, "group.id": "cl-group", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe(["cl"])
    seen = []
    deadline = time.time() + 30
    while len(seen) < len(expected) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.value().decode())
    c.commit(asynchronous=False)
    c.close()
    assert sorted(seen) == sorted(expected)

    # The leader dies: broker 1 takes every partition over, and producing, transactions
    # and the group's committed offsets carry on there.
    b0.kill9()
    wait_for(lambda: leaders(b1.bootstrap, "cl")[1] == {0: 1, 1: 1, 2: 1, 3: 1}, timeout=30,
             what="broker 1 leads every partition")
    assert "took over a partition whose writer is gone" in b1.log_text()
    p = producers[1]
    p.begin_transaction()
    for k in range(4):
        p.produce("cl", value=f"after-{k}".encode(), partition=k)
        expected.append(f"after-{k}")
    p.commit_transaction(60)
    got = read_all(b1.bootstrap, "cl", 4, "read_committed", expect=len(expected))
    assert sorted(got) == sorted(expected), "every committed record once, nothing aborted"
    c = Consumer({"bootstrap.servers": b1.bootstrap, "group.id": "cl-group", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe(["cl"])
    rest = []
    deadline = time.time() + 40
    while len(rest) < 4 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            rest.append(m.value().decode())
    c.close()
    assert sorted(rest) == [f"after-{k}" for k in range(4)], "the group resumed from its committed offsets"
