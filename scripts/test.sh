#!/usr/bin/env bash
# The one test command (README and .ci/run): set-up, lint, type check, import contracts,
# unit and integration tests.
# Pass pytest arguments to narrow it, e.g. scripts/test.sh -m "not integration".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/lint-imports
# A second guard behind pytest-timeout's per-test limit: after 70 minutes pytest
# gets SIGINT and prints where it was and what ran, well inside CI's 90.
# Two pytest-xdist workers (tests/conftest.py says which go together: the cluster tests
# one after another on one of them): 18 minutes instead of 26 on two cores.
# CDC_TEST_WORKERS=0 runs everything in this one process.
exec timeout --signal=INT --kill-after=60 70m .venv/bin/python -m pytest \
  -n "${CDC_TEST_WORKERS:-2}" "$@"
