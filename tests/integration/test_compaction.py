"""Compacted topics with real clients: the log cleaner keeps the latest record of every
key while readers from the beginning always see the latest value of every key; tombstones
go after delete.retention.ms; aborted transactions' records go; kill -9 mid-clean loses
nothing (docs/compaction.md)."""
import json
import shutil
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from conftest import wait_for

CLEANER = ("--log-cleaner-backoff-ms", "200")


def compacted(b, topic, **extra):
    config = {"cleanup.policy": "compact", "segment.bytes": "4000", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "1000"}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic(topic, 1, config=config)])[topic].result(10)


def read_latest(b, topic, isolation="read_committed", settle=1.0, timeout=30.0):
    """(latest value of every key, records read) for a reader from the beginning."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"r-{time.time()}", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])
    latest, count = {}, 0
    deadline = time.time() + timeout
    last_new = time.time()
    try:
        while time.time() < deadline and time.time() - last_new < settle:
            m = c.poll(0.1)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            latest[m.key().decode()] = None if m.value() is None else m.value().decode()
            count += 1
            last_new = time.time()
    finally:
        c.close()
    return latest, count


JS = Path(__file__).resolve().parents[1] / "js"


def aiokafka_latest(bootstrap, topic):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            tp = ATP(topic, 0)
            c.assign([tp])
            end = (await c.end_offsets([tp]))[tp]
            latest = {}
            while await c.position(tp) < end:
                batch = await c.getmany(tp, timeout_ms=1000)
                for m in batch.get(tp, []):
                    latest[m.key.decode()] = None if m.value is None else m.value.decode()
            return latest
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 60))


def log_bytes(b, topic):
    return sum(p.stat().st_size for p in (b.data_dir / f"{topic}-0").glob("*.log"))


def cleaner_passes(b, topic):
    import json
    path = b.data_dir / f"{topic}-0" / "cleaner.json"
    return json.loads(path.read_text())["total_passes"] if path.exists() else 0


def test_a_compacted_topic_shrinks_to_one_record_per_key_and_readers_always_see_the_latest(kaas_factory):
    b = kaas_factory(*CLEANER, "--log-cleaner-enable", "false")
    compacted(b, "state", segment_ms="1000")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "compression.type": "gzip",
                  "enable.idempotence": True})
    expected = {}
    for round_ in range(40):
        for k in range(50):
            expected[f"k{k}"] = f"v{round_}-{k}"
            p.produce("state", key=f"k{k}", value=expected[f"k{k}"])
        p.flush(10)
    # One more write after segment.ms rolls everything before it into sealed segments.
    time.sleep(1.2)
    expected["k0"] = "last"
    p.produce("state", key="k0", value="last")
    p.flush(10)
    before = log_bytes(b, "state")
    latest, count = read_latest(b, "state")
    assert latest == expected and count == 2001
    # Now the cleaner runs; readers from the beginning keep seeing the latest values.
    b.stop()
    b.extra = [x for x in b.extra if x not in ("--log-cleaner-enable", "false")]
    b.restart()
    reads = 0
    while cleaner_passes(b, "state") == 0 or reads < 3:
        latest, _ = read_latest(b, "state", settle=0.5)
        assert latest == expected, "a reader during cleaning saw a stale or missing value"
        reads += 1
        assert reads < 60, "the cleaner never ran"
    latest, count = read_latest(b, "state")
    assert latest == expected
    # About one record per key: 50 keys, the active segment's one record, and the
    # idempotent producer's last batch, kept for its sequence.
    assert count <= 50 + 1 + 50, count
    assert log_bytes(b, "state") < before / 4, (log_bytes(b, "state"), before)
    # Every other client reads across the gaps too: kcat, aiokafka, kafkajs, kafka-python.
    kc_out = subprocess.run(["kcat", "-b", b.bootstrap, "-C", "-t", "state", "-o", "beginning", "-e", "-f", "%k=%s\n"],
                            capture_output=True, text=True, timeout=60)
    assert kc_out.returncode == 0, kc_out.stderr
    assert dict(line.split("=", 1) for line in kc_out.stdout.splitlines()) == expected
    assert aiokafka_latest(b.bootstrap, "state") == expected
    js = subprocess.run(["node", str(JS / "read_latest.js"), b.bootstrap, "state"], capture_output=True, text=True,
                        timeout=120, cwd=JS)
    assert js.returncode == 0, js.stdout + js.stderr
    assert json.loads(js.stdout.strip().splitlines()[-1])["latest"] == expected
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP
    kc = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    kc.assign([KTP("state", 0)])
    kc.seek_to_beginning()
    seen = {m.key.decode(): m.value.decode() for m in kc}
    kc.close()
    assert seen == expected


def test_a_tombstone_disappears_after_delete_retention_ms(kaas_factory):
    b = kaas_factory(*CLEANER)
    compacted(b, "tomb")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    p.produce("tomb", key="gone", value="here")
    p.produce("tomb", key="gone", value=None)
    for i in range(200):
        p.produce("tomb", key=f"f{i % 20}", value="x" * 50)
        if i % 20 == 19:
            p.flush(10)  # separate batches, so segments roll
    # First the old value goes and the tombstone stays...
    wait_for(lambda: cleaner_passes(b, "tomb") > 0, what="a cleaning pass")
    latest, _ = read_latest(b, "tomb")
    assert "gone" in latest and latest["gone"] is None
    # ...then, delete.retention.ms (1 s) after cleaning reached it, the tombstone goes.
    wait_for(lambda: "gone" not in read_latest(b, "tomb", settle=0.5)[0], timeout=30, what="the tombstone to go")
    assert all(v == "x" * 50 for v in read_latest(b, "tomb")[0].values())


def test_an_aborted_transactions_records_disappear_from_a_compacted_topic(kaas_factory):
    b = kaas_factory(*CLEANER)
    compacted(b, "txstate")
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "compactor", "linger.ms": 0})
    p.init_transactions(10)
    p.begin_transaction()
    for i in range(20):
        p.produce("txstate", key=f"a{i}", value="aborted")
    p.flush(10)
    p.abort_transaction(10)
    p.begin_transaction()
    for i in range(20):
        p.produce("txstate", key=f"c{i}", value="committed")
    p.commit_transaction(10)
    plain = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(200):
        plain.produce("txstate", key=f"f{i % 10}", value="y" * 50)
        if i % 20 == 19:
            plain.flush(10)
    # read_uncommitted sees the aborted records until the cleaner removes them.
    wait_for(lambda: not any(k.startswith("a") for k in read_latest(b, "txstate", "read_uncommitted", 0.5)[0]),
             timeout=30, what="aborted records to be cleaned away")
    latest, _ = read_latest(b, "txstate")
    assert {k for k in latest if k.startswith("c")} == {f"c{i}" for i in range(20)}
    # The producer goes on, its transactions still work.
    p.begin_transaction()
    p.produce("txstate", key="c0", value="again")
    p.commit_transaction(10)
    assert read_latest(b, "txstate")[0]["c0"] == "again"


def test_records_without_a_key_are_refused_by_a_compacted_topic(kaas_factory):
    b = kaas_factory()
    compacted(b, "keyed")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "message.send.max.retries": 0})
    errors = []
    p.produce("keyed", value="no key", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    p.produce("keyed", key="k", value="keyed", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None


def test_kill9_during_cleaning_loses_no_latest_value(kaas_factory):
    """The broker dies at each step of a swap (failpoints), restarts, and every latest
    value is there; then it cleans again to the end."""
    for point in ("clean-after-swap-record", "clean-after-swap"):
        b = kaas_factory(*CLEANER, "--log-cleaner-enable", "false")
        topic = f"crash-{point}"
        compacted(b, topic)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        expected = {}
        for round_ in range(20):
            for k in range(30):
                expected[f"k{k}"] = f"{round_}"
                p.produce(topic, key=f"k{k}", value=f"{round_}")
            p.flush(10)
        b.stop()
        b.extra = [x for x in b.extra if x not in ("--log-cleaner-enable", "false")]
        b.env = {"KAAS_FAILPOINTS": point}
        b.proc = None
        b.start()
        wait_for(lambda: not b.alive(), timeout=30, what=f"the broker to die at {point}")
        b.env = {}
        b.restart()
        assert "finished an interrupted cleaner swap" in b.log_text(), point
        latest, _ = read_latest(b, topic)
        assert latest == expected, point
        wait_for(lambda: cleaner_passes(b, topic) > 0, what="a pass after the restart")
        assert read_latest(b, topic)[0] == expected
        b.kill9()


QUIX_PYTHON = Path(__file__).resolve().parents[2] / ".venv-quix" / "bin" / "python"


def test_a_quix_streams_exactly_once_app_restores_its_state_from_a_compacted_changelog(kaas_factory, tmp_path):
    """Quix Streams keeps its state in RocksDB, backed by a compacted changelog topic.
    The cleaner compacts that changelog (small segments); the app's local state is
    deleted; a new run restores it from the changelog and counts on from there."""
    b = kaas_factory(*CLEANER, "--segment-bytes", "2000", "--default-partitions", "1")
    keys = [f"w{i}" for i in range(10)]
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})

    def feed(rounds):
        for _ in range(rounds):
            for k in keys:
                p.produce("words", key=k, value="x")
            p.flush(10)

    def run_app(outputs):
        out = subprocess.run([str(QUIX_PYTHON), str(Path(__file__).parent / "quix_counter.py"), b.bootstrap,
                              str(tmp_path / "state"), str(outputs), "10"],
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    feed(20)
    first = run_app(200)
    assert {k: max(n for kk, n in first if kk == k) for k in keys} == {k: 20 for k in keys}
    changelogs = [t for t in AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
                  if t.startswith("changelog__")]
    assert len(changelogs) == 1, changelogs
    changelog = changelogs[0]
    desc = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, changelog)
    assert "compact" in desc.describe_configs([res])[res].result(10)["cleanup.policy"].value
    # A checkpoint every 10 messages: the changelog holds ~200 updates of 10 keys,
    # which the cleaner compacts.
    wait_for(lambda: cleaner_passes(b, changelog) > 0, timeout=30, what="the changelog to be cleaned")
    shutil.rmtree(tmp_path / "state")
    feed(5)
    second = run_app(50)
    assert {k: max(n for kk, n in second if kk == k) for k in keys} == {k: 25 for k in keys}
    # Exactly once: `counts` read committed holds each count once per key.
    latest, total = read_latest(b, "counts")
    assert total == 250 and latest == {k: "25" for k in keys}


def test_delete_records_is_refused_on_a_topic_that_is_only_compacted(kaas):
    compacted(kaas, "only-compact")
    p = Producer({"bootstrap.servers": kaas.bootstrap})
    p.produce("only-compact", key="k", value="v")
    p.flush(10)
    a = AdminClient({"bootstrap.servers": kaas.bootstrap})
    f = a.delete_records([TopicPartition("only-compact", 0, 1)])[TopicPartition("only-compact", 0, 1)]
    try:
        f.result(10)
        raise AssertionError("DeleteRecords deleted records of a compact-only topic")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.POLICY_VIOLATION
