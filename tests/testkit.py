"""Small helpers the test folders share (importable as ``testkit``: pytest puts this
folder on ``sys.path`` for its root conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cdc.model.position import Position
from cdc.playground.mariadb import MariaDBServer
from cdc.source.flavor import current_position, detect


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """The first truthy value of ``condition()``, polled every ``every`` seconds;
    AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def execute(server: MariaDBServer, *statements: str) -> None:
    """Runs ``statements`` on a connection of its own (autocommit)."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def position_now(server: MariaDBServer) -> Position:
    """The server's binlog position now."""
    conn = server.connect()
    try:
        return current_position(conn, detect(conn))
    finally:
        conn.close()
