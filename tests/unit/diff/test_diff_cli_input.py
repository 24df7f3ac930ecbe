"""`cdcctl diff` with bad input: exit 2 before any connection; an unreachable server: exit 3."""

from __future__ import annotations

import pytest

from cdc.cli.main import main
from cdc.diff import DiffInputError, check
from cdc.filter.table_filter import TableFilter
from cdc.playground.ports import free_port
from cdc.uri.mysql import parse_source_uri

SECRET = "s3cr3t-pw"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    return code, out, err


def uri(port: int = 3306) -> str:
    return f"mysql://u:{SECRET}@127.0.0.1:{port}/"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--source-uri", f"mysql://u:{SECRET}@host:99999/", "--target-uri", uri()], "port"),
        (["--source-uri", uri(), "--target-uri", "file:///tmp/out"], "not a database"),
        (["--source-uri", uri(), "--target-uri", f"postgres://u:{SECRET}@h/"], "scheme"),
        (["--source-uri", uri(), "--target-uri", uri(), "--filter", "db.t[a"], "filter[0]"),
        (
            ["--source-uri", uri(), "--target-uri", uri(), "--fix-sql", "/no/such/dir/f.sql"],
            "fix-sql",
        ),
    ],
)
def test_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "diff", *argv)
    assert code == 2
    assert out == ""
    assert message in err


@pytest.mark.parametrize(
    "extra", [["--chunk-size", "0"], ["--threads", "0"], ["--threads", "65"], ["--chunk-size", "x"]]
)
def test_bad_numbers_are_usage_errors(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["diff", "--source-uri", uri(), "--target-uri", uri(), *extra])
    assert stop.value.code == 2
    assert "--" in capsys.readouterr().err


def test_check_refuses_bad_sizes_before_connecting() -> None:
    closed = parse_source_uri(uri(free_port()))
    with pytest.raises(DiffInputError, match="threads must be"):
        check(closed, closed, TableFilter.parse(["*.*"]), threads=0)
    with pytest.raises(DiffInputError, match="chunk_size must be"):
        check(closed, closed, TableFilter.parse(["*.*"]), chunk_size=-1)


def test_an_unreachable_server_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there
    code, out, err = run(capsys, "diff", "--source-uri", uri(port), "--target-uri", uri(port))
    assert code == 3
    assert out == ""
    assert "cannot connect to the source" in err and "******" in err
