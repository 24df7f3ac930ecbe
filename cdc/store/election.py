"""Owner election through the owner key, and the fence that comes with winning.

The owner is whichever capture holds ``<prefix>/owner``, a key written under
that capture's lease. ``campaign`` loops::

    1. create the owner key (create_revision == 0) under our lease
       └─ created ──────────────────────> owner; Fence(owner key, create_revision)
    2. otherwise the key is someone else's: watch it from the revision read,
       until it is deleted (resign, or lease expired because that owner died)
    3. go to 1

The fence is the proof of ownership: every owner-only write compares the owner
key's create_revision with it inside the same etcd transaction
(``EtcdStore.fenced_put``). When a stalled owner's lease expires and another
capture wins, the key's create_revision changes, so the stalled owner's writes
fail with ``FencedError`` even if it has not noticed yet. The creation
revision (not the lease or the capture id) is what identifies one term of
ownership: a capture restarted with the same id starts a new term.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cdc.store.errors import LeaseLost, StoreError
from cdc.store.etcd import (
    CreateRevisionIs,
    Delete,
    EtcdStore,
    EventKind,
    Fence,
    Versioned,
    WatchEvent,
)
from cdc.store.keys import check_name
from cdc.store.lease import KeepAlive, Lease

__all__ = ["CampaignCancelled", "CampaignTimeout", "Election"]

log = logging.getLogger(__name__)


class CampaignTimeout(StoreError, TimeoutError):
    """``campaign(timeout=...)`` ended without winning."""


class CampaignCancelled(StoreError):
    """``resign()`` was called while ``campaign()`` was waiting (e.g. on shutdown)."""


class Election:
    """One capture's candidacy for owner of the cluster of ``store``.

    Without ``lease`` the election grants its own lease of ``ttl`` seconds
    per term and keeps it alive; if it is lost, ``on_lost()`` is called and
    the capture must stop acting as owner. With ``lease`` (for instance the
    capture's session lease) the owner key lives and dies with that lease,
    which the caller keeps alive; ``ttl`` is then unused.
    """

    def __init__(
        self,
        store: EtcdStore,
        capture_id: str,
        ttl: int = 10,
        *,
        lease: Lease | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.capture_id = check_name("capture id", capture_id)
        self.ttl = ttl
        self.key = str(store.keys.owner())
        self._external_lease = lease
        self._lease: Lease | None = lease
        self._keepalive: KeepAlive | None = None
        self._on_lost = on_lost
        self._fence: Fence | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._waiting: threading.Event | None = None
        #: The term this capture last said it waits for: said once, not at every retry
        #: of a campaign with a timeout (cdc-server campaigns again each second).
        self._waited_for: int | None = None

    @property
    def fence(self) -> Fence | None:
        """The fence of the current term, or ``None`` when not (or no longer) owner."""
        return self._fence

    def campaign(self, timeout: float | None = None) -> Fence:
        """Block until this capture is owner; the fence of its term.

        ``CampaignTimeout`` after ``timeout`` seconds; ``CampaignCancelled`` if
        another thread calls ``resign()`` meanwhile; ``StoreUnavailable`` if
        etcd cannot be reached (the caller retries). Campaigning while already
        owner returns the current fence.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        value = {"capture_id": self.capture_id}
        with self._lock:
            cancel = self._cancel = threading.Event()
        while True:
            if cancel.is_set():
                raise CampaignCancelled(f"capture {self.capture_id} resigned while campaigning")
            lease = self._ensure_lease()
            try:
                created, holder = self.store.create_or_get(self.key, value, lease=lease)
            except LeaseLost:
                if self._external_lease is not None:
                    raise
                log.warning(
                    "capture %s: election lease %x is gone, granting a new one",
                    self.capture_id,
                    lease.id,
                )
                self._drop_lease(revoke=False)
                continue
            if created or holder.lease == lease.id:
                fence = Fence(self.key, holder.create_revision)
                with self._lock:
                    self._fence = fence
                if cancel.is_set():
                    self.resign()
                    raise CampaignCancelled(f"capture {self.capture_id} resigned while winning")
                log.info(
                    "capture %s is owner (term created at revision %d, lease %x)",
                    self.capture_id,
                    fence.create_revision,
                    lease.id,
                )
                return fence
            if self._waited_for != holder.create_revision:
                self._waited_for = holder.create_revision
                log.info(
                    "capture %s waits: %s is owner (revision %d)",
                    self.capture_id,
                    _capture_of(holder),
                    holder.create_revision,
                )
            self._wait_until_gone(holder, deadline)

    def resign(self) -> None:
        """Give up ownership (if held) and the election's own lease. Safe to repeat.

        A ``campaign()`` blocked in another thread ends with ``CampaignCancelled``.
        """
        with self._lock:
            fence, self._fence = self._fence, None
            self._cancel.set()
            if self._waiting is not None:
                self._waiting.set()
        if fence is not None:
            try:
                self.store.txn(
                    [CreateRevisionIs(fence.key, fence.create_revision)], [Delete(fence.key)]
                )
                log.info("capture %s resigned as owner", self.capture_id)
            except StoreError as exc:
                log.warning(
                    "capture %s: resign could not delete the owner key: %s", self.capture_id, exc
                )
        self._drop_lease(revoke=True)

    def current_owner(self) -> tuple[str, int] | None:
        """``(capture id, create revision of its term)`` of the owner, or ``None``."""
        holder = self.store.get(self.key)
        if holder is None:
            return None
        return _capture_of(holder), holder.create_revision

    def is_owner(self, fence: Fence | None = None) -> bool:
        """Whether ``fence`` (default: this election's) is still the current term."""
        fence = fence if fence is not None else self._fence
        if fence is None:
            return False
        holder = self.store.get(fence.key)
        return holder is not None and holder.create_revision == fence.create_revision

    def _ensure_lease(self) -> Lease:
        if self._external_lease is not None:
            return self._external_lease
        if (
            self._lease is not None
            and self._keepalive is not None
            and not self._keepalive.lost.is_set()
        ):
            return self._lease
        self._drop_lease(revoke=False)
        lease = self.store.grant_lease(self.ttl)
        self._lease = lease
        self._keepalive = KeepAlive(lease, on_lost=self._lease_lost).start()
        return lease

    def _drop_lease(self, *, revoke: bool) -> None:
        if self._external_lease is not None:
            return
        keepalive, lease = self._keepalive, self._lease
        self._keepalive = self._lease = None
        if keepalive is not None:
            keepalive.stop()
        if revoke and lease is not None:
            try:
                lease.revoke()
            except StoreError as exc:
                log.warning(
                    "capture %s: could not revoke lease %x (it will expire): %s",
                    self.capture_id,
                    lease.id,
                    exc,
                )

    def _lease_lost(self, lease: Lease) -> None:
        with self._lock:
            was_owner, self._fence = self._fence is not None, None
        if was_owner:
            log.error(
                "capture %s lost its election lease %x: no longer owner", self.capture_id, lease.id
            )
            if self._on_lost is not None:
                self._on_lost()

    def _wait_until_gone(self, holder: Versioned, deadline: float | None) -> None:
        """Return once ``holder``'s term has ended (the key deleted or re-created)."""
        ended = threading.Event()
        with self._lock:
            self._waiting = ended
            if self._cancel.is_set():
                ended.set()

        def on_event(event: WatchEvent) -> None:
            if event.kind is EventKind.DELETE or event.kv.create_revision != holder.create_revision:
                ended.set()

        handle = self.store.watch_key(self.key, on_event, start_revision=holder.mod_revision + 1)
        try:
            while not ended.is_set():
                wait: float = self.ttl
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        raise CampaignTimeout(
                            f"capture {self.capture_id} did not become owner in time: "
                            f"{_capture_of(holder)} still holds {self.key}"
                        )
                if ended.wait(wait):
                    return
                # Belt and braces: a watch re-attaching after a broken stream
                # is slower than one read.
                current = self.store.get(self.key)
                if current is None or current.create_revision != holder.create_revision:
                    return
        finally:
            with self._lock:
                self._waiting = None
            handle.cancel()


def _capture_of(holder: Versioned) -> str:
    try:
        return str(holder.json().get("capture_id", "?"))
    except StoreError:
        return "?"
