"""Shared fixtures: a real kaas-server process on a free loopback port, and kaasctl.

Every broker started here is stopped when its test ends, also when the test fails.
The binaries come from KAAS_SERVER_BIN (set by scripts/test.sh) and KAASCTL_BIN, or
target/debug.

Every kaas-server and kaasctl a test starts gets `process_env()`: this process's
environment without COLUMNS and LINES. pytest imports GNU readline, which exports
COLUMNS=80 and LINES=24 into the process's C environment (os.environ does not show
them, every child inherits them), and kaasctl fits its tables to COLUMNS. A test
that wants a terminal width says so (`kaasctl_columns`, the `kaasctl` marker).
"""
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("KAAS_SERVER_BIN", ROOT / "target" / "debug" / "kaas-server"))
KAASCTL = Path(os.environ.get("KAASCTL_BIN", ROOT / "target" / "debug" / "kaasctl"))

# Set by whoever sizes a terminal; never inherited by the processes the tests start.
TERMINAL_SIZE_VARS = ("COLUMNS", "LINES")


def forget_terminal_size():
    """Takes COLUMNS and LINES out of this process's C environment too, for children
    started without process_env() (clients, scripts): readline put them there, and
    os.environ never saw them."""
    for var in TERMINAL_SIZE_VARS:
        os.environ.pop(var, None)
        os.unsetenv(var)


forget_terminal_size()


def process_env(extra=None) -> dict:
    """The environment for a process a test starts: ours without COLUMNS and LINES,
    then `extra` (a test that wants a width passes COLUMNS itself)."""
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_SIZE_VARS}
    env.update(extra or {})
    return env


# The terminal width kaasctl runs with in this test: None (no COLUMNS: a pipe, whole
# lines) or "80". Tests marked `kaasctl` run once with each (see pytest_generate_tests).
_kaasctl_columns = None


@pytest.fixture(autouse=True)
def kaasctl_columns(request):
    global _kaasctl_columns
    forget_terminal_size()  # in case readline was first imported after this module
    _kaasctl_columns = getattr(request, "param", None)
    try:
        yield _kaasctl_columns
    finally:
        _kaasctl_columns = None


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("kaasctl"):
        metafunc.parametrize("kaasctl_columns", [None, "80"], ids=["no-COLUMNS", "COLUMNS=80"], indirect=True)


def run_kaasctl(data_dir, *args, env=None, timeout=60, **kwargs) -> subprocess.CompletedProcess:
    """kaasctl --data-dir DATA_DIR ARGS..., output captured as text, with
    process_env() and this test's `kaasctl_columns`."""
    extra = {"COLUMNS": _kaasctl_columns} if _kaasctl_columns else {}
    extra.update(env or {})
    return subprocess.run([str(KAASCTL), "--data-dir", str(data_dir), *args], capture_output=True, text=True,
                          timeout=timeout, env=process_env(extra), **kwargs)


_ports_handed_out: set = set()


def free_port() -> int:
    """A loopback port nobody listens on now and that this test run has not handed out
    before, below the kernel's ephemeral range (`free_port_run`): a broker keeps its port
    across a restart, and a port from the ephemeral range may meanwhile become the local
    port of any client's connection, which the broker then cannot bind. Two listeners of
    one broker (or two brokers) are never named the same port."""
    return free_port_run(1)


def free_port_run(count: int) -> int:
    """The first of `count` consecutive loopback ports nobody listens on now, none handed
    out before, for a script that numbers its listeners from a base. Taken below the
    kernel's ephemeral range: a port from that range may be taken meanwhile as the
    local port of any client's connection, and a listener then cannot bind it
    (test_local_cluster.py failed so once, when its first port came from bind(0))."""
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    # A machine whose ephemeral range starts low (some give it 1024-65535) has no room
    # below it: any port above 10000 then, each checked free as below.
    top = low - count if low - count > 12000 else 65535 - count
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10000, top)
        ports = range(base, base + count)
        if any(p in _ports_handed_out for p in ports):
            continue
        try:
            for port in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        _ports_handed_out.update(ports)
        return base
    raise RuntimeError(f"no {count} consecutive free loopback ports below {low}")


class KaasBroker:
    def __init__(self, data_dir: Path, log_path: Path, extra=(), env=None, wrapper=()):
        self.wrapper = list(wrapper)  # a command the broker runs under (e.g. prlimit)
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.port = free_port()
        self.extra = list(extra)
        self.env = dict(env or {})
        self.proc = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self):
        args = [
            *self.wrapper,
            str(BIN),
            "--data-dir", str(self.data_dir),
            # A broker given its listeners (--listener) names them all itself.
            *([] if any(a == "--listener" or a.startswith("--listener=") for a in self.extra) else ["--listen", self.bootstrap]),
            *([] if "--broker-id" in self.extra else ["--broker-id", "0"]),
            "--group-initial-rebalance-delay-ms", "0",
            *self.extra,
        ]
        self.log = open(self.log_path, "ab")
        env = process_env({"RUST_LOG": os.environ.get("RUST_LOG", "info"), **self.env})
        # The listener is bound before the volume is opened and recovered; a started
        # broker is one that logged it is ready (the log file keeps earlier runs).
        ready_before = self.log_text().count("kaas-server ready")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kaas-server exited with {self.proc.returncode}; log:\n{self.log_text()}")
            if self.log_text().count("kaas-server ready") > ready_before:
                if "--listen" in args:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return self
                return self
            time.sleep(0.05)
        raise RuntimeError(f"kaas-server did not log that it is ready in 30 s; log:\n{self.log_text()}")

    def stop(self, timeout=15) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self):
        """Start again on the same data directory and port."""
        self.start()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


@pytest.fixture
def kaas(tmp_path):
    """A running broker; call kaas_factory for custom flags."""
    broker = KaasBroker(tmp_path / "data", tmp_path / "broker.log").start()
    try:
        yield broker
    finally:
        broker.kill9()


@pytest.fixture
def kaas_factory(tmp_path):
    started = []

    def make(*extra, data_dir=None, env=None):
        b = KaasBroker(data_dir or tmp_path / f"data{len(started)}", tmp_path / f"broker{len(started)}.log", extra, env)
        started.append(b)
        return b.start()

    try:
        yield make
    finally:
        for b in started:
            b.kill9()


def wait_for(predicate, timeout=20.0, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
