"""scripts/kafka-txn-coordinator.sh (the KIP-360 page's shell suite) against a live broker."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_rejoin_epoch_wire_contract_holds_on_a_live_broker(kaas):
    out = subprocess.run([str(ROOT / "scripts" / "kafka-txn-coordinator.sh"), kaas.bootstrap],
                         capture_output=True, text=True, timeout=60, env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rejoin-epoch wire contract holds" in out.stdout
    assert "FAIL" not in out.stdout
