"""etcd leases and the thread that keeps one alive.

A lease is etcd's liveness token: keys written under it vanish when it is not
refreshed for ``ttl`` seconds, which is how a dead capture (and a dead owner)
disappears from the cluster. ``KeepAlive`` refreshes every ``ttl / 3``::

    grant ──> refresh ─ ok ─> wait ttl/3 ─> refresh ─ ...
                 │ etcd says "no such lease"            ─> lost
                 │ etcd unreachable: retry until ttl has passed since the
                 └─ last good refresh (the lease may be gone by then)  ─> lost

"lost" is reported once, through ``on_lost``; the owner of the lease must then
assume every key under it is gone (an owner steps down).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from cdc.store.errors import LeaseLost, StoreError

__all__ = ["KeepAlive", "Lease", "LeaseCalls"]

log = logging.getLogger(__name__)


class LeaseCalls(Protocol):
    """The three calls a lease makes on its store (``EtcdStore``, which imports this module)."""

    def refresh_lease(self, lease_id: int) -> int: ...

    def revoke_lease(self, lease_id: int) -> None: ...

    def lease_ttl(self, lease_id: int) -> int: ...


class Lease:
    """A granted etcd lease (``EtcdStore.grant_lease``); ``id`` is what keys are put under."""

    def __init__(self, store: LeaseCalls, lease_id: int, ttl: int) -> None:
        self.id = lease_id
        self.ttl = ttl
        self.granted_at = time.monotonic()
        self._store = store

    def refresh(self) -> int:
        """Renew the lease; the TTL etcd granted again. ``LeaseLost`` if it is gone."""
        remaining = self._store.refresh_lease(self.id)
        if remaining <= 0:
            raise LeaseLost(self.id)
        return remaining

    def revoke(self) -> None:
        """End the lease now, deleting its keys. Revoking a lost lease is not an error."""
        self._store.revoke_lease(self.id)

    def remaining_ttl(self) -> int:
        """Seconds left before expiry, or -1 when the lease no longer exists."""
        return self._store.lease_ttl(self.id)

    def __repr__(self) -> str:
        return f"Lease(id={self.id:x}, ttl={self.ttl})"


class KeepAlive:
    """Refreshes ``lease`` from a daemon thread until stopped or lost.

    ``on_lost(lease)`` runs once, on the keep-alive thread, when etcd reports
    the lease gone or when no refresh succeeded for ``ttl`` seconds; ``lost``
    is set at the same moment. Use as a context manager or call ``start``/``stop``.
    """

    def __init__(
        self,
        lease: Lease,
        on_lost: Callable[[Lease], None] | None = None,
        interval: float | None = None,
    ) -> None:
        self.lease = lease
        self.interval = interval if interval is not None else max(lease.ttl / 3, 0.1)
        self.lost = threading.Event()
        self._on_lost = on_lost
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"etcd-keepalive-{lease.id:x}", daemon=True
        )

    def start(self) -> KeepAlive:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop refreshing (the lease then expires after its TTL unless revoked)."""
        self._stopped.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        ttl = self.lease.ttl
        deadline = self.lease.granted_at + ttl
        wait = self.interval
        while not self._stopped.wait(wait):
            started = time.monotonic()
            try:
                self.lease.refresh()
            except LeaseLost:
                self._lose("etcd reports it expired or revoked")
                return
            except StoreError as exc:
                now = time.monotonic()
                if now >= deadline:
                    self._lose(f"no successful refresh for {ttl}s, last error: {exc}")
                    return
                log.warning("lease %x: refresh failed, retrying: %s", self.lease.id, exc)
                wait = min(self.interval, deadline - now)
                continue
            deadline = started + ttl
            wait = self.interval

    def _lose(self, why: str) -> None:
        if self._stopped.is_set():
            return
        log.error("lease %x lost: %s", self.lease.id, why)
        self.lost.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self.lease)
            except Exception:
                log.exception("lease %x: on_lost callback failed", self.lease.id)
