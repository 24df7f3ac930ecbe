#!/usr/bin/env bash
# The playground command of README.md: set-up, then a private local cluster.
#   scripts/playground.sh            up (idempotent) and print how to reach everything
#   scripts/playground.sh status|down
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
action=${1:-up}
[ $# -gt 0 ] && shift
exec .venv/bin/cdcctl playground "$action" "$@"
