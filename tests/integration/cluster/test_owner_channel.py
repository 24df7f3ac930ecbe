"""The owner's etcd channel: its own, opened when its capture is elected, closed when deposed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from capture.server import CaptureServer, ServerConfig
from cdc.store import Election, EtcdStore, Fence, StoreError
from owner.owner import Owner

Elect = Callable[[str], tuple[Election, Fence]]


def test_the_owner_runs_on_an_etcd_channel_of_its_own(store: EtcdStore, elect: Elect) -> None:
    """On its capture's channel, the owner's cycle queued behind the processor's watches
    (at 10,000 tables, cycles of 150-250 ms that computed 10 ms;
    bench/control_plane_real_bench.py): the capture gives it a store of its own."""
    server = CaptureServer(ServerConfig(store.config, "127.0.0.1:1", "127.0.0.1:1", "c1"))
    try:
        server._elected(elect("c1")[1])
        owner = server._owner
        assert owner is not None and owner.store is not server.store
        assert owner.store.config == server.store.config
        server._deposed()
        with pytest.raises(StoreError, match="closed"):
            owner.store.get(owner.store.keys.barrier("cf"))
        assert server.store.get(server.store.keys.barrier("cf")) is None  # still open
    finally:
        server.store.close()


def test_a_term_that_cannot_start_stops_what_it_started(store: EtcdStore, elect: Elect) -> None:
    """The share owner's mirrors fail to read (here: the capture's store closed): the
    owner, already started on its own store, stops and that store closes, instead of
    cycling on beside the next owner until fenced."""
    server = CaptureServer(ServerConfig(store.config, "127.0.0.1:1", "127.0.0.1:1", "c1"))
    fence = elect("c1")[1]
    server.store.close()
    owners: list[Owner] = []
    real = Owner.start

    def record(owner: Owner) -> None:
        owners.append(owner)
        real(owner)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Owner, "start", record)
        with pytest.raises(StoreError, match="closed"):
            server._elected(fence)
    assert server._owner is None and server._share_owner is None
    (owner,) = owners
    assert not owner._thread.is_alive()
    with pytest.raises(StoreError, match="closed"):
        owner.store.get(owner.store.keys.barrier("cf"))
