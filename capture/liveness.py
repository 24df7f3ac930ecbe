"""Whether this capture can still prove its lease is alive: lease-based self-fencing.

A capture frozen past its lease (a long GC pause, SIGSTOP, a VM migration)
has lost its tables to other captures when it runs again; until its
keep-alive notices, its pipelines must not write. ``LeaseClock`` asks etcd
how long the lease has left every ``ttl / 6`` seconds and keeps
``valid_until = asked at + remaining - margin`` on the monotonic clock;
``fresh()`` is false once that moment has passed, which it has right after
any freeze longer than the lease::

    ask (t0) ── remaining r ──► valid until t0 + r - margin

etcd reports the remaining TTL in whole seconds, rounded down, and ``t0`` is
taken before the request: both err on the short side.
    frozen ....................................... thawed: now > valid until ──► not fresh
"""

from __future__ import annotations

import threading
import time

from cdc.logs import get_logger
from cdc.store import Lease, StoreError

__all__ = ["LeaseClock"]


class LeaseClock:
    """Tracks how long ``lease`` is known to live (see the module docstring)."""

    def __init__(self, lease: Lease, margin: float = 0.1) -> None:
        self.lease = lease
        self.margin = margin
        self.interval = max(lease.ttl / 6, 0.2)
        self._valid_until = time.monotonic() + lease.ttl - margin
        self._stop = threading.Event()
        self.log = get_logger(__name__)
        self._thread = threading.Thread(
            target=self._run, name=f"lease-clock-{lease.id:x}", daemon=True
        )

    def start(self) -> LeaseClock:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._valid_until = 0.0

    def fresh(self) -> bool:
        """Whether the lease is known to be alive now."""
        return time.monotonic() < self._valid_until

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            asked = time.monotonic()
            try:
                remaining = self.lease.remaining_ttl()
            except StoreError as exc:
                self.log.warning("lease %x: cannot read its TTL: %s", self.lease.id, exc)
                continue
            if remaining <= 0:
                # under a second left (etcd rounds down) or gone: not fresh now, but ask
                # again: a lease its keep-alive refreshes answers a full TTL at the next
                # ask, an expired one never does. Returning here left a live capture
                # unable to prove its lease for good (its shares and writes stopped).
                self._valid_until = 0.0
                continue
            if not self._stop.is_set():
                self._valid_until = asked + remaining - self.margin
