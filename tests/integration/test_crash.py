"""Durability: acknowledged acks=-1 records survive kill -9; a garbage tail is cut."""
import time

from confluent_kafka import Consumer, Producer, TopicPartition

N = 10_000


def read_all(bootstrap, topic, partitions, expect, timeout=60):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.time()}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    try:
        while len(got) < expect and time.time() < deadline:
            for m in c.consume(500, 0.5):
                if not m.error():
                    got.append(m)
    finally:
        c.close()
    return got


def test_acknowledged_records_survive_kill_9_and_the_log_accepts_writes(kaas):
    p = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all", "linger.ms": 2})
    acked = []
    for i in range(N):
        p.produce("durable", value=str(i).encode(), partition=0,
                  on_delivery=lambda err, msg: acked.append(int(msg.value())) if err is None else None)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert len(acked) == N
    kaas.kill9()
    kaas.restart()
    got = read_all(kaas.bootstrap, "durable", 1, N)
    assert sorted(int(m.value()) for m in got) == list(range(N))
    assert [m.offset() for m in got] == list(range(N))
    p2 = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    delivered = []
    p2.produce("durable", b"after", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p2.flush(15) == 0
    assert delivered == [(None, N)]


def test_a_segment_with_garbage_appended_recovers_to_the_last_good_batch(kaas):
    p = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    for i in range(50):
        p.produce("torn", value=str(i).encode(), partition=0)
    assert p.flush(15) == 0
    assert kaas.stop() == 0
    seg = kaas.data_dir / "torn-0" / f"{0:020}.log"
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 64)
    kaas.restart()
    assert seg.stat().st_size == good
    log = kaas.log_text()
    assert "recovery truncated a corrupt or torn log tail" in log
    assert "cut_bytes=256" in log
    got = read_all(kaas.bootstrap, "torn", 1, 50)
    assert sorted(int(m.value()) for m in got) == list(range(50))
    delivered = []
    p2 = Producer({"bootstrap.servers": kaas.bootstrap, "acks": "all"})
    p2.produce("torn", b"next", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p2.flush(15) == 0
    assert delivered == [(None, 50)]


def test_sigterm_exits_zero_after_finishing_in_flight_requests(kaas):
    c = Consumer({"bootstrap.servers": kaas.bootstrap, "group.id": "lp", "fetch.wait.max.ms": 5000})
    c.assign([TopicPartition("quiet", 0, 0)])
    c.poll(0.5)  # a long-polling fetch is now parked on the broker
    t0 = time.time()
    assert kaas.stop() == 0
    assert time.time() - t0 < 10
    assert "kaas-server stopped cleanly" in kaas.log_text()
    c.close()
