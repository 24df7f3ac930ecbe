"""Fixtures of the cluster tests: a store on a fresh prefix of the shared etcd, elections."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cluster_helpers import Node
from testkit import execute

from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.store import Election, EtcdStore, Fence


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with etcd_server.store(etcd_prefix) as store:
        yield store


@pytest.fixture
def downstream(sink_db: MariaDBServer, source_database: str) -> Iterator[str]:
    """The sink's copy of the source database (its name), dropped after the test."""
    yield source_database
    execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")


@pytest.fixture
def elect(store: EtcdStore) -> Iterator[Callable[[str], tuple[Election, Fence]]]:
    """Wins the owner election for a capture id; every election resigns after the test."""
    elections: list[Election] = []

    def win(capture_id: str) -> tuple[Election, Fence]:
        election = Election(store, capture_id, ttl=5)
        elections.append(election)
        return election, election.campaign(timeout=10)

    yield win
    for election in elections:
        election.resign()


@pytest.fixture
def nodes(store: EtcdStore) -> Iterator[Callable[..., Node]]:
    """Starts in-process captures (``nodes(name, spark=None)``); all killed after the test."""
    started: list[Node] = []

    def make(name: str, spark: Any = None) -> Node:
        node = Node(store, name, spark)
        started.append(node)
        return node

    yield make
    for node in started:
        node.kill()
