#!/usr/bin/env bash
# Runs every benchmark (bench/*_bench.py) with its defaults; each rewrites its own
# section of docs/benchmarks.md. Set-up first, as the README's commands do.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
for script in bench/*_bench.py; do
  echo "== $script"
  .venv/bin/python "$script"
done
