"""kafkajs (npm) round trip against a real kaas-server, through tests/js/roundtrip.js."""
import json
import subprocess
from pathlib import Path

JS = Path(__file__).resolve().parents[1] / "js"


def test_kafkajs_produce_consume_round_trip(kaas):
    out = subprocess.run(["node", str(JS / "roundtrip.js"), kaas.bootstrap], capture_output=True, text=True, timeout=120, cwd=JS)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["produced"] == result["consumed"] == 300
    assert result["inOrder"] and result["headersIntact"]
