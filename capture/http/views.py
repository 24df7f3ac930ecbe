"""What the JSON API answers: changefeeds, their tables and barrier, as plain JSON values.

Pure functions of what the shared readers return (``cdc.changefeed``), so the
console shows the same facts as ``cdcctl changefeed query``:

    lag of a table        seconds since its processor last reported its checkpoint,
                          while its pipeline runs (reports come every second; a stuck
                          table's lag grows); None otherwise. The age of the source
                          data itself is cdc_checkpoint_lag_seconds in /metrics.
    lag of a changefeed   the largest lag of its running tables
    snapshot ETA          the chunks left at the pace of the chunks done so far

Every string of an answer goes through ``masked`` last: a password that
slipped into an error message or a statement is hidden there too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cdc.changefeed import Barrier, Changefeed, ErrorInfo, TableEntry, TableState
from cdc.changefeed.snapshot_progress import TableProgress
from cdc.masking import mask_secret

__all__ = [
    "barrier_view",
    "changefeed_lag",
    "changefeed_summary",
    "eta_seconds",
    "masked",
    "table_lag",
    "table_view",
]


def masked(value: Any) -> Any:
    """``value`` with every string in it (keys included) masked by ``mask_secret``."""
    if isinstance(value, str):
        return mask_secret(value)
    if isinstance(value, Mapping):
        return {masked(k): masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [masked(v) for v in value]
    return value


def _text(value: object | None) -> str | None:
    return None if value is None else str(value)


def table_lag(entry: TableEntry, now: float) -> float | None:
    """Seconds since the table's running pipeline last reported; None when none runs."""
    record = entry.record
    if record is None or record.state is not TableState.RUNNING or not record.updated_at:
        return None
    return max(0.0, now - record.updated_at)


def changefeed_lag(entries: Iterable[TableEntry], now: float) -> float | None:
    """The largest lag of the changefeed's running tables; None when none runs."""
    lags = [lag for lag in (table_lag(e, now) for e in entries) if lag is not None]
    return max(lags) if lags else None


def eta_seconds(progress: TableProgress) -> float | None:
    """Seconds until the last chunk is done at the pace so far; None before the first."""
    if progress.finished:
        return 0.0
    if not progress.chunks_done or not progress.rows_per_second:
        return None
    elapsed = progress.rows / progress.rows_per_second
    left = progress.chunks_total - progress.chunks_done
    return elapsed / progress.chunks_done * left


def _error(error: ErrorInfo | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {
        "message": error.message,
        "at": error.at,
        "table": error.table,
        "permanent": error.permanent,
    }


def changefeed_summary(cf: Changefeed, lag: float | None) -> dict[str, Any]:
    """One changefeed as the list shows it: state, positions, lag, error and its retry."""
    status = cf.status
    return {
        "id": cf.changefeed_id,
        "state": status.state.value,
        "checkpoint": _text(status.checkpoint),
        "resolved": _text(status.resolved),
        "lag": lag,
        "error": _error(status.error),
        "retry_at": status.retry_at,
        "errors_in_window": len(status.error_history),
        "updated_at": status.updated_at,
    }


def table_view(entry: TableEntry, progress: TableProgress, now: float) -> dict[str, Any]:
    """One table: where it runs, its state, checkpoint, lag, error and snapshot progress."""
    record, task = entry.record, entry.task
    return {
        "table": entry.table,
        "capture": task.capture_id if task else None,
        "task": task.state.value if task else None,
        "state": record.state.value if record else "pending",
        "checkpoint": _text(entry.checkpoint),
        "lag": table_lag(entry, now),
        "error": record.error if record else None,
        "updated_at": record.updated_at if record else None,
        "snapshot": {
            "chunks_done": progress.chunks_done,
            "chunks_total": progress.chunks_total,
            "rows": progress.rows,
            "rows_per_second": progress.rows_per_second,
            "eta_seconds": eta_seconds(progress),
            "running": 0 < progress.chunks_total != progress.chunks_done,
        },
    }


def barrier_view(barrier: Barrier | None) -> dict[str, Any] | None:
    """The barrier and the DDL it waits on (None: the owner has set none yet)."""
    if barrier is None:
        return None
    ddl = barrier.ddl
    return {
        "kind": barrier.kind.value,
        "limit": str(barrier.limit),
        "ddl": None
        if ddl is None
        else {
            "position": str(ddl.position),
            "kind": ddl.kind,
            "statement": ddl.statement,
            "tables": list(ddl.tables),
        },
    }
