"""The fix SQL, applied to the target by the mariadb client, leaves no difference behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cdc.diff import DiffKind, write_fix_sql

pytestmark = pytest.mark.integration

ROW = (
    "'text', 1.5, 0.1e0, 12.50, '2024-01-01 10:00:00.123456', '2024-01-01 10:00:00', "
    "'2024-02-29', '-12:30:00.25', X'00FF27', X'0102', b'101', 'é', 'x,z', "
    "'{\"a\": \"it''s\"}', 'a''quote\\\\back\\nline 😀', 'café'"
)


def apply_with_client(server: Any, db: str, path: Path) -> None:
    """Runs the file through the real command-line client, as an operator would."""
    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client, "the mariadb client is installed with mariadb-server"
    env = {**os.environ, "MYSQL_PWD": server.password}
    with path.open("rb") as sql:
        done = subprocess.run(
            [client, "-h", server.host, "-P", str(server.port), "-u", server.user, db],
            stdin=sql,
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()


def plant(pair: Any) -> None:
    pair.both(
        "CREATE TABLE t_types (id INT PRIMARY KEY, v_text VARCHAR(20), v_float FLOAT, "
        "v_double DOUBLE, v_dec DECIMAL(10,2), v_dt DATETIME(6), v_ts TIMESTAMP NULL DEFAULT "
        "NULL, v_date DATE, v_time TIME(2), v_blob BLOB, v_bin BINARY(4), v_bit BIT(12), "
        "v_enum ENUM('a', 'é'), v_set SET('x', 'y', 'z'), v_json JSON, v_odd TEXT, "
        "v_latin VARCHAR(10) CHARACTER SET latin1, "
        "v_gen INT AS (id * 2) VIRTUAL) DEFAULT CHARSET utf8mb4",
    )
    columns = (
        "id, v_text, v_float, v_double, v_dec, v_dt, v_ts, v_date, v_time, v_blob, v_bin, "
        "v_bit, v_enum, v_set, v_json, v_odd, v_latin"
    )
    values = ", ".join(f"({i}, {ROW})" for i in range(1, 11))
    pair.source(
        "SET SESSION sql_mode = ''",  # for the invalid ENUM value '' (index 0)
        f"INSERT INTO t_types ({columns}) VALUES {values}",
        f"INSERT INTO t_types ({columns}) VALUES (11, '', NULL, -1e300, -0.5, "
        "'0000-00-00 00:00:00', '1970-01-01 00:00:01', '0000-00-00', '-838:59:59', X'', "
        "X'00', 0, '', '', 'null', '', '')",
        "INSERT INTO t_types (id) VALUES (12)",
    )
    pair.target(
        f"INSERT INTO t_types ({columns}) VALUES {values}",
        "UPDATE t_types SET v_text = '' WHERE id = 1",
        "UPDATE t_types SET v_float = 2.5, v_double = 0.3, v_dec = 1 WHERE id = 2",
        "UPDATE t_types SET v_dt = '2024-01-01 10:00:00.123457', v_ts = NULL WHERE id = 3",
        "UPDATE t_types SET v_blob = X'00FE', v_bin = X'0103', v_bit = 0 WHERE id = 4",
        "UPDATE t_types SET v_enum = 'a', v_set = 'y', v_json = '[]' WHERE id = 5",
        "UPDATE t_types SET v_odd = 'plain', v_latin = 'cafe', v_time = '00:00:00' WHERE id = 6",
        "UPDATE t_types SET v_text = 'TEXT ' WHERE id = 7",
        "DELETE FROM t_types WHERE id = 8",
        f"INSERT INTO t_types ({columns}) VALUES (13, {ROW})",
    )
    pair.both(
        "CREATE TABLE t_key (a VARCHAR(20) NOT NULL, b INT NOT NULL, v VARCHAR(5), "
        "PRIMARY KEY (a, b)) DEFAULT CHARSET utf8mb4 COLLATE utf8mb4_general_ci",
        "INSERT INTO t_key VALUES ('Case', 1, 'x'), ('pad', 2, 'y'), ('it''s', 3, NULL)",
    )
    pair.target(
        "UPDATE t_key SET a = 'case' WHERE b = 1",
        "UPDATE t_key SET a = 'pad ' WHERE b = 2",
        "UPDATE t_key SET v = '' WHERE b = 3",
        "INSERT INTO t_key VALUES ('gone', 4, 'z')",
    )
    pair.both("CREATE TABLE t_nokey (a INT, b VARCHAR(10), f FLOAT, d DATETIME)")
    pair.source(
        "INSERT INTO t_nokey VALUES (1, 'x', 0.1, '2024-01-01'), (1, 'x', 0.1, '2024-01-01'), "
        "(3, NULL, NULL, NULL)"
    )
    pair.target(
        "INSERT INTO t_nokey VALUES (1, 'x', 0.1, '2024-01-01'), (2, 'y', 1.5, NULL), "
        "(3, '', NULL, NULL), (2, 'y', 1.5, NULL)"
    )
    pair.both(
        "CREATE TABLE t_parent (id INT PRIMARY KEY, v INT) ENGINE InnoDB",
        "CREATE TABLE t_child (id INT PRIMARY KEY, parent INT, "
        "FOREIGN KEY (parent) REFERENCES t_parent (id) ON DELETE CASCADE) ENGINE InnoDB",
        "INSERT INTO t_parent VALUES (1, 1)",
        "INSERT INTO t_child VALUES (1, 1)",
    )
    pair.target("UPDATE t_parent SET v = 2")


def test_fix_sql_makes_the_target_equal(pair: Any, tmp_path: Path) -> None:
    plant(pair)
    before = pair.check(chunk_size=4)
    assert not before.equal
    kinds = {t.table.table: sorted(r.kind.value for r in t.rows) for t in before.tables}
    assert kinds == {
        "t_types": ["different"] * 7
        + ["extra-in-target", "missing-in-target"] * 1
        + ["missing-in-target"] * 2,
        "t_key": ["different"] * 3 + ["extra-in-target"],
        "t_nokey": ["extra-in-target"] * 3 + ["missing-in-target"] * 2,
        "t_parent": ["different"],
        "t_child": [],
    }
    fix = tmp_path / "fix.sql"
    statements = write_fix_sql(before, fix)
    assert statements == sum(len(t.rows) for t in before.tables)
    text = fix.read_text()
    assert "v_gen" not in text  # generated columns are the server's to compute
    assert "REPLACE INTO" in text and "DELETE FROM" in text and "LIMIT 1" in text

    apply_with_client(pair.target_server, pair.db, fix)

    after = pair.check(chunk_size=4)
    assert after.equal, [t.to_dict() for t in after.tables if not t.equal]
    # REPLACE on the parent did not cascade into the child
    child = pair.of(after, "t_child")
    assert child.rows_target == 1


def test_fix_sql_of_an_equal_pair_has_no_statements(pair: Any, tmp_path: Path) -> None:
    pair.both("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    report = pair.check()
    assert report.equal
    assert write_fix_sql(report, tmp_path / "fix.sql") == 0
    apply_with_client(pair.target_server, pair.db, tmp_path / "fix.sql")


def test_only_the_missing_kind_is_written_for_a_table_missing_columns(
    pair: Any, tmp_path: Path
) -> None:
    pair.source("CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    pair.target("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    pair.source("INSERT INTO t VALUES (1, 1, 1), (2, 2, 2)")
    pair.target("INSERT INTO t VALUES (1, 1)")
    report = pair.check()
    table = pair.of(report, "t")
    assert [(r.kind, r.key) for r in table.rows] == [(DiffKind.MISSING_IN_TARGET, (2,))]
    write_fix_sql(report, tmp_path / "fix.sql")
    text = (tmp_path / "fix.sql").read_text()
    assert "column(s) b missing on the target" in text
    apply_with_client(pair.target_server, pair.db, tmp_path / "fix.sql")
    after = pair.of(pair.check(), "t")
    assert after.rows == () and after.missing_columns == ("b",)
