"""Changefeeds that end: at their target position, or when a snapshot-only run is done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster_helpers import Node, changefeed_config, checksums, status, tasks
from prometheus_client import REGISTRY
from testkit import execute, position_now, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore, TaskState
from cdc.playground.mariadb import MariaDBServer
from cdc.store import EtcdStore


def rows(server: MariaDBServer, table: str) -> list[tuple[Any, ...]]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table} ORDER BY id")
            return list(cur.fetchall())
    finally:
        conn.close()


def test_a_changefeed_finishes_at_its_target_position(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    nodes: Callable[..., Node],
) -> None:
    db = source_database
    ddl = f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)"
    execute(source_db, ddl)
    execute(sink_db, f"CREATE DATABASE `{db}`", ddl)
    try:
        start = position_now(source_db)
        execute(source_db, *(f"INSERT INTO `{db}`.t VALUES ({i}, {i})" for i in range(1, 6)))
        target = position_now(source_db)
        execute(source_db, *(f"INSERT INTO `{db}`.t VALUES ({i}, {i})" for i in range(6, 9)))
        config = changefeed_config(
            source_db.uri,
            sink_db.uri,
            [f"{db}.*"],
            snapshot_mode="never",
            start_position=f"{start.file}:{start.offset}",
            target_position=f"{target.file}:{target.offset}",
        )
        ChangefeedStore(store).create(config)
        nodes("c1").lead(store)
        wait_for(lambda: status(store).state is ChangefeedState.FINISHED, 30, "state finished")
        assert rows(sink_db, f"`{db}`.t") == [(i, i) for i in range(1, 6)]
        wait_for(
            lambda: all(t.state is TaskState.STOP for t, _ in tasks(store, "cf1").values()),
            10,
            "the table to stop",
        )
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")


def test_a_snapshot_only_changefeed_finishes_after_its_snapshot(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    nodes: Callable[..., Node],
    spark: Any,
) -> None:
    db = source_database
    names = ["a", "b"]
    for name in names:
        values = ",".join(f"({i}, {i * 3})" for i in range(1, 201))
        execute(
            source_db,
            f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO `{db}`.{name} VALUES {values}",
        )
    try:
        config = changefeed_config(
            source_db.uri, sink_db.uri, [f"{db}.*"], snapshot_mode="snapshot-only", chunk_size=64
        )
        ChangefeedStore(store).create(config)
        nodes("c1", spark).lead(store)
        nodes("c2", spark)
        wait_for(lambda: status(store).state is ChangefeedState.FINISHED, 60, "state finished")
        assert checksums(sink_db, db, names) == checksums(source_db, db, names)
        for name in names:
            labels = {"changefeed": config.changefeed_id, "table": f"{db}.{name}"}
            # 64 rows a chunk from 1, 65, 129, 193, and the tail at the MAX, 200
            assert REGISTRY.get_sample_value("cdc_snapshot_chunks_total", labels) == 5
            assert REGISTRY.get_sample_value("cdc_snapshot_rows_total", labels) == 200
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")
