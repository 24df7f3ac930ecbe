"""The owner's DDL puller for one changefeed, and the barrier it publishes.

    binlog (changefeed filter) ──► Puller ──► DdlTracker thread
        Resolved r ............ newest resolved = r; no DDL pending: barrier {resolved, limit r}
        DdlEvent d ............ pending += (d, limit = newest resolved before d)
                                barrier {ddl, limit} for the first pending DDL
        Resolved r >= target .. pending += (target, limit = the last resolved at or before it);
                                stop reading
    owner cycle: checkpoint >= first pending's limit ──► apply it, ``done()`` ──► barrier moves

DDL at or before the last one already applied (``applied``, from the status)
are skipped: a new owner reads the binlog again from the changefeed
checkpoint (after a failover of the source, read again on the new server:
the GTID sets tell, ``Position.within``). ``identify`` says which server the
source URI reaches for the changefeed (``cdc.changefeed.failover``: the
owner records it, follows a failover or refuses it). The barrier's limit never
decreases, starting from what is stored (``floor``); resolved barriers are
written at most every ``interval`` seconds (heartbeats bring a resolved
position every half second when the source is idle).

``stop_at``: the tracker stops exactly there (its resolved position becomes
``stop_at``, no DDL after it is queued), so that ``successor`` follows other
rules from there: an owner taking over a tables update whose position is decided
(``owner.table_update``) reads the old rules up to it and the new ones after it.
Row changes are read and dropped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.changefeed import Barrier, BarrierDdl, BarrierKind, StartPoint
from cdc.config.changefeed import ChangefeedConfig
from cdc.filter.table_filter import TableFilter
from cdc.logs import get_logger
from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, detect
from cdc.store import FencedError, StoreError
from owner.ddl import table_effects

__all__ = ["DdlTracker", "PendingDdl"]


@dataclass(frozen=True)
class PendingDdl:
    """A DDL (or the target position, ``ddl=None``) the table pipelines must stop before.

    ``limit``: the last position before it; every pipeline delivers up to
    there, and once the changefeed checkpoint reaches it the DDL can be applied.
    """

    limit: Position
    ddl: DdlEvent | None
    position: Position


class DdlTracker:
    """Follows one changefeed's binlog for DDL on its own thread (see the module docstring).

    ``publish(barrier)`` writes the barrier (the owner's fenced write); it runs
    on the tracker's thread or the owner's, never both at once. ``error`` is
    set when the puller fails; the owner turns it into a changefeed error.
    """

    def __init__(
        self,
        config: ChangefeedConfig,
        start: StartPoint,
        applied: Position | None,
        floor: Position | None,
        publish: Callable[[Barrier], None],
        *,
        interval: float = 0.2,
        identify: Callable[[Any], ServerInfo] = detect,
        stop_at: Position | None = None,
    ) -> None:
        self.config = config
        self.stop_at = stop_at
        self._identify = identify
        self.start = start
        self.applied = applied
        self.interval = interval
        self.error: BaseException | None = None
        self.log = get_logger(__name__, changefeed=config.changefeed_id, role="ddl-puller")
        self._publish_fn = publish
        self._target = Position.parse(config.target_position) if config.target_position else None
        self._lock = threading.Lock()
        self._pending: deque[PendingDdl] = deque()
        self._resolved: Position | None = start if isinstance(start, Position) else None
        self._published: Barrier | None = None
        self._floor = floor
        self._last_publish = 0.0
        self._puller: Puller | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"ddl-puller-{config.changefeed_id}", daemon=True
        )

    # --- life --------------------------------------------------------------------------------

    def start_thread(self) -> DdlTracker:
        self._publish(force=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        puller = self._puller
        if puller is not None:
            puller.close()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            conn = connect(self.config.source_uri)
            try:
                server = self._identify(conn)
            finally:
                conn.close()
            rules = TableFilter.parse(self.config.rules, self.config.case_sensitive)
            puller = Puller(
                PullerConfig(
                    source=self.config.source_uri,
                    server=server,
                    start=self.start,
                    tables=rules,
                    rows=False,
                )
            )
            self._puller = puller
            if self._closed.is_set():
                return
            self.log.info("following DDL from %s", self.start)
            for event in puller.events():
                if self._closed.is_set() or self._on_event(event):
                    break
        except Exception as exc:  # handed to the owner as a changefeed error
            if not self._closed.is_set():
                self.log.error("DDL puller failed: %s", exc)
                self.error = exc
        finally:
            if self._puller is not None and not self._closed.is_set():
                self._puller.close()

    def successor(self, config: ChangefeedConfig) -> DdlTracker | None:
        """A tracker (not started) following ``config``'s table rules from where this one,
        closed, stands: no binlog is read again, so the barrier does not wait. Its pending
        DDL are carried over, except those whose tables the new rules no longer match (they
        leave the changefeed, their downstream left as it is). The tables the new rules add
        need nothing from before this point (``owner.table_update``). None with a target
        position (that tracker is made anew from the checkpoint)."""
        if self._target is not None or self.alive:
            return None
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        with self._lock:
            start = self._resolved
            kept = [
                p
                for p in self._pending
                if p.ddl is None
                or not p.ddl.tables
                or any(rules.matches(t.schema, t.table) for t in p.ddl.tables)
            ]
            floor = self._floor
        if start is None:
            return None
        tracker = DdlTracker(
            config,
            start,
            self.applied,
            floor,
            self._publish_fn,
            interval=self.interval,
            identify=self._identify,
        )
        tracker._pending.extend(kept)
        return tracker

    def tables_created(self, config: ChangefeedConfig, scheduled: Collection[str]) -> set[str]:
        """The tables the pending DDL that ``successor(config)`` carries over create (or
        rename into), ``scheduled`` being the tables with a task: once applied, the DDL
        path gives them their tasks (a renamed table keeps its rows downstream), so a
        tables update must not add them too."""
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        with self._lock:
            pending = [p.ddl for p in self._pending if p.ddl is not None and p.ddl.tables]
        tasks = set(scheduled)
        created: set[str] = set()
        for ddl in pending:
            if not any(rules.matches(t.schema, t.table) for t in ddl.tables):
                continue
            effects = table_effects(ddl, tasks, rules.matches)
            tasks.difference_update(effects.dropped)
            tasks.update(effects.created)
            created.difference_update(effects.dropped)
            created.update(effects.created)
        return created

    # --- events ------------------------------------------------------------------------------

    def _on_event(self, event: object) -> bool:
        """One event of the puller; True when the tracker stops reading (the target position
        reached, or ``stop_at``)."""
        if isinstance(event, Resolved):
            return self._on_resolved(event.position)
        if isinstance(event, DdlEvent):
            return self._on_ddl(event)
        return False

    def _stopped_at(self, position: Position) -> bool:
        """True (and the resolved position is ``stop_at``) when ``position`` is past
        ``stop_at``, or at it: every event up to ``stop_at`` is read, none after it taken."""
        stop = self.stop_at
        if stop is None or position.key() < stop.key():
            return False
        self._resolved = stop
        self.log.info("stopped at %s, where the tables update takes other rules", stop)
        self._publish_locked(force=True)
        return True

    def _on_resolved(self, position: Position) -> bool:
        """Records a resolved position; True once the target position is behind it (or
        ``stop_at`` reached)."""
        with self._lock:
            if self._target is not None and position.key() >= self._target.key():
                # Changes at the target are delivered, those after it are not.
                exact = position.key() == self._target.key()
                limit = position if exact else (self._resolved or position)
                self._pending.append(PendingDdl(limit, None, self._target))
                self.log.info("target position %s reached in the binlog", self._target)
                self._publish_locked(force=True)
                return True
            if self._stopped_at(position):
                return True
            self._resolved = position
            if not self._pending:
                self._publish_locked(force=False)
        return False

    def _on_ddl(self, ddl: DdlEvent) -> bool:
        """Queues ``ddl``; True (not queued) when it lies after ``stop_at``."""
        with self._lock:
            if self.stop_at is not None and ddl.position.key() > self.stop_at.key():
                return self._stopped_at(ddl.position)
            if self.applied is not None and ddl.position.within(self.applied):
                self._resolved = ddl.position
                return self._stopped_at(ddl.position)
            limit = self._resolved or Position(ddl.position.file, 0, None, ddl.position.gen)
            self._pending.append(PendingDdl(limit, ddl, ddl.position))
            self._resolved = ddl.position
            self.log.info(
                "DDL at %s (%s) queued behind limit %s", ddl.position, ddl.kind.value, limit
            )
            self._publish_locked(force=True)
            return self._stopped_at(ddl.position)

    # --- the owner's side --------------------------------------------------------------------

    def next(self) -> PendingDdl | None:
        """The first DDL (or target) the pipelines wait for, if any."""
        with self._lock:
            return self._pending[0] if self._pending else None

    def done(self, pending: PendingDdl) -> None:
        """``pending`` is applied downstream (or skipped): move the barrier on."""
        with self._lock:
            if self._pending and self._pending[0] is pending:
                self._pending.popleft()
                if pending.ddl is not None:
                    self.applied = pending.position
            self._publish_locked(force=True)

    def refresh(self) -> None:
        """Writes the barrier if the last write of it failed (called every owner cycle)."""
        self._publish(force=True)

    @property
    def resolved(self) -> Position | None:
        with self._lock:
            return self._resolved

    def barrier(self) -> Barrier | None:
        """The barrier as the tracker sees it now (what it publishes)."""
        with self._lock:
            return self._barrier_locked()

    def _barrier_locked(self) -> Barrier | None:
        if self._pending:
            first = self._pending[0]
            if first.ddl is None:
                return Barrier(BarrierKind.TARGET, first.limit)
            return Barrier(BarrierKind.DDL, first.limit, BarrierDdl.of(first.ddl))
        if self._resolved is None:
            return None
        return Barrier(BarrierKind.RESOLVED, self._resolved)

    def _publish(self, *, force: bool) -> None:
        with self._lock:
            self._publish_locked(force=force)

    def _publish_locked(self, *, force: bool) -> None:
        barrier = self._barrier_locked()
        if barrier is None or barrier == self._published:
            return
        now = time.monotonic()
        if not force and now - self._last_publish < self.interval:
            return
        floor = self._floor
        if floor is not None and barrier.limit.key() < floor.key():
            if barrier.kind is BarrierKind.RESOLVED:
                return
            barrier = Barrier(barrier.kind, floor, barrier.ddl)
        try:
            self._publish_fn(barrier)
        except FencedError:
            raise
        except StoreError as exc:
            self.log.warning("barrier not written, trying again with the next one: %s", exc)
            return
        self._published = barrier
        self._floor = barrier.limit
        self._last_publish = now
