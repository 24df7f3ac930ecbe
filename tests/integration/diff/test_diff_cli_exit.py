"""`cdcctl diff` against the real servers: exit codes, JSON and table output, passwords masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cdc.cli.main import main

pytestmark = pytest.mark.integration


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def uris(pair: Any) -> list[str]:
    return ["--source-uri", pair.source_server.uri, "--target-uri", pair.target_server.uri]


def assert_masked(pair: Any, *texts: str) -> None:
    for secret in (pair.source_server.password, pair.target_server.password):
        for text in texts:
            assert secret not in text
            assert quote(secret, safe="") not in text


def test_equal_tables_exit_0(pair: Any, capsys: pytest.CaptureFixture[str]) -> None:
    pair.both("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)", "INSERT INTO t VALUES (1, 'x')")
    code, out, err = run(capsys, "diff", *uris(pair), "--filter", f"{pair.db}.*")
    assert code == 0, err
    data = json.loads(out)
    assert data["equal"] is True
    assert data["summary"]["rows_checked"] == 1
    assert "******" in data["source"] and "******" in data["target"]
    assert_masked(pair, out, err)


def test_differences_exit_1_with_the_rows_and_fix_sql(
    pair: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pair.both("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
    pair.source("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    pair.target("INSERT INTO t VALUES (1, 'X'), (3, 'z')")
    fix = tmp_path / "fix.sql"
    code, out, err = run(
        capsys,
        "diff",
        *uris(pair),
        "--filter",
        f"{pair.db}.*",
        "--chunk-size",
        "1",
        "--threads",
        "3",
        "--fix-sql",
        str(fix),
    )
    assert code == 1, err
    data = json.loads(out)
    assert data["equal"] is False
    (table,) = data["tables"]
    assert table["differences"] == [
        {
            "kind": "different",
            "key": {"id": 1},
            "columns": ["v"],
            "source": {"v": "x"},
            "target": {"v": "X"},
        },
        {"kind": "missing-in-target", "key": {"id": 2}},
        {"kind": "extra-in-target", "key": {"id": 3}},
    ]
    assert data["fix_sql"] == {"path": str(fix), "statements": 3}
    assert "REPLACE INTO" in fix.read_text()
    assert_masked(pair, out, err, fix.read_text())


def test_table_output(
    pair: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # rich shortens cells to the terminal width
    pair.source("CREATE TABLE only_here (id INT PRIMARY KEY)")
    pair.both("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (7)")
    pair.target("DELETE FROM t")
    code, out, err = run(capsys, "-o", "table", "diff", *uris(pair), "--filter", f"{pair.db}.*")
    assert code == 1, err
    assert "missing-in-target" in out and "only_here" in out and '{"id": 7}' in out
    code, out2, _ = run(
        capsys, "diff", *uris(pair), "--filter", f"{pair.db}.*", "--output", "table"
    )
    assert code == 1 and "missing-in-target" in out2
    assert_masked(pair, out, err, out2)


def test_filter_matching_nothing_exits_2(pair: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diff", *uris(pair), "--filter", f"{pair.db}.none")
    assert code == 2
    assert out == ""
    assert "matches no table on the source" in err
    assert_masked(pair, out, err)


def test_wrong_password_exits_2_masked(pair: Any, capsys: pytest.CaptureFixture[str]) -> None:
    server = pair.source_server
    bad = f"mysql://{server.user}:not-{quote(server.password)}@{server.host}:{server.port}/"
    code, out, err = run(
        capsys,
        "diff",
        "--source-uri",
        bad,
        "--target-uri",
        pair.target_server.uri,
        "--filter",
        f"{pair.db}.*",
    )
    assert code == 2
    assert "check the user and password" in err and "******" in err
    assert "not-" not in err
    assert_masked(pair, out, err)
