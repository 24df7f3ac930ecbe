"""open_sink (cdc.sink.factory) dispatches on the URI kind and refuses what it cannot open.
(MySQL sinks need a server: tests/integration/sink/ opens them through the same classes.)"""

from __future__ import annotations

import pytest

from cdc.sink.base import SinkError
from cdc.sink.blackhole import BlackholeSink
from cdc.sink.factory import open_sink
from cdc.sink.mysql import MySQLSinkOptions
from cdc.sink.pull import PullSinkURI
from cdc.sink.registry import parse_sink_uri


def no_schemas(_: object) -> None:
    raise AssertionError("not used")


def test_blackhole_uris_open_a_blackhole_sink() -> None:
    sink = open_sink(parse_sink_uri("blackhole://"), no_schemas, "cf")  # type: ignore[arg-type]
    assert isinstance(sink, BlackholeSink)
    sink.close()


def test_pull_uris_are_opened_only_inside_cdc_server() -> None:
    with pytest.raises(SinkError, match="pull sinks run inside cdc-server only"):
        open_sink(PullSinkURI(), no_schemas, "cf")  # type: ignore[arg-type]


def test_anything_else_is_refused_with_what_was_expected() -> None:
    with pytest.raises(SinkError, match="expected a parsed sink URI"):
        open_sink("blackhole://", no_schemas, "cf")  # type: ignore[arg-type]


def test_file_uris_open_the_file_sink(tmp_path: object) -> None:
    sink = open_sink(parse_sink_uri(f"file://{tmp_path}/out"), no_schemas, "cf")  # type: ignore[arg-type]
    try:
        assert type(sink).__name__ == "FileSink"
    finally:
        sink.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retry_timeout": 0}, "retry_timeout must be a positive number"),
        ({"backoff_initial": -1}, "backoff_initial must be a positive number"),
        ({"backoff_initial": 2, "backoff_max": 1}, "backoff_max .* must be at least"),
        ({"queue_depth": 0}, "queue_depth must be >= 1"),
        ({"read_timeout": True}, "read_timeout must be a positive number"),
        ({"idle_transaction_timeout": 0}, "idle_transaction_timeout must be an int >= 1"),
        ({"idle_transaction_timeout": 2.5}, "idle_transaction_timeout must be an int >= 1"),
    ],
)
def test_sink_options_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MySQLSinkOptions(**kwargs)
