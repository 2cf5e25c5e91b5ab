#!/usr/bin/env bash
# The benchmark suite, one command (docs/performance.md): builds the release broker,
# kaasctl, the id-volume generator and the librdkafka load generator, then runs every
# scenario and the machine-limit measurements. Arguments go to scripts/bench.py
# (--quick, --only, --peer NAME=HOST:PORT[:PID]). Report: target/bench/results.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p kaas-server -p kaasctl -p kaas-faultfs --bins --example gen_txn_volume
cargo build --release --manifest-path bench/Cargo.toml
exec python3 scripts/bench.py "$@"
