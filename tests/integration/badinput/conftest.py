"""Fixtures of the bad-input suite: one real cdc-server per module, cdcctl, a database pair.

Passwords reach the cdc-server only through its environment (``password-env``),
as in production; each test removes the changefeeds it created.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from badinput_helpers import SINK_PW_ENV, SOURCE_PW_ENV, Cli, Server, cdc_server
from testkit import execute

from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.store.keys import cluster_prefix


@pytest.fixture(scope="module")
def server(
    etcd_server: EtcdServer,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Server]:
    """One cdc-server for the module, in a cluster of its own; its keys removed afterwards."""
    env = {SOURCE_PW_ENV: source_db.password, SINK_PW_ENV: sink_db.password}
    cluster = f"badinput-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("cdc-server") / "server.log"
    with cdc_server(etcd_server.endpoint, env, log, cluster) as running:
        yield running
    with etcd_server.store(cluster_prefix(cluster)) as store:
        store.delete_prefix(cluster_prefix(cluster) + "/")


@pytest.fixture
def cli(
    server: Server, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cli]:
    """cdcctl aimed at the module's server through CDC_SERVER; created changefeeds removed."""
    monkeypatch.setenv("CDC_SERVER", server.address)
    runner = Cli(capsys)
    yield runner
    runner.remove_created()


@pytest.fixture
def source_uri(source_db: MariaDBServer) -> str:
    db = source_db
    return f"mysql://{db.user}@127.0.0.1:{db.port}/?password-env={SOURCE_PW_ENV}"


@pytest.fixture
def sink_uri(sink_db: MariaDBServer) -> str:
    db = sink_db
    return f"mysql://{db.user}@127.0.0.1:{db.port}/?password-env={SINK_PW_ENV}&worker-count=2"


@pytest.fixture
def db(source_database: str, sink_db: MariaDBServer) -> Iterator[str]:
    """A fresh database on the source and the same name on the downstream (both dropped)."""
    execute(sink_db, f"CREATE DATABASE IF NOT EXISTS `{source_database}`")
    yield source_database
    execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")
