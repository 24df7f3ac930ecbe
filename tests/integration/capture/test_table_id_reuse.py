"""Table ids reused after a source restart never make one table's rows another's.

A table map's id is the server's and numbering starts again when it restarts,
which begins a new binlog file. A puller that watches table ``a`` never sees
the table maps of other tables (they are refused unparsed), so an id it
remembered for ``a`` from before the restart can, after it, name table ``b``:
without forgetting ids at each new file, ``b``'s rows came out as ``a``'s
(found by the randomized differential test, seed 2001: a five-column row
decoded with a four-column table; with equal shapes it is silent).

The binlog is written first, restart included, and then read by one puller
from before the restart, so the stream crosses the files itself and the test
does not depend on reconnect timing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from testkit import execute, position_now, running_mariadb

from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.filter.table_filter import TableFilter
from cdc.model.events import RowChange
from cdc.playground.mariadb import MariaDBServer
from cdc.source.connect import connect
from cdc.source.flavor import detect
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def private_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_mariadb(tmp_path_factory, "reuse", 71, binlog=True)


def _table_id(server: MariaDBServer, table: str) -> int:
    """The id of the newest table map of ``db.<table>`` in the current binlog file."""
    file = execute(server, "SHOW MASTER STATUS")[0][0]
    ids = [
        int(m.group(1))
        for *_, info in execute(server, f"SHOW BINLOG EVENTS IN '{file}'")
        if (m := re.search(rf"table_id: (\d+) \(db\.{table}\)", str(info)))
    ]
    assert ids, f"no table map of db.{table} in {file}"
    return ids[-1]


def test_rows_of_a_table_that_took_a_remembered_id_are_not_the_watched_tables(
    private_source: MariaDBServer,
) -> None:
    server = private_source
    columns = "(id INT PRIMARY KEY, v VARCHAR(20))"
    execute(server, "CREATE DATABASE db", f"CREATE TABLE db.a {columns}")
    execute(server, f"CREATE TABLE db.b {columns}")
    start = position_now(server)
    execute(server, "INSERT INTO db.a VALUES (1, 'a before')")
    remembered = _table_id(server, "a")
    server.stop()
    type(server)(server.spec).start()
    while True:
        execute(server, "INSERT INTO db.b VALUES (2, 'b after')")
        taken = _table_id(server, "b")
        if taken >= remembered:
            break
        # Each time b is opened again it takes the next id: walk it up to a's old one.
        execute(server, "DELETE FROM db.b", "FLUSH TABLES db.b")
    assert taken == remembered, (
        f"could not make db.b take the id db.a had before the restart ({remembered}); "
        f"it took {taken}"
    )
    execute(server, "INSERT INTO db.a VALUES (3, 'a after')")
    end = position_now(server)

    conn = connect(parse_source_uri(server.uri))
    try:
        info = detect(conn)
    finally:
        conn.close()
    puller = Puller(
        PullerConfig(
            source=parse_source_uri(server.uri),
            server=info,
            start=start,
            tables=TableFilter.parse(["db.a"], case_sensitive=True),
        )
    )
    rows: list[tuple[str, object]] = []
    try:
        for event in puller.events():
            if isinstance(event, RowChange):
                image = event.after or event.before
                assert image is not None
                rows.append((str(event.table), image["v"]))
            elif isinstance(event, Resolved) and event.position.key() >= end.key():
                break
    finally:
        puller.close()
    assert rows == [("db.a", "a before"), ("db.a", "a after")]
