"""A changefeed follows its source to a promoted replica, by GTID (#20 item 4).

Two private MariaDBs: a primary and a replica replicating from it by GTID
(``MASTER_USE_GTID=slave_pos``, log-slave-updates, gtid-strict-mode). The
changefeed's source URI reaches them through a relay (``source_relay.Relay``),
as a DNS name would: ``switch`` moves it to the replica and cuts every open
connection, the binlog readers' included.

* Resuming: the changefeed snapshots the primary, a write load with a DDL
  runs on it, the relay moves to the caught-up replica (promoted) while the
  changefeed is still behind, and writes, a DDL and a new table follow on the
  replica. The changefeed records the new server (generation 1), re-reads
  nothing it delivered and misses nothing: the downstream equals the replica
  (``cdcctl diff``).
* Refusing: the replica stops replicating, the changefeed delivers
  transactions the replica never got, the relay moves: the changefeed fails,
  its error naming the missing GTIDs, and the downstream still equals the
  primary it read.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster
from source_relay import Relay
from testkit import execute, running_mariadb

from cdc.changefeed import ChangefeedState
from cdc.cli.main import main as cdcctl
from cdc.model.gtid import GtidSet
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

CF = "failover"
TIMEOUT = 180
USER = "cdcsrc"


@pytest.fixture
def primary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_mariadb(tmp_path_factory, "fo-primary", 21, binlog=True)


@pytest.fixture
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_mariadb(tmp_path_factory, "fo-replica", 22, binlog=True)


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="failover")
    try:
        cluster.start("fo-1")
        yield cluster
    finally:
        cluster.close()


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = cdcctl(list(args))
    out, err = capsys.readouterr()
    assert code == 0, (args, code, out, err)
    return json.loads(out)


def gtids(server: MariaDBServer) -> GtidSet:
    (row,) = execute(server, "SELECT @@gtid_binlog_pos")
    return GtidSet.parse(row[0] or "")


def replicate(primary: MariaDBServer, replica: MariaDBServer, password: str) -> None:
    """A user the changefeed reads with on both (created on the primary, replicated), and
    the replica replicating from the primary by GTID."""
    execute(
        primary,
        f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%'",
    )
    execute(
        replica,
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
        f"MASTER_USER='{primary.user}', MASTER_PASSWORD='{primary.password}', "
        "MASTER_USE_GTID=slave_pos",
        "START SLAVE",
    )
    caught_up(primary, replica)


def caught_up(primary: MariaDBServer, replica: MariaDBServer) -> None:
    (row,) = execute(replica, f"SELECT MASTER_GTID_WAIT('{gtids(primary)}', 60)")
    assert row[0] == 0, "the replica did not catch up with the primary in 60 s"


def promote(replica: MariaDBServer) -> None:
    execute(replica, "STOP SLAVE", "RESET SLAVE ALL")


def source_uri(relay: Relay, password: str, secrets_dir: Path) -> str:
    secret = secrets_dir / "relay.password"
    secret.write_text(password)
    secret.chmod(0o600)
    return f"mysql://{USER}@127.0.0.1:{relay.port}/?password-file={secret}"


def sink_uri(sink: MariaDBServer, secrets_dir: Path) -> str:
    secret = secrets_dir / "sink.password"
    secret.write_text(sink.password)
    secret.chmod(0o600)
    return f"mysql://{sink.user}@{sink.host}:{sink.port}/?password-file={secret}&worker-count=2"


def covered(cluster: Cluster, server: MariaDBServer) -> None:
    """Waits until the changefeed runs and its checkpoint holds every transaction of
    ``server`` (by GTID: positions of two servers do not compare by file:offset)."""
    target = gtids(server)

    def reached() -> bool:
        status = cluster.status()
        assert status.state is not ChangefeedState.FAILED, cluster.describe()
        checkpoint = status.checkpoint
        return (
            status.state is ChangefeedState.NORMAL
            and checkpoint is not None
            and checkpoint.gtid is not None
            and checkpoint.gtid.contains(target)
        )

    cluster.wait(reached, TIMEOUT, f"the checkpoint to hold {target}")


def writes(server: MariaDBServer, db: str, first: int, count: int) -> None:
    """``count`` small transactions: inserts, updates, deletes."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for i in range(first, first + count):
                cur.execute(f"INSERT INTO `{db}`.t (id, k, c) VALUES ({i}, {i % 7}, 'w{i}')")
                cur.execute(f"UPDATE `{db}`.t SET k = k + 1 WHERE id = {i - 5}")
                if i % 4 == 0:
                    cur.execute(f"DELETE FROM `{db}`.t WHERE id = {i - 50}")
    finally:
        conn.close()


