#!/usr/bin/env bash
# The playground command of README.md: set-up, then a private local cluster.
#   scripts/playground.sh            up (idempotent), a demo changefeed, how to reach everything
#   scripts/playground.sh status|down
# `up` flags (ports, --base-dir) are passed to `cdcctl playground up`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
action=${1:-up}
[ $# -gt 0 ] && shift
if [ "$action" != up ]; then
  exec .venv/bin/cdcctl playground "$action" "$@"
fi

summary=$(.venv/bin/cdcctl playground up "$@")
printf '%s\n' "$summary"

# The demo changefeed: demo.items on the source, replicated to the downstream.
# The passwords go to 0600 files in secrets/ next to state.json (the playground's
# cdc-server reads password files from there only, --secrets-dir) and travel by
# reference (password-file), so neither etcd nor any output holds them.
eval "$(printf '%s' "$summary" | .venv/bin/python -c '
import json, shlex, sys
from pathlib import Path
summary = json.load(sys.stdin)
state = json.loads(Path(summary["credentials"]).read_text())
base = Path(state["base_dir"])
for name in ("source", "downstream"):
    db = state["services"][name]
    secret = base / "secrets" / f"{name}.password"
    secret.parent.mkdir(mode=0o700, exist_ok=True)
    secret.touch(mode=0o600)
    secret.write_text(db["password"])
    for key, value in (("host", db["host"]), ("port", db["port"]), ("user", db["user"]),
                       ("secret", secret)):
        print(f"{name}_{key}={shlex.quote(str(value))}")
print("server=" + shlex.quote(summary["cdc-server"]["addr"]))
print("console=" + shlex.quote(summary["cdc-server"]["console"]))
')"

MYSQL_PWD=$(cat "$source_secret") mariadb -h "$source_host" -P "$source_port" -u "$source_user" -e "
  CREATE DATABASE IF NOT EXISTS demo;
  CREATE TABLE IF NOT EXISTS demo.items (
    id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2), updated_at TIMESTAMP(6));
  INSERT IGNORE INTO demo.items
    SELECT seq, CONCAT('item-', seq), seq % 100 + 0.99, NOW(6) FROM demo.seq_1_to_10000;"

source_uri="mysql://${source_user}@${source_host}:${source_port}/?password-file=${source_secret}&server-id=4001"
sink_uri="mysql://${downstream_user}@${downstream_host}:${downstream_port}/?password-file=${downstream_secret}"
set +e
created=$(.venv/bin/cdcctl changefeed create --server "$server" --changefeed-id demo \
  --source-uri "$source_uri" --sink-uri "$sink_uri" --filter-rule 'demo.*' 2>&1)
code=$?
set -e
if [ $code -eq 0 ]; then
  echo "created changefeed demo (demo.items on the source -> the downstream)"
elif printf '%s' "$created" | grep -q ALREADY_EXISTS; then
  echo "changefeed demo exists already"
else
  printf '%s\n' "$created" >&2
  exit $code
fi
cat <<EOT

The web console (changefeeds, tables, snapshot progress, lag, captures): $console

Watch it in the terminal (Ctrl-C to stop):
  export CDC_SERVER=$server
  .venv/bin/cdcctl changefeed query -c demo --watch
Then change rows on the source and see them arrive:
  MYSQL_PWD=\$(cat $source_secret) mariadb -h $source_host -P $source_port -u $source_user \\
    -e "UPDATE demo.items SET price = price + 1 WHERE id <= 100"
  MYSQL_PWD=\$(cat $downstream_secret) mariadb -h $downstream_host -P $downstream_port \\
    -u $downstream_user -e "SELECT COUNT(*), SUM(price) FROM demo.items"
EOT
