"""The watch view's rendering: snapshot bars while chunks run, then the per-table rows."""

from __future__ import annotations

import io

from rich.console import Console

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.cli.watch_view import WatchView, watch


def _changefeed(done: int, total: int) -> admin_pb2.Changefeed:
    return admin_pb2.Changefeed(
        changefeed_id="cf",
        status=admin_pb2.ChangefeedStatus(state="normal", checkpoint="bin.000001:4"),
        tables=[
            admin_pb2.TableStatus(
                table="shop.orders",
                capture_id="c1",
                state="running",
                checkpoint="bin.000001:99",
                updated_at=100.0,
                snapshot=admin_pb2.SnapshotProgress(
                    chunks_done=done, chunks_total=total, rows=done * 10, rows_per_second=250.0
                ),
            )
        ],
    )


def _text(view: WatchView, cf: admin_pb2.Changefeed) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(view.render(cf, now=112.0))
    return console.file.getvalue()


def test_bar_while_the_snapshot_runs_then_only_the_table_row() -> None:
    view = WatchView()
    running = _text(view, _changefeed(2, 5))
    assert "2/5" in running and "20 rows" in running and "250 rows/s" in running
    assert "ETA" in running
    assert "shop.orders" in running and "12s" in running and "bin.000001:99" in running

    finished = _text(view, _changefeed(5, 5))
    assert "5/5" not in finished and "ETA" not in finished
    assert "shop.orders" in finished


def test_count_prints_that_many_refreshes() -> None:
    console = Console(file=io.StringIO(), width=200)
    calls = []

    def fetch() -> admin_pb2.Changefeed:
        calls.append(1)
        return _changefeed(len(calls), 3)

    assert watch(fetch, 0.01, 3, console) == 0
    assert len(calls) == 3
    assert console.file.getvalue().count("changefeed cf  state normal") == 3
