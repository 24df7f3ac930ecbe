"""Fixtures of the fault-injection suite: its own servers, and one scene per test.

The suite stops and restarts etcd, the source and the downstream MariaDB, so
it gets servers of its own (session-wide, on free loopback ports in the
session's temporary directory) instead of the shared ones of
tests/conftest.py: a fault that went wrong cannot leave a shared server down
under the rest of the session. Each test's ``scene`` starts any of them that a
failed test left stopped, and removes its database and cluster afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_harness import Cluster, Scene, start_again
from testkit import execute, running_etcd, running_mariadb

from cdc.playground import isolation
from cdc.playground.errors import ServiceError
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

SOURCE_SERVER_ID = 11
SINK_SERVER_ID = 12


@pytest.fixture(scope="session")
def chaos_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The suite's source MariaDB (row binlog, full images and metadata, GTID)."""
    yield from running_mariadb(tmp_path_factory, "chaos-source", SOURCE_SERVER_ID, binlog=True)


@pytest.fixture(scope="session")
def chaos_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The suite's downstream MariaDB."""
    yield from running_mariadb(tmp_path_factory, "chaos-sink", SINK_SERVER_ID, binlog=False)


@pytest.fixture(scope="session")
def chaos_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """The suite's single-member etcd."""
    yield from running_etcd(tmp_path_factory, "chaos")


def _up(server: MariaDBServer | EtcdServer) -> None:
    """Starts ``server`` again if a test left it stopped."""
    if not server.is_running():
        try:
            start_again(server)
        except ServiceError as exc:
            pytest.fail(f"cannot start {server!r} again:\n{exc}", pytrace=False)


@pytest.fixture
def scene(
    chaos_source: MariaDBServer,
    chaos_sink: MariaDBServer,
    chaos_etcd: EtcdServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Scene]:
    """A fresh database name and cluster; afterwards the servers are all up again and the
    test's processes, keys and databases are gone."""
    for server in (chaos_etcd, chaos_source, chaos_sink):
        _up(server)
    cluster = Cluster(chaos_etcd.endpoint, tmp_path)
    db = isolation.database_name(request.node.name)
    scene = Scene(db, chaos_source, chaos_sink, chaos_etcd, cluster)
    try:
        yield scene
    finally:
        if scene.writer is not None:
            scene.writer.halt.set()
            scene.writer.join(timeout=30)
        for server in (chaos_etcd, chaos_source, chaos_sink):
            _up(server)
        cluster.close()
        execute(chaos_source, f"DROP DATABASE IF EXISTS `{db}`")
        execute(chaos_sink, f"DROP DATABASE IF EXISTS `{db}`")
