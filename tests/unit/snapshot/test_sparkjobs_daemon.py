"""The Spark worker daemon: its imports start no thread, so the workers it forks work, and
what they made is frozen before the fork."""

from __future__ import annotations

from testkit import run_python

from sparkjobs.snapshot import session_conf


def test_the_daemon_module_imports_the_chunk_code_and_starts_no_thread() -> None:
    probe = (
        "import sys, threading\n"
        "import sparkjobs.daemon\n"
        "chunk_code = ('sparkjobs.snapshot', 'pyspark.worker', 'cdc.sink.mysql.chunkload',"
        " 'cdc.sink.mysql.sink', 'cdc.sink.file.snapshot_files', 'cdc.sink.kafka.sink',"
        " 'sqlglot')\n"
        "assert all(m in sys.modules for m in chunk_code), [m for m in chunk_code"
        " if m not in sys.modules]\n"
        "print(threading.active_count())\n"
    )
    assert run_python(probe).strip() == "1"


def test_sessions_use_it_unless_told_otherwise() -> None:
    assert session_conf("local[2]", "app")["spark.python.daemon.module"] == "sparkjobs.daemon"
    other = {"spark.python.daemon.module": "pyspark.daemon"}
    assert session_conf("local[2]", "app", other)["spark.python.daemon.module"] == "pyspark.daemon"


def test_the_daemon_freezes_what_its_imports_made_before_it_forks() -> None:
    """PySpark's daemon collects garbage after every task of a reused worker; objects
    frozen before the fork are not walked by those collections."""
    probe = (
        "import gc\n"
        "import sparkjobs.daemon as daemon\n"
        "daemon.manager = lambda: print(gc.get_freeze_count())\n"
        "daemon.serve()\n"
    )
    assert int(run_python(probe)) > 10_000
