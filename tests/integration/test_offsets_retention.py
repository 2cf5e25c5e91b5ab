"""Offsets retention (Kafka's offsets.retention.minutes with KIP-211's rule,
docs/consumer-groups.md#offsets-retention) with unmodified confluent-kafka clients
against a real kaas-server: a group's committed offsets expire a retention after its
last member left, never while it has members, and a group left with nothing is
removed (its file, and from ListGroups)."""
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_for

RETENTION_S = 3.0
FLAGS = (
    "--offsets-retention-ms", str(int(RETENTION_S * 1000)),
    "--offsets-retention-check-interval-ms", "200",
    # KIP-848 members heartbeat every 500 ms (5 s by default).
    "--group-consumer-heartbeat-interval-ms", "500",
)
TOPIC = "retained"


def consumer(kaas, group, protocol="classic"):
    return Consumer({
        "bootstrap.servers": kaas.bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })


def consume_all_and_commit(c, count):
    """Reads `count` records (polling), then commits their offsets synchronously."""
    got = 0
    deadline = time.time() + 30
    while got < count and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
    assert got == count, f"read {got} of {count}"
    c.commit(asynchronous=False)


def committed(kaas, group):
    """The group's committed offsets of both partitions, as OffsetFetch answers them
    (-1001: none), read by a consumer that never joins the group."""
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)]
    finally:
        c.close()


def listed(admin):
    return {g.group_id for g in admin.list_consumer_groups().result(10).valid}


def test_offsets_expire_a_retention_after_the_last_member_and_never_while_one_stays(kaas_factory):
    kaas = kaas_factory(*FLAGS)
    admin = AdminClient({"bootstrap.servers": kaas.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 2)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    # Stays: a classic member commits once, then stays, polling, committing nothing.
    stays = consumer(kaas, "stays")
    stays.subscribe([TOPIC])
    consume_all_and_commit(stays, 10)
    # Goes: a classic group and a KIP-848 consumer group commit and close.
    for group, protocol in (("goes", "classic"), ("goes-848", "consumer")):
        c = consumer(kaas, group, protocol)
        c.subscribe([TOPIC])
        consume_all_and_commit(c, 10)
        c.close()
    closed = time.time()
    for group in ("stays", "goes", "goes-848"):
        assert committed(kaas, group) == [5, 5], group

    # Well inside the retention after the last member left: nothing has gone.
    while time.time() < closed + RETENTION_S * 0.5:
        stays.poll(0.2)
    assert committed(kaas, "goes") == [5, 5]
    assert committed(kaas, "goes-848") == [5, 5]
    assert {"stays", "goes", "goes-848"} <= listed(admin)

    # A retention later the closed groups are gone, offsets, file and listing.
    def gone():
        stays.poll(0.2)
        return committed(kaas, "goes") == [-1001, -1001] and committed(kaas, "goes-848") == [-1001, -1001]

    wait_for(gone, timeout=RETENTION_S + 10, interval=0.2, what="the closed groups' offsets to expire")
    groups_dir = kaas.data_dir / "__cluster" / "groups"
    assert not (groups_dir / "goes.json").exists()
    assert not (groups_dir / "goes-848.json").exists()
    wait_for(lambda: stays.poll(0.2) is None and not ({"goes", "goes-848"} & listed(admin)),
             timeout=10, what="ListGroups to drop them")
    assert "group removed: its committed offsets expired" in kaas.log_text()

    # The member that stayed, its commit now well past the retention, keeps it.
    while time.time() < closed + RETENTION_S * 2.5:
        stays.poll(0.2)
    assert committed(kaas, "stays") == [5, 5]
    assert "stays" in listed(admin)
    stays.close()
