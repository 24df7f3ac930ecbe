"""`cdcctl changefeed ddl replace` refuses a --sql that is not one DDL statement before
any request: one line, exit 2 (a replacement may run twice after an owner failover)."""

from __future__ import annotations

import pytest

from cdc.cli import exitcodes
from cdc.cli.main import main as cdcctl


@pytest.mark.parametrize(
    "sql", ["", "DELETE FROM t", "ALTER TABLE t ADD c INT; DELETE FROM t", "SELECT 1"]
)
def test_a_replacement_that_is_not_one_ddl_statement_is_refused_here(
    sql: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["changefeed", "ddl", "replace", "-c", "cf", "--position", "b.000001:4"]
    # no server listens there: the refusal comes before any request
    code = cdcctl([*argv, "--sql", sql, "--server", "127.0.0.1:9"])
    out, err = capsys.readouterr()
    assert code == exitcodes.BAD_INPUT == 2
    assert (
        out == ""
        and err.startswith("cdcctl: error: --sql: ")
        and len(err.strip().splitlines()) == 1
    )
