"""PySpark's worker daemon, with the chunk code imported before it forks a worker.

Spark starts one daemon per executor (``spark.python.daemon.module``, set by
``sparkjobs.snapshot.session_conf``) and forks a Python worker from it per task
slot, and again after an idle worker was stopped. Each new worker used to import
PySpark's worker and this project's chunk code (the sinks, sqlglot, PyMySQL: about a
second on 2 cores) before its first chunk could run, so the first Spark job of a
snapshot took a second longer than the next ones, every time a capture's workers had
gone idle. Imported here once, the modules come to every worker with the fork.

Nothing imported here may start a thread: a fork copies only the forking thread
(PySpark imports its worker after the fork for that reason, in case pandas or
pyarrow start threads; ``tests/unit/snapshot/test_sparkjobs_daemon.py`` checks that
these imports start none).
"""

import pyspark.worker  # noqa: F401  (imported for the workers: see above)
from pyspark.daemon import manager

import sparkjobs.snapshot  # noqa: F401

if __name__ == "__main__":
    manager()
