"""docs/getting-started.md, run as written (issue 28): every ```sh and ```python block
of the page, in order, against the build under test. A page that stops working — a
renamed flag, a command that fails, a missing install step — fails here.

How a block is run, and the only liberties taken:
- Commands run in a fresh working directory (so `./data` is new), one by one, with
  bash; a line ending in `\\` continues on the next.
- `cargo run --release -p NAME [-- ARGS]` runs the binary under test (KAAS_SERVER_BIN,
  KAASCTL_BIN) through a `cargo` shim first on PATH; the shim refuses any other cargo
  command and a `cargo run` without `--release` (a second, slow debug build for a
  reader). `./target/release/NAME` is that binary too.
- The first command that starts `kaas-server` is the page's broker: it runs in the
  background, as written, with KAAS_LISTEN set to a free port (tests never take 9092);
  every `127.0.0.1:9092` in later blocks is that port. A later `kaas-server` command
  (a configuration example naming /srv and 0.0.0.0) is checked with `--print-config`
  appended: its flags must parse, nothing is bound or written.
- Every other command must exit 0 within 60 s.
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import BIN, KAASCTL, free_port, process_env, wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"

SHIM = """#!/usr/bin/env bash
# cargo, for the getting-started doc test: `cargo run --release -p NAME [-- ARGS]` runs
# the build under test; anything else is refused.
[ "$1" = run ] || { echo "doc test: only 'cargo run' is shimmed, not: cargo $*" >&2; exit 97; }
shift
release=0; pkg=
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release=1; shift ;;
    -p) pkg=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "doc test: unexpected cargo argument $1" >&2; exit 97 ;;
  esac
done
[ "$release" = 1 ] || { echo "doc test: 'cargo run' without --release builds a second, debug copy" >&2; exit 98; }
case "$pkg" in
  kaas-server) exec "$KAAS_SERVER_BIN" "$@" ;;
  kaasctl) exec "$KAASCTL_BIN" "$@" ;;
  *) echo "doc test: unknown package $pkg" >&2; exit 97 ;;
esac
"""


def blocks(text):
    """(language, [command or source]) for each fenced sh / python block, in order. A
    block in any other language fails the test: the page would hold a command this
    test does not run."""
    fences = re.findall(r"^```(\S*)$", text, flags=re.M)
    langs = fences[0::2]  # openings; every other fence closes a block
    assert len(fences) % 2 == 0 and set(langs) <= {"sh", "python"}, f"{PAGE}: a block this test cannot run: {langs}"
    out = []
    for lang, body in re.findall(r"^```(sh|python)\n(.*?)^```", text, flags=re.S | re.M):
        if lang == "python":
            out.append((lang, [body]))
            continue
        commands, pending = [], ""
        for line in body.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line = (pending + line).strip()
            pending = ""
            if line and not line.startswith("#"):
                commands.append(line)
        out.append((lang, commands))
    return out


def test_every_command_block_of_getting_started_works_as_written(tmp_path):
    text = PAGE.read_text()
    found = blocks(text)
    assert len(found) >= 4, f"{PAGE} lost its command blocks? {found}"
    work = tmp_path / "work"
    (work / "target" / "release").mkdir(parents=True)
    (work / "target" / "release" / "kaas-server").symlink_to(BIN)
    (work / "target" / "release" / "kaasctl").symlink_to(KAASCTL)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "cargo").write_text(SHIM)
    (shims / "cargo").chmod(0o755)
    port = free_port()
    env = process_env({
        "PATH": f"{shims}:{os.environ.get('PATH', '')}",
        "KAAS_SERVER_BIN": str(BIN),
        "KAASCTL_BIN": str(KAASCTL),
        "RUST_LOG": "info",
    })
    env = {k: v for k, v in env.items() if not k.startswith("KAAS_") or k in ("KAAS_SERVER_BIN", "KAASCTL_BIN")}
    broker = None
    log = tmp_path / "broker.log"
    ran = []
    try:
        for lang, commands in found:
            for command in commands:
                here = command.replace("127.0.0.1:9092", f"127.0.0.1:{port}")
                if lang == "python":
                    r = subprocess.run([sys.executable, "-c", here], cwd=work, env=env, capture_output=True,
                                       text=True, timeout=60)
                    assert r.returncode == 0, f"python block failed:\n{command}\n{r.stdout}\n{r.stderr}"
                    ran.append(("python", r.stdout))
                    continue
                if "kaas-server" in command and broker is None:
                    with open(log, "wb") as out:
                        broker = subprocess.Popen(["bash", "-c", f"exec {here}"], cwd=work,
                                                  env={**env, "KAAS_LISTEN": f"127.0.0.1:{port}"},
                                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                    wait_for(lambda: "kaas-server ready" in log.read_text(errors="replace") or broker.poll() is not None,
                             timeout=30, what="the page's broker")
                    assert broker.poll() is None, f"{command} exited:\n{log.read_text()}"
                    ran.append((command, ""))
                    continue
                if "kaas-server" in command:
                    here += " --print-config"
                r = subprocess.run(["bash", "-c", here], cwd=work, env=env, capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, f"{command!r} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
                ran.append((command, r.stdout))
        outputs = "\n".join(o for _, o in ran)
        # What the page says the commands show.
        assert "k1 hello" in outputs and "k2 world" in outputs, outputs
        assert "b'hello'" in outputs, outputs
        assert "greetings" in next(o for c, o in ran if c.endswith("topics")), ran
        assert (work / "data" / "__cluster" / "cluster.json").exists(), "the broker's volume is ./data"
        assert "NEW CLUSTER" in log.read_text(), "the first start says it made a new volume"
        config = next(o for c, o in ran if "--data-dir /srv/kaas" in c)
        assert 'listen = "0.0.0.0:9092"  # flag' in config and "broker-id = 1  # flag" in config, config
    finally:
        if broker is not None and broker.poll() is None:
            os.killpg(broker.pid, signal.SIGTERM)
            try:
                broker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(broker.pid, signal.SIGKILL)
                broker.wait()
