#!/usr/bin/env python3
"""Counts the volume operations kaas makes (docs/performance.md, "A capacity model for
network volumes"): brokers on kaas-faultfs, which counts every request the kernel
sends it, while a workload runs. Reports operations per produced batch, per
transaction, per idle second per partition, and per partition taken over.

  .venv/bin/python scripts/volume_ops.py [TTL_MS]   (root and /dev/fuse; builds nothing:
                                                      run cargo build --workspace first)

TTL_MS (default 0) is how long the kernel may cache names and attributes: 0 makes every
path component of every open a request, as a client without a cache; 1000 is closer to
an NFS client, whose attribute cache keeps them for seconds (each open still asks).

Binaries: KAAS_SERVER_BIN and KAAS_FAULTFS_BIN, else target/release, else target/debug.
Writes target/volume-ops-ttl<TTL_MS>.json and prints a table. "Metadata" counts every
request but data, fsync and forget: the close (release) too, which on NFS flushes."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import META_OPS, ROOT, faultfs_mount, free_port  # noqa: E402

# The close (release) counts too: on NFS it flushes.
META = (*META_OPS, "release")


def binary(env, name):
    if os.environ.get(env):
        return Path(os.environ[env])
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / name
        if p.exists():
            return p
    sys.exit(f"{name} is not built")


SERVER = binary("KAAS_SERVER_BIN", "kaas-server")
FAULTFS = binary("KAAS_FAULTFS_BIN", "kaas-faultfs")
OUT = ROOT / "target"
TTL_MS = int(sys.argv[1]) if len(sys.argv) > 1 else 0


def start(data, i, size):
    port = free_port()
    log = open(OUT / f"volume-ops-broker{i}.log", "wb")
    extra = ["--broker-session-timeout-ms", "4000", "--volume-poll-interval-ms", "1000"] if size > 1 else []
    proc = subprocess.Popen([str(SERVER), "--data-dir", str(data), "--listen", f"127.0.0.1:{port}", "--broker-id",
                             str(i), *extra], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while "kaas-server ready" not in Path(log.name).read_text(errors="replace"):
        if proc.poll() is not None or time.time() > deadline:
            sys.exit(f"kaas-server did not start; see {log.name}")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port}"


def counts(command):
    return json.loads(command("status"))["ops"]


def diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def summary(ops, per):
    meta = sum(v for k, v in ops.items() if k in META)
    syncs = ops.get("fsync", 0) + ops.get("fsyncdir", 0)
    io = ops.get("read", 0) + ops.get("write", 0)
    return {"metadata": round(meta / per, 2), "fsync": round(syncs / per, 2), "read_write": round(io / per, 2),
            "by_kind": {k: round(v / per, 2) for k, v in sorted(ops.items())}}


def one_broker(results):
    with faultfs_mount(OUT / "volume-ops-1", FAULTFS, TTL_MS) as command:
        proc, boot = start(OUT / "volume-ops-1" / "mnt" / "data", 0, 1)
        try:
            admin = AdminClient({"bootstrap.servers": boot})
            time.sleep(3)
            before = counts(command)
            time.sleep(10)
            baseline = diff(counts(command), before)
            results["idle broker, per second"] = summary(baseline, 10)

            for f in admin.create_topics([NewTopic("ops", 1), NewTopic("idle", 100)]).values():
                f.result(timeout=30)
            p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0, "enable.idempotence": True})
            p.produce("ops", value=b"warm")
            p.flush(10)
            n = 200
            before = counts(command)
            for i in range(n):
                p.produce("ops", value=b"x" * 100)
                p.flush(10)
            results["per produced batch (acks=all, one at a time)"] = summary(diff(counts(command), before), n)

            t = Producer({"bootstrap.servers": boot, "transactional.id": "ops"})
            t.init_transactions(30)
            for _ in range(3):
                t.begin_transaction()
                t.produce("ops", value=b"t")
                t.commit_transaction(30)
            n = 100
            before = counts(command)
            for _ in range(n):
                t.begin_transaction()
                t.produce("ops", value=b"t")
                t.commit_transaction(30)
            time.sleep(2)  # the Complete line's sync and the markers' follow-ups
            idle_2s = {k: v * 2 / 10 for k, v in baseline.items()}
            ops = diff(counts(command), before)
            results["per transaction (one partition, one record)"] = summary(
                {k: max(0, v - round(idle_2s.get(k, 0))) for k, v in ops.items()}, n)

            time.sleep(5)
            before = counts(command)
            time.sleep(10)
            idle = diff(counts(command), before)
            per_partition = {k: max(0, v - baseline.get(k, 0)) for k, v in idle.items()}
            results["idle, per second per partition (100 partitions)"] = summary(per_partition, 10 * 101)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def take_over(results):
    size, partitions = 3, 60
    with faultfs_mount(OUT / "volume-ops-3", FAULTFS, TTL_MS) as command:
        data = OUT / "volume-ops-3" / "mnt" / "data"
        brokers = [start(data, i, size) for i in range(size)]
        try:
            boot = ",".join(b for _, b in brokers)
            admin = AdminClient({"bootstrap.servers": boot})
            admin.create_topics([NewTopic("moving", partitions)])["moving"].result(timeout=30)
            time.sleep(5)

            def led_by(broker):
                md = AdminClient({"bootstrap.servers": brokers[0][1]}).list_topics("moving", timeout=10)
                return sum(1 for p in md.topics["moving"].partitions.values() if p.leader == broker)

            victims = led_by(2)
            before = counts(command)
            time.sleep(5)
            idle = diff(counts(command), before)
            results[f"idle, per second per partition (3 brokers, {partitions} partitions)"] = summary(
                idle, 5 * partitions)
            started = time.time()
            before = counts(command)
            brokers[2][0].send_signal(signal.SIGKILL)
            brokers[2][0].wait()
            while led_by(2) > 0 or led_by(-1) > 0:
                if time.time() - started > 60:
                    sys.exit("the survivors did not take the partitions over in 60 s")
                time.sleep(0.2)
            took = time.time() - started
            ops = diff(counts(command), before)
            background = {k: v * took / 5 for k, v in idle.items()}
            results[f"per partition taken over ({victims} of {partitions}, 3 brokers)"] = summary(
                {k: max(0, v - round(background.get(k, 0))) for k, v in ops.items()}, max(victims, 1))
            results["take-over seconds"] = round(took, 1)
        finally:
            for proc, _ in brokers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()


def main():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        sys.exit("needs root and /dev/fuse (it mounts kaas-faultfs)")
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "server": str(SERVER), "ttl_ms": TTL_MS}
    one_broker(results)
    take_over(results)
    (OUT / f"volume-ops-ttl{TTL_MS}.json").write_text(json.dumps(results, indent=2))
    print("| what | metadata ops | fsyncs | reads + writes |\n|---|---|---|---|")
    for k, v in results.items():
        if isinstance(v, dict):
            print(f"| {k} | {v['metadata']} | {v['fsync']} | {v['read_write']} |")
    print(f"\ntake-over took {results['take-over seconds']} s; details in target/volume-ops-ttl{TTL_MS}.json")


if __name__ == "__main__":
    main()
