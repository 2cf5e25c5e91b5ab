"""Consumers of different clients in one group, over three brokers on one volume,
while the group's coordinator dies (issue 9): kafka-python and kafkajs members
rebalance onto the new coordinator and, between them, miss no record. (docs/cluster.md)"""
import json
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from conftest import run_kaasctl, wait_for
from test_cluster import SHORT, placement, rendezvous, settled
from txn_helpers import create_topic

JS = Path(__file__).resolve().parents[1] / "js"


def three_brokers_with(kaas_factory, tmp_path, topic, partitions):
    """Three brokers on one volume and `topic`, its partitions placed on them:
    (brokers, every bootstrap address)."""
    data = tmp_path / "shared"
    brokers = [kaas_factory("--broker-id", str(i), *SHORT, data_dir=data) for i in range(3)]
    create_topic(brokers[0].bootstrap, topic, partitions)
    wait_for(lambda: settled(*(b.bootstrap for b in brokers), topic=topic, brokers=[0, 1, 2]),
             timeout=30, what=f"{topic} placed on the three brokers")
    return brokers, ",".join(b.bootstrap for b in brokers)


def test_kafka_python_and_kafkajs_members_rebalance_when_the_coordinator_dies_and_miss_nothing(kaas_factory, tmp_path):
    brokers, every = three_brokers_with(kaas_factory, tmp_path, "rb", 6)
    coordinator = rendezvous("group-rbg", [0, 1, 2])
    assert coordinator in placement("rb", 6, [0, 1, 2]).values(), "the coordinator also leads partitions"

    def produce(start, count):
        p = Producer({"bootstrap.servers": every, "acks": "all", "enable.idempotence": True})
        for i in range(start, start + count):
            p.produce("rb", value=f"r{i}".encode(), partition=i % 6)
        assert p.flush(60) == 0

    seen = {"python": [], "js": []}
    assigned = {"python": set(), "js": set()}
    after_kill = {"python": 0, "js": 0}
    killed = threading.Event()
    stop = threading.Event()

    def python_member():
        c = KafkaConsumer("rb", bootstrap_servers=every.split(","), group_id="rbg", auto_offset_reset="earliest",
                          session_timeout_ms=10000, heartbeat_interval_ms=1000, request_timeout_ms=30000,
                          partition_assignment_strategy=[RoundRobinPartitionAssignor])
        try:
            while not stop.is_set():
                batch = c.poll(timeout_ms=500)
                assigned["python"] = {tp.partition for tp in c.assignment()}
                for records in batch.values():
                    for r in records:
                        seen["python"].append(r.value.decode())
                        after_kill["python"] += killed.is_set()
        finally:
            c.close()

    js = subprocess.Popen(["node", str(JS / "group_member.js"), every, "rb", "rbg"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, cwd=JS)
    js_log = []

    def js_reader():
        for line in js.stdout:
            js_log.append(line.rstrip())
            if line.startswith("JOINED "):
                assigned["js"] = set(json.loads(line[7:]).get("rb", []))
            if line.startswith("SEEN "):
                seen["js"].append(line[5:].strip())
                after_kill["js"] += killed.is_set()

    threads = [threading.Thread(target=python_member, daemon=True), threading.Thread(target=js_reader, daemon=True)]
    for t in threads:
        t.start()
    try:
        # Both members in the group, sharing the six partitions, before anything is produced.
        wait_for(lambda: assigned["python"] and assigned["js"] and assigned["python"] | assigned["js"] == set(range(6))
                 and not assigned["python"] & assigned["js"], timeout=60, what="both members sharing the partitions")
        produce(0, 300)
        union = lambda: set(seen["python"]) | set(seen["js"])  # noqa: E731
        wait_for(lambda: len(union()) == 300 and seen["python"] and seen["js"], timeout=60,
                 what="both members consuming the first 300 records")
        brokers[coordinator].kill9()
        killed.set()
        produce(300, 300)
        try:
            wait_for(lambda: len(union()) == 600, timeout=120, what="the last 300 records after the coordinator died")
        except AssertionError as e:
            raise AssertionError(f"{e}: have {len(union())}, assigned {assigned}, js log tail {js_log[-8:]}") from None
        assert union() == {f"r{i}" for i in range(600)}, "between them the members missed nothing"
        wait_for(lambda: after_kill["python"] and after_kill["js"], timeout=60,
                 what=f"both members consuming after the rebalance ({after_kill})")
    finally:
        stop.set()
        js.terminate()
        try:
            js.wait(20)
        except subprocess.TimeoutExpired:
            js.kill()
        for t in threads:
            t.join(20)


def test_kcat_and_aiokafka_follow_leaders_spread_over_three_brokers(kaas_factory, tmp_path):
    """Clients given one broker as bootstrap find each partition's leader among three
    (Metadata lists every live broker and the rendezvous-placed leaders) and follow
    NOT_LEADER_OR_FOLLOWER when a leader stops."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    data = tmp_path / "shared"
    brokers = [kaas_factory("--broker-id", str(i), *SHORT, data_dir=data) for i in range(3)]
    create_topic(brokers[0].bootstrap, "kc6", 6)
    placed = wait_for(lambda: settled(*(b.bootstrap for b in brokers), topic="kc6", brokers=[0, 1, 2]),
                      timeout=30, what="kc6 placed")
    assert len(set(placed.values())) == 3, placed
    lines = "".join(f"k{i}:v{i}\n" for i in range(60))
    prod = subprocess.run(["kcat", "-b", brokers[0].bootstrap, "-P", "-t", "kc6", "-K", ":", "-X", "acks=all"],
                          input=lines, capture_output=True, text=True, timeout=60)
    assert prod.returncode == 0, prod.stderr

    async def aio_round():
        p = AIOKafkaProducer(bootstrap_servers=brokers[1].bootstrap, acks="all")
        await p.start()
        try:
            for i in range(60):
                await p.send_and_wait("kc6", f"a{i}".encode(), partition=i % 6)
        finally:
            await p.stop()
        c = AIOKafkaConsumer("kc6", bootstrap_servers=brokers[2].bootstrap, auto_offset_reset="earliest",
                             group_id="aio3", enable_auto_commit=False)
        await c.start()
        got = []
        try:
            end = asyncio.get_event_loop().time() + 30
            while len(got) < 120 and asyncio.get_event_loop().time() < end:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got.extend(r.value.decode() for r in records)
        finally:
            await c.stop()
        return got

    got = asyncio.run(aio_round())
    assert sorted(got) == sorted([f"v{i}" for i in range(60)] + [f"a{i}" for i in range(60)])
    # A leader stops cleanly: kcat, bootstrapped on a survivor, still reads everything.
    gone = placed[0]
    assert brokers[gone].stop() == 0
    survivor = brokers[(gone + 1) % 3]
    rest = sorted({0, 1, 2} - {gone})
    wait_for(lambda: settled(*(brokers[i].bootstrap for i in rest), topic="kc6", brokers=rest), timeout=30,
             what="the survivors leading every partition")
    cons = subprocess.run(["kcat", "-b", survivor.bootstrap, "-C", "-t", "kc6", "-o", "beginning", "-e",
                           "-f", "%s\n"], capture_output=True, text=True, timeout=60)
    assert cons.returncode == 0, cons.stderr
    assert sorted(cons.stdout.split()) == sorted([f"v{i}" for i in range(60)] + [f"a{i}" for i in range(60)])


def test_a_classic_group_taken_over_from_a_killed_coordinator_keeps_its_member_and_is_not_deleted_under_it(
        kaas_factory, tmp_path):
    """A classic group's members lived only in their coordinator's memory: the broker
    that took the group over after a kill -9 deleted its committed offsets if asked
    to before the members had found it (docs/limits.md said so), and made every
    member rejoin. The group's stable generation is in its file now: DeleteGroups is
    refused (NON_EMPTY_GROUP) and the member goes on with its assignment, no
    rebalance (docs/consumer-groups.md, "On the volume and fail-over")."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    brokers, every = three_brokers_with(kaas_factory, tmp_path, "kg", 3)
    coordinator = rendezvous("group-kgg", [0, 1, 2])
    survivors = [b.bootstrap for i, b in enumerate(brokers) if i != coordinator]

    def produce(start, count):
        p = Producer({"bootstrap.servers": every, "acks": "all", "enable.idempotence": True})
        for i in range(start, start + count):
            p.produce("kg", value=f"r{i}".encode(), partition=i % 3)
        assert p.flush(60) == 0

    assignments = []
    consumer = Consumer({"bootstrap.servers": every, "group.id": "kgg", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 30000,
                         "heartbeat.interval.ms": 1000})
    consumer.subscribe(["kg"], on_assign=lambda c, parts: assignments.append(sorted(p.partition for p in parts)))
    seen = set()

    def consume_until(n, what):
        deadline = time.time() + 60
        while len(seen) < n and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                seen.add(m.value().decode())
        assert len(seen) >= n, f"{what}: {len(seen)} of {n}"

    try:
        produce(0, 30)
        consume_until(30, "the first records")
        consumer.commit(asynchronous=False)
        assert assignments == [[0, 1, 2]]
        brokers[coordinator].kill9()

        # kafka-python's admin client: librdkafka's aborts the process when a group's
        # coordinator drops its connection under a request (confluentinc/librdkafka
        # #3663, #4605: "rd_kafka_enq_once_del_source_return: Assertion
        # `eonce->refcnt > 0' failed"), which a kill -9 of the coordinator is.
        retriable = {"NotCoordinatorError", "CoordinatorNotAvailableError", "CoordinatorLoadInProgressError",
                     "KafkaConnectionError", "KafkaTimeoutError", "RequestTimedOutError", "NodeNotReadyError",
                     "NoBrokersAvailable"}
        answer, answers = None, []
        deadline = time.time() + 60
        while answer is None and time.time() < deadline:
            consumer.poll(0.2)
            # A fresh client each time: one keeps asking the coordinator it found first.
            admin = None
            try:
                admin = KafkaAdminClient(bootstrap_servers=survivors, request_timeout_ms=10000)
                answer = admin.delete_groups(["kgg"])["kgg"]
            except KafkaError as e:
                answer = type(e).__name__
            finally:
                if admin is not None:
                    admin.close()
            answers.append(answer)
            if answer in retriable:
                answer = None
                time.sleep(0.3)
        assert answer == "NonEmptyGroupError", f"DeleteGroups right after the take-over: {answer} (answers: {answers[-5:]})"

        produce(30, 30)
        consume_until(60, "the records after the take-over")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("kg", p) for p in range(3)], timeout=30)
        assert sum(tp.offset for tp in committed) == 60, committed
        assert assignments == [[0, 1, 2]], f"the member rebalanced: {assignments}"
        # kaasctl, off the volume, names the member the record holds as each
        # partition's owner (docs/kaasctl.md, `kaasctl groups`).
        shown = run_kaasctl(brokers[0].data_dir, "groups", "kgg", "--json")
        assert shown.returncode == 0, shown.stderr
        owners = {r["partition"]: r.get("owner") for r in json.loads(shown.stdout)}
        assert owners == {p: consumer.memberid() for p in range(3)}, owners
    finally:
        consumer.close()


