"""The owner applies new table rules of a changefeed (``cdc.changefeed.table_update``).

    1. list the tables the new rules match on the source: added = those without a
       task, removed = tasks the rules no longer match (``plan_tables``)
    2. schemas of the tables added without backfill, read before step 3
    3. the update's position P:
         running: S = the source's binlog end now; once the DDL puller (still
                  following the old rules) has read past S it is stopped and P = where
                  it stands: the barrier it published, and so every table, is at or
                  before P, and every change committed before the update is at or
                  before S <= P
         paused:  P = S (no barrier moves)
    4. downstream tables of the tables added without backfill prepared (the sink
       kind's ``prepare_table``, with their schema as the sink gets it); those of the
       tables added with backfill that exist checked (``check_existing``: one left by
       an earlier removal may lack columns a DDL added since), not created
    5. the schemas read again: a DDL of an added table between 2 and 5 refuses the
       update (its schema at P is not known; run it again); otherwise
    6. the plan, in one transaction (``ChangefeedOwner._update_tables``): the result
       to record (P, the tables added and how, the tables removed) stored in the
       pending update (``TablesUpdate.planned``), and the tasks of the tables added
       without backfill created, each starting at P with its schema at P
    7. the rest of the tasks: backfill -> unassigned task without start (its
       pipeline snapshots the table while the others stream, as at create);
       removed -> task marked for removal: the pipeline stops after a flush, then
       task, record and chunks are deleted (owner/removals.py); its downstream
       table stays as it is
    8. the status: the pending update cleared, the planned result recorded (in one
       compare-and-swap); the caller starts the DDL puller on the new rules from
       P, the stopped one's pending DDL carried over (``DdlTracker.successor``):
       the added tables need no DDL from before P (one without backfill has its
       schema at P, one with backfill anchors its snapshot later), and a DDL of
       theirs at or before their start is not applied downstream again
       (``owner.ddl.anchored_tables``: a new owner reads again from the checkpoint)

An owner that dies (or is deposed) at any step, and the one taking over:

    before 6 .......... nothing of the update is stored (downstream tables prepared in
                        4 stay, as after a refusal): it is computed again from step 1,
                        with its DDL puller on the old rules from the checkpoint
    after 6, before 8 . the plan is kept: nothing computed again, its DDL puller follows
                        the old rules from the checkpoint up to P exactly (``stop_at``)
                        and the new ones from P, so a DDL of an added table after P is
                        put in the barrier and applied as for every table; the missing
                        tasks of step 7 are written (each write is idempotent) and the
                        planned result recorded
    after 8 ........... the update is done: its DDL puller follows the new rules from
                        the checkpoint (``anchored_tables`` as said in step 8)

The tasks of the tables added without backfill are written with the plan because
they hold the schema at P, which a later owner could not read again. So at most
``MAX_CREATED_AT_ONCE`` tables are added without backfill by one update (more are
refused: run several updates). Until step 8 no task the update creates is assigned,
so no pipeline of an added table runs before the plan is whole.

The tables that stay are not touched: no task of theirs is rewritten, their
pipelines run on, and the barrier moves on as soon as the new DDL puller reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from cdc.changefeed import TableTask, TaskState
from cdc.changefeed.table_update import (
    BACKFILL,
    NO_BACKFILL,
    TablesUpdate,
    TablesUpdateResult,
    too_soon_to_add,
)
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.filter.column_plan import plan_columns
from cdc.filter.table_filter import TableFilter
from cdc.logs import ContextLogger
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.loader import list_tables, load_schemas
from cdc.sink.kind import DownstreamTableMismatch
from cdc.sink.registry import kind_of
from cdc.source.connect import connect
from cdc.source.flavor import current_position, detect
from owner.tables import MAX_CREATED_AT_ONCE

__all__ = [
    "AppliedTables",
    "StillRemoving",
    "TableChanges",
    "apply_tables_update",
    "plan_tables",
]

#: How long the owner waits for its DDL puller to read past the update's position.
CATCH_UP_SECONDS = 15.0


class StillRemoving(Exception):
    """The update adds back a table an earlier one is still removing: it waits."""


@dataclass(frozen=True)
class TableChanges:
    """``added``: table -> ``BACKFILL`` / ``NO_BACKFILL``; ``removed``: tasks to delete."""

    added: Mapping[str, str]
    removed: tuple[str, ...]


def plan_tables(
    update: TablesUpdate,
    config: ChangefeedConfig,
    matched: Collection[str],
    tasks: Collection[str],
) -> TableChanges:
    """Which tables the new rules add (and how) and remove: step 1 of the module docstring.

    A table goes without backfill when the update says so (``--no-backfill``), when
    the config's ``[filter] no-backfill`` rules match it, or when the changefeed takes
    no snapshots (mode never)."""
    no_backfill = (
        TableFilter.parse(config.no_backfill, config.case_sensitive) if config.no_backfill else None
    )
    rules = TableFilter.parse(config.rules, config.case_sensitive)
    added: dict[str, str] = {}
    for table in sorted(set(matched) - set(tasks)):
        name = TableName.parse(table)
        streamed = (
            update.no_backfill
            or config.snapshot_mode is SnapshotMode.NEVER
            or (no_backfill is not None and no_backfill.matches(name.schema, name.table))
        )
        added[table] = NO_BACKFILL if streamed else BACKFILL
    names = {t: TableName.parse(t) for t in tasks}
    removed = tuple(sorted(t for t, n in names.items() if not rules.matches(n.schema, n.table)))
    return TableChanges(added, removed)


@dataclass(frozen=True)
class AppliedTables:
    """What ``apply_tables_update`` decided: the result to record and the new tasks."""

    result: TablesUpdateResult
    tasks: Mapping[str, TableTask]


def apply_tables_update(
    update: TablesUpdate,
    config: ChangefeedConfig,
    tasks: Collection[str],
    stop_puller: Callable[[Position], Position] | None,
    log: ContextLogger,
    removed_at: Mapping[str, float],
    removing: Collection[str] = (),
    created_by_ddl: Callable[[], Collection[str]] = lambda: (),
) -> AppliedTables:
    """Steps 1 to 5 of the module docstring; the tasks to create and the result (with
    ``error`` set, and no tasks, when the update cannot be applied as asked).

    ``tasks``: the tables with a task, but for ``removing``, those still being removed
    (an update adding one of them back raises ``StillRemoving``: tried again later).
    ``stop_puller(S)``: waits until the running DDL puller has read past ``S``, stops
    it and returns where it stood; None while the changefeed is paused. ``removed_at``:
    tables held back from being added (``READD_HOLD_SECONDS``, owner/removals.py).
    ``created_by_ddl()``, asked once the DDL puller stopped: the tables its pending DDL
    (up to the update's position) create or rename into; the DDL path adds them once
    that DDL is applied (a renamed table is renamed downstream), so the update does not."""
    source = connect(config.source_uri)
    try:
        info = detect(source)
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        matched = [str(t) for t in list_tables(source, rules.matches)]
        changes = plan_tables(update, config, matched, tasks)
        back = sorted(set(changes.added) & set(removing))
        if back:
            raise StillRemoving(
                f"{', '.join(back[:5])} still being removed by an earlier update (its "
                "pipeline has not answered the stop yet)"
            )
        early = too_soon_to_add(changes.added, removed_at, time.time())
        if early is not None:
            return AppliedTables(TablesUpdateResult(update.id, None, error=early), {})
        streamed = [TableName.parse(t) for t, how in changes.added.items() if how == NO_BACKFILL]
        if len(streamed) > MAX_CREATED_AT_ONCE:
            error = (
                f"the update adds {len(streamed)} tables without backfill, and one update "
                f"adds at most {MAX_CREATED_AT_ONCE}: add them in several updates"
            )
            return AppliedTables(TablesUpdateResult(update.id, None, error=error), {})
        before = load_schemas(source, streamed)
        try:
            _prepare_downstream(config, source, [before[name] for name in streamed], log)
        except DownstreamTableMismatch as exc:
            error = f"a table added without backfill cannot be written downstream: {exc}"
            return AppliedTables(TablesUpdateResult(update.id, None, error=error), {})
        backfilled = [TableName.parse(t) for t, how in changes.added.items() if how == BACKFILL]
        try:
            _check_downstream(config, load_schemas(source, backfilled))
        except DownstreamTableMismatch as exc:
            error = f"a table added with backfill cannot be written downstream: {exc}"
            return AppliedTables(TablesUpdateResult(update.id, None, error=error), {})
        except LookupError as exc:
            error = (
                f"a table added with backfill is gone from the source ({exc}); run the update again"
            )
            return AppliedTables(TablesUpdateResult(update.id, None, error=error), {})
        now = current_position(source, info)
        position = stop_puller(now) if stop_puller is not None else now
        by_ddl = set(created_by_ddl())
        if by_ddl & set(changes.added):
            log.info(
                "tables update: %s left to the DDL creating them (held at the barrier)",
                ", ".join(sorted(by_ddl & set(changes.added))),
            )
            added = {t: how for t, how in changes.added.items() if t not in by_ddl}
            changes = TableChanges(added, changes.removed)
            streamed = [name for name in streamed if str(name) not in by_ddl]
        after = load_schemas(source, streamed)
    finally:
        source.close()
    changed = sorted(str(t) for t in streamed if before[t] != after[t])
    if changed:
        error = (
            f"a DDL changed {', '.join(changed)} while the update added it without backfill, "
            "so its schema at the update's position is not known; run the update again"
        )
        return AppliedTables(TablesUpdateResult(update.id, position, error=error), {})
    new_tasks: dict[str, TableTask] = {}
    for table, how in changes.added.items():
        if how == BACKFILL:
            new_tasks[table] = TableTask("", TaskState.STOP)
        else:
            schema = after[TableName.parse(table)]
            new_tasks[table] = TableTask("", TaskState.STOP, start=position, schema=schema)
    result = TablesUpdateResult(
        update.id, position, dict(changes.added), changes.removed, at=time.time()
    )
    return AppliedTables(result, new_tasks)


def _check_downstream(config: ChangefeedConfig, schemas: Mapping[TableName, TableSchema]) -> None:
    """Step 4 for the tables added with backfill: a downstream table of theirs that exists
    must take their rows as the sink gets them (one left by an earlier removal may lack
    columns a DDL added since); it is created, if missing, by the table's snapshot."""
    if not schemas:
        return
    sent = []
    for schema in schemas.values():
        column_rules = config.columns.for_table(schema.name)
        sent.append(schema if column_rules is None else plan_columns(column_rules, schema).out)
    kind_of(config.sink_uri).check_existing(config.sink_uri, sent)


def _prepare_downstream(
    config: ChangefeedConfig, source: Any, schemas: list[TableSchema], log: ContextLogger
) -> None:
    """Step 4: the downstream tables of the tables added without backfill, with each
    schema as the sink gets it under the column rules (as a snapshot's anchor does)."""
    kind = kind_of(config.sink_uri)
    for schema in schemas:
        column_rules = config.columns.for_table(schema.name)
        sent = schema if column_rules is None else plan_columns(column_rules, schema).out
        outcome = kind.prepare_table(
            config.sink_uri, source, sent, source_schema=None if sent is schema else schema
        )
        log.info("table %s: added without backfill, downstream %s", schema.name, outcome)
