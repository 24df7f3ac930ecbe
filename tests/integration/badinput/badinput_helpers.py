"""What the bad-input tests share: cdcctl in-process, waiting, SQL, checksums, a cdc-server.

The cdc-server is a real process (``python -m capture.main``) on the session's
etcd under its own cluster id; cdcctl runs in-process (``cdc.cli.main.main``)
so a test sees its exit code, stdout and stderr exactly as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest
from testkit import execute, wait_for

from cdc.api.health import is_serving
from cdc.cli.main import main as cdcctl
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

SOURCE_PW_ENV = "CDC_BADINPUT_SOURCE_PW"
SINK_PW_ENV = "CDC_BADINPUT_SINK_PW"


@dataclass(frozen=True)
class Server:
    """A running cdc-server: its admin address and its log file."""

    address: str
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def cdc_server(
    etcd_endpoint: str, env: dict[str, str], log: Path, cluster: str
) -> Iterator[Server]:
    """A cdc-server process on a free port until the block ends (then SIGTERM, else kill)."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "capture.main",
                f"--etcd={etcd_endpoint}",
                f"--addr={address}",
                "--capture-id=badinput-1",
                f"--cluster-id={cluster}",
                # Nothing here waits for a lease to expire; a short TTL would only
                # make a loaded machine's capture doubt its lease and refuse writes.
                "--lease-ttl=10",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )
    try:
        deadline = time.monotonic() + 30
        while not is_serving(address, timeout=0.5):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"cdc-server did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield Server(address, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


class Cli:
    """Runs cdcctl in-process (the server comes from CDC_SERVER, as for a user).

    Changefeeds it creates are removed by ``remove_created``.
    """

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.created: list[str] = []

    def __call__(self, *argv: str) -> Result:
        self.capsys.readouterr()
        code = cdcctl(list(argv))
        out, err = self.capsys.readouterr()
        return Result(code, out, err)

    def create(self, cid: str, source_uri: str, sink_uri: str, *flags: str) -> Result:
        """``changefeed create``; the id is remembered for removal even if create fails."""
        self.created.append(cid)
        return self(
            "changefeed",
            "create",
            "--changefeed-id",
            cid,
            "--source-uri",
            source_uri,
            "--sink-uri",
            sink_uri,
            *flags,
        )

    def query(self, cid: str) -> dict[str, Any]:
        return self("changefeed", "query", "-c", cid).json()

    def list_ids(self) -> list[str]:
        return [cf["id"] for cf in self("changefeed", "list").json()]

    def remove_created(self) -> None:
        for cid in self.created:
            self("changefeed", "remove", "-c", cid)


def null_safe_columns(names: Iterable[str]) -> str:
    """Each column preceded by its NULL marker, for CONCAT_WS (which skips NULLs: without
    the markers (1, NULL, 'a') and (1, 'a', NULL) would hash alike)."""
    return ", ".join(f"ISNULL(`{n}`), `{n}`" for n in names)


def checksum(server: MariaDBServer, db: str, table: str) -> tuple[int, int]:
    """(row count, sum of CRC32 over every column) of ``db.table``; (-1, -1) if it is missing."""
    names = execute(
        server,
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
        f" WHERE TABLE_SCHEMA='{db}' AND TABLE_NAME='{table}' ORDER BY ORDINAL_POSITION",
    )
    if not names:
        return (-1, -1)
    columns = null_safe_columns(name for (name,) in names)
    count, total = execute(
        server,
        f"SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', {columns}))), 0)"
        f" FROM `{db}`.`{table}`",
    )[0]
    return int(count), int(total)


def same_rows(source: MariaDBServer, sink: MariaDBServer, db: str, table: str) -> bool:
    return checksum(source, db, table) == checksum(sink, db, table)


def wait_running(cli: Cli, cid: str, tables: int) -> dict[str, Any]:
    """Waits until ``tables`` tables of ``cid`` report running; the query then."""

    def running() -> dict[str, Any] | None:
        data = cli.query(cid)
        states = [t["state"] for t in data["tables"]]
        return data if states.count("running") == tables else None

    return wait_for(running, 60, f"{tables} tables of {cid} to run")


def wait_state(cli: Cli, cid: str, state: str, timeout: float = 60) -> dict[str, Any]:
    """Waits until changefeed ``cid`` is in ``state``; the query then."""

    def reached() -> dict[str, Any] | None:
        data = cli.query(cid)
        return data if data["state"] == state else None

    return wait_for(reached, timeout, f"changefeed {cid} to be {state}")


def wait_synced(source: MariaDBServer, sink: MariaDBServer, db: str, *tables: str) -> None:
    """Waits until every table has the same rows downstream as on the source."""
    wait_for(
        lambda: all(same_rows(source, sink, db, t) for t in tables),
        60,
        f"{', '.join(tables)} to reach the downstream",
    )


def purge_binlogs_before_newest(source: MariaDBServer) -> str:
    """Rotates the binlog and purges every older file; the oldest file kept.

    A file a binlog reader still has open, or one MariaDB's binlog checkpoint has not
    passed yet (crash recovery may need it), is not purged, so this retries; a reader
    that holds one for more than 5 s is one an earlier test left behind on the shared
    source (a removed changefeed whose capture has not let go yet), and its
    connection is killed (the caller's own changefeed is stopped by then).
    """
    execute(source, "FLUSH BINARY LOGS")
    newest = execute(source, "SHOW BINARY LOGS")[-1][0]
    since = time.monotonic()

    def purged() -> bool:
        execute(source, f"PURGE BINARY LOGS TO '{newest}'")
        if [row[0] for row in execute(source, "SHOW BINARY LOGS")] == [newest]:
            return True
        if time.monotonic() - since > 5:
            for (thread,) in execute(source, _DUMP_THREADS):
                with suppress(pymysql.MySQLError):  # gone meanwhile
                    execute(source, f"KILL {thread}")
        return False

    wait_for(purged, 30, f"binlog files before {newest} to be purged")
    return newest


_DUMP_THREADS = "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'"
