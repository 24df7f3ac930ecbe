"""Column selectors and masks that cannot apply are refused at create, and `cdcctl diff
--columns-from` refuses a file it cannot use (issue #20 item 6; docs/bad-input.md).

Each refusal is one line naming the rule, the table and the column, exit 2, and nothing
is created.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput_helpers import Cli
from test_badinput_cannot_run import refused
from testkit import execute

from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never")


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "columns.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("rules", "words"),
    [
        (
            '[[sink.column-selectors]]\nmatcher = ["{db}.users"]\ncolumns = ["*", "!id"]\n',
            (
                "INVALID_ARGUMENT: sink.column-selectors: table {db}.users: key column 'id' "
                "cannot be excluded",
                "idempotent writes by key",
            ),
        ),
        (
            '[[sink.column-masks]]\nmatcher = ["{db}.users"]\ncolumns = ["age"]\nmethod = "hash"\n',
            ("sink.column-masks: table {db}.users: column 'age' (int(11)) is not text",),
        ),
        (
            '[[sink.column-masks]]\nmatcher = ["{db}.*"]\ncolumns = ["emial"]\nmethod = "redact"\n',
            ("table {db}.users has no column 'emial'", "its columns: id, email, age"),
        ),
        (
            '[[sink.column-masks]]\nmatcher = ["{db}.users"]\ncolumns = ["email"]\n'
            'method = "blur"\n',
            ("sink.column-masks[0].method: unknown mask method 'blur'",),
        ),
    ],
)
def test_column_rules_that_cannot_apply_are_refused_at_create(
    cli: Cli,
    server: object,
    source_uri: str,
    source_db: MariaDBServer,
    db: str,
    tmp_path: Path,
    rules: str,
    words: tuple[str, ...],
) -> None:
    execute(
        source_db,
        f"CREATE TABLE `{db}`.users (id INT PRIMARY KEY, email VARCHAR(40), age INT)",
    )
    path = _file(tmp_path, rules.format(db=db))
    result = cli.create(
        "cf", source_uri, "blackhole://", "--config", str(path), "--filter-rule", f"{db}.*", *NEVER
    )
    refused(result, *(w.format(db=db) for w in words))
    assert cli.list_ids() == []


def test_diff_refuses_a_columns_file_it_cannot_use(
    cli: Cli, source_db: MariaDBServer, db: str, tmp_path: Path
) -> None:
    execute(
        source_db,
        f"CREATE TABLE `{db}`.users (id INT PRIMARY KEY, email VARCHAR(40), age INT)",
    )
    diff = ("diff", "--source-uri", source_db.uri, "--target-uri", source_db.uri)
    refused(
        cli(*diff, "--columns-from", str(tmp_path / "missing.toml")),
        "columns-from: cannot read",
    )
    refused(
        cli(*diff, "--columns-from", str(_file(tmp_path, "[[sink.column-masks]\n"))),
        "columns-from:",
        "TOML syntax error",
    )
    bad = _file(
        tmp_path,
        f'[[sink.column-masks]]\nmatcher = ["{db}.users"]\ncolumns = ["age"]\nmethod = "hash"\n',
    )
    refused(
        cli(*diff, "--filter", f"{db}.*", "--columns-from", str(bad)),
        "--columns-from: sink.column-masks: table",
        "is not text",
    )
