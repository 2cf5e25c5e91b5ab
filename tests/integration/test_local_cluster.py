"""scripts/local-cluster.sh (README): three brokers over one data directory that list
each other, and a clean stop on SIGTERM."""
import os
import signal
import subprocess
from pathlib import Path

from confluent_kafka.admin import AdminClient

from conftest import BIN, free_port_run, process_env, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_the_local_cluster_script_starts_three_brokers_and_stops_them_cleanly(tmp_path):
    base = free_port_run(3)
    env = process_env(dict(BROKERS="3", PORT_BASE=str(base), DATA_DIR=str(tmp_path / "data"),
                           LOG_DIR=str(tmp_path / "logs"), KAAS_SERVER_BIN=str(BIN)))
    proc = subprocess.Popen([str(ROOT / "scripts" / "local-cluster.sh")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        a = AdminClient({"bootstrap.servers": bootstrap})
        wait_for(lambda: sorted(a.list_topics(timeout=5).brokers) == [0, 1, 2], timeout=30, what="three brokers listed")
        for i in range(3):
            log = (tmp_path / "logs" / f"broker-{i}.log").read_text()
            assert "queued markers are announced to their leaders" in log and 'listener="PLAINTEXT"' in log, log
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "local cluster stopped" in out
        for i in range(3):
            assert "kaas-server stopped cleanly" in (tmp_path / "logs" / f"broker-{i}.log").read_text()
        # Nothing but the volume in the data directory: the logs are kept apart.
        assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["__cluster"], list((tmp_path / "data").iterdir())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the script and every broker it started
            proc.wait()
