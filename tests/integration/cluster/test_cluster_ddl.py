"""The DDL barrier with in-process owner and processors on the real servers.

Tables are created, altered (a column added, then used; a column dropped),
renamed, truncated, dropped and created LIKE another while rows are written
to them, interleaved over several tables. The downstream must end equal, and
since a row using a column the downstream lacks would fail in the sink (the
changefeed would go to state error), the changefeed must never have had an
error: no row reached the downstream before the DDL it depends on.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster_helpers import Node, changefeed_config, checksums, status, tasks
from testkit import position_now, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.playground.mariadb import MariaDBServer
from cdc.store import EtcdStore


def script(db: str) -> list[str]:
    q = f"`{db}`"
    steps = [
        f"CREATE TABLE {q}.a (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {q}.b (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {q}.c (id INT PRIMARY KEY, v INT)",
    ]
    for i in range(1, 6):
        steps += [
            f"INSERT INTO {q}.a VALUES ({i}, {i})",
            f"INSERT INTO {q}.b VALUES ({i}, {i})",
            f"INSERT INTO {q}.c VALUES ({i}, {i})",
        ]
    steps += [
        f"ALTER TABLE {q}.a ADD COLUMN note VARCHAR(20) DEFAULT 'x'",
        f"INSERT INTO {q}.a (id, v, note) VALUES (10, 10, 'uses note')",
        f"UPDATE {q}.a SET note = CONCAT('n', id) WHERE id < 4",
        f"INSERT INTO {q}.b VALUES (10, 10)",
        f"ALTER TABLE {q}.a DROP COLUMN v",
        f"INSERT INTO {q}.a (id, note) VALUES (11, 'no v')",
        f"UPDATE {q}.b SET v = v * 2",
        f"RENAME TABLE {q}.b TO {q}.b2",
        f"INSERT INTO {q}.b2 VALUES (11, 11)",
        f"ALTER TABLE {q}.b2 ADD COLUMN extra INT NOT NULL DEFAULT 5",
        f"INSERT INTO {q}.b2 (id, v, extra) VALUES (12, 12, 99)",
        f"TRUNCATE TABLE {q}.c",
        f"INSERT INTO {q}.c VALUES (20, 20)",
        f"CREATE VIEW {q}.vw AS SELECT id FROM {q}.a",
        f"UPDATE {q}.a SET note = 'after view'",
        f"DROP TABLE {q}.c",
        f"CREATE TABLE {q}.d LIKE {q}.a",
        f"INSERT INTO {q}.d SELECT * FROM {q}.a",
        f"DELETE FROM {q}.a WHERE id = 1",
        f"ALTER TABLE {q}.d ADD COLUMN w INT",
        f"INSERT INTO {q}.d (id, note, w) VALUES (100, 'w', 7)",
    ]
    return steps


def run(server: MariaDBServer, statements: list[str]) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


def tables_of(server: MariaDBServer, db: str) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s"
                " ORDER BY TABLE_NAME",
                (db,),
            )
            return [row[0] for row in cur.fetchall()]
    finally:
        conn.close()


def test_ddl_and_dml_interleaved_reach_the_downstream_in_order(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    nodes: Callable[..., Node],
) -> None:
    db = source_database
    sink_uri = sink_db.uri.rstrip("/") + "/?worker-count=2"
    config = changefeed_config(source_db.uri, sink_uri, [f"{db}.*"], snapshot_mode="never")
    ChangefeedStore(store).create(config)
    first = nodes("c1")
    nodes("c2")
    first.lead(store)
    wait_for(lambda: status(store).start is not None, 10, "the changefeed to start")
    try:
        run(source_db, script(db))
        target = position_now(source_db)

        def reached() -> bool:
            checkpoint = status(store).checkpoint
            return checkpoint is not None and checkpoint.key() >= target.key()

        wait_for(reached, 60, "the checkpoint to pass the script")
        final = status(store)
        assert final.state is ChangefeedState.NORMAL
        assert final.error_history == (), final.error
        assert [s.kind for s in final.skipped_ddl] == ["create view"]
        assert final.schema_version >= 9
        assert sorted(t for t in tasks(store, "cf1")) == [f"{db}.a", f"{db}.b2", f"{db}.d"]
        assert tables_of(sink_db, db) == ["a", "b2", "d"]
        assert checksums(sink_db, db, ["a", "b2", "d"]) == checksums(
            source_db, db, ["a", "b2", "d"]
        )
    finally:
        run(sink_db, [f"DROP DATABASE IF EXISTS `{db}`"])
