"""sparkjobs.snapshot without a cluster: session settings and keeping the password out."""

from __future__ import annotations

import re
import sys

import pytest

from cdc.model.schema import Column, TableName, TableSchema
from cdc.snapshot.chunk import SnapshotChunk
from sparkjobs.snapshot import (
    REDACTION_STRING_REGEX,
    TOKEN_ATTEMPTS,
    ChunkWriter,
    SinkWriter,
    _masked,
    _Task,
    run_chunks,
    session_conf,
    worker_python,
)

SECRET = "s3cr3t-Pa55"
URI = f"mysql://repl:{SECRET}@10.0.0.5:3306/"


class NullWriter(ChunkWriter):
    def write(self, schema, chunk, result) -> None:  # test double
        return None


@pytest.mark.parametrize("master", ["local", "local[*]", "local[4]"])
def test_local_workers_run_this_interpreter(master: str) -> None:
    env = {"PYSPARK_PYTHON": "/usr/bin/python2"}
    assert worker_python(master, {"spark.pyspark.python": "/x"}, env) == sys.executable


@pytest.mark.parametrize("master", ["spark://h:7077", "k8s://https://h:6443", "yarn"])
def test_cluster_workers_use_the_configured_interpreter(master: str) -> None:
    assert worker_python(master, {"spark.pyspark.python": "./env/bin/python"}, {}) == (
        "./env/bin/python"
    )
    assert worker_python(master, {}, {"PYSPARK_PYTHON": "/opt/py/bin/python"}) == (
        "/opt/py/bin/python"
    )
    assert worker_python(master, {}, {}) == sys.executable


def test_session_conf_binds_local_mode_to_loopback_and_lets_conf_win() -> None:
    local = session_conf("local[2]", "app")
    assert local["spark.master"] == "local[2]"
    assert local["spark.app.name"] == "app"
    assert local["spark.driver.host"] == "127.0.0.1"
    cluster = session_conf("spark://h:7077", "app", {"spark.executor.memory": "2g"})
    assert "spark.driver.host" not in cluster
    assert cluster["spark.executor.memory"] == "2g"
    assert session_conf("yarn", "app", {"spark.app.name": "x"})["spark.app.name"] == "x"
    # the driver starts fast by default; a user's own JVM options replace ours
    assert cluster["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    own = {"spark.driver.extraJavaOptions": "-Xmx2g"}
    assert session_conf("local[1]", "app", own)["spark.driver.extraJavaOptions"] == "-Xmx2g"


def test_redaction_pattern_hides_credentials_in_uris() -> None:
    # Spark applies this Java regex to strings it prints; Python reads it the same way.
    pattern = re.compile(REDACTION_STRING_REGEX)
    text = f"reading {URI} and mysql://u:p%40ss@h:1/?server-id=5 and file:///tmp/out"
    redacted = pattern.sub("*********(redacted)", text)
    assert SECRET not in redacted and "p%40ss" not in redacted
    assert "@10.0.0.5:3306/" in redacted and "file:///tmp/out" in redacted


def test_task_and_writer_reprs_mask_the_password() -> None:
    task = _Task(URI, {}, SinkWriter(f"mysql://root:{SECRET}@sink:3306/", "cf"), 100)
    assert SECRET not in repr(task)
    assert "10.0.0.5" in repr(task)


def test_error_text_from_tasks_is_masked() -> None:
    text = _masked(f"boom connecting to {URI}; the password was {SECRET}", SECRET)
    assert SECRET not in text
    assert "10.0.0.5" in text


def test_run_chunks_checks_its_arguments_before_starting_spark() -> None:
    t = TableName("db", "t")
    schema = TableSchema(t, (Column("id", "int", "int(11)", nullable=False),), ("id",))
    chunk = SnapshotChunk(t, 0, "id")
    assert run_chunks(None, URI, {}, [], NullWriter()) == []
    with pytest.raises(ValueError, match="no schema given for table"):
        run_chunks(None, URI, {}, [chunk], NullWriter())
    with pytest.raises(ValueError, match="unique"):
        run_chunks(None, URI, {t: schema}, [chunk, chunk], NullWriter())
    with pytest.raises(TypeError, match="ChunkWriter"):
        run_chunks(None, URI, {t: schema}, [chunk], object())


class _Attempt:
    def __init__(self, number: int) -> None:
        self.number = number

    def attemptNumber(self) -> int:  # pyspark's name
        return self.number


def test_a_task_spark_runs_again_holds_the_chunk_over_the_attempt_it_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost executor's task runs again elsewhere; the first attempt may still write."""
    import pyspark

    table = TableName("db", "t")
    writer = SinkWriter("mysql://u:secret@h:3306/", "cf", tokens={table: 7})
    assert writer.token(TableName("db", "other")) is None
    assert writer.token(table) == 7 * TOKEN_ATTEMPTS  # outside a task: attempt 0
    tokens = []
    for attempt in (0, 1, 2):
        monkeypatch.setattr(
            pyspark.TaskContext, "get", classmethod(lambda _c, a=attempt: _Attempt(a))
        )
        tokens.append(writer.token(table))
    assert tokens == sorted(set(tokens)) and tokens[0] == 7 * TOKEN_ATTEMPTS
    later = SinkWriter("mysql://u:secret@h:3306/", "cf", tokens={table: 8})
    assert later.token(table) > tokens[-1]  # a later proof wins over every attempt
