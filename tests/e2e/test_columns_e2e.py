"""Columns chosen and masked (#20 item 6), through the snapshot and the binlog, into MariaDB.

A changefeed file excludes ``photo`` and every ``secret*`` column of ``users`` and masks
three columns (``email`` hashed with a salt, ``name`` truncated, ``bio`` redacted). The
snapshot (Spark) and the binlog deliver rows alike: the downstream table is created
without the excluded columns and with ``email`` as CHAR(64); DDL touches the masked and
excluded columns (a masked column widened, an excluded one added); `cdcctl diff
--columns-from` the same file finds the downstream equal to the source as the changefeed
delivers it. Then a DDL renames a masked column: the table fails closed at the DDL with
the reason, and no unmasked value reaches the downstream.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster, caught_up
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

CF = "columns"
TIMEOUT = 240
SALT = "pepper-1"


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="columns")
    try:
        cluster.start("col-1")
        yield cluster
    finally:
        cluster.close()


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = cdcctl(list(args))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {"stderr": err})


def changefeed_file(tmp_path: Path, source: str, sink: str, db: str) -> Path:
    path = tmp_path / "columns.toml"
    path.write_text(
        f'changefeed-id = "{CF}"\n'
        f'source-uri = "{source}"\n'
        f'sink-uri = "{sink}&worker-count=2"\n'
        "[filter]\n"
        f'rules = ["{db}.*"]\n'
        "[snapshot]\n"
        'spark-master = "local[1]"\n'
        "chunk-size = 100\n"
        "[[sink.column-selectors]]\n"
        f'matcher = ["{db}.users"]\n'
        'columns = ["*", "!photo", "!secret*"]\n'
        "[[sink.column-masks]]\n"
        f'matcher = ["{db}.users"]\n'
        'columns = ["email"]\n'
        'method = "hash"\n'
        f'salt = "{SALT}"\n'
        "[[sink.column-masks]]\n"
        f'matcher = ["{db}.*"]\n'
        'columns = ["name"]\n'
        'method = "truncate"\n'
        "length = 3\n"
        "[[sink.column-masks]]\n"
        f'matcher = ["{db}.users"]\n'
        'columns = ["bio"]\n'
        'method = "redact"\n'
        'replacement = "[hidden]"\n'
    )
    return path


def test_excluded_and_masked_columns_through_snapshot_binlog_and_ddl(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    rows = ", ".join(
        f"({i}, 'user{i}@example.com', 'Name {i}', x'{i:04x}', 'bio {i}', {i % 90})"
        for i in range(1, 301)
    )
    execute(
        source_db,
        f"CREATE TABLE `{db}`.users (id INT PRIMARY KEY, email VARCHAR(40), "
        "name VARCHAR(80), photo BLOB, bio TEXT, age INT)",
        f"INSERT INTO `{db}`.users VALUES {rows}",
        f"CREATE TABLE `{db}`.other (id INT PRIMARY KEY, name VARCHAR(20))",
        f"INSERT INTO `{db}`.other VALUES (1, 'Bartholomew'), (2, NULL)",
    )
    config = changefeed_file(
        tmp_path,
        source_db.uri_by_reference(tmp_path, "source"),
        sink_db.uri_by_reference(tmp_path, "sink"),
        db,
    )
    try:
        code, out = cli(
            capsys,
            "changefeed",
            "create",
            "--server",
            cluster.api_address(),
            "--config",
            str(config),
        )
        assert code == 0, out
        caught_up(cluster, position_now(source_db), TIMEOUT)
        (create,) = execute(sink_db, f"SHOW CREATE TABLE `{db}`.users")
        assert "photo" not in create[1] and "char(64)" in create[1].lower(), create[1]

        execute(
            source_db,
            f"UPDATE `{db}`.users SET email = CONCAT('new', id, '@x.org'), photo = x'ff', "
            "bio = CONCAT(bio, ' more') WHERE id % 3 = 0",
            f"DELETE FROM `{db}`.users WHERE id % 10 = 0",
            f"INSERT INTO `{db}`.users VALUES (1001, NULL, 'Zed', NULL, NULL, 1)",
            f"ALTER TABLE `{db}`.users MODIFY email VARCHAR(100)",
            f"ALTER TABLE `{db}`.users ADD COLUMN secret_pin VARCHAR(10) DEFAULT NULL",
            f"UPDATE `{db}`.users SET secret_pin = '1234', "
            "email = REPEAT('x', 90) WHERE id % 7 = 0",
            f"UPDATE `{db}`.other SET name = 'Maximilian' WHERE id = 2",
        )
        caught_up(cluster, position_now(source_db), TIMEOUT)

        (email, name, bio) = execute(
            sink_db, f"SELECT email, name, bio FROM `{db}`.users WHERE id = 1"
        )[0]
        assert email == hashlib.sha256(f"{SALT}user1@example.com".encode()).hexdigest()
        assert (name, bio) == ("Nam", "[hidden]")
        assert execute(sink_db, f"SELECT COUNT(*) FROM `{db}`.users WHERE secret_pin IS NOT NULL")[
            0
        ] == (0,)
        code, report = cli(
            capsys,
            *("diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
            *("--filter", f"{db}.*", "--columns-from", str(config)),
        )
        assert code == 0 and report["equal"] is True, report
        # without the rules the same tables differ: the masks are really there
        code, plain = cli(
            capsys,
            *("diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
            *("--filter", f"{db}.*"),
        )
        assert code == 1 and plain["equal"] is False

        # a rename would send the hashed values under a name no mask names: refused
        execute(
            source_db,
            f"ALTER TABLE `{db}`.users CHANGE email mail VARCHAR(100)",
            f"INSERT INTO `{db}`.users (id, mail, name) VALUES (2001, 'leak@example.com', 'L')",
        )

        def failed() -> bool:
            return cluster.status().state is ChangefeedState.FAILED

        cluster.wait(failed, TIMEOUT, "the changefeed to fail at the rename")
        error = cluster.status().error
        assert error is not None and "removed masked or excluded column(s) email" in error.message
        assert "mail" in error.message, error.message
        leaked = execute(sink_db, f"SELECT COUNT(*) FROM `{db}`.users WHERE id = 2001")
        assert leaked == [(0,)]
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")
