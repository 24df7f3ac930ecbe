"""Every MySQL-versus-MariaDB difference the product depends on, in one place.

- GTID text: MariaDB `domain-server-seq,...`; MySQL `uuid:1-5,...`.
- Current GTID set: MariaDB `@@gtid_binlog_pos`; MySQL `@@gtid_executed`.
- Current binlog position: `SHOW MASTER STATUS`; MySQL 8.2+ `SHOW BINARY LOG STATUS`.
- GTID set before the oldest kept file: MariaDB `BINLOG_GTID_POS(file, 4)`;
  MySQL `@@gtid_purged`.
- Reader flags: MariaDB needs `is_mariadb=True` on `BinLogStreamReader`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position


class SourceError(RuntimeError):
    """A source cannot be used as it is; the message says what to change."""


@dataclass(frozen=True)
class ServerInfo:
    flavor: Flavor
    version: str
    server_id: int


class _Status(enum.Enum):
    BINARY_LOG = "SHOW BINARY LOG STATUS"
    MASTER = "SHOW MASTER STATUS"


def detect(conn: Any) -> ServerInfo:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@server_id")
        version, server_id = cur.fetchone()
    flavor = Flavor.MARIADB if "mariadb" in version.lower() else Flavor.MYSQL
    return ServerInfo(flavor, version, int(server_id))


def _status_statement(info: ServerInfo) -> str:
    if info.flavor is Flavor.MYSQL and tuple(int(p) for p in info.version.split(".")[:2]) >= (8, 2):
        return _Status.BINARY_LOG.value
    return _Status.MASTER.value


def current_position(conn: Any, info: ServerInfo) -> Position:
    """The source's binlog end now: where a reader started now would begin.

    This is also the snapshot's watermark read: a plain status query, no lock.
    """
    with conn.cursor() as cur:
        cur.execute(_status_statement(info))
        row = cur.fetchone()
        if row is None:
            raise SourceError(
                "the source has no binary log: start it with log_bin=ON "
                "(and binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL)"
            )
        file, offset = row[0], int(row[1])
        cur.execute(f"SELECT {current_gtid_variable(info)}")
        gtid_text = cur.fetchone()[0] or ""
    return Position(file, offset, GtidSet.parse(gtid_text, info.flavor))


def current_gtid_variable(info: ServerInfo) -> str:
    return "@@gtid_binlog_pos" if info.flavor is Flavor.MARIADB else "@@gtid_executed"


def binlog_files(conn: Any) -> list[tuple[str, int]]:
    """`SHOW BINARY LOGS`: (file, size) from the oldest kept to the newest."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(row[0], int(row[1])) for row in cur.fetchall()]


def oldest_gtid_set(conn: Any, info: ServerInfo, oldest_file: str) -> GtidSet:
    """The GTID set already executed before the oldest binlog file still kept.

    A start GTID set must contain it, or transactions between the two are gone.
    """
    with conn.cursor() as cur:
        if info.flavor is Flavor.MARIADB:
            cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (oldest_file,))
        else:
            cur.execute("SELECT @@gtid_purged")
        text = cur.fetchone()[0] or ""
    return GtidSet.parse(text, info.flavor)


def reader_kwargs(info: ServerInfo) -> dict[str, Any]:
    """Flavour flags for `BinLogStreamReader`."""
    return {"is_mariadb": info.flavor is Flavor.MARIADB}
