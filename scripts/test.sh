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
exec .venv/bin/python -m pytest "$@"
