"""kcat (librdkafka CLI) produce and consume against a real kaas-server."""
import subprocess


def test_kcat_round_trip_with_keys(kaas):
    lines = "".join(f"key{i}:value {i}\n" for i in range(100))
    prod = subprocess.run(["kcat", "-b", kaas.bootstrap, "-P", "-t", "kc", "-K", ":", "-X", "acks=all"],
                          input=lines, capture_output=True, text=True, timeout=60)
    assert prod.returncode == 0, prod.stderr
    cons = subprocess.run(["kcat", "-b", kaas.bootstrap, "-C", "-t", "kc", "-o", "beginning", "-e", "-f", "%k|%s|%o\n"],
                          capture_output=True, text=True, timeout=60)
    assert cons.returncode == 0, cons.stderr
    got = cons.stdout.strip().splitlines()
    assert got == [f"key{i}|value {i}|{i}" for i in range(100)]


def test_kcat_lists_metadata(kaas):
    out = subprocess.run(["kcat", "-b", kaas.bootstrap, "-L", "-t", "meta"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert 'topic "meta" with 1 partitions' in out.stdout
