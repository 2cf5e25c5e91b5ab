#!/usr/bin/env python3
"""kaas's benchmark suite (docs/performance.md). Run it through scripts/bench.sh, which
builds what it needs first.

Starts a release kaas-server on a fresh data directory per scenario group, drives it
with kaas-bench (librdkafka), measures the machine's limits in the same run, and writes
target/bench/results.json and target/bench/results.md. Figures are reported, never
asserted.

  scripts/bench.sh                         every scenario against kaas
  scripts/bench.sh --quick                 smaller counts (a smoke run of the suite)
  scripts/bench.sh --only txn-1,consume    a subset
  scripts/bench.sh --peer tansu=127.0.0.1:9093[:PID]
                                           the same scenarios against another broker
                                           (started by you; with its PID, its CPU
                                           seconds and peak RSS are read as well)
  scripts/bench.sh --no-timeline           without the packet-capture split of one
                                           producer's transactions (needs tcpdump)
  scripts/bench.sh --skip-eatmydata        without the transaction scenarios against
                                           kaas with fsync disabled (needs eatmydata)
  scripts/bench.sh --skip-cluster          without the scenarios on three brokers
                                           sharing one volume
  scripts/bench.sh --skip-slow-volume      without the produce and transaction
                                           scenarios on kaas-faultfs set up like an
                                           NFS volume (0.5 ms per metadata operation,
                                           2 ms per fsync; needs root and /dev/fuse)
"""
import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench/target/release/kaas-bench"
SERVER = ROOT / "target/release/kaas-server"
KAASCTL = ROOT / "target/release/kaasctl"
GEN = ROOT / "target/release/examples/gen_txn_volume"
FAULTFS = ROOT / "target/release/kaas-faultfs"
OUT = ROOT / "target/bench"
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampler:
    """Peak RSS of a process while a scenario runs (VmHWM would include earlier ones),
    and its CPU seconds every 50 ms, so the CPU of a window inside the run can be read
    (`cpu_between`)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()
        self.samples = []  # (wall-clock time, CPU seconds)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
                self.samples.append((time.time(), cpu_seconds(self.pid)))
            except OSError:
                return
            self.stop.wait(0.05)

    def cpu_between(self, start, end):
        """CPU seconds between two wall-clock times, from the samples around them
        (linear between samples; within 50 ms of sampling and the kernel's tick)."""
        def at(t):
            before = [x for x in self.samples if x[0] <= t]
            after = [x for x in self.samples if x[0] >= t]
            if not before or not after:
                return None
            (t0, c0), (t1, c1) = before[-1], after[0]
            return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
        a, b = at(start), at(end)
        return None if a is None or b is None else b - a

    def __enter__(self):
        self.cpu0 = cpu_seconds(self.pid)
        self.samples.append((time.time(), self.cpu0))
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        end = cpu_seconds(self.pid)
        self.samples.append((time.time(), end))
        self.cpu = end - self.cpu0


class Target:
    """A broker under test: kaas started here, or a peer started by the user."""

    def __init__(self, name, bootstrap=None, pid=None):
        self.name, self.bootstrap, self.pid, self.proc = name, bootstrap, pid, None

    def start_kaas(self, data_dir, log, wrapper=(), extra=("--broker-id", "0")):
        self.bootstrap = f"127.0.0.1:{free_port()}"
        self.log = open(log, "wb")  # a fresh log: "ready" from an earlier run must not count
        env = dict(os.environ, RUST_LOG="info")
        self.proc = subprocess.Popen(
            [*wrapper, str(SERVER), "--data-dir", str(data_dir), "--listen", self.bootstrap, *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.pid = self.proc.pid
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kaas-server exited with {self.proc.returncode}; see {log}")
            if "kaas-server ready" in Path(log).read_text(errors="replace"):
                return
            time.sleep(0.05)
        raise RuntimeError(f"kaas-server not ready in 120 s; see {log}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def bench(*args, timeout=600):
    out = subprocess.run([str(BENCH), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"kaas-bench {' '.join(map(str, args))} failed: {out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def children_cpu():
    """CPU seconds of every child process this script has waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def rendezvous(key, live):
    """kaas_core::ownership::owner: which live broker gets `key`."""
    def weight(b):
        h = 0xcbf29ce484222325
        for byte in key.encode() + b"\0" + b.to_bytes(4, "big", signed=True):
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 33
        h = (h * 0xff51afd7ed558ccd) & 0xFFFFFFFFFFFFFFFF
        return (h ^ (h >> 33), b)
    return max(live, key=weight)


def spread_topic(prefix, partitions, brokers):
    """A topic name whose partitions the brokers lead evenly (rendezvous placement):
    3 partitions on 3 brokers, one each; 12 partitions, four each."""
    live = list(range(brokers))
    for k in range(10_000):
        name = f"{prefix}-{k}"
        led = [rendezvous(f"partition\0{name}\0{p}", live) for p in range(partitions)]
        if all(led.count(b) == partitions // brokers for b in live):
            return name
    raise RuntimeError(f"no evenly placed name for {partitions} partitions on {brokers} brokers")


def measured(target, fn):
    """Runs fn(), adding the CPU seconds of the load generators it ran (they share the
    machine's cores with the broker) and, when its pid is known, the broker's CPU
    seconds and peak RSS."""
    before = children_cpu()
    if getattr(target, "pids", None):
        # Several brokers: their CPU together, over the transactions' window.
        samplers = [Sampler(pid) for pid in target.pids]
        with contextlib.ExitStack() as stack:
            for sampler in samplers:
                stack.enter_context(sampler)
            result = fn()
        window = result.pop("window_unix_s", None)
        cpus = [sampler.cpu_between(*window) if window else None for sampler in samplers]
        result["broker_cpu_s"] = round(sum(c if c is not None else sm.cpu for c, sm in zip(cpus, samplers)), 2)
        result["broker_peak_rss_mib"] = round(sum(sm.peak for sm in samplers), 1)
    elif not target.pid:
        result = fn()
    else:
        with Sampler(target.pid) as s:
            result = fn()
        # kaas-bench txn gives the window of its transactions (without start-up and
        # teardown): the broker's CPU is read over the same window as the client's.
        window = result.pop("window_unix_s", None)
        cpu = s.cpu_between(*window) if window else None
        if window and cpu is None:
            result["broker_cpu_window"] = "whole run (the samples did not cover the transactions' window)"
        result["broker_cpu_s"] = round(s.cpu if cpu is None else cpu, 2)
        result["broker_peak_rss_mib"] = round(s.peak, 1)
    # kaas-bench txn measures its own CPU over the transactions alone (cpu_s);
    # elsewhere the whole load-generator processes count.
    result["client_cpu_s"] = round(result.pop("cpu_s", children_cpu() - before), 2)
    return result


def timed_command(args, runs=3):
    """Median wall time and the peak RSS of a command, over `runs` runs."""
    times, rss = [], 0
    for _ in range(runs):
        t = time.time()
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        times.append(time.time() - t)
        rss = max(rss, usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) not in (0, 3):
            raise RuntimeError(f"{args} failed: {p.stderr.read().decode()}")
    times.sort()
    return {"seconds": round(times[len(times) // 2], 3), "peak_rss_mib": round(rss, 1)}


def scenarios(quick):
    n = 20_000 if quick else 200_000
    t1, t8 = (100, 50) if quick else (1_000, 500)
    return {
        "produce-100B-1p": dict(kind="produce", size=100, partitions=1, count=n),
        "produce-1KiB-1p": dict(kind="produce", size=1024, partitions=1, count=n),
        "consume-1KiB": dict(kind="consume", after="produce-1KiB-1p", count=n),
        "produce-100B-8p": dict(kind="produce", size=100, partitions=8, count=n),
        "produce-1KiB-8p": dict(kind="produce", size=1024, partitions=8, count=n),
        "txn-1": dict(kind="txn", producers=1, txns=t1),
        "txn-8": dict(kind="txn", producers=8, txns=t8),
        # One transaction over 3 partitions, and eight producers' over 3 of 12: on one
        # broker here, and the same on three brokers sharing one volume (CLUSTER).
        "txn-1x3p": dict(kind="txn", producers=1, txns=t1, partitions=3, spread=3),
        "txn-8x12p": dict(kind="txn", producers=8, txns=t8, partitions=12, spread=3),
        "txn-1-100k-ids": dict(kind="txn", producers=1, txns=t1, ids=100_000),
        "txn-8-100k-ids": dict(kind="txn", producers=8, txns=t8, ids=100_000),
        "latency-1KiB-10k-per-s": dict(kind="latency", rate=10_000, size=1024, seconds=3 if quick else 10),
    }


def run_scenario(target, name, sc, results):
    topic = f"bench-{name}"
    if sc["kind"] == "produce":
        bench("create-topic", "--bootstrap", target.bootstrap, "--topic", topic, "--partitions", sc["partitions"])
        return measured(target, lambda: bench(
            "produce", "--bootstrap", target.bootstrap, "--topic", topic, "--count", sc["count"],
            "--size", sc["size"], "--partitions", sc["partitions"]))
    if sc["kind"] == "consume":
        return measured(target, lambda: bench(
            "consume", "--bootstrap", target.bootstrap, "--topic", f"bench-{sc['after']}", "--count", sc["count"]))
    if sc["kind"] == "txn":
        partitions = sc.get("partitions", 1)
        if getattr(target, "brokers", None):
            topic = spread_topic(topic, partitions, target.brokers)
        bench("create-topic", "--bootstrap", target.bootstrap, "--topic", topic, "--partitions", partitions)
        if getattr(target, "brokers", None):
            time.sleep(2)  # every broker has opened its partitions (volume sync: 1 s)
        return measured(target, lambda: bench(
            "txn", "--bootstrap", target.bootstrap, "--topic", topic, "--producers", sc["producers"],
            "--txns", sc["txns"], "--id-prefix", f"{name}-{os.getpid()}",
            "--partitions", partitions, "--spread", sc.get("spread", 1)))
    if sc["kind"] == "latency":
        bench("create-topic", "--bootstrap", target.bootstrap, "--topic", topic, "--partitions", 1)
        count = sc["rate"] * sc["seconds"]

        def run():
            consumer = subprocess.Popen(
                [str(BENCH), "latency-consume", "--bootstrap", target.bootstrap, "--topic", topic, "--count", str(count)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if consumer.stdout.readline().strip() != "ready":
                raise RuntimeError(f"latency consumer failed: {consumer.stderr.read()}")
            produced = bench("latency-produce", "--bootstrap", target.bootstrap, "--topic", topic,
                             "--rate", sc["rate"], "--size", sc["size"], "--seconds", sc["seconds"])
            out, err = consumer.communicate(timeout=120)
            if consumer.returncode != 0:
                raise RuntimeError(f"latency consumer failed: {err}")
            got = json.loads(out.strip().splitlines()[-1])
            return {**got, "producer": produced}
        return measured(target, run)
    raise ValueError(sc["kind"])


def wire_timeline(target, txns, partitions=1, spread=1):
    """One transactional producer under a packet capture of its connections: the time
    the broker holds each request against the time the client takes between them
    (scripts/wire_timeline.py). Needs tcpdump, allowed to capture on loopback. Any
    failure is reported in the result, never raised: it is an extra, not the run."""
    tcpdump = shutil.which("tcpdump")
    if not tcpdump:
        return {"error": "skipped: tcpdump not found (apt-get install tcpdump)"}
    ports = [a.rsplit(":", 1)[1] for a in target.bootstrap.split(",")]
    pcap = OUT / f"timeline-{target.name.split(',')[0].replace(' ', '-')}.pcap"
    cap = None
    said = []
    try:
        topic = "bench-timeline"
        if getattr(target, "brokers", None):
            topic = spread_topic(topic, partitions, target.brokers)
        bench("create-topic", "--bootstrap", target.bootstrap, "--topic", topic, "--partitions", partitions)
        if getattr(target, "brokers", None):
            time.sleep(2)
        # Immediate mode and packet-buffered output: nothing waits in a capture block
        # that the stop would drop. Only the headers are needed (snap length 256).
        cap = subprocess.Popen([tcpdump, "-i", "lo", "-n", "--immediate-mode", "-U", "-s", "256",
                                "-w", str(pcap), " or ".join(f"tcp port {p}" for p in ports)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        reader = threading.Thread(target=lambda: said.extend(cap.stderr), daemon=True)
        reader.start()
        # tcpdump says "listening on lo" once it captures.
        deadline = time.time() + 10
        while not any("listening" in line for line in said):
            if cap.poll() is not None or time.time() > deadline:
                return {"error": f"skipped: tcpdump did not start: {''.join(said).strip()[:200]}"}
            time.sleep(0.05)
        bench("txn", "--bootstrap", target.bootstrap, "--topic", topic, "--producers", 1,
              "--txns", txns, "--id-prefix", f"timeline-{os.getpid()}", "--partitions", partitions, "--spread", spread)
        time.sleep(0.5)
        cap.send_signal(signal.SIGINT)
        cap.wait(30)
        reader.join(5)
        sys.path.insert(0, str(ROOT / "scripts"))
        import wire_timeline
        events, lost = wire_timeline.timeline(str(pcap), [int(p) for p in ports])
        result = wire_timeline.summary(events, lost)
        dropped = [line.strip() for line in said if "dropped by kernel" in line and not line.startswith("0 ")]
        if dropped:
            result["capture_dropped"] = dropped[0]
        return result
    except Exception as e:
        return {"error": f"timeline failed: {str(e)[:200]}"}
    finally:
        if cap and cap.poll() is None:
            cap.kill()
            cap.wait()


@contextlib.contextmanager
def running_kaas(name, data, log, wrapper=()):
    """A kaas broker on `data`, settled for 2 s, stopped on the way out."""
    target = Target(name)
    try:
        target.start_kaas(data, log, wrapper)
        time.sleep(2)
        yield target
    finally:
        target.stop()


def run_kaas(selected, all_sc, results, args):
    """kaas: one fresh broker per group of scenarios that share a volume."""
    groups = {}
    for name in selected:
        sc = all_sc[name]
        # A consume reads what its produce scenario wrote, on the same broker.
        key = ("ids", sc["ids"]) if sc.get("ids") else ("plain", sc.get("after", name))
        groups.setdefault(key, []).append(name)
    for key, names in groups.items():
        data = OUT / f"data-{names[0]}"
        shutil.rmtree(data, ignore_errors=True)
        if key[0] == "ids":
            t = time.time()
            subprocess.run([str(GEN), str(data), str(key[1])], check=True, capture_output=True)
            results["setup"][f"gen_{key[1]}_ids_s"] = round(time.time() - t, 1)
        with running_kaas("kaas", data, OUT / f"kaas-{names[0]}.log") as target:
            results["kaas"].setdefault("idle_rss_mib", {})[names[0]] = round(rss_mib(target.pid), 1)
            for name in names:
                print(f"  kaas {name} ...", file=sys.stderr, flush=True)
                results["kaas"][name] = run_scenario(target, name, all_sc[name], results)
            if args.timeline and key == ("plain", "txn-1"):
                print("  kaas timeline-txn-1 ...", file=sys.stderr, flush=True)
                results["kaas"]["timeline-txn-1"] = wire_timeline(target, all_sc["txn-1"]["txns"] // 3)
        if key[0] == "ids" and not args.keep:
            # kaasctl on the same volume, with the broker stopped.
            for cmd, argv in (("kaasctl txn list", ["txn", "list"]), ("kaasctl top --once", ["top", "--once"])):
                results["kaasctl"][f"{cmd} ({key[1]:,} ids)"] = timed_command(
                    [str(KAASCTL), "--data-dir", str(data), *argv])
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)


CLUSTER = "kaas, 3 brokers on one volume"


class Cluster:
    """Three kaas brokers on one data directory (what scripts/local-cluster.sh runs),
    as one target: every address in its bootstrap, every pid measured."""

    def __init__(self, data, brokers=3):
        self.data, self.brokers, self.members = data, brokers, []
        self.name, self.pid = CLUSTER, None

    def __enter__(self):
        for i in range(self.brokers):
            t = Target(f"kaas-{i}")
            t.start_kaas(self.data, OUT / f"cluster-{i}.log", extra=("--broker-id", str(i)))
            self.members.append(t)
        self.bootstrap = ",".join(t.bootstrap for t in self.members)
        self.pids = [t.pid for t in self.members]
        # Every broker sees the others live (leases, 1 s) before topics are placed.
        time.sleep(4)
        return self

    def __exit__(self, *exc):
        for t in self.members:
            t.stop()


def run_cluster(selected, all_sc, results, args):
    """The multi-partition transaction scenarios on three brokers sharing one volume,
    each on a fresh volume; kaas's one-broker figures for the same scenarios come from
    run_kaas in the same run."""
    names = [n for n in selected if all_sc[n]["kind"] == "txn" and all_sc[n].get("spread", 1) > 1]
    if not names:
        return
    results[CLUSTER] = {}
    for name in names:
        data = OUT / f"data-cluster-{name}"
        shutil.rmtree(data, ignore_errors=True)
        try:
            with Cluster(data) as cluster:
                print(f"  {CLUSTER} {name} ...", file=sys.stderr, flush=True)
                results[CLUSTER][name] = run_scenario(cluster, name, all_sc[name], results)
                if args.timeline and name == "txn-1x3p":
                    print(f"  {CLUSTER} timeline-txn-1x3p ...", file=sys.stderr, flush=True)
                    results[CLUSTER]["timeline-txn-1x3p"] = wire_timeline(
                        cluster, all_sc[name]["txns"] // 3, partitions=3, spread=3)
        except Exception as e:
            results[CLUSTER][name] = {"error": str(e)[:200]}
        finally:
            if not args.keep:
                shutil.rmtree(data, ignore_errors=True)


CTP = "consume-transform-produce over 3 brokers, kill -9 mid-run"


def run_ctp(results, args):
    """scripts/bench_ctp.py twice: leaders notified of queued markers (the default),
    then with --inter-broker-notifications false (markers wait for the leaders' 2 s
    poll: kaas before notices), fewer inputs — the rates are compared."""
    results[CTP] = {}
    # The kill and hand-over cost both runs the same few seconds; the notified run gets
    # enough inputs that its rate is the job's, not the outage's.
    runs = {"notified": 600 if args.quick else 6000, "poll only": 100 if args.quick else 200}
    for name, inputs in runs.items():
        flags = [] if name == "notified" else ["--inter-broker-notifications", "false"]
        print(f"  {CTP}: {name} ...", file=sys.stderr, flush=True)
        try:
            # confluent-kafka: the tests' venv (scripts/test.sh installs it), else this Python.
            python = ROOT / ".venv/bin/python"
            out = subprocess.run([str(python if python.exists() else sys.executable),
                                  str(ROOT / "scripts/bench_ctp.py"), "--server", str(SERVER),
                                  "--inputs", str(inputs), "--", *flags],
                                 capture_output=True, text=True, timeout=1800)
            if out.returncode != 0 and not out.stdout.strip():
                raise RuntimeError(out.stderr.strip()[-300:])
            results[CTP][name] = json.loads(out.stdout.strip().splitlines()[-1])
        except Exception as e:
            results[CTP][name] = {"error": str(e)[:300]}


NO_FSYNC = "kaas with fsync disabled (eatmydata; not durable, a reference only)"


def run_kaas_without_fsync(selected, all_sc, results, args):
    """The transaction scenarios again against kaas under eatmydata, which turns every
    fsync and fdatasync into nothing: what the same client reaches when the broker's
    syncs cost nothing. A reference for reading the durable figures, never a setting.
    Like the durable runs, each scenario gets a fresh broker and volume; a failure is
    reported in its result, never raised."""
    eatmydata = shutil.which("eatmydata")
    names = [n for n in selected if all_sc[n]["kind"] == "txn" and not all_sc[n].get("ids")]
    if not names:
        return
    results[NO_FSYNC] = {}
    for name in names:
        if not eatmydata:
            results[NO_FSYNC][name] = {"error": "skipped: eatmydata not found (apt-get install eatmydata)"}
            continue
        data = OUT / f"data-no-fsync-{name}"
        shutil.rmtree(data, ignore_errors=True)
        try:
            with running_kaas("kaas-no-fsync", data, OUT / f"kaas-no-fsync-{name}.log", (eatmydata,)) as target:
                print(f"  kaas without fsync {name} ...", file=sys.stderr, flush=True)
                results[NO_FSYNC][name] = run_scenario(target, name, all_sc[name], results)
        except Exception as e:
            results[NO_FSYNC][name] = {"error": str(e)[:200]}
        finally:
            if not args.keep:
                shutil.rmtree(data, ignore_errors=True)


# The requests kaas-faultfs's `delay meta` slows (kaas-faultfs/src/fs.rs), by the names
# its `status` counts them under.
META_OPS = ("lookup", "getattr", "setattr", "open", "create", "mkdir", "unlink", "rmdir", "rename", "link",
            "opendir", "readdir")
SLOW = "kaas on an NFS-like volume"
SLOW_META_US, SLOW_FSYNC_US = 500, 2000
# Two clients of the same volume: one that caches no name or attribute (every path
# component of every open a round trip), and one that keeps them for a second, as an
# NFS client's attribute cache does (each open still asks the server).
SLOW_CACHES = {"no client cache": 0, "names and attributes cached 1 s": 1000}


@contextlib.contextmanager
def faultfs_mount(root, binary=FAULTFS, ttl_ms=0):
    """kaas-faultfs mounted at root/mnt over an empty root/backing, with its control
    socket at root/ctl and the kernel caching names and attributes for `ttl_ms`;
    `command(line)` drives it. Unmounted on the way out."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "backing").mkdir(parents=True)
    (root / "mnt").mkdir()
    ctl = root / "ctl"
    proc = subprocess.Popen([str(binary), "--backing", str(root / "backing"), "--mountpoint", str(root / "mnt"),
                             "--control", str(ctl), "--ttl-ms", str(ttl_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def command(line):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(ctl))
            s.sendall(line.encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                answer += chunk
        answer = answer.decode().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"kaas-faultfs {line!r}: {answer}")
        return answer[3:]

    try:
        deadline = time.time() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"kaas-faultfs exited with {proc.returncode}")
            try:
                command("status")
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        yield command
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["umount", "-l", str(root / "mnt")], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def run_kaas_on_slow_volume(selected, all_sc, results, args):
    """The produce and transaction scenarios on kaas-faultfs with every metadata
    operation 0.5 ms and every fsync 2 ms slower: what a network volume (NFS, EFS)
    costs, beside the local-disk figures. The quick counts (the slow volume holds its
    data in memory). Each result carries the volume operations it took, by kind."""
    names = [n for n in selected if all_sc[n]["kind"] in ("produce", "txn") and not all_sc[n].get("ids")]
    if not names:
        return
    results[SLOW] = {}
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not FAULTFS.exists():
        for name in names:
            results[SLOW][name] = {"error": "skipped: needs root, /dev/fuse and target/release/kaas-faultfs"}
        return
    quick = scenarios(True)
    for (cache, ttl_ms), name in ((c, n) for c in SLOW_CACHES.items() for n in names):
        key = f"{name}, {cache}"
        try:
            with faultfs_mount(OUT / f"slow-{name}", ttl_ms=ttl_ms) as command:
                command(f"delay meta {SLOW_META_US}")
                command(f"delay fsync {SLOW_FSYNC_US}")
                with running_kaas("kaas-slow", OUT / f"slow-{name}" / "mnt" / "data", OUT / f"kaas-slow-{name}.log") as target:
                    print(f"  kaas on a slow volume {key} ...", file=sys.stderr, flush=True)
                    before = json.loads(command("status"))["ops"]
                    r = run_scenario(target, name, quick[name], results)
                    after = json.loads(command("status"))["ops"]
                    r["volume_ops"] = {k: after.get(k, 0) - before.get(k, 0) for k in after
                                       if after.get(k, 0) != before.get(k, 0)}
                    results[SLOW][key] = r
        except Exception as e:
            results[SLOW][key] = {"error": str(e)[:200]}


def fmt(v, unit=""):
    if v is None:
        return "–"
    if isinstance(v, float):
        v = f"{v:,.0f}" if v >= 100 else f"{v:,.2f}"
    else:
        v = f"{v:,}"
    return f"{v}{unit}"


def report(results):
    lim = results["limits"]
    lines = [f"# kaas benchmark run, {results['date']}", "",
             f"Machine: {results['machine']}", "",
             "## Machine limits (same run)", "",
             "| limit | MB/s |", "|---|---|",
             f"| 64 KiB writes, O_DSYNC | {fmt(lim['dsync_64k_mb_per_s'])} |",
             f"| 1 GiB buffered + one fdatasync | {fmt(lim['buffered_fdatasync_mb_per_s'])} |",
             f"| loopback TCP, one connection | {fmt(lim['loopback_tcp_mb_per_s'])} |", ""]
    targets = [t for t in results if t not in ("limits", "date", "machine", "setup", "kaasctl", CTP, SLOW)]
    for t in targets:
        r = results[t]
        lines += [f"## {t}", "", "| scenario | result | of limit | broker CPU s | client CPU s | peak RSS MiB |",
                  "|---|---|---|---|---|---|"]
        for name, v in r.items():
            if name == "idle_rss_mib" or not isinstance(v, dict):
                continue
            if name.startswith("timeline-"):
                continue
            if "error" in v:
                lines.append(f"| {name} | failed: {v['error']} | | | | |")
                continue
            frac = ""
            if "txn_per_s" in v:
                lat = v["txn_latency_ms"] or {}
                what = f"{fmt(v['txn_per_s'])} txn/s (p50 {fmt(lat.get('p50'))} ms, p99 {fmt(lat.get('p99'))} ms)"
                if v.get("broker_cpu_s") is not None and v.get("transactions"):
                    # CPU bound: both processes on the machine's cores, nothing else.
                    per_txn = (v["broker_cpu_s"] + v["client_cpu_s"]) / v["transactions"]
                    frac = (f"{per_txn * 1e3:.2f} ms CPU/txn: at most "
                            f"{fmt((os.cpu_count() or 1) / per_txn)} txn/s on {os.cpu_count()} cores")
            elif "latency_ms" in v:
                lat = v["latency_ms"] or {}
                what = (f"p50 {fmt(lat.get('p50'))} ms, p99 {fmt(lat.get('p99'))} ms, p99.9 {fmt(lat.get('p999'))} ms"
                        f" ({fmt(v['received'])} records, {fmt(v['producer']['achieved_rate'])} rec/s)")
            else:
                what = f"{fmt(v['records_per_s'])} rec/s, {fmt(v['mb_per_s'])} MB/s"
                limit = lim["loopback_tcp_mb_per_s"] if name.startswith("consume") else lim["dsync_64k_mb_per_s"]
                frac = f"{v['mb_per_s'] / limit:.0%} of {'loopback' if name.startswith('consume') else 'O_DSYNC'}"
            lines.append(f"| {name} | {what} | {frac} | {fmt(v.get('broker_cpu_s'))} | {fmt(v.get('client_cpu_s'))} "
                         f"| {fmt(v.get('broker_peak_rss_mib'))} |")
        tl = r.get("timeline-txn-1") or r.get("timeline-txn-1x3p")
        if tl:
            lines += ["", "Where one transactional producer's time goes (packet capture, scripts/wire_timeline.py):", ""]
            if "error" in tl:
                lines.append(tl["error"])
            elif "transactions" in tl:
                per_api = ", ".join(f"{api} {v['median_ms']} ms" for api, v in tl["requests"].items()
                                    if api in ("AddPartitionsToTxn", "Produce", "EndTxn", "WriteTxnMarkers"))
                gaps = ", ".join(f"{k} {v} ms" for k, v in tl.get("client_gaps_median_ms", {}).items())
                lines.append(
                    f"{tl['transactions']} transactions at {fmt(tl['txn_per_s'])} txn/s: per transaction "
                    f"{tl['broker_ms_per_txn']} ms in the broker (median per request: {per_api}) and "
                    f"{tl['client_ms_per_txn']} ms in the client (median per step: {gaps}); with a broker "
                    f"that answered at once, about {fmt(tl['ceiling_txn_per_s_with_an_instant_broker'])} txn/s.")
            else:
                lines.append("no whole transactions found in the capture")
            for extra in ("connections_not_followed", "capture_dropped"):
                if extra in tl:
                    lines.append(f"({extra.replace('_', ' ')}: {tl[extra]})")
        if "idle_rss_mib" in r:
            lines += ["", "Idle RSS after start (MiB): " + ", ".join(f"{k}: {v}" for k, v in r["idle_rss_mib"].items())]
        lines.append("")
    if CLUSTER in results and "kaas" in results:
        lines += ["## Three brokers against one", "", "| scenario | 3 brokers txn/s | 1 broker txn/s | ratio | 3 brokers p99 ms |",
                  "|---|---|---|---|---|"]
        for name, v in results[CLUSTER].items():
            one = results["kaas"].get(name) or {}
            if "txn_per_s" not in v or "txn_per_s" not in one:
                continue
            lines.append(f"| {name} | {fmt(v['txn_per_s'])} | {fmt(one['txn_per_s'])} | "
                         f"{v['txn_per_s'] / one['txn_per_s']:.2f}x | {fmt((v['txn_latency_ms'] or {}).get('p99'))} |")
        lines.append("")
    if SLOW in results and "kaas" in results:
        lines += [f"## {SLOW}", "", f"(kaas-faultfs: {SLOW_META_US / 1000} ms per metadata operation, "
                  f"{SLOW_FSYNC_US / 1000} ms per fsync; the quick counts; local disk from the kaas section above)", "",
                  "| scenario | slow volume | local disk | volume operations (metadata / fsync / read+write) |",
                  "|---|---|---|---|"]
        for name, v in results[SLOW].items():
            if "error" in v:
                lines.append(f"| {name} | failed: {v['error']} | | |")
                continue
            local = results["kaas"].get(name.split(",")[0]) or {}

            def rate(r):
                if "txn_per_s" in r:
                    return f"{fmt(r['txn_per_s'])} txn/s (p99 {fmt((r.get('txn_latency_ms') or {}).get('p99'))} ms)"
                return f"{fmt(r['mb_per_s'])} MB/s" if "mb_per_s" in r else "–"
            ops = v.get("volume_ops", {})
            meta = sum(ops.get(k, 0) for k in META_OPS)
            syncs = ops.get("fsync", 0) + ops.get("fsyncdir", 0)
            io = ops.get("read", 0) + ops.get("write", 0)
            per = v.get("transactions") or v.get("records")
            unit = "txn" if v.get("transactions") else "record"
            lines.append(f"| {name} | {rate(v)} | {rate(local)} | {fmt(meta)} / {fmt(syncs)} / {fmt(io)}"
                         + (f" ({meta / per:.1f} / {syncs / per:.2f} per {unit})" if per else "") + " |")
        lines.append("")
    if CTP in results:
        lines += [f"## {CTP}", "", "(scripts/bench_ctp.py: confluent-kafka, 6 partitions, at most 10 inputs per "
                  "transaction; the rate includes the kill and the hand-over)", "",
                  "| markers | inputs | transactions | seconds | txn/s | exactly once |", "|---|---|---|---|---|---|"]
        for name, v in results[CTP].items():
            if "error" in v:
                lines.append(f"| {name} | failed: {v['error']} | | | | |")
            else:
                lines.append(f"| {name} | {v['inputs']} | {v['transactions']} | {v['seconds']} | {fmt(v['txn_per_s'])} "
                             f"| {v['exactly_once']} |")
        fast, slow = results[CTP].get("notified", {}), results[CTP].get("poll only", {})
        if fast.get("txn_per_s") and slow.get("txn_per_s"):
            lines += ["", f"Notified against poll only: {fast['txn_per_s'] / slow['txn_per_s']:.0f}x the transactions per second."]
        lines.append("")
    if results["kaasctl"]:
        lines += ["## kaasctl", "", "| command | median s | peak RSS MiB |", "|---|---|---|"]
        for k, v in results["kaasctl"].items():
            lines.append(f"| {k} | {v['seconds']} | {v['peak_rss_mib']} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--peer", action="append", default=[])
    ap.add_argument("--skip-kaas", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--no-timeline", dest="timeline", action="store_false",
                    help="skip the packet-capture split of a transaction's time (needs tcpdump)")
    ap.add_argument("--skip-cluster", action="store_true",
                    help="skip the scenarios on three brokers sharing one volume")
    ap.add_argument("--skip-slow-volume", action="store_true",
                    help="skip the produce and transaction scenarios on an NFS-like kaas-faultfs volume")
    ap.add_argument("--skip-eatmydata", action="store_true",
                    help="skip the transaction scenarios against kaas with fsync disabled by eatmydata")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    all_sc = scenarios(args.quick)
    selected = [s for s in all_sc if not args.only or any(s.startswith(o) for o in args.only.split(","))]
    for s in list(selected):
        after = all_sc[s].get("after")
        if after and after not in selected:
            selected.insert(selected.index(s), after)
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} cores, "
               f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
               "setup": {}, "kaasctl": {}}
    print("machine limits ...", file=sys.stderr, flush=True)
    results["limits"] = bench("limits", "--dir", OUT, *(["--dsync-mib", 64, "--buffered-mib", 256] if args.quick else []))
    if not args.skip_kaas:
        results["kaas"] = {}
        run_kaas(selected, all_sc, results, args)
        if not args.skip_cluster:
            run_cluster(selected, all_sc, results, args)
            if not args.only or "ctp" in args.only.split(","):
                run_ctp(results, args)
        if not args.skip_eatmydata:
            run_kaas_without_fsync(selected, all_sc, results, args)
        if not args.skip_slow_volume:
            run_kaas_on_slow_volume(selected, all_sc, results, args)
    for spec in args.peer:
        name, addr = spec.split("=", 1)
        parts = addr.split(":")
        pid = int(parts[2]) if len(parts) > 2 else None
        target = Target(name, f"{parts[0]}:{parts[1]}", pid)
        results[name] = {}
        for s in selected:
            if all_sc[s].get("ids"):
                continue  # a volume of ids is kaas's own format
            print(f"  {name} {s} ...", file=sys.stderr, flush=True)
            try:
                results[name][s] = run_scenario(target, s, all_sc[s], results)
            except Exception as e:  # a peer may lack a feature; report it, go on
                results[name][s] = {"error": str(e)[:200]}
        if args.timeline and "txn-1" in selected:
            results[name]["timeline-txn-1"] = wire_timeline(target, all_sc["txn-1"]["txns"] // 3)
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    md = report(results)
    (OUT / "results.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
