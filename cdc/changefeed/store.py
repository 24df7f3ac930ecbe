"""The changefeed lifecycle in etcd: create, pause, resume, update, remove, and reads.

    create   info + status(normal) in one transaction, both create-only
    pause    status: normal | error | failed ──► stopped     (compare-and-swap)
    resume   status: stopped | error | failed ──► normal     (compare-and-swap, error cleared)
    update   info, only while the status says stopped        (both keys compared);
             the table filter stays (the table set follows DDL from the first listing)
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

from cdc.changefeed.errors import ChangefeedExists, ChangefeedNotFound, NotStopped
from cdc.changefeed.source_record import SourceRecord
from cdc.changefeed.state import ChangefeedState, check_transition
from cdc.changefeed.status import ChangefeedStatus
from cdc.config.changefeed import ChangefeedConfig
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
        info = self.store.get(self.keys.changefeed_info(changefeed_id))
        status = self.store.get(self.keys.changefeed_status(changefeed_id))
        if info is None or status is None:
            raise ChangefeedNotFound(changefeed_id)
        return _changefeed(info, status)

    def list(self) -> list[Changefeed]:
        """Every changefeed, sorted by id."""
        infos = self.store.get_prefix(self.keys.prefix_of(ChangefeedInfoKey))
        statuses = {
            self.keys.parse(s.key, ChangefeedStatusKey).changefeed_id: s
            for s in self.store.get_prefix(self.keys.prefix_of(ChangefeedStatusKey))
        }
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

    def update(self, config: ChangefeedConfig) -> Changefeed:
        """Replaces the configuration of a stopped changefeed (``NotStopped`` otherwise)."""
        config.check_storable()
        cf = config.changefeed_id
        info_key = self.keys.changefeed_info(cf)
        status_key = self.keys.changefeed_status(cf)
        for _ in range(_RETRIES):
            current = self.get(cf)
            if current.status.state is not ChangefeedState.STOPPED:
                raise NotStopped(cf, current.status.state.value)
            _check_same_tables(current.config, config)
            if self.store.txn(
                [
                    ModRevisionIs(info_key, current.info_revision),
                    ModRevisionIs(status_key, current.status_revision),
                ],
                [Put(info_key, config.to_dict(mask=False))],
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


def _check_same_tables(old: ChangefeedConfig, new: ChangefeedConfig) -> None:
    """The table set of a running changefeed follows DDL from its first listing on; a new
    filter would need the tables listed again, which is not supported yet."""
    if (old.rules, old.case_sensitive) != (new.rules, new.case_sensitive):
        raise ConfigError(
            "filter.rules",
            f"changefeed {old.changefeed_id} captures the tables of its filter "
            f"{list(old.rules)}; changing the filter of an existing changefeed is not "
            "supported yet: remove the changefeed and create it again with the new filter",
        )


def _changefeed(info: Versioned, status: Versioned) -> Changefeed:
    return Changefeed(
        ChangefeedConfig.from_dict(info.json()),
        ChangefeedStatus.from_dict(status.json()),
        info.mod_revision,
        info.create_revision,
        status.mod_revision,
    )
