"""Exactly-once through a kill -9 on three brokers with clients other than librdkafka:
aiokafka's, kafka-python's and kafkajs' consume-transform-produce jobs (each with its own
coordinator lookups, retries and transaction manager). The librdkafka job is
test_cluster.py's. (docs/cluster.md, docs/compatibility.md)"""
import asyncio
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import wait_for
from test_cluster import SHORT, _committed, _txn_slot, assert_offsets_at_ends, rendezvous, settled
from txn_helpers import create_topic, read_all

TOTAL = 3000
JS = Path(__file__).resolve().parents[1] / "js"


def guarded_call(call, args, outcome):
    """`call(*args)`; an exception it raises is appended to `outcome`."""
    try:
        call(*args)
    except BaseException as e:  # noqa: BLE001 - handed to the caller
        outcome.append(e)


def _exactly_once_through_a_kill_9(kaas_factory, tmp_path, name, job):
    """Three brokers; topics `<name>-in` and `<name>-out` of 6 partitions. One broker —
    the leader of input partition 0, the coordinator of the job's group and of its
    transactional id — is killed with kill -9 while inputs keep coming and the job
    runs, and restarted once the job went 300 inputs further. `job(every, group, tid,
    progress, stop)` runs in a thread of its own: it consumes `<name>-in`
    (read_committed, in `group`), writes `out-<value>` to the same partition of
    `<name>-out` with the consumed offsets in each transaction (`tid`), keeps
    `progress["committed"]` at the group's committed total and returns once it is
    TOTAL, or when `stop` is set. Then every input is in the output exactly once
    under read_committed, and the group's offsets end at the inputs' ends."""
    data = tmp_path / "shared"
    brokers = [kaas_factory("--broker-id", str(i), *SHORT, data_dir=data) for i in range(3)]
    every = ",".join(b.bootstrap for b in brokers)
    src, dst = f"{name}-in", f"{name}-out"
    create_topic(brokers[0].bootstrap, src, 6)
    create_topic(brokers[0].bootstrap, dst, 6)
    for t in (src, dst):
        wait_for(lambda: settled(*(b.bootstrap for b in brokers), topic=t, brokers=[0, 1, 2]),
                 timeout=30, what=f"{t} placed on the three brokers")
    placed = settled(*(b.bootstrap for b in brokers), topic=src, brokers=[0, 1, 2])
    victim = placed[0]
    group = next(g for g in (f"{name}-{i}" for i in range(1000)) if rendezvous(f"group-{g}", [0, 1, 2]) == victim)
    tid = next(t for t in (f"{name}-job-{i}" for i in range(1000))
               if rendezvous(f"txn-slot-{_txn_slot(t)}", [0, 1, 2]) == victim)

    def feed():
        # Bursts of 20 inputs every 0.15 s, for about 20 s: the kill lands among
        # transactions in flight, and inputs keep coming through it.
        p = Producer({"bootstrap.servers": every, "acks": "all", "enable.idempotence": True})
        for i in range(TOTAL):
            p.produce(src, value=f"v{i}".encode(), partition=i % 6)
            progress["fed"] = i + 1
            if i % 20 == 19:
                p.poll(0)
                time.sleep(0.15)
        assert p.flush(60) == 0, "every input acknowledged"

    progress, stop, failed = {"committed": 0, "fed": 0}, threading.Event(), []
    threads = [threading.Thread(target=guarded_call, args=(feed, (), failed), daemon=True),
               threading.Thread(target=guarded_call, args=(job, (every, group, tid, progress, stop), failed),
                                daemon=True)]
    for t in threads:
        t.start()

    def until(n, seconds):
        deadline = time.time() + seconds
        while progress["committed"] < n:
            assert not failed, f"the job or the feed failed: {failed[0]!r}"
            assert time.time() < deadline, f"{progress['committed']} of {n} inputs processed in {seconds} s"
            time.sleep(0.05)

    try:
        until(300, 90)
        at_kill, fed_at_kill = progress["committed"], progress["fed"]
        brokers[victim].kill9()
        until(at_kill + 300, 150)
        brokers[victim].restart()
        wait_for(lambda: settled(*(b.bootstrap for b in brokers), topic=src, brokers=[0, 1, 2]) == placed,
                 timeout=40, what="the restarted broker leads its partitions again")
        until(TOTAL, 150)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failed, f"the job or the feed failed: {failed[0]!r}"
    assert fed_at_kill < TOTAL, "the kill landed while inputs were still coming"

    out = read_all(every, dst, 6, "read_committed", expect=TOTAL)
    assert sorted(out) == sorted(f"out-v{i}" for i in range(TOTAL)), "every input exactly once in the output"
    assert_offsets_at_ends(every, group, src, 6)


