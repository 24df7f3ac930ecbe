"""What the owner does with a DDL at the barrier: apply it downstream, follow its tables.

    1. skip it (a warning and an event in the status) when its kind is not in the
       changefeed's supported-ddl list or an event filter ignores it;
       otherwise apply it through the changefeed's sink (which flushes first)
    2. the tables it creates, drops and renames (``table_effects``):
       created (CREATE TABLE, LIKE) ... a new task starting at the DDL's position,
                                        with the schema the DDL gives it
       renamed from a captured table .. a new task at the DDL's position with the old
                                        table's schema (from its record), renamed
       renamed into the filter from
       outside, or from a table whose
       snapshot is not settled ........ a new task that snapshots the table first
       dropped (DROP TABLE / DATABASE,
       renamed away) .................. task, record and snapshot chunks deleted

A swap through a temporary name (``RENAME TABLE a TO t, b TO a, t TO b``)
replaces both tasks: each name now holds the other table's rows.

A DDL the sink cannot apply raises ``DdlRefused`` (the changefeed stops in state
error naming its position). An operator's decision for exactly that DDL
(``cdcctl changefeed ddl skip|replace``, ``ChangefeedStatus.ddl_decision``) is
carried out by ``carry_out`` instead of step 1: skipped (recorded as skipped) or
the operator's SQL run downstream in its place. At least once: an owner that dies
after running it and before recording the DDL done (``ChangefeedOwner._record_ddl``)
leaves the decision, and the next owner runs it again (hence one DDL statement only,
``cdc.changefeed.ddl_ops.check_replacement``). Step 2 follows the source's DDL
either way: the tables captured and their schemas are the source's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cdc.changefeed import SkippedDdl, TableRecord, TableTask, TaskState
from cdc.changefeed.ddl_decision import DdlAction, DdlDecision
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.filter.ddl_support import IGNORED_BY_EVENT_FILTER, skip_reason
from cdc.filter.event_filter import EventFilter
from cdc.logs import ContextLogger
from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.changes import (
    AlterTable,
    CreateTable,
    CreateTableLike,
    DdlApplyError,
    DropSchema,
    DropTables,
    RenameTables,
    RenameTo,
)
from cdc.schema.ddl import analyze, apply_ddl
from cdc.sink.mysql.errors import redact_statement
from cdc.sink.registry import kind_of

__all__ = [
    "NEW",
    "OUTSIDE",
    "DdlRefused",
    "TableEffects",
    "anchored_tables",
    "apply_downstream",
    "carry_out",
    "decision_for",
    "new_tasks",
    "table_effects",
]

#: Origin of a table created empty by the DDL.
NEW = "<new>"
#: Origin of a table renamed into the filter from a table the changefeed did not capture.
OUTSIDE = "<outside>"


@dataclass(frozen=True)
class TableEffects:
    """``dropped``: tasks to delete; ``created``: new table -> origin (a table, NEW, OUTSIDE)."""

    dropped: tuple[str, ...]
    created: Mapping[str, str]

    def __bool__(self) -> bool:
        return bool(self.dropped or self.created)


def table_effects(
    ddl: DdlEvent, scheduled: set[str], matches: Callable[[str, str], bool]
) -> TableEffects:
    """How ``ddl`` changes the set of captured tables (see the module docstring)."""
    # Names outside the filter are followed too: a swap may pass through one.
    origin: dict[str, str] = {t: t for t in scheduled}

    def rename(old: TableName, new: TableName) -> None:
        origin[str(new)] = origin.pop(str(old), OUTSIDE)

    for change in analyze(ddl.statement, ddl.schema).changes:
        if isinstance(change, CreateTable | CreateTableLike):
            origin.setdefault(str(change.table), NEW)
        elif isinstance(change, DropTables):
            for name in change.tables:
                origin.pop(str(name), None)
        elif isinstance(change, DropSchema):
            for table in [t for t in origin if TableName.parse(t).schema == change.schema]:
                del origin[table]
        elif isinstance(change, RenameTables):
            for old, new in change.pairs:
                rename(old, new)
        elif isinstance(change, AlterTable):
            for action in change.actions:
                if isinstance(action, RenameTo) and action.table != change.table:
                    rename(change.table, action.table)
    names = {t: TableName.parse(t) for t in origin}
    kept = {t: o for t, o in origin.items() if matches(names[t].schema, names[t].table)}
    dropped = tuple(sorted(t for t in scheduled if kept.get(t) != t))
    created = {t: o for t, o in sorted(kept.items()) if o != t}
    return TableEffects(dropped, created)


def new_tasks(
    ddl: DdlEvent,
    effects: TableEffects,
    known: Mapping[TableName, TableSchema],
    config: ChangefeedConfig,
    log: ContextLogger,
    unsettled: frozenset[str] = frozenset(),
) -> dict[str, TableTask]:
    """The tasks of the tables ``ddl`` creates, unassigned (the scheduler starts them).

    ``known`` holds the schemas of the captured tables at the DDL (from their
    records); the DDL applied to them gives the new tables' schemas.
    ``unsettled``: captured tables whose snapshot still has chunks to read
    (docs/ddl-during-snapshot.md); renamed, they are snapshotted again.
    """
    try:
        after = apply_ddl(known, ddl)
    except DdlApplyError as exc:
        log.warning(
            "DDL at %s does not fit the known schemas (%s); new tables load theirs",
            ddl.position,
            exc,
        )
        after = {}
    tasks = {}
    for table, source in effects.created.items():
        if (source == OUTSIDE or source in unsettled) and (
            config.snapshot_mode is not SnapshotMode.NEVER
        ):
            tasks[table] = TableTask("", TaskState.STOP, replace_downstream=source in unsettled)
            continue
        schema = after.get(TableName.parse(table))
        tasks[table] = TableTask("", TaskState.STOP, start=ddl.position, schema=schema)
    return tasks


def anchored_tables(
    ddl: DdlEvent,
    records: Mapping[str, TableRecord | None],
    starts: Mapping[str, Position] | None = None,
) -> list[str]:
    """The DDL's tables when each is captured with a snapshot anchored at or after it.

    Such a table's downstream table was prepared from the source's schema at
    the anchor (``TableRecord.snapshot_at``), which already holds the DDL:
    applying it again would fail or, for a TRUNCATE, remove the snapshot's
    rows. ``starts``: tables without a snapshot whose task starts at a position
    with the schema there, the downstream table prepared with it (a table a
    ``changefeed update`` added without backfill): the same holds at or before
    their start. A DDL that also names a table without such an anchor is applied
    as usual (an empty list).
    """
    names = [str(t) for t in ddl.tables]
    starts = starts or {}
    anchors = [
        r.snapshot_at if (r := records.get(n)) is not None and r.snapshot_at else starts.get(n)
        for n in names
    ]
    if not names or any(a is None or a.key() < ddl.position.key() for a in anchors):
        return []
    return names


def apply_downstream(
    config: ChangefeedConfig, ddl: DdlEvent, events: EventFilter, log: ContextLogger
) -> SkippedDdl | None:
    """Applies ``ddl`` through the changefeed's sink; the skip record when it is not applied.

    Raises the sink's ``SinkError`` when the DDL fails downstream.
    """
    reason = skip_reason(ddl, events, config.supported_ddl)
    if reason == IGNORED_BY_EVENT_FILTER:
        log.info("DDL at %s ignored by an event filter: %s", ddl.position, ddl.kind.value)
        return _skipped(ddl, reason)
    if reason is not None:
        log.warning(reason)
        return _skipped(ddl, reason)
    kind_of(config.sink_uri).apply_ddl(config.sink_uri, ddl, config.changefeed_id)
    return None


class DdlRefused(Exception):
    """The sink could not apply ``ddl`` (``cause``); the message names its position and
    the commands that let the changefeed go on."""

    def __init__(self, changefeed_id: str, ddl: DdlEvent, cause: BaseException) -> None:
        self.ddl = ddl
        self.cause = cause
        said = str(cause)
        where = "" if str(ddl.position) in said else f"DDL at {ddl.position}: "
        super().__init__(
            f"{type(cause).__name__}: {where}{said}; the changefeed stopped at this DDL "
            f"({ddl.kind.value}): fix the downstream and resume, or: cdcctl changefeed ddl "
            f"skip|replace -c {changefeed_id} --position '{ddl.position}'"
        )


def decision_for(decision: DdlDecision | None, ddl: DdlEvent) -> DdlDecision | None:
    """``decision`` when it was made for exactly this DDL (same position, GTID set
    included), else None: a decision never applies to another DDL."""
    if decision is None:
        return None
    same = decision.position.key() == ddl.position.key() and (
        decision.position.gtid == ddl.position.gtid
    )
    return decision if same else None


def carry_out(
    config: ChangefeedConfig, ddl: DdlEvent, decision: DdlDecision, log: ContextLogger
) -> SkippedDdl | None:
    """Skips ``ddl`` (its skip record) or runs the decision's SQL downstream in its place
    (None); ``DdlRefused`` when the sink refuses that SQL. The SQL runs in the DDL's
    default database or, when the source statement had none, its first table's."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(decision.at))
    if decision.action is DdlAction.SKIP:
        log.warning("DDL at %s skipped by an operator's decision: %s", ddl.position, ddl.kind.value)
        return _skipped(ddl, f"skipped by an operator (cdcctl changefeed ddl skip, {when} UTC)")
    assert decision.sql is not None
    schema = ddl.schema or (ddl.tables[0].schema if ddl.tables else "")
    replacement = dataclasses.replace(ddl, statement=decision.sql, schema=schema)
    try:
        kind_of(config.sink_uri).apply_ddl(config.sink_uri, replacement, config.changefeed_id)
    except Exception as exc:
        raise DdlRefused(config.changefeed_id, ddl, exc) from exc
    log.info("DDL at %s replaced downstream by an operator's SQL (%s UTC)", ddl.position, when)
    return None


def _skipped(ddl: DdlEvent, reason: str) -> SkippedDdl:
    text = redact_statement(ddl.statement)  # the status is read by every operator
    statement = text if len(text) <= 300 else text[:297] + "..."
    return SkippedDdl(ddl.position, ddl.kind.value, statement, reason, time.time())
