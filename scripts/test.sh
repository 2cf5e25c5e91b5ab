#!/usr/bin/env bash
# Runs every kaas test. On a fresh machine it first installs what the tests need:
# kcat, libfaketime (and Node.js/npm if absent) from Debian, the Python clients into ./.venv, and
# kafkajs into tests/js/node_modules. Safe to re-run: installed pieces are reused.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=0
need_deb() { # need_deb COMMAND PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  shift
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

need_pkg() { # need_pkg PACKAGE...: for libraries, which install no command
  dpkg-query -W -f='${Status}' "$@" 2>/dev/null | grep -q "install ok installed" && return 0
  need_deb /nonexistent "$@"
}

step "system packages"
need_deb kcat kcat
need_pkg libfaketime   # a broker frozen with its clock (tests/integration/test_frozen_clock.py)
need_deb tmux tmux
need_deb node nodejs
need_deb npm npm
need_deb python3 python3 python3-venv

step "python clients (.venv)"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || { need_deb true python3-venv; python3 -m venv .venv; }
fi
if ! .venv/bin/python -c 'import sys' 2>/dev/null || ! cmp -s tests/requirements.txt .venv/.requirements 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
  cp tests/requirements.txt .venv/.requirements
fi

step "quix streams (.venv-quix)"
# Its own venv: quixstreams pins a confluent-kafka older than the one in .venv.
if [ ! -x .venv-quix/bin/python ]; then
  python3 -m venv .venv-quix
fi
if ! cmp -s tests/requirements-quix.txt .venv-quix/.requirements 2>/dev/null; then
  .venv-quix/bin/pip install -q --disable-pip-version-check -r tests/requirements-quix.txt
  cp tests/requirements-quix.txt .venv-quix/.requirements
fi

step "kafkajs (tests/js)"
if [ ! -d tests/js/node_modules/kafkajs ]; then
  (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
fi

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "rust tests"
cargo build --workspace --all-targets --quiet
cargo test --workspace --quiet

step "real-client integration tests"
# As root the power-cut and disk-fault tests can mount kaas-faultfs: there they must
# run, not skip (a machine without /dev/fuse fails them).
if [ "$(id -u)" = 0 ]; then export KAAS_REQUIRE_FUSE=1; fi
KAAS_SERVER_BIN="$PWD/target/debug/kaas-server" .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
