"""Private MariaDB servers for benchmarks, started through the playground layer."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.packages import MARIADB_PACKAGES, ensure_packages
from cdc.playground.ports import free_port


@contextmanager
def mariadb(
    name: str, server_id: int, binlog: bool, options: tuple[str, ...] = ()
) -> Iterator[MariaDBServer]:
    """A started private server; ``options`` are extra mariadbd flags (sizing, limits)."""
    ensure_packages(MARIADB_PACKAGES)
    with tempfile.TemporaryDirectory(prefix=f"cdc-bench-{name}-") as tmp:
        server = MariaDBServer(
            MariaDBSpec(name, Path(tmp) / "db", free_port(), server_id, binlog, options),
            die_with_parent=True,
        )
        server.start()
        try:
            yield server
        finally:
            server.stop()


def execute_sql(server: MariaDBServer, sql: str) -> None:
    """Runs one statement on ``server`` over a connection of its own."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()
