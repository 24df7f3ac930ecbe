"""The changefeed lifecycle in etcd: create, pause, resume, update, remove, and reads.

    create   info + status(normal) in one transaction, both create-only
    pause    status: normal | error | failed ──► stopped     (compare-and-swap)
    resume   status: stopped | error | failed ──► normal     (compare-and-swap, error cleared)
    update   info, while the status says stopped             (both keys compared);
             new table rules also while normal: info + status.tables_update, which
             the owner applies (adds and removes tables, table_update.py); other
             settings only while stopped, nothing in error or failed
    remove   every key of ``KeySpace.changefeed_scope`` in one transaction

These are the user's writes and are not fenced (the user is not the owner);
they are compare-and-swaps, so a concurrent owner write makes them re-read
and re-check instead of being lost. The owner's own status writes go through
``update_status`` with its fence. The config is stored as
``ChangefeedConfig.to_dict(mask=False)``: passwords only with
``store-credentials``, otherwise by reference (``check_storable``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cdc.changefeed.errors import (
    ChangefeedExists,
    ChangefeedNotFound,
    NotStopped,
    UpdateRefused,
)
from cdc.changefeed.source_record import SourceRecord
from cdc.changefeed.state import ChangefeedState, check_transition
from cdc.changefeed.status import ChangefeedStatus
from cdc.changefeed.table_update import TablesUpdate
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.errors import ConfigError
from cdc.store import (
    Absent,
    ConflictError,
    Delete,
    DeletePrefix,
    EtcdStore,
    Fence,
    ModRevisionIs,
    Put,
    Versioned,
)
from cdc.store.keys import ChangefeedInfoKey, ChangefeedStatusKey, check_name

__all__ = ["Changefeed", "ChangefeedStore"]

_RETRIES = 16


@dataclass(frozen=True)
class Changefeed:
    """A changefeed as read from etcd, with the revisions its keys were read at.

    ``created`` (the info key's create revision) names this incarnation: a
    changefeed removed and created again under the same id has another one.
    """

    config: ChangefeedConfig
    status: ChangefeedStatus
    info_revision: int
    created: int
    status_revision: int

    @property
    def changefeed_id(self) -> str:
        return self.config.changefeed_id


class ChangefeedStore:
    """The lifecycle operations over one cluster's store (see the module docstring)."""

    def __init__(self, store: EtcdStore) -> None:
        self.store = store
        self.keys = store.keys

    # --- reads ---------------------------------------------------------------------------------

    def get(self, changefeed_id: str) -> Changefeed:
        """The changefeed; ``ChangefeedNotFound`` if it does not exist."""
        check_name("changefeed id", changefeed_id)
        # one revision: an update writes both in one transaction, and an owner that saw
        # the new status (a pending tables update) with the old rules applied nothing
        info, status = self.store.get_at_one_revision(
            self.keys.changefeed_info(changefeed_id), self.keys.changefeed_status(changefeed_id)
        )
        if info is None or status is None:
            raise ChangefeedNotFound(changefeed_id)
        return _changefeed(info, status)

    def list(self) -> list[Changefeed]:
        """Every changefeed, sorted by id."""
        infos, revision = self.store.get_prefix_with_revision(
            self.keys.prefix_of(ChangefeedInfoKey)
        )
        read, _ = self.store.get_prefix_with_revision(
            self.keys.prefix_of(ChangefeedStatusKey), at=revision
        )
        statuses = {self.keys.parse(s.key, ChangefeedStatusKey).changefeed_id: s for s in read}
        out = []
        for info in infos:
            cf = self.keys.parse(info.key, ChangefeedInfoKey).changefeed_id
            status = statuses.get(cf)
            if status is not None:
                out.append(_changefeed(info, status))
        return out

    # --- the user's operations -------------------------------------------------------------

    def create(self, config: ChangefeedConfig, source: SourceRecord | None = None) -> Changefeed:
        """Stores a new changefeed in state normal; ``ChangefeedExists`` if the id is taken.

        ``source``: the server the source URI reached when it was checked (the failover
        guard's first record, ``cdc.changefeed.failover``)."""
        config.check_storable()
        cf = config.changefeed_id
        info_key = self.keys.changefeed_info(cf)
        status_key = self.keys.changefeed_status(cf)
        created = self.store.txn(
            [Absent(info_key), Absent(status_key)],
            [
                Put(info_key, config.to_dict(mask=False)),
                Put(status_key, ChangefeedStatus(source=source).to_dict()),
            ],
        )
        if not created:
            raise ChangefeedExists(cf)
        return self.get(cf)

    def pause(self, changefeed_id: str) -> ChangefeedStatus:
        """Stops the changefeed (its pipelines stop, keeping their checkpoints)."""
        return self._set_state(changefeed_id, ChangefeedState.STOPPED)

    def resume(self, changefeed_id: str) -> ChangefeedStatus:
        """Runs a stopped, error or failed changefeed again; clears its error and backoff."""
        return self._set_state(changefeed_id, ChangefeedState.NORMAL)

    def _set_state(self, changefeed_id: str, state: ChangefeedState) -> ChangefeedStatus:
        key = self.keys.changefeed_status(changefeed_id)
        for _ in range(_RETRIES):
            current = self.store.get(key)
            if current is None:
                raise ChangefeedNotFound(changefeed_id)
            status = ChangefeedStatus.from_dict(current.json())
            if status.state is state:
                return status
            check_transition(changefeed_id, status.state, state)
            if state is ChangefeedState.NORMAL:
                new = status.changed(state=state, error=None, error_history=(), retry_at=None)
            else:
                new = status.changed(state=state, retry_at=None)
            if self.store.compare_and_swap(key, new.to_dict(), current.mod_revision):
                return new
        raise ConflictError(f"changefeed {changefeed_id}: status kept changing, try again")

    def update(self, config: ChangefeedConfig, *, no_backfill: bool = False) -> Changefeed:
        """Replaces the configuration (see the module docstring for when); new table rules
        become a pending ``TablesUpdate`` in the status (``no_backfill``: its added tables
        stream from the update's position). ``NotStopped`` / ``UpdateRefused`` otherwise."""
        config.check_storable()
        cf = config.changefeed_id
        info_key = self.keys.changefeed_info(cf)
        status_key = self.keys.changefeed_status(cf)
        for _ in range(_RETRIES):
            current = self.get(cf)
            tables = check_update(current, config, no_backfill=no_backfill)
            ops = [Put(info_key, config.to_dict(mask=False))]
            if tables is not None:
                status = current.status.changed(tables_update=tables)
                ops.append(Put(status_key, status.to_dict()))
            if self.store.txn(
                [
                    ModRevisionIs(info_key, current.info_revision),
                    ModRevisionIs(status_key, current.status_revision),
                ],
                ops,
            ):
                return self.get(cf)
        raise ConflictError(f"changefeed {cf}: kept changing during the update, try again")

    def remove(self, changefeed_id: str) -> None:
        """Deletes every key of the changefeed; ``ChangefeedNotFound`` if there is none."""
        check_name("changefeed id", changefeed_id)
        info_key = self.keys.changefeed_info(changefeed_id)
        if self.store.get(info_key) is None:
            raise ChangefeedNotFound(changefeed_id)
        keys, prefixes = self.keys.changefeed_scope(changefeed_id)
        ops = [Delete(k) for k in keys] + [DeletePrefix(p) for p in prefixes]
        self.store.txn([], ops)

    # --- the owner's writes ------------------------------------------------------------------

    def update_status(
        self,
        changefeed_id: str,
        fn: Callable[[ChangefeedStatus], ChangefeedStatus],
        *,
        fence: Fence,
    ) -> ChangefeedStatus | None:
        """Owner-only: applies ``fn(old) -> new`` to the status (compare-and-swap, retried).

        ``fn`` is pure and may run several times; returning ``old`` itself writes
        nothing. The state change it makes must be an arrow of the state diagram
        (``InvalidTransition`` otherwise). Returns None, writing nothing, when
        the changefeed has been removed. ``FencedError`` if no longer owner.
        """

        def apply(old: dict | None) -> dict | None:
            if old is None:
                return None
            status = ChangefeedStatus.from_dict(old)
            new = fn(status)
            if new is status:
                return old
            check_transition(changefeed_id, status.state, new.state)
            return new.to_dict()

        result = self.store.update(self.keys.changefeed_status(changefeed_id), apply, fence=fence)
        return None if result is None else ChangefeedStatus.from_dict(result)

    def update_status_from(
        self,
        read: Changefeed,
        fn: Callable[[ChangefeedStatus], ChangefeedStatus],
        *,
        fence: Fence,
    ) -> ChangefeedStatus | None:
        """Owner-only: ``update_status`` starting from ``read``'s status, as the owner's
        watched view holds it at ``read.status_revision``, so the owner's cycle does not read
        the key again: nothing is sent when ``fn`` keeps that status, one compare-and-swap
        when it changes it, and ``update_status`` when the stored status has moved on since.

        Keeping the status read must mean keeping any later one, as for the owner's
        advancing progress: a position that is not ahead of the one read is not ahead of a
        later one either. Returns the status then stored (``read``'s when nothing is sent).
        """
        new = fn(read.status)
        if new is read.status:
            return read.status
        check_transition(read.changefeed_id, read.status.state, new.state)
        key = self.keys.changefeed_status(read.changefeed_id)
        if self.store.txn(
            [ModRevisionIs(key, read.status_revision)], [Put(key, new.to_dict())], fence=fence
        ):
            return new
        return self.update_status(read.changefeed_id, fn, fence=fence)


def check_update(
    current: Changefeed, config: ChangefeedConfig, *, no_backfill: bool = False
) -> TablesUpdate | None:
    """Whether ``current`` may take ``config`` now (raises ``NotStopped``, ``UpdateRefused``
    or ``ConfigError`` saying why not); the pending tables update it makes, if any."""
    cf, old, status = current.changefeed_id, current.config, current.status
    state = status.state
    tables = old.table_rules_changed(config)
    if no_backfill and not tables:
        raise ConfigError(
            "no-backfill",
            "applies to the tables an update of [filter] rules adds, and the rules are "
            f"unchanged ({list(old.rules)}); change the rules, or leave --no-backfill out",
        )
    if (
        tables
        and config.snapshot_mode is SnapshotMode.SNAPSHOT_ONLY
        and (no_backfill or config.no_backfill)
    ):
        raise ConfigError(
            "no-backfill",
            "a snapshot-only changefeed reads no binlog, so it cannot stream a table from the "
            "update's position; leave --no-backfill and [filter] no-backfill out (added "
            "tables are snapshotted)",
        )
    if state in (ChangefeedState.ERROR, ChangefeedState.FAILED):
        raise UpdateRefused(
            cf,
            f"is in state {state.value}; pause it (cdcctl changefeed pause), update it, then "
            "resume it",
        )
    if state not in (ChangefeedState.NORMAL, ChangefeedState.STOPPED):
        raise NotStopped(cf, state.value)
    if status.tables_update is not None:
        raise UpdateRefused(
            cf,
            "the owner has not applied the previous update of the table rules yet; try again "
            "in a few seconds (cdcctl changefeed query shows the tables)",
        )
    others = old.other_changes(config)
    if state is ChangefeedState.NORMAL and (others or not tables):
        what = f"also changes {', '.join(others)}" if others else "changes no [filter] rules"
        raise UpdateRefused(
            cf,
            f"is running, and only new table rules ([filter] rules) are taken while it runs; "
            f"this update {what}: pause it first (cdcctl changefeed pause), update it, then "
            "resume it",
        )
    if tables and old.case_sensitive != config.case_sensitive:
        raise ConfigError(
            "case-sensitive",
            "changes how the table rules match; change it and the rules in two updates",
        )
    return TablesUpdate(old.rules, no_backfill) if tables else None


def _changefeed(info: Versioned, status: Versioned) -> Changefeed:
    return Changefeed(
        ChangefeedConfig.from_dict(info.json()),
        ChangefeedStatus.from_dict(status.json()),
        info.mod_revision,
        info.create_revision,
        status.mod_revision,
    )
