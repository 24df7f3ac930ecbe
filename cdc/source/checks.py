"""Startup checks of a source before any binlog is read.

Each failure names the setting or the purged file and says what to do, since a
CDC tool that starts on a STATEMENT-format binlog or a purged position silently
loses rows. A wrong setting can be fixed and retried (``SourceError``); a start
position the binlog no longer has cannot (``ChangesUnavailable``).
"""

from __future__ import annotations

from typing import Any

from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.source.flavor import (
    ServerInfo,
    SourceError,
    binlog_files,
    executed_gtids,
    gtid_enabled,
    oldest_gtid_set,
)


class ChangesUnavailable(SourceError):
    """Changes the changefeed needs are not in the binlog as rows: purged, never there, or
    logged as SQL statements. Retrying cannot bring them back, so the changefeed fails."""


class SourceSwitched(SourceError):
    """A binlog connection reached another server than the one its reader was started on
    (the source URI moved, e.g. after a failover): the reader ends instead of reading a
    file:offset that means nothing there; the changefeed follows the new server by GTID
    (``cdc.changefeed.failover``) when it retries."""


REQUIRED_SETTINGS = (
    ("log_bin", "ON"),
    ("binlog_format", "ROW"),
    ("binlog_row_image", "FULL"),
    ("binlog_row_metadata", "FULL"),
)


def check_binlog_settings(conn: Any) -> None:
    """Raises SourceError naming every setting that is wrong (all of them at once)."""
    names = ", ".join(f"'{name}'" for name, _ in REQUIRED_SETTINGS)
    with conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        actual = {name.lower(): str(value).upper() for name, value in cur.fetchall()}
    wrong = [
        f"{name}={actual.get(name, 'unsupported by this server')} (need {want})"
        for name, want in REQUIRED_SETTINGS
        if actual.get(name) != want
    ]
    if wrong:
        fixes = " ".join(f"{name}={want}" for name, want in REQUIRED_SETTINGS)
        raise SourceError(
            "the source's binlog cannot be captured: "
            + "; ".join(wrong)
            + f". Set in the server config: {fixes} (log_bin needs a restart; for the others "
            "SET GLOBAL works for new sessions), then try again."
        )


def check_position_available(conn: Any, info: ServerInfo, start: Position | GtidSet) -> None:
    """Raises ChangesUnavailable if the binlog at `start` has been purged (or never existed).

    A position of another generation (read on the server the changefeed followed
    here from, ``Position.gen``) is checked by its GTID set, which is where a
    reader resumes on this server."""
    if isinstance(start, Position) and start.gen != info.generation:
        start = resume_gtids(conn, info, start)
    files = binlog_files(conn)
    if not files:
        raise SourceError("the source keeps no binary logs (SHOW BINARY LOGS is empty)")
    oldest, newest = files[0][0], files[-1][0]
    if isinstance(start, Position):
        sizes = dict(files)
        if start.file not in sizes:
            raise ChangesUnavailable(
                f"start position {start.file}:{start.offset} is not on the source: it keeps "
                f"binlog files {oldest} .. {newest}. The file was purged (or belongs to another "
                "server); start a new changefeed with snapshot mode 'initial', or from a "
                "position that still exists."
            )
        if start.offset > sizes[start.file]:
            raise ChangesUnavailable(
                f"start position {start.file}:{start.offset} is past the end of that file "
                f"({sizes[start.file]} bytes); use a position from SHOW MASTER STATUS"
            )
        return
    missing = start.missing_from(executed_gtids(conn, info))
    if missing:
        raise ChangesUnavailable(
            f"start GTID set {start} holds transactions this server never had: "
            f"{'; '.join(missing)}. Resuming here would lose them; give a GTID set the "
            "server has (SELECT @@gtid_binlog_pos / @@gtid_executed)."
        )
    needed = oldest_gtid_set(conn, info, oldest)
    if not start.contains(needed):
        raise ChangesUnavailable(
            f"start GTID set {start} is older than the oldest binlog kept ({oldest} starts "
            f"after {needed}): transactions in between were purged. Start a new changefeed "
            "with snapshot mode 'initial', or from a GTID set the source still has."
        )


def resume_gtids(conn: Any, info: ServerInfo, position: Position) -> GtidSet:
    """The GTID set a position read on another server resumes from here; ChangesUnavailable
    when it has none (a file:offset of another server means nothing) or this server has
    no GTIDs."""
    where = (
        f"position {position} was read on an earlier source of the changefeed (generation "
        f"{position.gen}; this server, {info.describe()}, is generation {info.generation})"
    )
    if position.gtid is None:
        raise ChangesUnavailable(
            f"{where} and carries no GTID set (the changefeed started at a binlog file:offset "
            "without GTIDs): a file:offset of another server means nothing, so it cannot "
            "resume here. Create the changefeed again (snapshot mode 'initial')."
        )
    if not gtid_enabled(conn, info):
        raise ChangesUnavailable(
            f"{where}, and this server has no GTIDs (gtid_mode is not ON): only a GTID set "
            "says where to resume on another server. Turn GTIDs on, or create the "
            "changefeed again (snapshot mode 'initial')."
        )
    return position.gtid
