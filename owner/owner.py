"""The owner's leader loop: a cycle when the cluster changes, at least one a second.

The owner reads the cluster from mirrors (``cdc.store.mirror``): the
captures, the changefeeds (info and status), every task and every table
record, each read once when its term starts and then kept current by a
watch and by the owner's own writes. A cycle therefore sends etcd only what
it writes (and the reads of a DDL's rare steps), however many tables there
are.

A cycle starts as soon as a mirrored key changes (a changefeed created,
updated or removed, a capture joining or leaving, a table record reporting a
phase or a checkpoint, a task the owner itself created or moved, whose next
step is due at once), and otherwise after ``cycle_interval``: a new
changefeed is scheduled, and a DDL barrier reached is applied, without
waiting out a fixed tick. A woken cycle starts no sooner than ``min_cycle_gap``,
and four times the processor time the last cycle used, after that one began, so
however often keys change the owner uses at most a quarter of a core. Time
spent waiting (on etcd, on a DDL applied downstream) does not count: spaced by
wall time, each DDL held the next one back three times as long as it took to
apply. The status keys are mirrored but wake nothing: the owner writes them
itself, which would wake it after every checkpoint it persists; a pause or
resume (the user's writes there) is seen within ``cycle_interval``.

Each cycle (Patroni's ``run_cycle``)::

    1. the live captures (their keys live under their leases)
    2. every changefeed (info + status); one whose stored config cannot be
       read is failed with that reason
    3. per changefeed, ``ChangefeedOwner.tick`` (changefeed.py): scheduling,
       checkpoint, DDL barrier, retries; an unexpected error there is logged
       and the other changefeeds carry on
    4. log one status line (at INFO when it changed, else every 30 cycles)

An unexpected exception is logged loudly and the next cycle retries: the loop
never dies silently while the capture still believes it is owner. A fenced
write refused (``FencedError``) means another capture won the election: the
loop ends and the owner steps down, before it changes anything else.
"""

from __future__ import annotations

import re
import threading
import time

from cdc.changefeed import (
    Changefeed,
    ChangefeedNotFound,
    ChangefeedState,
    ChangefeedStatus,
    ErrorInfo,
)
from cdc.changefeed.store import ChangefeedStore
from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import get_logger
from cdc.metrics import OWNER_CYCLE, OWNER_CYCLE_CPU
from cdc.store import (
    EtcdStore,
    Fence,
    FencedError,
    KeyMirror,
    KeyReader,
    MirroredReads,
    StoreError,
)
from cdc.store.keys import (
    CaptureKey,
    ChangefeedInfoKey,
    ChangefeedStatusKey,
    StreamProgressKey,
    TableCheckpointKey,
    TaskKey,
)
from owner.changefeed import ChangefeedOwner, OwnerOptions

__all__ = ["Owner", "OwnerOptions"]

#: Key kinds whose changes start a cycle early: what users and processors write, and
#: tasks, so that a cycle that created or moved tables is followed by the next step.
_WAKING_KINDS = (
    ChangefeedInfoKey,
    CaptureKey,
    TaskKey,
    TableCheckpointKey,
    StreamProgressKey,
)

#: A woken cycle starts no sooner than this many times the processor time the last one
#: used after that one began: at most a quarter of a core goes to cycles.
_BUSY_SPACING = 4.0

_CYCLE_NUMBER = re.compile(r"^cycle \d+: ")


