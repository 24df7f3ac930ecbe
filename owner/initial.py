"""The first schedule of a changefeed: its start point and its tables.

1. check the source (binlog settings), read its binlog position now
2. list the tables the filter accepts
3. snapshot modes: each table gets a task without a start (its pipeline
   snapshots it); the changefeed's DDL puller starts at the position of step 1,
   which is before every chunk's low watermark
   mode never: each table starts at the configured start-position /
   start-gtid (or the position of step 1), with its schema read now
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.changefeed import StartPoint, TableTask, TaskState
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.filter.table_filter import TableFilter
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.schema.loader import list_tables, load_schemas
from cdc.source.checks import check_binlog_settings
from cdc.source.connect import connect
from cdc.source.flavor import current_position, detect

__all__ = ["InitialPlan", "plan_initial"]


@dataclass(frozen=True)
class InitialPlan:
    """Where the changefeed starts and the (unassigned) task of every table."""

    start: StartPoint
    tasks: dict[str, TableTask]


def plan_initial(config: ChangefeedConfig) -> InitialPlan:
    """Reads the source once (see the module docstring); SourceError if it is unusable."""
    source = connect(config.source_uri)
    try:
        check_binlog_settings(source)
        info = detect(source)
        now = current_position(source, info)
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        tables = list_tables(source, rules.matches)
        if config.snapshot_mode is not SnapshotMode.NEVER:
            return InitialPlan(now, {str(t): TableTask("", TaskState.STOP) for t in tables})
        start: StartPoint = now
        if config.start_position:
            start = Position.parse(config.start_position)
        elif config.start_gtid:
            start = GtidSet.parse(config.start_gtid, info.flavor)
        schemas = load_schemas(source, tables)
        return InitialPlan(
            start,
            {str(t): TableTask("", TaskState.STOP, start=start, schema=schemas[t]) for t in tables},
        )
    finally:
        source.close()
