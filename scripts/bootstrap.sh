#!/usr/bin/env bash
# Create a venv and install streamkit with some extras into it, skipped when already up to date.
#   bash scripts/bootstrap.sh                       # .venv with the dev extra (what scripts/test.sh needs)
#   bash scripts/bootstrap.sh .venv-demo devbroker  # the demo's: a worker plus the dev broker
# pip's output goes to VENV/install.log and is shown only when an install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
EXTRAS=${2:-dev}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
MARK="$VENV/.installed-$EXTRAS"
# The dev venv installs editable (code edits apply at once); any other installs streamkit as
# `pip install` does, again whenever its code changed.
if [ "$EXTRAS" = dev ]; then TARGET=(-e ".[dev]"); WATCH=(pyproject.toml); else TARGET=(".[$EXTRAS]"); WATCH=(pyproject.toml streamkit); fi
if [ ! -f "$MARK" ] || [ -n "$(find "${WATCH[@]}" -type f ! -name "*.pyc" -newer "$MARK" -print -quit)" ]; then
  LOG="$VENV/install.log"
  if ! { "$VENV/bin/python" -m pip install -q --upgrade pip \
         && "$VENV/bin/python" -m pip install -q "${TARGET[@]}"; } > "$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "bootstrap: installing streamkit[$EXTRAS] into $VENV failed (log above, kept in $LOG)" >&2
    exit 1
  fi
  touch "$MARK"
fi
