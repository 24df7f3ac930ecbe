"""Chunks as Spark tasks (local[2]): every row arrives, every chunk reports its high watermark."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from pyspark import cloudpickle

from cdc.model.schema import TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.snapshot import SnapshotChunk, split_table
from cdc.snapshot.reader import ChunkResult
from cdc.source.flavor import current_position
from cdc.typeconv import SINK_SESSION_SQL, sink_connect_kwargs, to_sql_param
from sparkjobs.snapshot import ChunkWriter, SinkWriter, run_chunks

# Spark workers cannot import test modules: ship this module's classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class UpsertWriter(ChunkWriter):
    """Upserts a chunk's rows into one table of the sink database with PyMySQL."""

    def __init__(self, host: str, port: int, user: str, password: str, database: str) -> None:
        self.connect = {"host": host, "port": port, "user": user, "password": password}
        self.database = database
        self.fail_chunk: str | None = None
        self.fail_text = ""

    def write(self, schema: TableSchema, chunk: SnapshotChunk, result: ChunkResult) -> None:
        if chunk.chunk_id == self.fail_chunk:
            raise RuntimeError(self.fail_text)
        columns = schema.columns
        names = ", ".join(f"`{c.name}`" for c in columns)
        marks = ", ".join(["%s"] * len(columns))
        sql = f"REPLACE INTO `{self.database}`.`{schema.name.table}` ({names}) VALUES ({marks})"
        conn = pymysql.connect(**self.connect, **sink_connect_kwargs(), autocommit=False)
        try:
            with conn.cursor() as cur:
                for statement in SINK_SESSION_SQL:
                    cur.execute(statement)
                values = [[to_sql_param(c, row[c.name]) for c in columns] for row in result.rows]
                if values:
                    cur.executemany(sql, values)
            conn.commit()
        finally:
            conn.close()


TABLE_SQL = "CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(8,2))"


@pytest.fixture
def sink(sink_db: MariaDBServer, sink_database: str) -> Iterator[Any]:
    conn = sink_db.connect(database=sink_database)
    with conn.cursor() as cur:
        cur.execute(TABLE_SQL.format(t="t"))
    yield conn
    conn.close()


