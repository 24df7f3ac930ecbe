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

from cdc.playground import isolation
from cdc.playground.errors import ServiceError
from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.packages import ETCD_PACKAGES, MARIADB_PACKAGES, ensure_packages
from cdc.playground.ports import free_port

SOURCE_SERVER_ID = 11
SINK_SERVER_ID = 12


def _start(server: MariaDBServer | EtcdServer) -> None:
    try:
        server.start()
    except ServiceError as exc:
        pytest.fail(f"cannot start {server!r}:\n{exc}", pytrace=False)


@pytest.fixture(scope="session")
def chaos_source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The suite's source MariaDB (row binlog, full images and metadata, GTID)."""
    ensure_packages(MARIADB_PACKAGES)
    spec = MariaDBSpec(
        name="chaos-source",
        base_dir=tmp_path_factory.mktemp("chaos-source"),
        port=free_port(),
        server_id=SOURCE_SERVER_ID,
        binlog=True,
    )
    server = MariaDBServer(spec, die_with_parent=True)
    _start(server)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chaos_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """The suite's downstream MariaDB."""
    ensure_packages(MARIADB_PACKAGES)
    spec = MariaDBSpec(
        name="chaos-sink",
        base_dir=tmp_path_factory.mktemp("chaos-sink"),
        port=free_port(),
        server_id=SINK_SERVER_ID,
        binlog=False,
    )
    server = MariaDBServer(spec, die_with_parent=True)
    _start(server)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chaos_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """The suite's single-member etcd."""
    ensure_packages(ETCD_PACKAGES)
    client_port = free_port()
    peer_port = free_port()
    while peer_port == client_port:
        peer_port = free_port()
    spec = EtcdSpec(
        name="chaos",
        base_dir=tmp_path_factory.mktemp("chaos-etcd"),
        client_port=client_port,
        peer_port=peer_port,
    )
    server = EtcdServer(spec, die_with_parent=True)
    _start(server)
    yield server
    server.stop()


def _up(server: MariaDBServer | EtcdServer) -> None:
    """Starts ``server`` again if a test left it stopped."""
    if not server.is_running():
        try:
            start_again(server)
        except ServiceError as exc:
            pytest.fail(f"cannot start {server!r} again:\n{exc}", pytrace=False)


def _drop(server: MariaDBServer, db: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    finally:
        conn.close()


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
        _drop(chaos_source, db)
        _drop(chaos_sink, db)
