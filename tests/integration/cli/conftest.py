"""A real `cdc-server` for the admin API tests, with its own cluster id in the session etcd."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc.api.health import is_serving
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port
from cdc.store import EtcdConfig, EtcdStore
from cdc.store.keys import cluster_prefix

SOURCE_PW_ENV = "CDC_TEST_SOURCE_PW"
SINK_PW_ENV = "CDC_TEST_SINK_PW"


@dataclass(frozen=True)
class AdminServer:
    address: str
    cluster_id: str
    capture_id: str
    log: Path
    store: EtcdStore


@contextmanager
def running_server(
    etcd_endpoint: str, env: dict[str, str], log: Path, cluster: str
) -> Iterator[AdminServer]:
    """A cdc-server process on a free port until the block ends; its cluster's keys removed."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "capture.main",
                f"--etcd={etcd_endpoint}",
                f"--addr=127.0.0.1:{port}",
                "--capture-id=admin-1",
                f"--cluster-id={cluster}",
                # Nothing here waits for a lease to expire; a short TTL would only
                # make a loaded machine's capture doubt its lease and refuse writes.
                "--lease-ttl=10",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
        )
    address = f"127.0.0.1:{port}"
    config = EtcdConfig((etcd_endpoint,), prefix=cluster_prefix(cluster))
    try:
        with EtcdStore(config) as store:
            deadline = time.monotonic() + 30
            while not is_serving(address, timeout=0.5):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"cdc-server did not start:\n{log.read_text()}")
                time.sleep(0.1)
            yield AdminServer(address, cluster, "admin-1", log, store)
            store.delete_prefix(cluster_prefix(cluster) + "/")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def server_starter() -> object:
    """``running_server`` itself, for tests that bring their own etcd."""
    return running_server


@pytest.fixture
def admin_server(
    etcd_server: EtcdServer, source_db: MariaDBServer, sink_db: MariaDBServer, tmp_path: Path
) -> Iterator[AdminServer]:
    """One cdc-server; it knows the databases' passwords only through its environment."""
    env = {SOURCE_PW_ENV: source_db.password, SINK_PW_ENV: sink_db.password}
    cluster = f"admin-{uuid.uuid4().hex[:8]}"
    with running_server(etcd_server.endpoint, env, tmp_path / "server.log", cluster) as server:
        yield server


@pytest.fixture
def source_uri(source_db: MariaDBServer) -> str:
    """The source, its password by reference (only the server's environment has it)."""
    db = source_db
    return f"mysql://{db.user}@127.0.0.1:{db.port}/?password-env={SOURCE_PW_ENV}&server-id=4242"


@pytest.fixture
def sink_uri(sink_db: MariaDBServer) -> str:
    return f"mysql://{sink_db.user}@127.0.0.1:{sink_db.port}/?password-env={SINK_PW_ENV}"


@pytest.fixture
def source_table(source_db: MariaDBServer, source_database: str) -> str:
    """``<database>.items`` on the source with two rows; the filter rule matching it."""
    conn = source_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE `{source_database}`.items (id INT PRIMARY KEY, name VARCHAR(20))"
            )
            cur.execute(f"INSERT INTO `{source_database}`.items VALUES (1, 'a'), (2, 'b')")
    finally:
        conn.close()
    return f"{source_database}.*"
