"""Every MySQL-versus-MariaDB difference the product depends on, in one place.

- GTID text: MariaDB `domain-server-seq,...`; MySQL `uuid:1-5,...`.
- Current GTID set: MariaDB `@@gtid_binlog_pos`; MySQL `@@gtid_executed`.
- Current binlog position: `SHOW MASTER STATUS`; MySQL 8.2+ `SHOW BINARY LOG STATUS`.
- GTID set before the oldest kept file: MariaDB `BINLOG_GTID_POS(file, 4)`;
  MySQL `@@gtid_purged`.
- Reader flags: MariaDB needs `is_mariadb=True` on `BinLogStreamReader`.
- Server identity (a failover guard): MySQL `@@server_uuid`, unique per server;
  MariaDB has none, so `@@server_id` (unique in a replication topology, as
  replication requires) and, for the record, `@@gtid_domain_id`.
- GTID on at all: MySQL `@@gtid_mode` (a server may run without); MariaDB always.
- A session's transaction left idle: MariaDB ends the session after
  `idle_transaction_timeout` seconds; MySQL has no such setting.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position


class SourceError(RuntimeError):
    """A source cannot be used as it is; the message says what to change."""


@dataclass(frozen=True)
class ServerInfo:
    """What a connection said about its server. ``uuid`` (MySQL) and ``domain`` (MariaDB)
    are read by ``detect``; ``generation`` is the changefeed's count of failovers that
    led to this server (``cdc.changefeed.failover``), stamped on every position read
    from it: 0 unless a changefeed's failover guard set it."""

    flavor: Flavor
    version: str
    server_id: int
    uuid: str | None = None
    domain: int | None = None
    generation: int = 0

    def same_server(self, other: ServerInfo) -> bool:
        """Whether both describe the same server (flavour, server_id, server_uuid)."""
        return (self.flavor, self.server_id, self.uuid) == (
            other.flavor,
            other.server_id,
            other.uuid,
        )

    def describe(self) -> str:
        """``server_id 1, gtid_domain_id 0`` / ``server_id 1, server_uuid 3e11...``."""
        if self.uuid is not None:
            return f"server_id {self.server_id}, server_uuid {self.uuid}"
        if self.domain is not None:
            return f"server_id {self.server_id}, gtid_domain_id {self.domain}"
        return f"server_id {self.server_id}"


class _Status(enum.Enum):
    BINARY_LOG = "SHOW BINARY LOG STATUS"
    MASTER = "SHOW MASTER STATUS"


def detect(conn: Any) -> ServerInfo:
    """The server's flavour, version and identity (generation 0)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@server_id")
        version, server_id = cur.fetchone()
        flavor = Flavor.MARIADB if "mariadb" in version.lower() else Flavor.MYSQL
        cur.execute(_IDENTITY[flavor])
        (extra,) = cur.fetchone()
    if flavor is Flavor.MARIADB:
        return ServerInfo(flavor, version, int(server_id), domain=int(extra))
    return ServerInfo(flavor, version, int(server_id), uuid=str(extra).lower())


_IDENTITY = {Flavor.MARIADB: "SELECT @@gtid_domain_id", Flavor.MYSQL: "SELECT @@server_uuid"}


def idle_transaction_limit(server_version: str, seconds: int) -> tuple[str, ...]:
    """The statements that have the server end this session once its transaction has
    stood idle ``seconds`` (``server_version``: the handshake's, PyMySQL's
    ``get_server_info()``); none on MySQL, which has no such setting."""
    if "mariadb" not in server_version.lower():
        return ()
    return (f"SET SESSION idle_transaction_timeout = {int(seconds)}",)


def server_identity(conn: Any, info: ServerInfo) -> tuple[int, str | None]:
    """``(server_id, server_uuid or None)`` of the server ``conn`` reaches now: one
    round trip, asked on every binlog connection (the source URI may reach another
    server after a failover, e.g. a DNS name that moved)."""
    with conn.cursor(pymysql.cursors.Cursor) as cur:  # plain rows on a DictCursor connection
        if info.flavor is Flavor.MARIADB:
            cur.execute("SELECT @@server_id")
            return int(cur.fetchone()[0]), None
        cur.execute("SELECT @@server_id, @@server_uuid")
        server_id, uuid = cur.fetchone()
        return int(server_id), str(uuid).lower()


def gtid_enabled(conn: Any, info: ServerInfo) -> bool:
    """Whether the server numbers its transactions by GTID (MariaDB always does)."""
    if info.flavor is Flavor.MARIADB:
        return True
    with conn.cursor() as cur:
        cur.execute("SELECT @@gtid_mode")
        return str(cur.fetchone()[0]).upper() == "ON"


def executed_gtids(conn: Any, info: ServerInfo) -> GtidSet:
    """Every transaction the server has in its binlog history (``gtid_binlog_pos`` /
    ``gtid_executed``): what a changefeed may resume from there by GTID."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT {current_gtid_variable(info)}")
        return GtidSet.parse(cur.fetchone()[0] or "", info.flavor)


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
    return Position(file, offset, GtidSet.parse(gtid_text, info.flavor), info.generation)


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