def test_aiokafka_consume_transform_produce_is_exactly_once_through_a_kill_9_on_three_brokers(kaas_factory, tmp_path):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as Tp
    from aiokafka.errors import KafkaError

    async def run(every, group, tid, progress, stop):
        consumer = AIOKafkaConsumer("aio-in", bootstrap_servers=every, group_id=group, auto_offset_reset="earliest",
                                    enable_auto_commit=False, isolation_level="read_committed")
        producer = AIOKafkaProducer(bootstrap_servers=every, transactional_id=tid)
        await consumer.start()
        await producer.start()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=500, max_records=10)
                msgs = [m for ms in batch.values() for m in ms]
                if msgs:
                    try:
                        # Aborted by the context manager on an exception.
                        async with producer.transaction():
                            for m in msgs:
                                await producer.send("aio-out", value=b"out-" + m.value, partition=m.partition)
                            offsets = {Tp(m.topic, m.partition): m.offset + 1 for m in msgs}
                            await producer.send_offsets_to_transaction(offsets, group)
                    except KafkaError:
                        # Back to the committed offsets for the next round.
                        for tp in consumer.assignment():
                            c = await consumer.committed(tp)
                            if c is None:
                                await consumer.seek_to_beginning(tp)
                            else:
                                consumer.seek(tp, c)
                        await asyncio.sleep(0.5)
                        continue
                try:
                    progress["committed"] = sum([await consumer.committed(Tp("aio-in", p)) or 0 for p in range(6)])
                except KafkaError:
                    continue
                if progress["committed"] >= TOTAL:
                    return
        finally:
            await producer.stop()
            await consumer.stop()

    _exactly_once_through_a_kill_9(kaas_factory, tmp_path, "aio",
                                   lambda *args: asyncio.run(run(*args)))


def test_kafka_python_consume_transform_produce_is_exactly_once_through_a_kill_9_on_three_brokers(kaas_factory, tmp_path):
    """kafka-python 3.0.12 can lose a transactional request when its coordinator's
    broker refuses connections (docs/compatibility.md#known-client-issues), and its
    `send_offsets_to_transaction`, `commit_transaction` and `abort_transaction` wait
    without a timeout: the job bounds each transaction and each init_transactions as
    an application must, and when a transaction fails or does not return it starts a
    new producer, whose init_transactions fences the old one and ends the transaction
    it left open, and goes back to the group's committed offsets."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as Tp
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    def run(every, group, tid, progress, stop):
        servers = every.split(",")
        consumer = KafkaConsumer("kp-in", bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, isolation_level="read_committed")
        made, abandoned = [], []

        def bounded(call, *args):
            """Whether `call(*args)` returned in 30 s; an error it raised is raised
            here (a call still running is left behind)."""
            outcome = []
            step = threading.Thread(target=guarded_call, args=(call, args, outcome), daemon=True)
            step.start()
            step.join(30)
            if outcome:
                raise outcome[0]
            return not step.is_alive()

        def fresh_producer():
            """A producer that finished init_transactions, which fences every earlier
            one and ends the transaction it left open (its own InitProducerId may be
            lost too: then another is made)."""
            def make():
                made.append(KafkaProducer(bootstrap_servers=servers, transactional_id=tid))
                made[-1].init_transactions()

            for _ in range(10):
                if made:
                    abandoned.append(made.pop())
                try:
                    if bounded(make):
                        return made[-1]
                except KafkaError:
                    pass  # init_transactions timed out (max_block_ms): another producer
            raise AssertionError("no producer finished init_transactions in 10 attempts")

        def transaction(producer, msgs):
            producer.begin_transaction()
            for m in msgs:
                producer.send("kp-out", value=b"out-" + m.value, partition=m.partition)
            offsets = {Tp(m.topic, m.partition): OffsetAndMetadata(m.offset + 1, "", -1) for m in msgs}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()

        producer = fresh_producer()
        try:
            while not stop.is_set():
                batch = consumer.poll(timeout_ms=500, max_records=10)
                msgs = [m for ms in batch.values() for m in ms]
                if msgs:
                    try:
                        done = bounded(transaction, producer, msgs)
                    except KafkaError:
                        done = False
                    if not done:
                        # Failed or stuck: a new producer ends the transaction (an
                        # abort would go through the same lost-request path), and the
                        # consumer goes back to the offsets that ending left.
                        producer = fresh_producer()
                        for tp in consumer.assignment():
                            c = consumer.committed(tp)
                            if c is None:
                                consumer.seek_to_beginning(tp)
                            else:
                                consumer.seek(tp, c)
                        continue
                try:
                    progress["committed"] = sum(consumer.committed(Tp("kp-in", p)) or 0 for p in range(6))
                except KafkaError:
                    continue
                if progress["committed"] >= TOTAL:
                    return
        finally:
            print(f"kafka-python job: {len(abandoned)} producer(s) replaced")
            for p in made + abandoned:
                try:
                    p.close(0)
                except KafkaError:
                    # close() flushes first and raises on the batches a lost request
                    # left unsent, before it stops the sender: stopped directly.
                    p._sender.force_close()
            consumer.close()

    _exactly_once_through_a_kill_9(kaas_factory, tmp_path, "kp", run)


def test_kafkajs_consume_transform_produce_is_exactly_once_through_a_kill_9_on_three_brokers(kaas_factory, tmp_path):
    """The job is tests/js/ctp_job.js (kafkajs 2.2.4), run until the group's
    committed offsets cover every input."""
    def run(every, group, tid, progress, stop):
        log = open(tmp_path / "ctp_job.log", "w")
        job = subprocess.Popen(["node", str(JS / "ctp_job.js"), every, group, tid, "js-in", "js-out"],
                               cwd=JS, stdout=log, stderr=subprocess.STDOUT)
        check = Consumer({"bootstrap.servers": every, "group.id": group})
        try:
            while not stop.is_set():
                assert job.poll() is None, f"the job exited ({job.returncode}): see {log.name}"
                committed = _committed(check, [TopicPartition("js-in", p) for p in range(6)])
                progress["committed"] = sum(max(tp.offset, 0) for tp in committed)
                if progress["committed"] >= TOTAL:
                    return
                time.sleep(0.2)
        finally:
            check.close()
            job.kill()
            job.wait(10)
            log.close()

    _exactly_once_through_a_kill_9(kaas_factory, tmp_path, "js", run)
