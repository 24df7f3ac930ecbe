"""The Spark session of a capture: warm before a snapshot needs it, made once.

Starting the JVM, its gateway and the first Python workers takes seconds (7 s on 2
cores), which a user creating a changefeed would otherwise wait for before the first
chunk runs (issue #16). So the session is started in the background (``warm``): when
the capture starts, if it was given a master (``cdc-server --spark-master``), and
else as soon as a table that snapshots is handed to this capture, while its pipeline
anchors the snapshot and plans the chunks. A capture whose tables need no snapshot
and that was given no master never starts a JVM. One session per process (Spark
allows no more): the first master asked for decides.

The JVM is launched by a fork of this process, while gRPC's threads run (the
admin API, etcd): gRPC then skips its fork handlers, and the child can die
before it reports its port ("Java gateway process exited"; seen in about one
start in five under load). A new fork works, so that error is retried.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import get_logger
from sparkjobs.snapshot import spark_session

__all__ = ["START_ATTEMPTS", "LazySpark"]

#: The first Spark job of a session starts its Python workers; run on warming up.
_WARM_SLICES = 64


#: Launches of the Spark JVM before its error is the table's.
START_ATTEMPTS = 3


def _gateway_exited(error: Exception) -> bool:
    error_class = getattr(error, "getErrorClass", None)
    named = error_class() if callable(error_class) else None
    return named == "JAVA_GATEWAY_EXITED" or "JAVA_GATEWAY_EXITED" in str(error)


class LazySpark:
    """``spark(config)``: the process's Spark session, created on the first call."""

    def __init__(self, app: str, start: Callable[[str, str], Any] = spark_session) -> None:
        self.app = app
        self._start = start
        self._session: Any = None
        self._warming: threading.Thread | None = None
        self._master: str | None = None
        self._lock = threading.RLock()
        self.log = get_logger(__name__)

    def __call__(self, config: ChangefeedConfig) -> Any:
        session = self._get(config.spark_master)
        if config.spark_master != self._master:
            self.log.warning(
                "changefeed %s asks for Spark master %s; this process runs %s",
                config.changefeed_id,
                config.spark_master,
                self._master,
            )
        return session

    def warm(self, master: str) -> None:
        """Starts the session on ``master`` in the background, unless one is started or
        starting; a call meanwhile waits for it. Failures are logged (the first chunk
        that needs the session tries again and reports its error)."""
        with self._lock:
            if self._session is not None or self._warming is not None:
                return
            self._warming = threading.Thread(
                target=self._warm, args=(master,), name="spark-warm", daemon=True
            )
            self._warming.start()

    def _warm(self, master: str) -> None:
        began = time.monotonic()
        try:
            session = self._get(master)
            # the first job starts the executors' Python workers: a chunk need not
            sc = session.sparkContext
            slices = max(int(sc.defaultParallelism), 1)
            sc.parallelize(range(_WARM_SLICES), slices).count()
            self.log.info("spark session on %s warm after %.1f s", master, time.monotonic() - began)
        except Exception as exc:  # the first chunk tries again and reports it
            self.log.warning("warming the spark session on %s failed: %s", master, exc)

    def _get(self, master: str) -> Any:
        warming = self._warming
        if warming is not None and warming is not threading.current_thread():
            warming.join()  # its session, on the master it was warmed on
        with self._lock:
            if self._session is None:
                self._session = self._launch(master)
                self._master = master
            return self._session

    def _launch(self, master: str) -> Any:
        attempt = 1
        while True:
            try:
                return self._start(master, self.app)
            except Exception as exc:
                if attempt >= START_ATTEMPTS or not _gateway_exited(exc):
                    raise
                attempt += 1
                self.log.warning(
                    "the Spark JVM exited while starting (%s); launching it again (%d of %d)",
                    exc,
                    attempt,
                    START_ATTEMPTS,
                )
                time.sleep(0.5 * attempt)

    def cancel_jobs(self) -> None:
        """Cancels every Spark job of this process; called when the capture's registration
        ends (its lease lost, or the capture stopping).

        Its tables may already run elsewhere, and a chunk task writes the rows it read
        whenever it gets to it: a task that stalled past the lease and then committed
        would put older rows over what the table's new holder wrote since (Spark tasks
        carry no fence of their own: docs/ddl-during-snapshot.md). Spark marks the
        tasks killed and, after ``spark.python.task.killTimeout`` (2 s), kills the
        Python workers still running them, which rolls back what they had open
        downstream. Starts no session when there is none."""
        with self._lock:
            session = self._session
        if session is None:
            return
        try:
            session.sparkContext.cancelAllJobs()
        except Exception as exc:  # a stopped context: nothing runs on it
            self.log.warning("cancelling the spark jobs failed: %s", exc)
            return
        # info: a graceful stop ends the registration too; a lost lease is logged as an error
        self.log.info("registration ended: cancelled every spark job of this capture")

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None
                self._master = None
