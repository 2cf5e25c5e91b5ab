"""kaas-faultfs from the tests: mount it over a backing directory, drive it through its
control socket, cut the power. docs/testing.md, "The fault-injecting file system"."""
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BIN

FAULTFS = Path(os.environ.get("KAAS_FAULTFS_BIN", BIN.parent / "kaas-faultfs"))

# Why these tests cannot run here, or None. scripts/test.sh run as root sets
# KAAS_REQUIRE_FUSE=1: there a missing /dev/fuse fails the tests instead of skipping them.
MISSING = ("mounting a FUSE file system needs root" if os.geteuid() != 0
           else None if os.path.exists("/dev/fuse") else "no /dev/fuse")
# librdkafka 2.16 re-bootstraps when every broker it knows is gone at once (the whole
# cluster lost power), and a transactional call under way then never returns: its old
# broker handle stays "terminating" for good (seen in a debug log: FindCoordinator answered,
# no request after it). Not re-bootstrapping keeps the clients on the brokers' fixed
# addresses, which is all these tests need.
NO_REBOOTSTRAP = {"metadata.recovery.strategy": "none"}

needs_fuse = pytest.mark.skipif(MISSING is not None and os.environ.get("KAAS_REQUIRE_FUSE") != "1",
                                reason=MISSING or "")


class FaultFs:
    """One mount of kaas-faultfs at `root/mnt` over `root/backing`. After `cut()` or
    `stop()` the backing directory holds what survived; `mount()` again serves it."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.backing = self.root / "backing"
        self.mnt = self.root / "mnt"
        self.ctl = self.root / "ctl"
        self.log_path = self.root / "faultfs.log"
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.proc = None
        self.mounts = 0

    def mount(self):
        # The bare mountpoint must be empty: a file there was written by a process that
        # outlived the unmount (a broker not yet killed at a power cut), and what it
        # wrote — perhaps acknowledged — is hidden by this mount, not on the volume.
        stray = sorted(str(p.relative_to(self.mnt)) for p in self.mnt.rglob("*"))
        if stray:
            raise RuntimeError(f"{self.mnt} is not empty before mounting (written after the unmount): {stray[:10]}")
        if self.ctl.exists():
            self.ctl.unlink()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(FAULTFS), "--backing", str(self.backing), "--mountpoint", str(self.mnt),
                                      "--control", str(self.ctl)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kaas-faultfs exited with {self.proc.returncode}: {self.log_path.read_text()}")
            if self.ctl.exists():
                try:
                    self.status()
                    self.mounts += 1
                    return self
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError("kaas-faultfs did not come up in 20 s")

    def command(self, line: str) -> str:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(30)
            s.connect(str(self.ctl))
            s.sendall(line.encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        answer = answer.decode().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"kaas-faultfs {line!r}: {answer}")
        return answer[3:]

    def status(self) -> dict:
        return json.loads(self.command("status"))

    def _gone(self):
        try:
            self.proc.wait(timeout=20)
        finally:
            self.proc = None

    def cut(self, seed=None):
        """The power goes: the backing directory keeps what was durable (with `seed`,
        plus a random prefix of what was pending); the mount goes away."""
        self.command("cut" if seed is None else f"cut {seed}")
        self._gone()

    def stop(self):
        """A clean shutdown: everything written is kept."""
        self.command("stop")
        self._gone()

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
