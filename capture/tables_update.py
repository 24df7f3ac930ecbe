"""What `UpdateChangefeed` checks and waits for when an update changes the table rules.

1. the tables the new rules add (``owner.table_update.plan_tables`` over the
   source's tables and the changefeed's tasks) pass the checks of create
   (``check_new_tables``: a key to write by, and to split a snapshot by unless the
   table is added without backfill; column types; column and event rules), so a
   table the changefeed could not capture is refused before anything is written
2. after the update is stored, the owner applies it (owner/table_update.py); the
   request waits for its answer, so the command returns once the new tables have
   their tasks and the update's position is known (or the owner's refusal)
"""

from __future__ import annotations

import time
from collections.abc import Callable

from capture.changefeed_checks import PreconditionFailed, check_new_tables
from cdc.changefeed import Changefeed, ChangefeedStore, read_tables
from cdc.changefeed.table_update import NO_BACKFILL, TablesUpdate, TablesUpdateResult
from cdc.config import ChangefeedConfig
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName
from cdc.schema.loader import list_tables
from cdc.source.connect import connect
from cdc.source.flavor import SourceError
from cdc.store import EtcdStore
from owner.table_update import TableChanges, plan_tables

__all__ = ["APPLY_WAIT_SECONDS", "await_tables_update", "check_tables_update"]

#: How long an update waits for the owner to apply new table rules.
APPLY_WAIT_SECONDS = 40.0


def check_tables_update(
    store: EtcdStore, current: Changefeed, config: ChangefeedConfig, no_backfill: bool
) -> TableChanges:
    """Step 1 of the module docstring; the changes the rules make as of now."""
    tasks = [t for t, e in read_tables(store, current.changefeed_id).items() if e.task]
    try:
        conn = connect(config.source_uri, "source")
    except SourceError as exc:
        raise PreconditionFailed(f"source-uri: {exc}") from None
    try:
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        matched = [str(t) for t in list_tables(conn, rules.matches)]
        changes = plan_tables(
            TablesUpdate(current.config.rules, no_backfill), config, matched, tasks
        )
        added = [TableName.parse(t) for t in changes.added]
        streamed = [TableName.parse(t) for t, how in changes.added.items() if how == NO_BACKFILL]
        check_new_tables(conn, config, added, streamed)
    finally:
        conn.close()
    return changes


def await_tables_update(
    changefeeds: ChangefeedStore,
    changefeed_id: str,
    update_id: str,
    *,
    wait: float = APPLY_WAIT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Changefeed, TablesUpdateResult | None]:
    """Step 2: the changefeed once the owner answered the update ``update_id``, with the
    answer; (the changefeed, None) when it did not answer within ``wait`` seconds (the
    update stays pending: ``cdcctl changefeed query`` shows when it is applied)."""
    deadline = time.monotonic() + wait
    while True:
        cf = changefeeds.get(changefeed_id)
        pending = cf.status.tables_update
        if pending is None or pending.id != update_id:
            last = cf.status.last_tables_update
            return cf, last if last is not None and last.id == update_id else None
        if time.monotonic() > deadline:
            return cf, None
        sleep(0.2)
