#!/usr/bin/env python3
"""Produce/consume throughput against a running broker with confluent-kafka.
Measured, never asserted. Usage: bench_produce.py HOST:PORT [RECORDS] [SIZE]"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
size = int(sys.argv[3]) if len(sys.argv) > 3 else 100
value = b"x" * size
for acks in ("all", "1"):
    ok, err = [0], [0]

    def cb(e, _m):
        (err if e else ok)[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.num.messages": 10000})
    t = time.time()
    for _ in range(n):
        while True:
            try:
                p.produce(f"bench-acks-{acks}", value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    dt = time.time() - t
    print(f"produce acks={acks}: {ok[0]} delivered, {err[0]} errors, {left} undelivered, {dt:.2f} s, {ok[0] / dt:,.0f} records/s")
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
c.assign([TopicPartition("bench-acks-all", 0, 0)])
got, t = 0, time.time()
while got < n and time.time() - t < 120:
    got += len([m for m in c.consume(10000, 1.0) if not m.error()])
dt = time.time() - t
print(f"consume: {got} records, {dt:.2f} s, {got / dt:,.0f} records/s")
c.close()
