"""A real gRPC server in this process serving pull sinks backed by the session's etcd."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from subscription_helpers import Served

from cdc.playground.etcd import EtcdServer
from cdc.store import EtcdStore
from cdc.subscription import SinkRegistry, add_subscription_service


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with etcd_server.store(etcd_prefix) as opened:
        yield opened


@pytest.fixture
def served(store: EtcdStore) -> Iterator[Served]:
    registry = SinkRegistry()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    add_subscription_service(server, registry)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    state = Served(f"127.0.0.1:{port}", registry, store)
    try:
        yield state
    finally:
        for client in state.clients:
            client.close()
        for sink in state.sinks:
            sink.close()
        for thread in state.threads:
            thread.join(5)
        server.stop(grace=0).wait()
        leftover = [t for t in state.threads if t.is_alive()]
        assert not leftover, f"threads still running: {leftover}"
