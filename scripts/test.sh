#!/usr/bin/env bash
# Run the gates (ruff and mypy, configured in pyproject.toml; the docs site built --strict), each failing
# the script, then the whole test suite. Starts its own dev broker unless
# STREAMKIT_TEST_BROKER=host:port.
# Prints branch coverage per file (files at 100% left out), then per package for runtime/,
# transport/ and tables/ (the figures README.md quotes). Worker subprocesses are not measured.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh || exit 1
echo "ruff check:"
.venv/bin/python -m ruff check . || { echo "ruff failed: fix the findings above (ruff check --fix fixes some)"; exit 1; }
echo "mypy:"
.venv/bin/python -m mypy || { echo "mypy failed: fix the type errors above (settings in pyproject.toml [tool.mypy])"; exit 1; }
# First and fast: the docs site (mkdocs.yml) with --strict, so a broken link or a setting the
# generated reference cannot document fails the run. Its log is shown only when it fails.
DOCS_LOG=$(mktemp)
if NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true .venv/bin/python -m mkdocs build --strict -d site > "$DOCS_LOG" 2>&1; then
  echo "docs site built into site/ (mkdocs build --strict)"
  rm -f "$DOCS_LOG"
else
  cat "$DOCS_LOG"; rm -f "$DOCS_LOG"
  echo "docs site: mkdocs build --strict failed (output above)" >&2
  exit 1
fi
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 --cov=streamkit --cov-branch --cov-report=)
rm -f .coverage .coverage.spark
if [ $# -eq 0 ]; then
  # The whole suite: the Spark tests (JVMs and subprocesses, mostly waiting on Spark) run beside
  # the rest, in a second pytest with its own dev broker; their output follows the rest's.
  SPARK_LOG=$(mktemp)
  COVERAGE_FILE=.coverage.spark "${PYTEST[@]}" -m spark > "$SPARK_LOG" 2>&1 &
  spark_pid=$!
  "${PYTEST[@]}" -m "not spark"
  status=$?
  wait "$spark_pid"
  spark_status=$?
  echo "--- the Spark tests (run beside the others) ---"
  cat "$SPARK_LOG"; rm -f "$SPARK_LOG"
  [ "$status" -eq 0 ] && status=$spark_status
  [ -f .coverage.spark ] && .venv/bin/python -m coverage combine --append .coverage.spark > /dev/null
else
  "${PYTEST[@]}" "$@"
  status=$?
fi
if [ -f .coverage ]; then
  .venv/bin/python -m coverage report --skip-covered --skip-empty
  echo "branch coverage per package:"
  for pkg in runtime transport tables; do
    printf '  streamkit/%-10s %s\n' "$pkg/" "$(.venv/bin/python -m coverage report --include="streamkit/$pkg/*" | tail -1 | awk '{print $NF}')"
  done
fi
exit $status