def sink_rows(conn: Any, table: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, name, amount FROM {table} ORDER BY id")
        return list(cur.fetchall())


def prepare(src: Any) -> tuple[TableSchema, list[SnapshotChunk]]:
    src.execute(
        TABLE_SQL.format(t=f"`{src.db}`.t"),
        f"INSERT INTO `{src.db}`.t SELECT seq, CONCAT('n', seq), seq / 4 FROM seq_1_to_40",
    )
    schema = src.schema("t")
    chunks = split_table(src.snap, schema, chunk_size=12)
    assert len(chunks) == 5  # 12, 12, 12, 3, and the tail: the row at the MAX
    return schema, chunks


def test_chunks_run_as_spark_tasks_and_all_rows_arrive(
    spark: Any, src: Any, sink_db: MariaDBServer, sink_database: str, sink: Any
) -> None:
    schema, chunks = prepare(src)
    writer = UpsertWriter(sink_db.host, sink_db.port, sink_db.user, sink_db.password, sink_database)
    outcomes = run_chunks(spark, src.server.uri, {schema.name: schema}, chunks, writer)
    assert [o.chunk_id for o in outcomes] == [c.chunk_id for c in chunks]
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert [o.row_count for o in outcomes] == [12, 12, 12, 3, 1]
    now = current_position(src.admin, src.info)
    for outcome in outcomes:
        assert outcome.high_watermark is not None and outcome.low_watermark is not None
        assert outcome.high_watermark.gtid is not None
        assert outcome.low_watermark <= outcome.high_watermark <= now
    with src.admin.cursor() as cur:
        cur.execute(f"SELECT id, name, amount FROM `{src.db}`.t ORDER BY id")
        expected = list(cur.fetchall())
    assert sink_rows(sink, "t") == expected


def test_a_job_runs_a_task_per_core_each_over_its_share_of_the_chunks(
    spark: Any, src: Any, sink_db: MariaDBServer, sink_database: str, sink: Any
) -> None:
    """Spark's cost of a task is paid per core, not per chunk (sparkjobs/snapshot.py)."""
    schema, chunks = prepare(src)
    writer = UpsertWriter(sink_db.host, sink_db.port, sink_db.user, sink_db.password, sink_database)
    sc = spark.sparkContext
    sc.setJobGroup("a-task-per-core", "run_chunks")
    try:
        outcomes = run_chunks(spark, src.server.uri, {schema.name: schema}, chunks, writer)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    tracker = sc.statusTracker()
    (job,) = tracker.getJobIdsForGroup("a-task-per-core")
    info = tracker.getJobInfo(job)
    assert info is not None
    tasks = [tracker.getStageInfo(stage).numTasks for stage in info.stageIds]
    assert sc.defaultParallelism == 2 and tasks == [2]
    assert len(sink_rows(sink, "t")) == 40


def test_a_failing_chunk_is_reported_masked_and_the_others_still_finish(
    spark: Any, src: Any, sink_db: MariaDBServer, sink_database: str, sink: Any
) -> None:
    schema, chunks = prepare(src)
    writer = UpsertWriter(sink_db.host, sink_db.port, sink_db.user, sink_db.password, sink_database)
    writer.fail_chunk = chunks[1].chunk_id
    writer.fail_text = f"cannot write for {src.server.uri} (password {src.server.password})"
    outcomes = run_chunks(spark, src.server.uri, {schema.name: schema}, chunks, writer)
    assert [o.ok for o in outcomes] == [True, False, True, True, True]
    failed = outcomes[1]
    assert failed.high_watermark is None and failed.row_count == 0
    assert failed.error_type == "RuntimeError"
    assert "RuntimeError: cannot write for mysql://" in failed.error
    assert src.server.password not in failed.error
    assert "******" in failed.error
    assert len(sink_rows(sink, "t")) == 40 - 12


def test_rows_go_through_the_changefeed_sink(spark: Any, src: Any, sink_db: MariaDBServer) -> None:
    schema, chunks = prepare(src)
    # The MySQL sink writes to the same schema.table downstream.
    downstream = sink_db.connect()
    try:
        with downstream.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{src.db}`")
            cur.execute(TABLE_SQL.format(t=f"`{src.db}`.t"))
        writer = SinkWriter(sink_db.uri, "cf-snapshot-test")
        outcomes = run_chunks(spark, src.server.uri, {schema.name: schema}, chunks, writer)
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]
        assert len(sink_rows(downstream, f"`{src.db}`.t")) == 40
    finally:
        with downstream.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{src.db}`")
        downstream.close()


def test_a_capture_that_lost_the_chunks_writes_none_of_them(
    spark: Any, src: Any, sink_db: MariaDBServer
) -> None:
    """Each task's writes carry the token the job was given (cdc.sink.mysql.chunkfence)."""
    schema, chunks = prepare(src)
    downstream = sink_db.connect()
    table = f"`{src.db}`.t"
    try:
        with downstream.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{src.db}`")
            cur.execute(TABLE_SQL.format(t=table))

        def run(token: int) -> list[Any]:
            writer = SinkWriter(sink_db.uri, "cf-fence-test", tokens={schema.name: token})
            return run_chunks(spark, src.server.uri, {schema.name: schema}, chunks, writer)

        assert all(o.ok for o in run(20))
        first = sink_rows(downstream, table)
        src.execute(f"UPDATE {table} SET name = 'changed'")
        lost = run(10)
        assert [o.error_type for o in lost] == ["ChunkFenced"] * len(chunks)
        assert sink_rows(downstream, table) == first
        assert all(o.ok for o in run(30))
        assert {name for _, name, _ in sink_rows(downstream, table)} == {"changed"}
    finally:
        with downstream.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{src.db}`")
        downstream.close()


PROBE = """
import sys
from sparkjobs.snapshot import spark_session
session = spark_session("local[1]", "cdc-probe", {"spark.ui.enabled": "false",
                                                  "spark.local.dir": sys.argv[1]})
conf = session.sparkContext.getConf()
workers = session.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect()
print("WORKER", workers[0])
print("REDACTION", conf.get("spark.redaction.string.regex"))
session.stop()
"""


def test_spark_session_runs_workers_on_this_interpreter(spark: Any, tmp_path: Any) -> None:
    """In a process of its own: one JVM per process, and the fixture's session is running."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"WORKER {sys.executable}" in done.stdout
    assert "REDACTION (?<=://)" in done.stdout
