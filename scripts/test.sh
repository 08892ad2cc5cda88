#!/usr/bin/env bash
# Run the whole test suite. Starts its own dev broker unless STREAMKIT_TEST_BROKER=host:port.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
