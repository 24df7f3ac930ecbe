"""`cdcctl changefeed query --watch`: live snapshot bars, then per-table checkpoints.

Each refresh reads the changefeed (with its tables) once. While a table's
snapshot runs it is a progress bar of chunks with rows, rows/s and ETA; once
its snapshot is done (or it has none) it is a row of the table below: its
capture, state, checkpoint, how long ago its processor reported it (the
checkpoint lag as far as etcd tells) and its snapshot rate.

Interactive: a rich ``Live`` view until Ctrl-C. With ``count`` (or when stdout
is not a terminal and ``count`` is given) each refresh is printed in turn, so
scripts and tests see exactly ``count`` views.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.cli import exitcodes
from cdc.masking import mask_secret

Fetch = Callable[[], admin_pb2.Changefeed]


class WatchView:
    """Keeps the progress bars across refreshes, so rich can estimate rates and ETAs."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("chunks  {task.fields[rows]} rows  {task.fields[rate]} rows/s"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            auto_refresh=False,
        )
        self._tasks: dict[str, TaskID] = {}

    def render(self, cf: admin_pb2.Changefeed, now: float) -> RenderableType:
        status = cf.status
        header = Text(
            f"changefeed {cf.changefeed_id}  state {status.state}  "
            f"checkpoint {status.checkpoint or '-'}  resolved {status.resolved or '-'}"
        )
        parts: list[RenderableType] = [header]
        if status.error:
            parts.append(Text(f"error: {mask_secret(status.error)}", style="red"))
        snapshots = [t for t in cf.tables if 0 < t.snapshot.chunks_total != t.snapshot.chunks_done]
        for t in cf.tables:
            self._update_bar(t)
        if snapshots:
            parts.append(self.progress)
        parts.append(_tables(cf.tables, now))
        return Group(*parts)

    def _update_bar(self, t: admin_pb2.TableStatus) -> None:
        snap = t.snapshot
        if snap.chunks_total == 0:
            return
        rows, rate = snap.rows, f"{snap.rows_per_second:.0f}"
        task = self._tasks.get(t.table)
        if task is None:
            self._tasks[t.table] = self.progress.add_task(
                t.table, total=snap.chunks_total, completed=snap.chunks_done, rows=rows, rate=rate
            )
            return
        self.progress.update(
            task,
            total=snap.chunks_total,
            completed=snap.chunks_done,
            visible=snap.chunks_done < snap.chunks_total,
            rows=rows,
            rate=rate,
        )


def _tables(tables: list[admin_pb2.TableStatus], now: float) -> Table:
    view = Table("table", "capture", "state", "checkpoint", "lag", "snapshot rows/s", "error")
    for t in tables:
        lag = f"{max(0.0, now - t.updated_at):.0f}s" if t.updated_at else "-"
        rate = f"{t.snapshot.rows_per_second:.0f}" if t.snapshot.rows_per_second else "-"
        view.add_row(
            t.table,
            t.capture_id or "-",
            t.state or "pending",
            t.checkpoint or "-",
            lag,
            rate,
            mask_secret(t.error) if t.error else "",
        )
    return view


def watch(fetch: Fetch, interval: float, count: int | None, console: Console | None = None) -> int:
    """Refreshes every ``interval`` seconds; ``count`` refreshes then exit, else until Ctrl-C."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            # Piped output is for scripts and logs: do not wrap table names.
            console = Console(width=200)
    view = WatchView()
    if count is not None:
        for n in range(count):
            if n:
                time.sleep(interval)
            console.print(view.render(fetch(), time.time()))
        return exitcodes.OK
    try:
        with Live(view.render(fetch(), time.time()), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(view.render(fetch(), time.time()), refresh=True)
    except KeyboardInterrupt:
        return exitcodes.OK
