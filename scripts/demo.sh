#!/usr/bin/env bash
# The demo: start the bundled dev broker, run the wordcount worker, feed it text, show counts.
set -euo pipefail
cd "$(dirname "$0")/.."
# Its own venv with only what it runs: a worker (pip install streamkit) and the dev broker.
bash scripts/bootstrap.sh .venv-demo devbroker
PY=$PWD/.venv-demo/bin/python
WORK=$(mktemp -d)
cleanup() {
  [ -n "${WORKER_PID:-}" ] && kill -TERM "$WORKER_PID" 2>/dev/null && wait "$WORKER_PID" 2>/dev/null || true
  [ -n "${BROKER_PID:-}" ] && kill -TERM "$BROKER_PID" 2>/dev/null && wait "$BROKER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$PY" -m streamkit dev-broker > "$WORK/broker.out" 2>&1 &
BROKER_PID=$!
for _ in $(seq 100); do [ -s "$WORK/broker.out" ] && break; sleep 0.1; done
export STREAMKIT_BROKER=$(head -n1 "$WORK/broker.out")
echo "dev broker on $STREAMKIT_BROKER"

WEB_PORT=$("$PY" -c 'from streamkit.devbroker import free_port; print(free_port())')
cd examples
"$PY" -m streamkit worker -A wordcount:app -l warning --web-port "$WEB_PORT" --data-dir "$WORK/data" \
  > "$WORK/worker.log" 2>&1 &
WORKER_PID=$!
"$PY" wordcount.py feed sample.txt
"$PY" wordcount.py show --expect "$("$PY" wordcount.py total sample.txt)"
echo "asking the worker's web view: GET /count/the/"
"$PY" wordcount.py query the --port "$WEB_PORT"
kill -TERM "$WORKER_PID"; wait "$WORKER_PID"; WORKER_PID=
echo "worker stopped cleanly"
