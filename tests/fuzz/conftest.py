"""Fixtures of the randomized differential test: servers of its own, one ``World``.

Like tests/chaos, the test restarts the source MariaDB, so it gets servers of
its own instead of the shared ones of tests/conftest.py; they live for the
module only (tests/fuzz runs after tests/chaos, whose servers stay up for the
session). A seed starts any server a failed seed left stopped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzzrun import World
from testkit import running_etcd, running_mariadb

from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

SOURCE_SERVER_ID = 21
SINK_SERVER_ID = 22


@pytest.fixture(scope="module")
def fuzz_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The source MariaDB (row binlog, full images and metadata, GTID)."""
    yield from running_mariadb(tmp_path_factory, "fuzz-source", SOURCE_SERVER_ID, binlog=True)


@pytest.fixture(scope="module")
def fuzz_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The downstream MariaDB."""
    yield from running_mariadb(tmp_path_factory, "fuzz-sink", SINK_SERVER_ID, binlog=False)


@pytest.fixture(scope="module")
def fuzz_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """A single-member etcd."""
    yield from running_etcd(tmp_path_factory, "fuzz")


@pytest.fixture
def world(fuzz_source: MariaDBServer, fuzz_sink: MariaDBServer, fuzz_etcd: EtcdServer) -> World:
    return World(fuzz_source, fuzz_sink, fuzz_etcd)
