"""One capture's life in etcd: registration under a lease, candidacy for owner.

    register ──► capture key under lease L (kept alive) ──► campaign (owner key under L)
        ▲                                                       │ won
        │ lease L lost (process stalled past its TTL,           ▼
        │ etcd unreachable too long)                      on_elected(fence) ... owner runs
        └───────────── on_deposed() ◄───────────────────────────┘

The owner key shares the capture's lease, so a capture whose session is gone
can never still be owner. Losing the lease is not fatal: the session registers
again with a new lease and campaigns again, as a TiCDC capture does.

The processor follows the session: ``on_registered(clock)`` once the capture key
is written (``clock`` tells whether the lease is still known alive),
``on_unregistered()`` when the lease is lost or the session ends.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from capture.liveness import LeaseClock
from cdc.logs import get_logger
from cdc.store import Election, EtcdStore, Fence, KeepAlive, Lease, StoreError

RETRY_INTERVAL = 1.0


@dataclass(frozen=True)
class CaptureIdentity:
    """What a capture publishes about itself under `capture/<id>`."""

    capture_id: str
    address: str
    version: str
    started_at: float

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.capture_id,
            "address": self.address,
            "version": self.version,
            "started_at": self.started_at,
            "hostname": socket.gethostname(),
        }


class CaptureSession:
    """Keeps a capture registered and campaigning until `stop()`.

    `on_elected(fence)` runs on the session thread when this capture becomes
    owner and must return promptly (start the owner's own thread);
    `on_deposed()` runs when the term ends for any reason.
    """

    def __init__(
        self,
        store: EtcdStore,
        identity: CaptureIdentity,
        ttl: int,
        on_elected: Callable[[Fence], None],
        on_deposed: Callable[[], None],
        on_registered: Callable[[LeaseClock], None] | None = None,
        on_unregistered: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.identity = identity
        self.ttl = ttl
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self._on_registered = on_registered
        self._on_unregistered = on_unregistered
        self._stop = threading.Event()
        self._lease_lost = threading.Event()
        self._election: Election | None = None
        self._thread = threading.Thread(target=self._run, name="capture-session", daemon=True)
        self.log = get_logger(__name__, capture=identity.capture_id)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Resign and revoke the lease, so the others need not wait for its TTL."""
        self._stop.set()
        election = self._election
        if election is not None:
            election.resign()
        self._thread.join(timeout=self.ttl + 5)

    @property
    def fence(self) -> Fence | None:
        election = self._election
        return election.fence if election else None

    def owner(self) -> str | None:
        """The capture id of the current owner, as etcd says now."""
        election = self._election or Election(self.store, self.identity.capture_id)
        current = election.current_owner()
        return current[0] if current else None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._one_session()
            except StoreError as exc:
                self.log.error("session failed, retrying in %.0fs: %s", RETRY_INTERVAL, exc)
            except Exception:
                self.log.exception("unexpected error in the capture session, retrying")
            self._stop.wait(RETRY_INTERVAL)

    def _one_session(self) -> None:
        self._lease_lost.clear()
        lease = self.store.grant_lease(self.ttl)
        keepalive = KeepAlive(lease, on_lost=self._lost).start()
        clock = LeaseClock(lease).start()
        try:
            self.store.put(
                self.store.keys.capture(self.identity.capture_id),
                self.identity.to_dict(),
                lease=lease,
            )
            self.log.info(
                "registered at %s (lease %x, ttl %ds)", self.identity.address, lease.id, self.ttl
            )
            if self._on_registered is not None:
                self._on_registered(clock)
            self._campaign(lease)
        finally:
            clock.stop()
            if self._on_unregistered is not None:
                self._on_unregistered()
            keepalive.stop()
            if self._stop.is_set():
                self._revoke(lease)

    def _campaign(self, lease: Lease) -> None:
        election = Election(self.store, self.identity.capture_id, lease=lease)
        self._election = election
        while not self._stop.is_set() and not self._lease_lost.is_set():
            try:
                fence = election.campaign(timeout=RETRY_INTERVAL)
            except TimeoutError:
                continue
            self._on_elected(fence)
            while not (self._stop.is_set() or self._lease_lost.is_set()):
                if not election.is_owner(fence):
                    self.log.warning("owner key changed under us: stepping down")
                    break
                self._stop.wait(RETRY_INTERVAL)
            self._on_deposed()
        self._election = None

    def _lost(self, lease: Lease) -> None:
        self.log.error("capture lease %x lost: re-registering", lease.id)
        self._lease_lost.set()
        if self._on_unregistered is not None:
            self._on_unregistered()

    def _revoke(self, lease: Lease) -> None:
        try:
            lease.revoke()
        except StoreError as exc:
            self.log.warning("could not revoke lease %x (it expires by itself): %s", lease.id, exc)