class Owner:
    """Runs ``run_cycle`` on its own thread for one term of ownership (one fence)."""

    def __init__(
        self,
        store: EtcdStore,
        capture_id: str,
        fence: Fence,
        options: OwnerOptions | None = None,
    ) -> None:
        self.store = store
        self.fence = fence
        self.capture_id = capture_id
        self.options = options or OwnerOptions()
        self.log = get_logger(__name__, capture=capture_id, role="owner")
        self.feeds = ChangefeedStore(store)
        self.fenced = threading.Event()
        self._changefeeds: dict[str, ChangefeedOwner] = {}
        self._states: dict[str, ChangefeedState] = {}
        #: (info revision, status revision) of the pair each changefeed was last read as.
        self._revisions: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._mirrors: list[KeyMirror] = []
        self.reads: KeyReader = store
        self._thread = threading.Thread(target=self._loop, name="owner", daemon=True)
        self._last_line = ""
        self.cycles = 0

    def start(self) -> None:
        self.log.info("owner term starts (fence revision %d)", self.fence.create_revision)
        keys = self.store.keys
        try:
            for kind in (*_WAKING_KINDS, ChangefeedStatusKey):
                wake = self._on_change if kind in _WAKING_KINDS else None
                self._mirrors.append(KeyMirror(self.store, keys.prefix_of(kind), wake).start())
        except BaseException:
            self._close_mirrors()
            raise
        self.reads = MirroredReads(self.store, self._mirrors)
        self._thread.start()

    def _on_change(self, _key: str) -> None:
        self._wake.set()

    def _close_mirrors(self) -> None:
        for mirror in self._mirrors:
            mirror.close()
        self._mirrors.clear()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._close_mirrors()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        self._close_all()
        self.log.info("owner term ends after %d cycles", self.cycles)

    def _close_all(self) -> None:
        for changefeed in self._changefeeds.values():
            changefeed.close()
        self._changefeeds.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            begun, used = time.monotonic(), time.thread_time()
            # Cleared before reading: a change during the cycle starts the next one.
            self._wake.clear()
            try:
                self.run_cycle()
            except FencedError as exc:
                self.log.error("cycle %d: %s", self.cycles, exc)
                self.fenced.set()
                self._close_all()
                return
            except StoreError as exc:
                self.log.error("cycle %d: etcd error, retrying: %s", self.cycles, exc)
            except Exception:
                self.log.exception("cycle %d failed unexpectedly, retrying", self.cycles)
            self.cycles += 1
            OWNER_CYCLE.observe(time.monotonic() - begun)
            took = time.thread_time() - used
            OWNER_CYCLE_CPU.observe(took)
            self._wake.wait(self.options.cycle_interval)
            rest = begun + max(self.options.min_cycle_gap, _BUSY_SPACING * took) - time.monotonic()
            if rest > 0:
                self._stop.wait(rest)

    def run_cycle(self) -> str:
        """One pass over the cluster state; returns the status line it logged."""
        keys = self.store.keys
        captures = {
            keys.parse(item.key, CaptureKey).capture_id
            for item in self.reads.get_prefix(keys.prefix_of(CaptureKey))
        }
        changefeeds = self._read_changefeeds()
        for cf_id in list(self._changefeeds):
            current = changefeeds.get(cf_id)
            if current is None or current.created != self._changefeeds[cf_id].created:
                self._changefeeds.pop(cf_id).close()
        parts = []
        for cf_id, cf in sorted(changefeeds.items()):
            owner = self._changefeeds.get(cf_id)
            if owner is None:
                owner = self._changefeeds[cf_id] = ChangefeedOwner(
                    self.store, self.fence, cf, self.options, self.reads
                )
            try:
                parts.append(f"[{cf_id} {owner.tick(cf, captures)}]")
            except FencedError:
                raise
            except Exception:
                self.log.exception("changefeed %s: cycle failed, retrying next cycle", cf_id)
                parts.append(f"[{cf_id} cycle failed]")
        line = f"cycle {self.cycles}: captures={len(captures)} changefeeds={len(changefeeds)}" + (
            " " + " ".join(parts) if parts else ""
        )
        plain = _CYCLE_NUMBER.sub("", line)
        if plain != self._last_line or self.cycles % 30 == 0:
            self.log.info(line)
        else:
            self.log.debug(line)
        self._last_line = plain
        return line

    def _read_changefeeds(self) -> dict[str, Changefeed]:
        """Every readable changefeed; an unreadable one is failed (once) with the reason.

        Info and status come from two mirrors, each following its own watch: a status
        that changed state (a resume right after an update of the config) may be seen
        before the info written earlier, and the info of a changefeed just created before
        its status (written in the same transaction; the status's arrival wakes no cycle,
        so skipping it left a new changefeed waiting up to a cycle interval). A changefeed
        is read again, both keys at one revision, when its status is not mirrored yet, its
        state differs from the last cycle's, its info changed since the pair last used or
        its status is older than that pair's, or a tables update is pending (rare reads:
        flat per cycle). A torn pair was worse than late: new table rules (info) beside a
        status without their pending update had the owner apply a DDL before the update's
        position by the new rules, and drop there a table the update was to remove at its
        position (a randomized soak, seed 964)."""
        keys = self.store.keys
        statuses = {
            keys.parse(item.key, ChangefeedStatusKey).changefeed_id: item
            for item in self.reads.get_prefix(keys.prefix_of(ChangefeedStatusKey))
        }
        out = {}
        for info in self.reads.get_prefix(keys.prefix_of(ChangefeedInfoKey)):
            cf_id = keys.parse(info.key, ChangefeedInfoKey).changefeed_id
            status = statuses.get(cf_id)
            try:
                if status is None:
                    cf = self.feeds.get(cf_id)
                else:
                    cf = Changefeed(
                        ChangefeedConfig.from_dict(info.json()),
                        ChangefeedStatus.from_dict(status.json()),
                        info.mod_revision,
                        info.create_revision,
                        status.mod_revision,
                    )
                    if self._states.get(cf_id) is not cf.status.state or self._torn(cf):
                        cf = self.feeds.get(cf_id)
            except ChangefeedNotFound:
                continue
            except (ValueError, StoreError) as exc:
                self._fail_unreadable(cf_id, exc)
                continue
            out[cf_id] = cf
        self._states = {cf_id: cf.status.state for cf_id, cf in out.items()}
        self._revisions = {
            cf_id: (cf.info_revision, cf.status_revision) for cf_id, cf in out.items()
        }
        return out

    def _torn(self, cf: Changefeed) -> bool:
        """Whether the mirrored info and status may not belong together (see
        ``_read_changefeeds``)."""
        seen = self._revisions.get(cf.changefeed_id)
        return (
            seen is None
            or cf.info_revision != seen[0]
            or cf.status_revision < seen[1]
            or cf.status.tables_update is not None
        )

    def _fail_unreadable(self, cf_id: str, exc: Exception) -> None:
        message = f"stored changefeed cannot be read: {exc}"

        def fail(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.state is not ChangefeedState.NORMAL:
                return status
            return status.changed(
                state=ChangefeedState.FAILED, error=ErrorInfo(message, time.time(), None, True)
            )

        try:
            self.feeds.update_status(cf_id, fail, fence=self.fence)
        except (ValueError, StoreError) as error:
            if isinstance(error, FencedError):
                raise
            self.log.error("changefeed %s: %s (status unreadable too: %s)", cf_id, message, error)
