"""Changefeeds in etcd: their configuration, status, lifecycle, and the per-table values.

Shared by the owner (which schedules and advances changefeeds) and the
processors (which run their tables); neither imports the other, both import
this. ``ChangefeedStore`` is the lifecycle API; the value types say what each
key holds (docs/etcd-layout.md).
"""

from cdc.changefeed.barrier import Barrier, BarrierDdl, BarrierKind
from cdc.changefeed.errors import (
    ChangefeedError,
    ChangefeedExists,
    ChangefeedNotFound,
    InvalidTransition,
    NotStopped,
    is_permanent,
)
from cdc.changefeed.points import StartPoint, point_from_dict, point_to_dict
from cdc.changefeed.state import ChangefeedState, check_transition
from cdc.changefeed.status import ChangefeedStatus, ErrorInfo, SkippedDdl
from cdc.changefeed.store import Changefeed, ChangefeedStore
from cdc.changefeed.table_entries import TableEntry, TableReader, TaskView, read_tables
from cdc.changefeed.tables import TableRecord, TableState, TableTask, TaskState

__all__ = [
    "Barrier",
    "BarrierDdl",
    "BarrierKind",
    "Changefeed",
    "ChangefeedError",
    "ChangefeedExists",
    "ChangefeedNotFound",
    "ChangefeedState",
    "ChangefeedStatus",
    "ChangefeedStore",
    "ErrorInfo",
    "InvalidTransition",
    "NotStopped",
    "SkippedDdl",
    "StartPoint",
    "TableEntry",
    "TableReader",
    "TableRecord",
    "TableState",
    "TableTask",
    "TaskState",
    "TaskView",
    "check_transition",
    "is_permanent",
    "point_from_dict",
    "point_to_dict",
    "read_tables",
]
