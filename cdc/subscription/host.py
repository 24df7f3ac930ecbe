"""The pull sinks of one cdc-server process: opened for its streams, served to its clients.

    processor's shared stream ── PULL.open ──► PullHost.open ──► PullSink ──► SinkRegistry
    owner at a barrier ──────── PULL.apply_ddl ─► PullHost.record_ddl ──► DdlLog (etcd)
    gRPC SubscriptionService ─────────────────────────────────────────────► SinkRegistry
                                                                           (else: Router)

The capture creates one host, installs it for the pull kind
(``cdc.sink.pull.serve_pull``) and serves its registry. A sink leaves the
registry when it is closed (its stream closed), and a new stream's sink
replaces (and closes) a failed one's.

Stopping: a graceful stop lets the pipelines flush, which waits for the
clients' acks; a client that acks nothing would hold the stop (and, through
the stream's locks, the process) forever, so ``closing_after`` closes every
sink once a grace period has passed: their tables end there, with what the
clients acked reported, and the rest is delivered again by the capture that
takes them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cdc.logs import get_logger
from cdc.model.events import DdlEvent
from cdc.sink.base import Sink
from cdc.store import EtcdStore
from cdc.subscription.ddl_log import DdlFeed, DdlLog
from cdc.subscription.service import SinkRegistry
from cdc.subscription.sink import DEFAULT_CAPACITY, PullSink, Served

__all__ = ["STOP_GRACE", "PullHost"]

#: Seconds a stopping capture waits for pull clients to ack before closing their sinks.
STOP_GRACE = 10.0

log = get_logger(__name__)


class PullHost:
    """See the module docstring; ``capacity`` is each subscription's ring size."""

    def __init__(self, store: EtcdStore, capacity: int = DEFAULT_CAPACITY) -> None:
        self.store = store
        self.capacity = capacity
        self.registry = SinkRegistry()

    def open(self, changefeed_id: str, writable: Callable[[], bool] | None) -> Sink:
        """A new pull sink of the changefeed, served from now on (``PullHost`` protocol of
        ``cdc.sink.pull``)."""
        served = Served(
            writable=writable,
            ddl=DdlFeed(DdlLog(self.store, changefeed_id)),
            on_close=self.registry.unregister,
        )
        sink = PullSink(self.store, changefeed_id, self.capacity, served)
        previous = self.registry.replace(sink)
        if previous is not None and not previous.closed:
            log.info("changefeed %s: a new pull sink replaces the one before it", changefeed_id)
            previous.close()
        return sink

    def record_ddl(self, changefeed_id: str, ddl: DdlEvent) -> None:
        DdlLog(self.store, changefeed_id).record(ddl)

    def close(self) -> None:
        """Closes every open sink: blocked pipelines get ``SinkError``, clients UNAVAILABLE."""
        for sink in self.registry.open_sinks():
            sink.close()

    @contextmanager
    def closing_after(self, grace: float = STOP_GRACE) -> Iterator[None]:
        """Closes every sink if the block (a graceful stop) lasts longer than ``grace``."""
        timer = threading.Timer(grace, self._give_up, args=(grace,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _give_up(self, grace: float) -> None:
        sinks = self.registry.open_sinks()
        if sinks:
            log.warning(
                "pull clients did not ack within %.0fs of the stop: closing %d pull sink(s); "
                "what they did not ack is delivered again by the capture taking the tables",
                grace,
                len(sinks),
            )
        self.close()