def diff_equal(
    capsys: pytest.CaptureFixture[str], source: MariaDBServer, sink: str, db: str
) -> None:
    report = cli(
        capsys,
        *("diff", "--source-uri", source.uri, "--target-uri", sink),
        *("--filter", f"{db}.*", "--chunk-size", "100"),
    )
    assert report["equal"] is True, report


def create(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], uri: str, sink: str, db: str, mode: str
) -> None:
    cli(
        capsys,
        *("changefeed", "create", "--server", cluster.api_address(), "--changefeed-id", CF),
        *("--source-uri", uri, "--sink-uri", sink),
        *("--filter-rule", f"{db}.*", "--chunk-size", "100", "--spark-master", "local[1]"),
        *("--snapshot-mode", mode),
    )


def test_a_failover_to_a_caught_up_replica_resumes_by_gtid_without_loss_or_repeat(
    cluster: Cluster,
    primary: MariaDBServer,
    replica: MariaDBServer,
    sink_db: MariaDBServer,
    sink_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = sink_database
    password = secrets.token_urlsafe(12)
    replicate(primary, replica, password)
    values = ", ".join(f"({i}, {i % 7}, 's{i}')" for i in range(1, 301))
    execute(
        primary,
        f"CREATE DATABASE `{db}`",
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, k INT, c VARCHAR(64))",
        f"INSERT INTO `{db}`.t VALUES {values}",
    )
    relay = Relay(primary.port)
    try:
        create(
            cluster,
            capsys,
            source_uri(relay, password, tmp_path),
            sink_uri(sink_db, tmp_path),
            db,
            "initial",
        )
        covered(cluster, primary)
        before = cluster.status().source
        assert before is not None and before.server_id == 21 and before.generation == 0

        # The changefeed is behind when the source moves: what it read of these is
        # read again on the replica, and must neither repeat nor go missing.
        writes(primary, db, 1000, 150)
        execute(primary, f"ALTER TABLE `{db}`.t ADD COLUMN note VARCHAR(20) DEFAULT 'p'")
        writes(primary, db, 2000, 100)
        caught_up(primary, replica)
        promote(replica)
        relay.switch(replica.port)

        writes(replica, db, 3000, 100)
        execute(
            replica,
            f"UPDATE `{db}`.t SET note = CONCAT('r', id) WHERE id % 3 = 0",
            f"CREATE TABLE `{db}`.added (id INT PRIMARY KEY, s VARCHAR(20))",
            f"INSERT INTO `{db}`.added VALUES (1, 'after'), (2, 'the switch')",
        )
        covered(cluster, replica)
        after = cluster.status().source
        assert after is not None and after.server_id == 22 and after.generation == 1
        assert after.previous[-1]["server_id"] == 21
        checkpoint = cluster.status().checkpoint
        assert checkpoint is not None and checkpoint.gen == 1
        shown = cli(capsys, "changefeed", "query", "--server", cluster.api_address(), "-c", CF)
        assert shown["source"]["server_id"] == 22 and shown["source"]["generation"] == 1
    finally:
        relay.close()
    diff_equal(capsys, replica, sink_db.uri, db)


def test_a_failover_to_a_server_missing_transactions_fails_naming_them(
    cluster: Cluster,
    primary: MariaDBServer,
    replica: MariaDBServer,
    sink_db: MariaDBServer,
    sink_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = sink_database
    password = secrets.token_urlsafe(12)
    replicate(primary, replica, password)
    execute(
        primary,
        f"CREATE DATABASE `{db}`",
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, k INT, c VARCHAR(64))",
    )
    execute(sink_db, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, k INT, c VARCHAR(64))")
    relay = Relay(primary.port)
    try:
        create(
            cluster,
            capsys,
            source_uri(relay, password, tmp_path),
            sink_uri(sink_db, tmp_path),
            db,
            "never",
        )
        # mode never starts where the owner first reads the binlog: write after that
        cluster.wait(lambda: cluster.status().checkpoint is not None, TIMEOUT, "a start")
        writes(primary, db, 100, 40)
        caught_up(primary, replica)
        execute(replica, "STOP SLAVE")
        kept = gtids(replica)
        writes(primary, db, 200, 20)  # the replica never gets these
        covered(cluster, primary)
        promote(replica)
        relay.switch(replica.port)

        def failed() -> bool:
            return cluster.status().state is ChangefeedState.FAILED

        cluster.wait(failed, TIMEOUT, "the changefeed to fail")
        status = cluster.status()
        assert status.error is not None
        message = status.error.message
        assert "server_id 22" in message and "server_id 21" in message, message
        assert "lacks transactions the changefeed's checkpoint covers" in message, message
        (last,) = kept.mariadb_gtids
        assert f"domain 0: seq {last.seq + 1} .. " in message, message
        source = status.source
        assert source is not None and source.server_id == 21 and source.generation == 0
    finally:
        relay.close()
    # nothing of the replica was delivered: the downstream is the primary's
    diff_equal(capsys, primary, sink_db.uri, db)
