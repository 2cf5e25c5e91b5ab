"""Membership on the shared volume: one process per broker id, whatever the lease file
says (`__cluster/brokers/<id>.lock`, docs/cluster.md)."""
import subprocess
import time

from conftest import BIN, free_port


def test_a_second_process_with_a_running_broker_id_is_refused(kaas, tmp_path):
    port = free_port()
    out = subprocess.run(
        [str(BIN), "--data-dir", str(kaas.data_dir), "--listen", f"127.0.0.1:{port}", "--broker-id", "0"],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode != 0
    assert "broker id 0 is in use by another running process" in out.stderr, out.stderr
    assert f"127.0.0.1:{kaas.port}" in out.stderr, "the holder is named"
    assert kaas.alive(), "the running broker is untouched"


def test_a_broker_killed_with_sigkill_restarts_at_once_with_its_id(kaas):
    kaas.kill9()
    started = time.time()
    kaas.restart()
    assert time.time() - started < 10, "no wait for the dead incarnation's lease to expire"
    assert "the previous incarnation of this broker id died without releasing its lease" in kaas.log_text()
