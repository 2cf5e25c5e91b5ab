"""Shared fixtures: a real kaas-server process on a free loopback port.

Every broker started here is stopped when its test ends, also when the test fails.
The binary comes from KAAS_SERVER_BIN (set by scripts/test.sh) or target/debug.
"""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("KAAS_SERVER_BIN", ROOT / "target" / "debug" / "kaas-server"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        env.update(self.env)
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
