"""Prometheus metrics of a cdc-server: every metric is defined once, here, on the default registry.

    metric                      type       labels                 counted where
    cdc_rows_total              counter    changefeed, table, op  pipeline: c, u, d written to
                                                                  the sink; snapshot: r
    cdc_bytes_total             counter    changefeed, table      pipeline (approximate)
    cdc_sink_flush_seconds      histogram  changefeed             pipeline: Sink.flush
    cdc_checkpoint_lag_seconds  gauge      changefeed, table      pipeline (see "Lag")
    cdc_resolved_lag_seconds    gauge      changefeed, table      pipeline (see "Lag")
    cdc_snapshot_chunks_total   counter    changefeed, table      snapshot: chunks done
    cdc_snapshot_rows_total     counter    changefeed, table      snapshot: their rows
    cdc_owner_changes_total     counter                           this capture elected owner
    cdc_capture_is_owner        gauge                             1 while this capture is owner
    cdc_errors_total            counter    changefeed, kind       owner: the changefeed went to
                                                                  error or failed; kind: table,
                                                                  ddl_puller, owner
    cdc_owner_cycle_seconds     histogram                         owner: one cycle (Owner.run_cycle)
    cdc_owner_cycle_cpu_seconds histogram                         owner: the CPU time of its thread
                                                                  in one cycle (the rest of a
                                                                  cycle waited: on etcd, on the
                                                                  interpreter's other threads)
    cdc_etcd_requests_total     counter                           every request this server sent
                                                                  etcd (reads, writes,
                                                                  transactions, lease calls;
                                                                  watch events are not requests)

Every capture exports what it runs itself; sum over captures for a cluster
view. ``cdc-server --metrics-addr host:port`` serves them on ``/metrics``
(``capture.metrics_endpoint``: HTTPS and the tokens when the server has them).

Lag (true on an idle source too, from the server's own heartbeats: no rows
written into the source). A resolved position carries the time the source's
state at it was current (``cdc.binlog.puller``): after a replication
heartbeat (asked every 0.5 s; the server sends one when it has nothing else
to send, naming its binlog's end, so the reader holds everything it had) the
heartbeat's arrival; after a commit its time from the binlog event header
(whole seconds of the source's clock: keep the clocks in sync), or the last
heartbeat's arrival when later. ``cdc_resolved_lag_seconds`` is the age of
the state the newest resolved position stands for, ``cdc_checkpoint_lag_seconds``
the age of the one the last saved checkpoint covers: an idle source shows
less than 2 s (reports come every checkpoint interval), a reader catching up
on a backlog shows how old the data it reaches is, and one held at a barrier
shows its lag growing. A table's lag series exist while its pipeline runs on
this capture.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from cdc.model.events import Op, RowChange
from cdc.model.position import Position

__all__ = [
    "BYTES",
    "CHECKPOINT_LAG",
    "ERRORS",
    "ETCD_REQUESTS",
    "IS_OWNER",
    "OWNER_CHANGES",
    "OWNER_CYCLE",
    "OWNER_CYCLE_CPU",
    "RESOLVED_LAG",
    "ROWS",
    "SINK_FLUSH",
    "SNAPSHOT_CHUNKS",
    "SNAPSHOT_ROWS",
    "TableMetrics",
    "became_owner",
    "snapshot_chunks_done",
    "stepped_down",
    "tally",
]

_TABLE = ("changefeed", "table")

ROWS = Counter(
    "cdc_rows", "Rows delivered to the sink, by operation (c, u, d; r = snapshot)", [*_TABLE, "op"]
)
BYTES = Counter("cdc_bytes", "Approximate bytes of the row images delivered to the sink", _TABLE)
SINK_FLUSH = Histogram(
    "cdc_sink_flush_seconds",
    "Time a table pipeline waits for the sink to make its rows durable",
    ["changefeed"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
CHECKPOINT_LAG = Gauge(
    "cdc_checkpoint_lag_seconds",
    "Age of the newest source state the table's saved checkpoint covers",
    _TABLE,
)
RESOLVED_LAG = Gauge(
    "cdc_resolved_lag_seconds", "Age of the table's newest resolved binlog position", _TABLE
)
SNAPSHOT_CHUNKS = Counter("cdc_snapshot_chunks", "Snapshot chunks done", _TABLE)
SNAPSHOT_ROWS = Counter("cdc_snapshot_rows", "Rows of the snapshot chunks done", _TABLE)
OWNER_CHANGES = Counter("cdc_owner_changes", "Times this capture was elected owner")
IS_OWNER = Gauge("cdc_capture_is_owner", "1 while this capture is the owner, else 0")
ERRORS = Counter(
    "cdc_errors", "Times a changefeed went to state error or failed", ["changefeed", "kind"]
)
#: Owner cycles' buckets: fine around #15's 100 ms goal, so a p99 says which side it is on.
_CYCLE_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
OWNER_CYCLE = Histogram(
    "cdc_owner_cycle_seconds",
    "Time the owner took for one cycle over the cluster's state",
    buckets=_CYCLE_BUCKETS,
)
OWNER_CYCLE_CPU = Histogram(
    "cdc_owner_cycle_cpu_seconds",
    "CPU time of the owner's thread in one cycle",
    buckets=_CYCLE_BUCKETS,
)
ETCD_REQUESTS = Counter("cdc_etcd_requests", "Requests this server sent etcd")

_OTHER_VALUE_BYTES = 8
_SIZED = frozenset((str, bytes, bytearray))


#: Batches up to this many rows are sized row by row; larger ones from an even sample.
EXACT_ROWS = 64


def tally(batch: Sequence[RowChange]) -> tuple[dict[Op, int], int]:
    """Rows per op, and the approximate bytes of their row images (after, or before for a
    delete): strings and bytes by length, any other value 8.

    One plain loop on purpose: it runs for every row on the pipeline's hot path, where
    a generator with ``isinstance`` cost ten times as much (and hashing an Enum per
    row is a Python call, so ops are counted with ``list.count``). Sizing every value
    of every row cost a tenth of a capture's time into the blackhole sink, so a batch
    of more than ``EXACT_ROWS`` rows is sized from every n-th row (about
    ``EXACT_ROWS`` of them, evenly spread) and scaled: the bytes are an estimate anyway.
    """
    ops = [change.op for change in batch]
    step = 1 if len(batch) <= EXACT_ROWS else len(batch) // EXACT_ROWS
    sample = batch[::step] if step > 1 else batch
    size = 0
    for change in sample:
        decoded = change.decoded_values()
        if decoded is not None:  # its values, without making its images (RowChange.decoded)
            values: Iterable[Any] | None = decoded[2] if decoded[2] is not None else decoded[1]
        else:
            image = change.after if change.after is not None else change.before
            values = None if image is None else image.values()
        assert values is not None  # every op carries one image or both (RowChange's check)
        for value in values:
            size += len(value) if value.__class__ in _SIZED else _OTHER_VALUE_BYTES
    if step > 1:
        size = size * len(batch) // len(sample)
    return {op: ops.count(op) for op in Op}, size


def became_owner() -> None:
    """This capture was elected owner."""
    OWNER_CHANGES.inc()
    IS_OWNER.set(1)


def stepped_down() -> None:
    """This capture's term as owner ended."""
    IS_OWNER.set(0)


