"""The Spark session of a capture, made when the first snapshot chunk needs one.

A capture whose tables need no snapshot never starts a JVM. One session per
process (Spark allows no more): the first changefeed's ``snapshot.spark-master``
decides its master.
"""

from __future__ import annotations

import threading
from typing import Any

from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import get_logger
from sparkjobs.snapshot import spark_session

__all__ = ["LazySpark"]


class LazySpark:
    """``spark(config)``: the process's Spark session, created on the first call."""

    def __init__(self, app: str) -> None:
        self.app = app
        self._session: Any = None
        self._lock = threading.Lock()
        self.log = get_logger(__name__)

    def __call__(self, config: ChangefeedConfig) -> Any:
        with self._lock:
            if self._session is None:
                self._session = spark_session(config.spark_master, self.app)
            elif config.spark_master != self._session.sparkContext.master:
                self.log.warning(
                    "changefeed %s asks for Spark master %s; this process runs %s",
                    config.changefeed_id,
                    config.spark_master,
                    self._session.sparkContext.master,
                )
            return self._session

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None
