"""A processor pass costs what changed: the tables whose task changed or whose pipeline
ended, not every table of the capture (10,000 tables on three captures spent most of a
capture's interpreter on passes over all of them, and its lease ran out)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from cluster_helpers import changefeed_config
from testkit import wait_for

from cdc.changefeed import ChangefeedStore, TableRecord, TableState, TableTask, TaskState
from cdc.config.changefeed import ChangefeedConfig
from cdc.store import EtcdStore
from processor.processor import Processor

CF = "cf1"


def record_state(store: EtcdStore, table: str) -> TableState | None:
    item = store.get(store.keys.table_checkpoint(CF, table))
    return None if item is None else TableRecord.from_dict(item.json()).state


@pytest.fixture
def processor(store: EtcdStore) -> Iterator[Processor]:
    # a full pass only once an hour: every later look at a table is one the pass asked for
    running = Processor(store, "c1", lambda _config: None, interval=0.2, full_interval=3600)
    yield running
    running.stop()


def test_a_pass_looks_only_at_the_tables_whose_task_changed(
    store: EtcdStore, processor: Processor
) -> None:
    for n in range(200):
        store.put(store.keys.task(CF, f"db.other{n}"), TableTask("c2").to_dict())
    for n in range(3):
        store.put(store.keys.task(CF, f"db.mine{n}"), TableTask("c1", TaskState.STOP).to_dict())
    processor.start()
    wait_for(
        lambda: all(record_state(store, f"db.mine{n}") is TableState.STOPPED for n in range(3)),
        15,
        "the first pass to answer the stops",
    )
    visited: list[tuple[str, str]] = []
    visit = processor._visit

    def counted(key: tuple[str, str], configs: dict[str, ChangefeedConfig | None]) -> bool:
        visited.append(key)
        return visit(key, configs)

    processor._visit = counted  # type: ignore[method-assign]
    store.put(store.keys.task(CF, "db.new"), TableTask("c1", TaskState.STOP).to_dict())
    wait_for(lambda: record_state(store, "db.new") is TableState.STOPPED, 15, "the new stop")
    assert set(visited) == {(CF, "db.new")}


def test_a_pipeline_that_ends_is_looked_at_at_once(
    store: EtcdStore, processor: Processor, source_db_uri_unreachable: str
) -> None:
    """The table of a pipeline that failed is seen ended by the next pass, not by a full
    one an hour later (its failure recorded: not started again at that revision)."""
    config = changefeed_config(source_db_uri_unreachable, "blackhole://", ["db.*"])
    ChangefeedStore(store).create(config)
    store.put(store.keys.task(CF, "db.t"), TableTask("c1").to_dict())
    processor.start()
    wait_for(lambda: record_state(store, "db.t") is TableState.ERROR, 30, "the table to fail")
    wait_for(lambda: (CF, "db.t") not in processor._running, 10, "the pass to see it ended")
    assert (CF, "db.t") in processor._ended


@pytest.fixture
def source_db_uri_unreachable() -> str:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    return f"mysql://cdc:secret@127.0.0.1:{port}/"
