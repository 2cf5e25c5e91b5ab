"""The commit / abort / read_committed round trip with kafka-python, aiokafka and kafkajs."""
import asyncio
import json
import subprocess
from pathlib import Path

from txn_helpers import create_topic, read_all

JS = Path(__file__).resolve().parents[1] / "js"


def test_kafka_python_transactions(kaas):
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(kaas.bootstrap, "kptx", 2)
    p = KafkaProducer(bootstrap_servers=kaas.bootstrap, transactional_id="kp-tx")
    p.init_transactions()
    p.begin_transaction()
    for i in range(10):
        p.send("kptx", value=f"keep-{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(10):
        p.send("kptx", value=f"drop-{i}".encode(), partition=i % 2)
    p.flush()
    p.abort_transaction()
    p.close()
    c = KafkaConsumer("kptx", bootstrap_servers=kaas.bootstrap, group_id="kp-rc", auto_offset_reset="earliest",
                      isolation_level="read_committed", consumer_timeout_ms=5000)
    got = sorted(m.value.decode() for m in c)
    c.close()
    assert got == sorted(f"keep-{i}" for i in range(10))
    assert len(read_all(kaas.bootstrap, "kptx", 2, "read_uncommitted", expect=20)) == 20


def test_aiokafka_transactions(kaas):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    create_topic(kaas.bootstrap, "aiotx", 2)

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=kaas.bootstrap, transactional_id="aio-tx")
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send("aiotx", value=f"keep-{i}".encode(), partition=i % 2)
            await p.begin_transaction()
            for i in range(10):
                await p.send_and_wait("aiotx", value=f"drop-{i}".encode(), partition=i % 2)
            await p.abort_transaction()
        finally:
            await p.stop()
        c = AIOKafkaConsumer("aiotx", bootstrap_servers=kaas.bootstrap, group_id="aio-rc",
                             auto_offset_reset="earliest", isolation_level="read_committed")
        await c.start()
        got = []
        try:
            end = asyncio.get_event_loop().time() + 8
            while asyncio.get_event_loop().time() < end:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got += [m.value.decode() for m in msgs]
        finally:
            await c.stop()
        return got

    got = asyncio.run(run())
    assert sorted(got) == sorted(f"keep-{i}" for i in range(10))
    assert len(read_all(kaas.bootstrap, "aiotx", 2, "read_uncommitted", expect=20)) == 20


def test_kafkajs_transactions(kaas):
    create_topic(kaas.bootstrap, "jstx", 2)
    out = subprocess.run(["node", str(JS / "transactions.js"), kaas.bootstrap], capture_output=True, text=True, timeout=120, cwd=JS)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(result["readCommitted"]) == sorted(f"keep-{i}" for i in range(10))
    assert len(read_all(kaas.bootstrap, "jstx", 2, "read_uncommitted", expect=20)) == 20