def test_a_consumer_commits_at_once_on_three_brokers_just_started(kaas_factory, tmp_path):
    """Three brokers started one after another on one volume (default lease and sync
    periods), and at once — as soon as the last says it is ready — a topic created
    through one of them and, for 30 groups in turn, a synchronous commit through
    librdkafka and a read of it back (`committed()`), the groups' coordinators spread
    over the three brokers. librdkafka retries COORDINATOR_LOAD_IN_PROGRESS,
    NOT_COORDINATOR and UNKNOWN_TOPIC_OR_PART only twice (a few hundred
    milliseconds) before the commit fails. On the code before (and with
    `--inter-broker-notifications false`), 1 or 2 of these 30 commits failed in each
    of three runs: a broker that joined took its share of the groups only once
    every peer's next renewal (each second) said it routed to it, and a topic created
    through one broker was known to the others only from their next volume sync (a
    second). Now brokers tell each other of such changes at once (cluster notices,
    docs/cluster.md#cluster-notices)."""
    from confluent_kafka import Consumer, TopicPartition

    data = tmp_path / "shared"
    brokers = [kaas_factory("--broker-id", str(i), data_dir=data) for i in range(3)]
    bootstrap = ",".join(b.bootstrap for b in brokers)
    create_topic(brokers[0].bootstrap, "started", 6)
    failed = []
    for i in range(30):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{i}", "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition("started", p, 5 + p) for p in range(6)], asynchronous=False)
            got = c.committed([TopicPartition("started", p) for p in range(6)], timeout=10)
            assert [tp.offset for tp in got] == [5 + p for p in range(6)], got
        except Exception as e:  # every failure is listed below
            failed.append((f"g{i}", repr(e)))
        finally:
            c.close()
    assert not failed, failed
    rows = json.loads(run_kaasctl(data, "brokers", "--json").stdout)
    coordinating = {r["broker_id"]: [g for g in r["groups"] if g.startswith("g")] for r in rows}
    assert all(coordinating.get(b) for b in range(3)), f"groups on every broker: {coordinating}"
