#!/usr/bin/env bash
# The fault-injection matrix on a real Apache Kafka started by ../shared/tools/real-kafka.sh:
#   KAFKA_DIR=~/kafka-4.1.0 KAFKA_PORT=29092 bash scripts/chaos-matrix.sh [scenario ...]
# Scenarios: outage10 outage45 outage120 freeze45 kill churn malformed diskfull (default: all) and windows
# (kill with a per-minute tumbling window whose final values are checked; not in the default), each run
# for both drivers and both guarantees; one summary line per run, appended to chaos-results.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
KAFKA=${KAFKA_SCRIPT:-../shared/tools/real-kafka.sh}
DIR=${KAFKA_DIR:-$HOME/kafka-4.1.0}; PORT=${KAFKA_PORT:-29092}
BROKER=127.0.0.1:$PORT
OUT=${CHAOS_RESULTS:-chaos-results.txt}
DRIVERS=${CHAOS_DRIVERS:-"aiokafka confluent"}; GUARANTEES=${CHAOS_GUARANTEES:-"at_least_once exactly_once"}
scenarios=("$@"); [ ${#scenarios[@]} -gt 0 ] || scenarios=(outage10 outage45 outage120 freeze45 kill churn malformed diskfull)
control=(--broker-stop "bash $KAFKA stop $DIR" --broker-start "bash $KAFKA start $DIR" --broker-pid-file "$DIR/data-$PORT/broker.pid"
         --kafka-dir "$DIR" --broker-log-dir "$DIR/data-$PORT/logs")  # a failed run explains its duplicates
status=0
for s in "${scenarios[@]}"; do
  case $s in
    outage*) args=(--scenario outage --fault-seconds "${s#outage}" --records 20000 --workers 2);;
    freeze*) args=(--scenario freeze --fault-seconds "${s#freeze}" --records 20000 --workers 2);;
    kill) args=(--scenario kill --kills 20 --records 60000 --workers 3);;
    windows) args=(--scenario kill --kills 6 --records 60000 --workers 3 --windows);;  # issue 15's run
    churn) args=(--scenario churn --churn-seconds 120 --records 60000 --workers 2);;
    malformed) args=(--scenario malformed --malformed 10000 --records 50000 --workers 2);;
    diskfull) args=(--scenario diskfull --records 20000 --workers 2);;  # needs root (mounts a tmpfs)
    *) echo "unknown scenario $s" >&2; exit 2;;
  esac
  for d in $DRIVERS; do for g in $GUARANTEES; do
    line=$(.venv/bin/python -m tests.chaos --broker "$BROKER" --driver "$d" --guarantee "$g" "${args[@]}" "${control[@]}" \
           --workdir "/tmp/chaos-$s-$d-$g" 2>/dev/null | tail -1)
    echo "$line" | tee -a "$OUT"
    case $line in *" OK") ;; *) status=1;; esac
  done; done
done
exit $status
