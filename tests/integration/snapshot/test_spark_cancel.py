"""A capture that lost its lease cancels its Spark jobs, and their Python tasks stop.

A chunk task writes the rows it read whenever it gets to it; once the capture's
lease is gone its tables may run elsewhere, so a task that went on would put older
rows over newer ones (``LazySpark.cancel_jobs``). The task here stands for a chunk
that has not committed yet: it appends to a file until told otherwise, for two
minutes; what counts is that it stops appending, i.e. its worker process is gone,
not only that Spark reports the job cancelled.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import SparkSession

from cdc.config import load_changefeed_config
from processor.spark import LazySpark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

CONFIG = load_changefeed_config(
    None,
    {
        "changefeed_id": "cf",
        "source_uri": "mysql://u:p@127.0.0.1:3306/",
        "sink_uri": "blackhole://",
        "rules": ["db.*"],
        "spark_master": "local[2]",
    },
)


def beating(beat: Path) -> Any:
    def task(_items: Iterable[int]) -> Iterator[int]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with beat.open("a") as out:
                out.write(".")
            time.sleep(0.05)
        yield 1

    return task


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def settles(path: Path, quiet: float, within: float) -> bool:
    """Whether ``path`` stops growing for ``quiet`` seconds before ``within`` pass."""
    deadline = time.monotonic() + within
    last, since = size(path), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = size(path)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
    return False


def test_cancelled_jobs_stop_their_python_tasks(spark: SparkSession, tmp_path: Path) -> None:
    lazy = LazySpark("cdc-tests", lambda master, app: spark)
    assert lazy(CONFIG) is spark
    beat = tmp_path / "beats"
    failures: list[BaseException] = []

    def job() -> None:
        try:
            spark.sparkContext.parallelize(range(2), 2).mapPartitions(beating(beat)).collect()
        except BaseException as exc:
            failures.append(exc)

    running = threading.Thread(target=job, daemon=True)
    running.start()
    deadline = time.monotonic() + 60
    while size(beat) < 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert size(beat) >= 20, "the tasks never started"
    assert not settles(beat, quiet=1.0, within=2.0), "the tasks stopped by themselves"

    lazy.cancel_jobs()

    running.join(60)
    assert not running.is_alive(), "the job did not end when cancelled"
    assert failures and "cancel" in str(failures[0]).lower(), failures
    # Spark kills a cancelled task's Python worker within its poll (2 s) and
    # spark.python.task.killTimeout (2 s); the margin is for a busy machine
    assert settles(beat, quiet=2.0, within=30.0), "the cancelled tasks kept running"


def test_cancelling_without_a_session_starts_none() -> None:
    starts: list[str] = []
    LazySpark("cdc-tests", lambda master, app: starts.append(master)).cancel_jobs()
    assert starts == []