def snapshot_chunks_done(changefeed: str, table: str, chunks: int, rows: int) -> None:
    """``chunks`` snapshot chunks of ``table`` holding ``rows`` rows are done (in the sink)."""
    SNAPSHOT_CHUNKS.labels(changefeed, table).inc(chunks)
    SNAPSHOT_ROWS.labels(changefeed, table).inc(rows)
    ROWS.labels(changefeed, table, Op.READ.value).inc(rows)


# The pipeline that publishes the lag of (changefeed, table) in this process. A table
# can briefly have two pipelines here (an aborted one still ending, its successor
# starting); only the newest may publish or remove the series.
_lag_owners: dict[tuple[str, str], TableMetrics] = {}
_lag_lock = threading.Lock()


class TableMetrics:
    """The metrics of one table pipeline, bound to its labels once; ``close()`` when it ends."""

    def __init__(self, changefeed: str, table: str) -> None:
        self._labels = (changefeed, table)
        self._rows = {op: ROWS.labels(changefeed, table, op.value) for op in Op}
        self._bytes = BYTES.labels(changefeed, table)
        self._flush = SINK_FLUSH.labels(changefeed)
        self._resolved_at: float | None = None
        self._checkpoint_at: float | None = None
        with _lag_lock:
            _lag_owners[self._labels] = self
            _remove_lag(self._labels)

    def rows(self, batch: Sequence[RowChange]) -> None:
        """``batch`` was handed to the sink."""
        counts, size = tally(batch)
        for op, count in counts.items():
            if count:
                self._rows[op].inc(count)
        self._bytes.inc(size)

    def flush(self) -> AbstractContextManager[object]:
        """Times the block as one sink flush."""
        return self._flush.time()

    def resolved(self, source_time: float | None = None) -> None:
        """The puller handed out a resolved position whose source state was current at
        ``source_time`` (see "Lag" above); None: now."""
        first = self._resolved_at is None
        self._resolved_at = time.time() if source_time is None else source_time
        if first:
            self._publish(RESOLVED_LAG, self._resolved_age)

    def checkpoint(self, position: Position | None) -> None:
        """``position`` was saved as the table's checkpoint (it covers the newest resolved)."""
        if position is None:
            return
        first = self._checkpoint_at is None
        self._checkpoint_at = self._resolved_at or time.time()
        if first:
            self._publish(CHECKPOINT_LAG, self._checkpoint_age)

    def close(self) -> None:
        """The pipeline ended: its lag series go (counters stay, as counters must)."""
        with _lag_lock:
            if _lag_owners.get(self._labels) is self:
                del _lag_owners[self._labels]
                _remove_lag(self._labels)

    def _resolved_age(self) -> float:
        return time.time() - (self._resolved_at or time.time())

    def _checkpoint_age(self) -> float:
        return time.time() - (self._checkpoint_at or time.time())

    def _publish(self, gauge: Gauge, age: Callable[[], float]) -> None:
        with _lag_lock:
            if _lag_owners.get(self._labels) is self:
                gauge.labels(*self._labels).set_function(age)


def _remove_lag(labels: tuple[str, str]) -> None:
    CHECKPOINT_LAG.remove(*labels)
    RESOLVED_LAG.remove(*labels)
