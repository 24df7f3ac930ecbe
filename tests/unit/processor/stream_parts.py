"""Pieces for shared-stream tests without a server: a changefeed's stream over a store
fake, and tables to hand it (processor/shared_stream.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc.config import load_changefeed_config
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.metrics import TableMetrics
from cdc.model.gtid import Flavor
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.source.flavor import ServerInfo
from cdc.store.keys import KeySpace
from processor.shared_stream import SharedStream, StreamOptions
from processor.streamed_table import StreamedTable
from processor.table_records import RecordWriter, TaskGuard

CF = "cf"
SERVER = ServerInfo(Flavor.MARIADB, "10.11", 1)


class Store:
    """A store fake for streams that never reach etcd: only its key layout."""

    keys = KeySpace("/cdc/test")


def pos(offset: int) -> Position:
    return Position("mysql-bin.000001", offset)


def stream(
    store: Any,
    barriers: Any,
    options: StreamOptions,
    alive: Callable[[], bool] = lambda: True,
) -> SharedStream:
    """A stream of changefeed ``CF`` over ``db.*`` into the blackhole sink; ``alive``
    says whether the capture's lease is known alive."""
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": "mysql://u:p@127.0.0.1:1/",
            "sink_uri": "blackhole://",
            "rules": ["db.*"],
        },
    )
    return SharedStream(store, config, barriers, alive, options, capture_id="c1")


def table(store: Any, name: str, floor: Position | None, task_revision: int = 1) -> StreamedTable:
    """Table ``db.<name>`` starting after ``floor``, its reports answering the task at
    ``task_revision``."""
    return StreamedTable(
        TableName("db", name),
        None,
        None,
        floor=floor,
        records=RecordWriter(store, CF, f"db.{name}", "c1", TaskGuard(task_revision)),
        metrics=TableMetrics(CF, f"db.{name}"),
        events=EventFilter([], True),
        flavor=Flavor.MARIADB,
        case_sensitive=True,
        log=get_logger(__name__, table=name),
    )
