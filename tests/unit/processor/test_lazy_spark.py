"""The capture's Spark session starts again when its JVM exits while starting.

The JVM is launched by a fork of a process whose gRPC threads run; the child
sometimes dies before it reports its port (``JAVA_GATEWAY_EXITED``), and the
changefeed went to state error for it. The start is this class's own seam.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import PySparkRuntimeError

from cdc.config import load_changefeed_config
from processor import spark as spark_module
from processor.spark import START_ATTEMPTS, LazySpark

CONFIG = load_changefeed_config(
    None,
    {
        "changefeed_id": "cf",
        "source_uri": "mysql://u:p@127.0.0.1:3306/",
        "sink_uri": "blackhole://",
        "rules": ["db.*"],
    },
)


def gateway_exited() -> PySparkRuntimeError:
    return PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})


class Starts:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, master: str, app: str) -> Any:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return f"session on {master}"


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_module.time, "sleep", lambda _s: None)


def test_a_jvm_that_exits_while_starting_is_launched_again() -> None:
    starts = Starts([gateway_exited(), gateway_exited()])
    assert LazySpark("app", starts)(CONFIG) == "session on local[*]"
    assert starts.calls == 3


def test_it_gives_up_after_the_last_attempt() -> None:
    starts = Starts([gateway_exited() for _ in range(START_ATTEMPTS)])
    with pytest.raises(PySparkRuntimeError):
        LazySpark("app", starts)(CONFIG)
    assert starts.calls == START_ATTEMPTS


def test_other_errors_are_not_retried() -> None:
    starts = Starts([ValueError("bad master")])
    with pytest.raises(ValueError):
        LazySpark("app", starts)(CONFIG)
    assert starts.calls == 1


def test_warm_starts_the_session_once_in_the_background() -> None:
    starts = Starts([])
    spark = LazySpark("app", starts)
    spark.warm("local[2]")
    spark.warm("local[2]")
    # a chunk meanwhile waits for the warm start and gets its session (on its master)
    assert spark(CONFIG) == "session on local[2]"
    assert starts.calls == 1
