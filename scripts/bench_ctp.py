#!/usr/bin/env python3
"""A consume-transform-produce job over three brokers on one volume, with a kill -9
(docs/performance.md, run by scripts/bench.py): confluent-kafka reads `ctp-in` (6
partitions) in a group, writes each input transformed to `ctp-out` and commits the
group's offsets in the same transaction, at most BATCH inputs per transaction. Half-way,
the broker leading `ctp-in` partition 0 is killed with kill -9 (and started again 10 s
later). Prints one JSON line: the transactions, the seconds they took (kill included),
the rate, and whether read_committed output holds every input exactly once.

  scripts/bench_ctp.py --server target/release/kaas-server --inputs 1200 [-- FLAGS...]

FLAGS go to every broker (e.g. --inter-broker-notifications false for markers that
wait for the poll)."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6
BATCH = 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, server, data, i, flags, logs):
        self.server, self.data, self.i, self.flags, self.logs = server, data, i, flags, logs
        self.port = free_port()
        self.proc = None

    def start(self):
        log = self.logs / f"broker-{self.i}.log"
        before = log.read_text(errors="replace").count("kaas-server ready") if log.exists() else 0
        out = open(log, "ab")
        self.proc = subprocess.Popen([self.server, "--data-dir", str(self.data), "--broker-id", str(self.i),
                                     "--listen", f"127.0.0.1:{self.port}", *self.flags],
                                    stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG="info"))
        deadline = time.time() + 60
        while log.read_text(errors="replace").count("kaas-server ready") <= before:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"broker {self.i} did not start; see {log}")
            time.sleep(0.05)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()


def committed(consumer, partitions, seconds=60):
    deadline = time.time() + seconds
    while True:
        try:
            return consumer.committed(partitions, timeout=20)
        except KafkaException as e:
            moving = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                          KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            if not (moving or e.args[0].retriable()) or time.time() > deadline:
                raise
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--inputs", type=int, default=1200)
    ap.add_argument("--timeout", type=float, default=900, help="give up after this many seconds")
    ap.add_argument("flags", nargs="*")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kaas-ctp-"))
    brokers = [Broker(args.server, work / "data", i, ["--broker-session-timeout-ms", "4000", *args.flags], work)
               for i in range(3)]
    restart = None
    try:
        for b in brokers:
            b.start()
        every = ",".join(f"127.0.0.1:{b.port}" for b in brokers)
        admin = AdminClient({"bootstrap.servers": every})
        time.sleep(3)  # every broker sees the others live
        for t in ("ctp-in", "ctp-out"):
            admin.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
        time.sleep(3)  # partitions placed and opened
        p = Producer({"bootstrap.servers": every, "acks": "all", "enable.idempotence": True})
        for i in range(args.inputs):
            p.produce("ctp-in", value=f"v{i}".encode(), partition=i % PARTITIONS)
        assert p.flush(60) == 0
        victim = admin.list_topics("ctp-in", timeout=10).topics["ctp-in"].partitions[0].leader
        consumer = Consumer({"bootstrap.servers": every, "group.id": "ctp", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.subscribe(["ctp-in"])
        conf = {"bootstrap.servers": every, "transactional.id": "ctp-job", "transaction.timeout.ms": 60000}
        producer = Producer(conf)
        producer.init_transactions(60)
        started, transactions, done, killed = time.time(), 0, 0, False
        while done < args.inputs:
            if time.time() - started > args.timeout:
                raise RuntimeError(f"gave up after {args.timeout} s: {done} of {args.inputs} inputs")
            if not killed and done >= args.inputs // 2:
                brokers[victim].kill9()
                killed = True
                # Started again 10 s later whatever the job is doing: a client call
                # blocked meanwhile (a commit retried while the markers wait for the
                # victim's poll) must not keep the broker down.
                restart = threading.Timer(10, brokers[victim].start)
                restart.start()
            msgs = [m for m in consumer.consume(BATCH, timeout=0.5) if not m.error()]
            if not msgs:
                continue
            try:
                producer.begin_transaction()
                for m in msgs:
                    producer.produce("ctp-out", value=b"out-" + m.value(), partition=m.partition())
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), 60)
                while True:
                    try:
                        producer.commit_transaction(60)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable():
                            raise
                transactions += 1
                done += len(msgs)
            except KafkaException as e:
                if e.args[0].txn_requires_abort():
                    producer.abort_transaction(60)
                elif e.args[0].fatal():
                    producer = Producer(conf)
                    producer.init_transactions(60)
                else:
                    raise
                for tp in committed(consumer, consumer.assignment()):
                    tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    consumer.seek(tp)
                done = sum(max(tp.offset, 0) for tp in committed(
                    consumer, [TopicPartition("ctp-in", q) for q in range(PARTITIONS)]))
        seconds = time.time() - started
        consumer.close()
        if restart:
            restart.join()
        reader = Consumer({"bootstrap.servers": every, "group.id": f"check-{time.time()}",
                           "isolation.level": "read_committed", "enable.auto.commit": False})
        reader.assign([TopicPartition("ctp-out", q, 0) for q in range(PARTITIONS)])
        out, quiet = [], time.time()
        while time.time() - quiet < 5:
            m = reader.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value().decode())
                quiet = time.time()
        reader.close()
        exact = sorted(out) == sorted(f"out-v{i}" for i in range(args.inputs))
        print(json.dumps({"inputs": args.inputs, "transactions": transactions, "seconds": round(seconds, 2),
                          "txn_per_s": round(transactions / seconds, 2), "exactly_once": exact,
                          "flags": args.flags}))
        return 0 if exact else 1
    finally:
        if restart:
            restart.cancel()
            restart.join()
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
