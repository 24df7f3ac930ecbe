"""Helpers of the subscription tests: the served pull sinks, event streams, dedupe keys."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc.model import DdlEvent, DdlKind, Op, Position, RowChange, TableName
from cdc.store import EtcdStore
from cdc.subscription import PullSink, SinkRegistry, SubscriptionClient

CHANGEFEED = "feed-1"
Event = RowChange | DdlEvent


@dataclass
class Served:
    """The server's address, its registry, and helpers that clean up after the test."""

    target: str
    registry: SinkRegistry
    store: EtcdStore
    sinks: list[PullSink] = field(default_factory=list)
    clients: list[SubscriptionClient] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def open_sink(self, capacity: int = 64, changefeed_id: str = CHANGEFEED) -> PullSink:
        sink = PullSink(self.store, changefeed_id, capacity)
        self.sinks.append(sink)
        self.registry.register(sink)
        return sink

    def restart(self, sink: PullSink, capacity: int = 64) -> PullSink:
        """What a server restart does to a pull sink: memory gone, etcd kept."""
        self.registry.unregister(sink)
        sink.close()
        return self.open_sink(capacity, sink.changefeed_id)

    def client(self, client_id: str, rules: Sequence[str] = ("*.*",)) -> SubscriptionClient:
        client = SubscriptionClient(self.target, CHANGEFEED, client_id, rules)
        self.clients.append(client)
        return client

    def background(self, target: Callable[..., Any], *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def transactions(
    tables: Sequence[TableName], count: int, rows: int = 3, first: int = 100
) -> list[list[Event]]:
    """``count`` transactions cycling over ``tables``; transaction n has ``1 + n % rows``
    rows sharing one position, and every 7th is a DDL on its table instead."""
    out: list[list[Event]] = []
    for n in range(count):
        table = tables[n % len(tables)]
        position = pos(first + 10 * n)
        if n % 7 == 6:
            statement = f"ALTER TABLE `{table.table}` ADD c{n} INT"
            out.append([DdlEvent(position, table.schema, (table,), DdlKind.ADD_COLUMN, statement)])
            continue
        out.append(
            [
                RowChange(table, Op.CREATE, None, {"id": n, "row": r}, (n, r), position, f"t{n}")
                for r in range(1 + n % rows)
            ]
        )
    return out


def feed(sink: PullSink, txns: Sequence[Sequence[Event]]) -> None:
    """What the pipeline does: rows in write_rows calls, DDL through apply_ddl."""
    for txn in txns:
        for event in txn:
            if isinstance(event, DdlEvent):
                sink.apply_ddl(event)
            else:
                sink.write_rows([event])


def ident(event: Event) -> tuple[Any, ...]:
    """Position and key: what a consumer dedupes by."""
    key = event.key if isinstance(event, RowChange) else ("ddl",)
    return (event.position.key(), key)


def wanted(txns: Sequence[Sequence[Event]], schema: str) -> list[Event]:
    return [
        e
        for txn in txns
        for e in txn
        if (e.table.schema if isinstance(e, RowChange) else e.tables[0].schema) == schema
    ]


def feed_and_resolve(sink: PullSink, txns: Sequence[Sequence[Event]]) -> None:
    feed(sink, txns)
    sink.resolve(txns[-1][0].position)


def drain(
    client: SubscriptionClient, count: int, max_events: int = 50, deadline: float = 30.0
) -> list[Event]:
    """Get and ack until ``count`` events came."""
    got: list[Event] = []
    end = time.monotonic() + deadline
    while len(got) < count:
        assert time.monotonic() < end, f"received {len(got)} of {count} events"
        batch = client.get(max_events, timeout=0.1)
        if batch:
            got.extend(batch.events)
            client.ack(batch.batch_id)
    return got


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting until {what}"
        time.sleep(0.01)
