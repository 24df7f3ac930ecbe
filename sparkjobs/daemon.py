"""PySpark's worker daemon, with the chunk code imported and frozen before it forks a worker.

Spark starts one daemon per executor (``spark.python.daemon.module``, set by
``sparkjobs.snapshot.session_conf``) and forks a Python worker from it per task
slot, and again after an idle worker was stopped. Each new worker used to import
PySpark's worker and this project's chunk code (the sinks, sqlglot, PyMySQL: about a
second on 2 cores) before its first chunk could run, so the first Spark job of a
snapshot took a second longer than the next ones, every time a capture's workers had
gone idle. Imported here once, the modules come to every worker with the fork.

Frozen, too. A reused worker runs ``gc.collect()`` after every task (PySpark's
daemon does), and a full collection walks every object those imports made: about
74,000, 50 ms of CPU on this project's 2-core machine, once per chunk, which was
two thirds of a worker's CPU in a 1M-row snapshot (``docs/snapshot-copy.md``).
``gc.freeze()`` before the fork moves them out of the collector's sight for good;
what a worker allocates itself is still collected.

Nothing imported here may start a thread: a fork copies only the forking thread
(PySpark imports its worker after the fork for that reason, in case pandas or
pyarrow start threads; ``tests/unit/snapshot/test_sparkjobs_daemon.py`` checks that
these imports start none).
"""

import gc

import pyspark.worker  # noqa: F401  (imported for the workers: see above)
from pyspark.daemon import manager

# What a chunk task runs: the task code, and what the sink kinds import only where a
# chunk is written (cdc/sink/*/kind.py) and an event filter only for its expressions.
import cdc.filter.expr
import cdc.sink.file.snapshot_files
import cdc.sink.kafka.sink
import cdc.sink.mysql.chunkload
import cdc.sink.mysql.rangerepair
import cdc.sink.mysql.sink  # noqa: F401
import sparkjobs.snapshot  # noqa: F401


def serve() -> None:
    """Freezes what the imports made, then runs PySpark's daemon (it forks the workers)."""
    gc.collect()
    gc.freeze()
    manager()


if __name__ == "__main__":
    serve()
