#!/usr/bin/env bash
# Probes the rejoin-epoch (KIP-360) wire contract of a live kaas broker with hand-built
# InitProducerId requests. Usage: scripts/kafka-txn-coordinator.sh [HOST:PORT]
# (default 127.0.0.1:9092). Exit 0 when every check holds. See
# scripts/kafka_txn_coordinator_probe.py for the checks.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
exec "$python" "$here/kafka_txn_coordinator_probe.py" "${1:-127.0.0.1:9092}"
