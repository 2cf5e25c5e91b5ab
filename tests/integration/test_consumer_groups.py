"""KIP-848 consumer groups (group.protocol=consumer) with unmodified confluent-kafka
consumers against a real kaas-server: the broker computes the assignment, members
reconcile one by one, and no record is read twice by committed offsets."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import run_kaasctl, wait_for


# Members are told to heartbeat every 500 ms (5 s by default): a partition moves
# between members over a few heartbeats, and the tests should not wait 5 s for each.
FAST = ("--group-consumer-heartbeat-interval-ms", "500")


@pytest.fixture
def kaas(kaas_factory):
    return kaas_factory(*FAST)


def create(kaas, name, partitions):
    a = AdminClient({"bootstrap.servers": kaas.bootstrap})
    for _, f in a.create_topics([NewTopic(name, partitions)]).items():
        f.result(15)


def produce(kaas, topic, count, partitions, tag=b"v"):
    p = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        p.produce(topic, key=str(i).encode(), value=tag + str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def member(kaas, group, **conf):
    return Consumer({
        "bootstrap.servers": kaas.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **conf,
    })


def assigned(c):
    return sorted((tp.topic, tp.partition) for tp in c.assignment())


class Ledger:
    """Every record read, by (topic, partition, offset): read twice is a failure
    (each read is committed before the next poll)."""

    def __init__(self):
        self.seen = {}

    def poll(self, c, name, timeout=0.2):
        m = c.poll(timeout)
        if m is None:
            return None
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                return None
            raise AssertionError(f"{name}: {m.error()}")
        key = (m.topic(), m.partition(), m.offset())
        assert key not in self.seen, f"{key} read by {name}, already read by {self.seen[key]}"
        self.seen[key] = name
        c.commit(message=m, asynchronous=False)
        return m


def poll_until(members, ledger, done, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for name, c in members.items():
            ledger.poll(c, name)
        if done():
            return
    raise AssertionError(
        f"timed out waiting for {what}: read {len(ledger.seen)}, assignments "
        + ", ".join(f"{n}={assigned(c)}" for n, c in members.items())
    )


def test_members_share_a_topic_and_a_third_takes_partitions_without_a_record_read_twice(kaas):
    create(kaas, "shared", 4)
    produce(kaas, "shared", 400, 4)
    ledger = Ledger()
    members = {"a": member(kaas, "kip848"), "b": member(kaas, "kip848")}
    try:
        for c in members.values():
            c.subscribe(["shared"])
        poll_until(
            members, ledger,
            lambda: len(ledger.seen) == 400 and all(len(c.assignment()) == 2 for c in members.values()),
            what="400 records read and 2 partitions each",
        )
        assert set(ledger.seen.values()) == {"a", "b"}
        # A third member joins: partitions move to it (revoked from their owner
        # first), and what is produced now is read once, by whoever owns it then.
        members["c"] = member(kaas, "kip848")
        members["c"].subscribe(["shared"])
        produce(kaas, "shared", 300, 4, tag=b"late")
        poll_until(
            members, ledger,
            lambda: len(ledger.seen) == 700
            and sorted(len(c.assignment()) for c in members.values()) == [1, 1, 2],
            what="700 records read and the partitions spread 2/1/1",
        )
        owned = [tp for c in members.values() for tp in assigned(c)]
        assert sorted(owned) == [("shared", p) for p in range(4)], owned
        # The broker's view: one consumer group, three members at the group's epoch.
        desc = run_kaasctl(kaas.data_dir, "groups", "kip848")
        assert desc.returncode == 0, desc.stderr
        assert "CONSUMER GROUP" in desc.stdout and desc.stdout.count("Stable") == 3, desc.stdout
    finally:
        for c in members.values():
            c.close()


def test_a_member_killed_with_kill_9_has_its_partitions_reassigned_after_the_session_timeout(kaas_factory, tmp_path):
    kaas = kaas_factory("--group-consumer-session-timeout-ms", "6000", *FAST)
    create(kaas, "victim", 4)
    produce(kaas, "victim", 40, 4)
    # The member to kill runs in a process of its own; it says which partitions it
    # holds once it holds some, then keeps polling.
    script = textwrap.dedent(f"""
        import sys, time
        from confluent_kafka import Consumer
        c = Consumer({{"bootstrap.servers": "{kaas.bootstrap}", "group.id": "k9", "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False}})
        c.subscribe(["victim"])
        said = False
        while True:
            c.poll(0.2)
            if not said and c.assignment():
                print("ASSIGNED", flush=True)
                said = True
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    survivor = member(kaas, "k9")
    try:
        assert proc.stdout.readline().strip() == "ASSIGNED"
        survivor.subscribe(["victim"])
        ledger = Ledger()
        poll_until({"s": survivor}, ledger, lambda: len(survivor.assignment()) == 2, what="a 2/2 split")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = time.time()
        poll_until({"s": survivor}, ledger, lambda: len(survivor.assignment()) == 4, timeout=30,
                   what="the dead member's partitions")
        # Not before its session ended: a kill -9 sends no leave.
        assert time.time() - killed_at >= 4, "partitions moved before the session timeout"
        assert "consumer group member removed" in kaas.log_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        survivor.close()


def test_a_regex_subscription_picks_up_a_topic_created_later(kaas):
    create(kaas, "re-one", 2)
    produce(kaas, "re-one", 10, 2)
    c = member(kaas, "regex")
    ledger = Ledger()
    try:
        c.subscribe(["^re-.*"])
        poll_until({"c": c}, ledger, lambda: len(ledger.seen) == 10, what="re-one's records")
        create(kaas, "re-two", 3)
        create(kaas, "other", 1)
        produce(kaas, "re-two", 30, 3)
        produce(kaas, "other", 5, 1)
        poll_until({"c": c}, ledger, lambda: len(ledger.seen) == 40, what="re-two's records")
        assert {t for t, _, _ in ledger.seen} == {"re-one", "re-two"}
        assert ("other", 0) not in assigned(c)
    finally:
        c.close()


def test_a_classic_member_cannot_join_a_consumer_group_and_classic_groups_work_beside_it(kaas):
    create(kaas, "mixed", 2)
    produce(kaas, "mixed", 20, 2)
    new = member(kaas, "taken")
    ledger = Ledger()
    try:
        new.subscribe(["mixed"])
        poll_until({"new": new}, ledger, lambda: len(ledger.seen) == 20, what="the consumer group's records")
        # A classic member of the same group id is refused, loudly.
        errors = []
        classic = Consumer({
            "bootstrap.servers": kaas.bootstrap, "group.id": "taken", "auto.offset.reset": "earliest",
            "error_cb": lambda e: errors.append(e),
        })
        classic.subscribe(["mixed"])
        deadline = time.time() + 20
        got = []
        while time.time() < deadline and not got:
            m = classic.poll(0.2)
            if m is not None and m.error() and m.error().code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL:
                got.append(m.error())
            got.extend(e for e in errors if e.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL)
            ledger.poll(new, "new", 0.05)
        classic.close()
        assert got, "the classic member was not told INCONSISTENT_GROUP_PROTOCOL"
        # kafka-python's classic consumer, in a group of its own, beside it.
        from kafka import KafkaConsumer
        kp = KafkaConsumer("mixed", bootstrap_servers=kaas.bootstrap, group_id=f"classic-{uuid.uuid4()}",
                           auto_offset_reset="earliest", consumer_timeout_ms=15000)
        try:
            read = [m for _, m in zip(range(20), kp)]
        finally:
            kp.close()
        assert len(read) == 20
        # kafka-python's admin client speaks DescribeGroups only: the consumer group
        # is shown with its member's subscription and assignment decoded.
        from kafka.admin import KafkaAdminClient
        kadmin = KafkaAdminClient(bootstrap_servers=kaas.bootstrap)
        try:
            described = kadmin.describe_groups(["taken"])["taken"]
        finally:
            kadmin.close()
        assert described["protocol_type"] == "consumer", described
        (m,) = described["members"]
        assert m["member_metadata"]["topics"] == ["mixed"], described
        assert m["member_assignment"]["assigned_partitions"] == [{"topic": "mixed", "partitions": [0, 1]}], described
        # ListGroups with its type filter tells them apart.
        admin = AdminClient({"bootstrap.servers": kaas.bootstrap})  # must outlive its futures
        groups = admin.list_consumer_groups().result(15)
        kinds = {g.group_id: str(g.type) for g in groups.valid}
        assert "CONSUMER" in kinds.get("taken", "").upper(), kinds
        classic_ids = [g for g, k in kinds.items() if g.startswith("classic-")]
        assert classic_ids and all("CLASSIC" in kinds[g].upper() for g in classic_ids), kinds
    finally:
        new.close()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_the_member_chooses_the_server_assignor(kaas, assignor):
    # Two topics of 3 partitions, two members: range gives each topic's first two
    # partitions to the first member (4 and 2); uniform balances them (3 and 3).
    topics = [f"{assignor}-x", f"{assignor}-y"]
    for t in topics:
        create(kaas, t, 3)
    group = f"as-{assignor}"
    a = member(kaas, group, **{"group.remote.assignor": assignor})
    b = member(kaas, group, **{"group.remote.assignor": assignor})
    want = [2, 4] if assignor == "range" else [3, 3]
    ledger = Ledger()
    try:
        a.subscribe(topics)
        b.subscribe(topics)
        poll_until({"a": a, "b": b}, ledger,
                   lambda: sorted(len(c.assignment()) for c in (a, b)) == want
                   and len(a.assignment()) + len(b.assignment()) == 6,
                   what=f"the {assignor} assignment {want}")
        if assignor == "range":
            # Per topic, consecutive ranges in member id order.
            for c in (a, b):
                by_topic = {}
                for t, p in assigned(c):
                    by_topic.setdefault(t, []).append(p)
                assert all(ps in ([0, 1], [2]) for ps in by_topic.values()), by_topic
        admin = AdminClient({"bootstrap.servers": kaas.bootstrap})  # must outlive its futures
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert len(d.members) == 2
        assert sorted(len(m.assignment.topic_partitions) for m in d.members) == want
        assert d.partition_assignor == assignor, d.partition_assignor
    finally:
        a.close()
        b.close()
