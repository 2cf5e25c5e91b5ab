#!/usr/bin/env python3
"""What a cluster with many partitions costs when nothing happens, and how long a
fail-over of a broker's partitions takes (issue 25 item 7; docs/performance.md).

Starts BROKERS kaas-server processes on one fresh volume, creates TOPICS topics whose
partitions add up to PARTITIONS, waits until every partition has a leader, then:
- idle: the CPU each broker uses over IDLE_S seconds with no client traffic (from
  /proc/<pid>/stat), as a percentage of one core;
- fail-over: kill -9 of the broker leading the most partitions, and the time until
  every partition has a live leader again, as Metadata from a surviving broker says
  (polled every 100 ms), minus nothing: the session timeout is part of it; and how
  long each survivor took from its first take-over to its last (its logs).

Usage: scripts/scale.py [--bin target/release/kaas-server] [--partitions 3000]
                        [--brokers 3] [--topics 30] [--idle-s 20]
                        [--session-timeout-ms 10000]
Prints one JSON line. Needs confluent-kafka (the test venv has it).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line; after the
    # command name's ")" they are the 12th and 13th.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def leaders(admin, topics):
    """Partition -> leader (or -1) for every partition of `topics`."""
    md = admin.list_topics(timeout=10)
    out = {}
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or tm.error is not None:
            continue
        for p, pm in tm.partitions.items():
            out[(t, p)] = pm.leader if pm.error is None else -1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("KAAS_SERVER_BIN", "target/release/kaas-server"))
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--topics", type=int, default=30)
    ap.add_argument("--idle-s", type=float, default=20)
    ap.add_argument("--session-timeout-ms", type=int, default=10_000)
    args = ap.parse_args()

    data = tempfile.mkdtemp(prefix="kaas-scale-")
    ports = [free_port() for _ in range(args.brokers)]
    procs = []
    try:
        for i, port in enumerate(ports):
            log = open(os.path.join(data, f"broker-{i}.log"), "w")
            procs.append(subprocess.Popen(
                [args.bin, "--data-dir", os.path.join(data, "volume"), "--broker-id", str(i),
                 "--listen", f"127.0.0.1:{port}", "--inter-broker-listener-name", "PLAINTEXT",
                 "--broker-session-timeout-ms", str(args.session_timeout_ms)],
                stdout=log, stderr=subprocess.STDOUT))
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.time() + 60
        while True:
            try:
                md = admin.list_topics(timeout=5)
                if len(md.brokers) == args.brokers:
                    break
            except Exception:
                pass
            if time.time() > deadline:
                sys.exit("the brokers did not all come up")
            time.sleep(0.5)
        per_topic = args.partitions // args.topics
        topics = [f"scale-{i}" for i in range(args.topics)]
        for t, f in admin.create_topics([NewTopic(t, per_topic) for t in topics]).items():
            f.result(60)
        total = per_topic * args.topics
        deadline = time.time() + 120
        while True:
            led = leaders(admin, topics)
            if len(led) == total and all(v >= 0 for v in led.values()):
                break
            if time.time() > deadline:
                sys.exit(f"only {sum(v >= 0 for v in led.values())} of {total} partitions got a leader")
            time.sleep(0.5)
        # Let the hand-overs of topic creation settle.
        time.sleep(3)

        before = [cpu_seconds(p.pid) for p in procs]
        t0 = time.time()
        time.sleep(args.idle_s)
        spent = [cpu_seconds(p.pid) - b for p, b in zip(procs, before)]
        elapsed = time.time() - t0
        idle_pct = [round(100 * s / elapsed, 2) for s in spent]

        led = leaders(admin, topics)
        counts = {}
        for v in led.values():
            counts[v] = counts.get(v, 0) + 1
        victim = max(counts, key=counts.get)
        moved = counts[victim]
        survivor = next(i for i in range(args.brokers) if i != victim)
        admin2 = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[survivor]}"})
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        killed = time.time()
        deadline = killed + 300
        while True:
            try:
                led = leaders(admin2, topics)
                if len(led) == total and all(v >= 0 and v != victim for v in led.values()):
                    break
            except Exception:
                pass
            if time.time() > deadline:
                sys.exit("the fail-over did not finish within 300 s")
            time.sleep(0.1)
        failover_s = round(time.time() - killed, 2)
        # The take-overs themselves, from each survivor's log: its first to its last
        # (the survivors' volume syncs run at phases of their own).
        from datetime import datetime
        took, spans = 0, []
        for i in range(args.brokers):
            if i == victim:
                continue
            with open(os.path.join(data, f"broker-{i}.log")) as f:
                at = [datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
                      for line in f if "took over a partition whose writer is gone" in line]
            at = [t for t in at if t >= killed - 1]
            took += len(at)
            if at:
                spans.append(round(at[-1] - at[0], 3))
        print(json.dumps({
            "partitions": total,
            "brokers": args.brokers,
            "idle_cpu_pct_per_broker": idle_pct,
            "failover_partitions": moved,
            "failover_s": failover_s,
            "takeovers_logged": took,
            "takeover_span_s_per_survivor": spans,
            "session_timeout_ms": args.session_timeout_ms,
            "bin": args.bin,
        }))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
