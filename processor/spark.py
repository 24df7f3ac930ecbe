"""The Spark session of a capture, made when the first snapshot chunk needs one.

A capture whose tables need no snapshot never starts a JVM. One session per
process (Spark allows no more): the first changefeed's ``snapshot.spark-master``
decides its master.

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
        self._lock = threading.Lock()
        self.log = get_logger(__name__)

    def __call__(self, config: ChangefeedConfig) -> Any:
        with self._lock:
            if self._session is None:
                self._session = self._launch(config.spark_master)
            elif config.spark_master != self._session.sparkContext.master:
                self.log.warning(
                    "changefeed %s asks for Spark master %s; this process runs %s",
                    config.changefeed_id,
                    config.spark_master,
                    self._session.sparkContext.master,
                )
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

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None
