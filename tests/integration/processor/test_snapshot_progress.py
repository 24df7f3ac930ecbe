"""Chunk plans and high watermarks in the real etcd: resume skips exactly the done chunks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdc.changefeed.snapshot_progress import ChunkStateError, SnapshotProgress
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.playground.etcd import EtcdServer
from cdc.snapshot.chunk import SnapshotChunk
from cdc.store import EtcdStore

TABLE = TableName("shop", "orders")


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with etcd_server.store(etcd_prefix) as store:
        yield store


def chunks(bounds: list[int]) -> list[SnapshotChunk]:
    edges: list[int | None] = [None, *bounds, None]
    return [
        SnapshotChunk(TABLE, n, "id", lower, upper)
        for n, (lower, upper) in enumerate(zip(edges, edges[1:], strict=False))
    ]


def test_plan_is_created_once_and_resumed(store: EtcdStore) -> None:
    progress = SnapshotProgress(store, "cf1")
    first = progress.plan(TABLE, chunks([100, 200]))
    assert [r.chunk.n for r in first] == [0, 1, 2]
    assert not any(r.done for r in first)

    again = SnapshotProgress(store, "cf1").plan(TABLE, chunks([50]))
    assert [r.chunk for r in again] == [r.chunk for r in first]


def test_done_chunks_carry_their_high_watermark(store: EtcdStore) -> None:
    progress = SnapshotProgress(store, "cf1")
    plan = progress.plan(TABLE, chunks([100, 200]))
    hw = Position("binlog.000003", 1234)
    record = progress.mark_done(plan[1].chunk, hw, rows=100)
    assert record.done and record.high_watermark == hw and record.rows == 100
    # Idempotent: a retried report keeps the first watermark.
    assert (
        progress.mark_done(plan[1].chunk, Position("binlog.000003", 9999), 100).high_watermark == hw
    )

    loaded = SnapshotProgress(store, "cf1").load(TABLE)
    assert [r.done for r in loaded] == [False, True, False]
    summary = progress.table_progress(TABLE)
    assert (summary.chunks_total, summary.chunks_done, summary.rows) == (3, 1, 100)
    assert summary.lowest_high_watermark == hw and not summary.finished


def test_marking_an_unplanned_chunk_is_an_error(store: EtcdStore) -> None:
    with pytest.raises(ChunkStateError, match="not planned"):
        SnapshotProgress(store, "cf2").mark_done(chunks([])[0], Position("binlog.000001", 4), 0)


def test_plans_larger_than_an_etcd_transaction_and_gaps(store: EtcdStore) -> None:
    progress = SnapshotProgress(store, "cf3")
    plan = progress.plan(TABLE, chunks(list(range(10, 3000, 10))))
    assert len(plan) == 300
    assert len(progress.load(TABLE)) == 300
    # A crash between batches leaves a gap: the next plan replaces it.
    store.delete(str(store.keys.snapshot_chunk("cf3", str(TABLE), 150)))
    replanned = progress.plan(TABLE, chunks([5]))
    assert [(r.chunk.lower, r.chunk.upper) for r in replanned] == [(None, 5), (5, None)]
    assert len(progress.load(TABLE)) == 2


def test_reopened_chunks_run_again_and_others_stay_done(store: EtcdStore) -> None:
    progress = SnapshotProgress(store, "cf1")
    plan = progress.plan(TABLE, chunks([100, 200]))
    for n, record in enumerate(plan):
        progress.mark_done(record.chunk, Position("binlog.000001", 100 * (n + 1)), rows=n)
    progress.reopen(TABLE, [plan[1].chunk.chunk_id, plan[2].chunk.chunk_id])
    after = progress.load(TABLE)
    assert [r.done for r in after] == [True, False, False]
    assert after[1].high_watermark is None and after[1].rows == 0
    assert [r.chunk for r in after] == [r.chunk for r in plan]
    progress.reopen(TABLE, [plan[1].chunk.chunk_id])
    assert [r.done for r in progress.load(TABLE)] == [True, False, False]
