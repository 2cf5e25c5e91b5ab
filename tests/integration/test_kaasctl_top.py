"""kaasctl top driven in a real terminal (tmux) against a running broker: the counts
change as transactions commit, and a force-abort from the dashboard unblocks a
read_committed consumer."""
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import KAASCTL, process_env, run_kaasctl, wait_for
from txn_helpers import create_topic


pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by scripts/test.sh")


class Tmux:
    """A terminal of its own: a private tmux server (its own socket, no config file),
    so a tmux the developer runs in lends it no environment, and the command runs
    without COLUMNS and LINES (the pane's size is the terminal's)."""

    def __init__(self, command, env):
        self.name = f"kaas-top-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.name, "-f", "/dev/null"]
        exports = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.name, "-x", "150", "-y", "45",
                        f"env -u COLUMNS -u LINES {exports} {command}"], check=True, env=process_env())

    def screen(self):
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True).stdout

    def keys(self, *keys):
        for k in keys:
            subprocess.run([*self.tmux, "send-keys", "-t", self.name, k], check=True)
            time.sleep(0.15)

    def alive(self):
        return subprocess.run([*self.tmux, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self):
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def count(screen, label):
    for line in screen.splitlines():
        if f"  {label} " in line:
            tail = line.split(label, 1)[1]
            digits = "".join(ch if ch.isdigit() else " " for ch in tail).split()
            if digits:
                return int(digits[0])
    return None


def test_top_shows_commits_live_and_its_force_abort_unblocks_read_committed(kaas_factory):
    b = kaas_factory("--volume-poll-interval-ms", "200")
    create_topic(b.bootstrap, "live", 1)
    # A producer that begins a transaction and dies: it pins the LSO.
    stuck = textwrap.dedent(f"""
        import os
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": "{b.bootstrap}", "transactional.id": "stuck-in-top"}})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("live", value=b"never-committed")
        p.flush(15)
        os.kill(os.getpid(), 9)
    """)
    subprocess.run([sys.executable, "-c", stuck], timeout=60)
    top = Tmux(f"{KAASCTL} top --interval 300ms", {"KAAS_DATA_DIR": str(b.data_dir), "TERM": "xterm-256color"})
    try:
        screen = wait_for(lambda: (lambda s: s if "Transactions (" in s else None)(top.screen()), what="the dashboard")
        assert count(screen, "Ongoing") == 1, screen
        before = count(screen, "CompleteCommit")
        # Commits happen while the dashboard watches.
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "committer"})
        p.init_transactions(30)
        for i in range(3):
            p.begin_transaction()
            p.produce("live", value=f"committed-{i}".encode())
            p.commit_transaction(30)
        wait_for(lambda: count(top.screen(), "CompleteCommit") == (before or 0) + 1, what="CompleteCommit count to rise")
        wait_for(lambda: "commits/tick (Σ 1)" in top.screen() or "commits/tick (Σ 2)" in top.screen() or "commits/tick (Σ 3)" in top.screen(), what="the commit sparkline")
        # A read_committed consumer is stuck behind the dead producer's transaction.
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "top-reader", "isolation.level": "read_committed", "enable.auto.commit": False})
        c.assign([TopicPartition("live", 0, 0)])
        assert [m for m in c.consume(10, 2.0) if not m.error()] == []
        # Force-abort it from the dashboard.
        top.keys("2", "/", *"stuck-in-top", "Enter")
        wait_for(lambda: "stuck-in-top" in top.screen() and "filter" in top.screen(), what="the filtered row")
        top.keys("a")
        wait_for(lambda: "Force-abort stuck-in-top?" in top.screen(), what="the confirmation dialog")
        top.keys("y")
        wait_for(lambda: "aborted stuck-in-top: Ongoing -> CompleteAbort" in top.screen(), timeout=30, what="the abort to complete")
        got = []
        deadline = time.time() + 30
        while len(got) < 3 and time.time() < deadline:
            got += [m.value().decode() for m in c.consume(10, 0.5) if not m.error()]
        c.close()
        assert sorted(got) == [f"committed-{i}" for i in range(3)]
        top.keys("q")
        wait_for(lambda: not top.alive(), what="kaasctl top to exit")
    finally:
        top.close()
    audit = run_kaasctl(b.data_dir, "audit", "--json")
    assert '"tool": "kaasctl top"' in audit.stdout


def test_top_shows_what_needs_attention_sorted_transactions_and_the_pinning_transaction(kaas_factory):
    """Issue 28, in a real 150x45 terminal: the overview's "needs attention" list names
    the transaction pinning the LSO and the group blocked behind it; the transactions
    view lists the oldest open transaction first with its timeout and time left; the
    partitions view names the transaction pinning each partition."""
    b = kaas_factory("--volume-poll-interval-ms", "200")
    create_topic(b.bootstrap, "pinned", 2)
    # A reader commits its offsets, then a producer opens a transaction on both
    # partitions and dies: the LSO stays where it was, the group waits behind it.
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(4):
        p.produce("pinned", value=f"plain-{i}".encode(), partition=i % 2)
    p.flush(15)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "waiting-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("pinned", 0, 0), TopicPartition("pinned", 1, 0)])
    got = []
    deadline = time.time() + 20
    while len(got) < 4 and time.time() < deadline:
        got += [m for m in c.consume(10, 0.5) if not m.error()]
    c.commit(asynchronous=False)
    c.close()
    stuck = textwrap.dedent(f"""
        import os
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": "{b.bootstrap}", "transactional.id": "pinning-tx",
                       "transaction.timeout.ms": 600000}})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("pinned", value=b"open-0", partition=0)
        p.produce("pinned", value=b"open-1", partition=1)
        p.flush(15)
        os.kill(os.getpid(), 9)
    """)
    subprocess.run([sys.executable, "-c", stuck], timeout=60)
    # A later, committed transaction: younger, so listed after the open one.
    q = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "a-committed-tx"})
    q.init_transactions(30)
    q.begin_transaction()
    q.produce("pinned", value=b"x", partition=0)
    q.commit_transaction(30)
    top = Tmux(f"{KAASCTL} top --interval 300ms", {"KAAS_DATA_DIR": str(b.data_dir), "TERM": "xterm-256color"})
    try:
        screen = wait_for(lambda: (lambda s: s if "Needs attention" in s and "pinning-tx" in s else None)(top.screen()),
                          what="the needs-attention list")
        assert '"pinning-tx" (Ongoing, open' in screen and "pins the LSO of 2 partition(s)" in screen, screen
        assert 'group "waiting-reader" is blocked behind open transactions' in screen, screen
        top.keys("2")
        screen = wait_for(lambda: (lambda s: s if "TIMEOUT" in s else None)(top.screen()), what="the transactions view")
        assert "sort age" in screen, screen
        rows = [l for l in screen.splitlines() if "pinning-tx" in l or "a-committed-tx" in l]
        assert "pinning-tx" in rows[0] and "a-committed-tx" in rows[1], screen
        assert "10m00s" in rows[0] and re.search(r"\b9m\d\ds\b", rows[0]), rows[0]  # timeout, time left
        top.keys("5")
        screen = wait_for(lambda: (lambda s: s if "PINNED BY" in s else None)(top.screen()), what="the partitions view")
        for part in ("pinned-0", "pinned-1"):
            line = next(l for l in screen.splitlines() if part in l)
            assert "pinning-tx (Ongoing" in line, screen
        top.keys("q")
        wait_for(lambda: not top.alive(), what="kaasctl top to exit")
    finally:
        top.close()
