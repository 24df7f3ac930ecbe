"""The barrier view against a real etcd: no barrier is missed, and it never gives up.

Two seams, both on the store instance the view uses (its calls go to the real
etcd either way): one puts a barrier right after the view's read and before
its watch starts; the other is a TCP forwarder in front of etcd that the test
cuts and restores, so the view's attempts to follow the key again really fail
for a while.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from testkit import Outage

from cdc.changefeed import Barrier
from cdc.changefeed.barrier import BarrierKind
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.store import EtcdConfig, EtcdStore, StoreError
from processor.barrier_view import BarrierView

pytestmark = pytest.mark.integration

CF = "cf-barrier"


def barrier(offset: int) -> Barrier:
    return Barrier(BarrierKind.RESOLVED, Position("binlog.000001", offset))


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def limit(view: BarrierView) -> int | None:
    current = view.barrier
    return None if current is None else current.limit.offset


@pytest.fixture
def writer(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    """A store of its own (its own connection), as the owner's would be."""
    with etcd_server.store(etcd_prefix) as store:
        yield store


def put_barrier(store: EtcdStore, offset: int) -> None:
    store.put(store.keys.barrier(CF), barrier(offset).to_dict())


def test_a_put_between_the_read_and_the_watch_is_seen(
    etcd_server: EtcdServer, etcd_prefix: str, writer: EtcdStore
) -> None:
    put_barrier(writer, 100)
    with etcd_server.store(etcd_prefix) as store:
        # After the view has read the key, the next store call it makes (asking the
        # revision, or starting the watch) first lets the owner publish a new barrier.
        armed = threading.Event()
        put_once = threading.Event()

        def after_read(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                result = method(*args, **kwargs)
                armed.set()
                return result

            return call

        def before(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                if armed.is_set() and not put_once.is_set():
                    put_once.set()
                    put_barrier(writer, 200)
                return method(*args, **kwargs)

            return call

        store.get = after_read(store.get)  # type: ignore[method-assign]
        store.get_with_revision = after_read(store.get_with_revision)  # type: ignore[method-assign]
        store.revision = before(store.revision)  # type: ignore[method-assign]
        store.watch_key = before(store.watch_key)  # type: ignore[method-assign]
        view = BarrierView(store, CF)
        try:
            assert put_once.is_set()
            wait_for(lambda: limit(view) == 200, 10, "the barrier put before the watch")
            put_barrier(writer, 300)
            wait_for(lambda: limit(view) == 300, 10, "a later barrier")
        finally:
            view.close()


def test_a_broken_watch_is_followed_again_until_etcd_answers(
    etcd_server: EtcdServer, etcd_prefix: str, writer: EtcdStore
) -> None:
    put_barrier(writer, 100)
    forwarder = Outage(int(etcd_server.endpoint.rpartition(":")[2]))
    config = EtcdConfig((f"127.0.0.1:{forwarder.port}",), prefix=etcd_prefix, dial_timeout=1.0)
    store = EtcdStore(config)
    attempts: list[str] = []
    real_read = store.get_with_revision

    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            return real_read(*args, **kwargs)
        except StoreError as exc:
            attempts.append(str(exc))
            raise

    store.get_with_revision = counted  # type: ignore[method-assign]
    store.get = lambda key: counted(key)[0]  # type: ignore[method-assign]
    view = BarrierView(store, CF)
    try:
        wait_for(lambda: limit(view) == 100, 10, "the first barrier")
        # etcd goes away for this capture; its watch stops, ending with an error
        forwarder.cut()
        handle = view._handle
        assert handle is not None
        handle.cancel()
        view._on_error(StoreError("watch cancelled by the test"))
        # the owner (still connected) publishes a barrier during the outage
        put_barrier(writer, 200)
        wait_for(lambda: len(attempts) >= 3, 30, "three failed attempts to follow again")
        assert limit(view) == 100
        forwarder.restore()
        wait_for(lambda: limit(view) == 200, 30, "the barrier put during the outage")
        put_barrier(writer, 300)
        wait_for(lambda: limit(view) == 300, 10, "a barrier put after the outage")
    finally:
        view.close()
        store.close()
        forwarder.cut()
