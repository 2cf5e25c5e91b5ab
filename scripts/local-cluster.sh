#!/usr/bin/env bash
# Starts a local cluster of brokers over one data directory and stops it cleanly on
# Ctrl-C / SIGTERM. Defaults: 3 brokers (ids 0..2) on 127.0.0.1:9092-9094, data in
# ./data, broker logs in ./logs (outside the volume: it is the brokers' shared state,
# and kaasctl reads it), the release build — built first unless KAAS_SERVER_BIN names
# a kaas-server binary. docs/cluster.md says what a cluster does today.
#
#   scripts/local-cluster.sh                       # build (release) and run
#   BROKERS=3 PORT_BASE=9092 DATA_DIR=./data LOG_DIR=./logs KAAS_SERVER_BIN=... scripts/local-cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BROKERS="${BROKERS:-3}"
PORT_BASE="${PORT_BASE:-9092}"
DATA_DIR="${DATA_DIR:-./data}"
LOG_DIR="${LOG_DIR:-./logs}"
if [ -z "${KAAS_SERVER_BIN:-}" ]; then
  cargo build --release -q -p kaas-server
  KAAS_SERVER_BIN=target/release/kaas-server
fi
mkdir -p "$DATA_DIR" "$LOG_DIR"
pids=()
stop() {
  trap - INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  echo "local cluster stopped"
  exit "$status"
}
trap stop INT TERM
for ((i = 0; i < BROKERS; i++)); do
  port=$((PORT_BASE + i))
  # Markers and fences are announced to the other brokers on the PLAINTEXT listener
  # (docs/cluster.md#markers-across-brokers).
  "$KAAS_SERVER_BIN" --data-dir "$DATA_DIR" --broker-id "$i" --listen "127.0.0.1:$port" \
    --inter-broker-listener-name PLAINTEXT \
    > "$LOG_DIR/broker-$i.log" 2>&1 &
  pids+=($!)
  echo "broker $i on 127.0.0.1:$port (log: $LOG_DIR/broker-$i.log)"
done
bootstrap=$(for ((i = 0; i < BROKERS; i++)); do printf '127.0.0.1:%d,' $((PORT_BASE + i)); done)
echo "bootstrap servers: ${bootstrap%,}   (Ctrl-C stops the cluster)"
# Wait for any broker to exit (then stop the rest) or for a signal.
while :; do
  for pid in "${pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "a broker exited; stopping the cluster" >&2
      stop
    fi
  done
  sleep 1 &
  wait $! || true
done
