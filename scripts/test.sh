#!/usr/bin/env bash
# Run the gate (ruff, configured in pyproject.toml; its failing fails the script),
# then the whole test suite. Starts its own dev broker unless STREAMKIT_TEST_BROKER=host:port.
# Prints branch coverage per file (files at 100% left out), then per package for runtime/,
# transport/ and tables/ (the figures README.md quotes). Worker subprocesses are not measured.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh || exit 1
echo "ruff check:"
.venv/bin/python -m ruff check . || { echo "ruff failed: fix the findings above (ruff check --fix fixes some)"; exit 1; }
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --cov=streamkit --cov-branch --cov-report=term:skip-covered "$@"
status=$?
if [ -f .coverage ]; then
  echo "branch coverage per package:"
  for pkg in runtime transport tables; do
    printf '  streamkit/%-10s %s\n' "$pkg/" "$(.venv/bin/python -m coverage report --include="streamkit/$pkg/*" | tail -1 | awk '{print $NF}')"
  done
fi
exit $status
