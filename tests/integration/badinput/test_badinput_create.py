"""Bad input refused by `cdcctl changefeed create`, before anything is written (issue #9).

Each case runs the command a user would type against a real cdc-server and
checks the exit code (2 bad input, 3 unreachable; README "Exit codes"), that
stderr names the problem and the fix in one line (no traceback), and that no
changefeed was created. docs/bad-input.md lists every case.
"""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from badinput_helpers import Cli, purge_binlogs_before_newest
from testkit import execute, position_now

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.config import ChangefeedConfig
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never")


def refused(cli: Cli, result, *words: str, code: int = 2) -> str:
    """Asserts the command failed with ``code``, one clear line naming ``words``, no changefeed."""
    assert result.code == code, (result.code, result.out, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    assert result.err.startswith("cdcctl: error: ") and result.err.count("\n") == 1, result.err
    for word in words:
        assert word in result.err, (word, result.err)
    assert cli.list_ids() == []
    return result.err


@pytest.fixture
def table(source_db: MariaDBServer, db: str) -> str:
    """``<db>.items`` on the source (with a primary key): a table a changefeed may capture."""
    execute(source_db, f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, v INT)")
    return f"{db}.items"


def test_malformed_uri(cli: Cli, source_uri: str, sink_uri: str, table: str) -> None:
    rule = ("--filter-rule", table, *NEVER)
    refused(
        cli,
        cli.create("cf", "http://db:3306/", sink_uri, *rule),
        "source-uri: unsupported scheme 'http://'",
        "supported: mysql://, mariadb://",
    )
    refused(
        cli,
        cli.create("cf", source_uri.replace("127.0.0.1:", "127.0.0.1:99999"), sink_uri, *rule),
        "source-uri: port",
        "out of range",
    )
    refused(
        cli,
        cli.create("cf", source_uri, "pulsar://broker:6650/", *rule),
        "sink-uri: unsupported scheme 'pulsar://'",
        "blackhole://",
    )


def test_sink_uri_with_unknown_parameter(
    cli: Cli, server, source_uri: str, sink_uri: str, table: str, tmp_path: Path
) -> None:
    rule = ("--filter-rule", table, *NEVER)
    refused(
        cli,
        cli.create("cf", source_uri, sink_uri + "&worker-cnt=4", *rule),
        "sink-uri.worker-cnt: unknown parameter 'worker-cnt'",
        "did you mean 'worker-count'?",
    )
    refused(
        cli,
        cli.create("cf", source_uri, f"file://{tmp_path}/out?protocl=csv", *rule),
        "sink-uri.protocl: unknown parameter",
        "did you mean 'protocol'?",
    )
    refused(
        cli,
        cli.create("cf", source_uri, "blackhole://?worker-count=4", *rule),
        "sink-uri.worker-count: unknown parameter",
        "this URI takes no parameters",
    )
    # A client that skips cdcctl's own parsing gets the same answer from the server.
    config = ChangefeedConfig("cf", source_uri, sink_uri, rules=(table,), snapshot_mode="never")
    tree = config.to_dict(mask=False)
    tree["sink-uri"] += "&worker-cnt=4"
    request = admin_pb2.CreateChangefeedRequest(
        config=admin_pb2.ChangefeedConfigJson(json=json.dumps(tree))
    )
    with grpc.insecure_channel(server.address) as channel, pytest.raises(grpc.RpcError) as info:
        admin_pb2_grpc.ChangefeedServiceStub(channel).CreateChangefeed(request, timeout=60)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("sink-uri.worker-cnt: unknown parameter")
    assert cli.list_ids() == []


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        (
            'changefeed-id = "cf"\n[filter\nrules = ["a.*"]\n',
            ("TOML syntax error", "line 2"),
        ),
        (
            '[filter]\nrulez = ["a.*"]\n',
            ("filter.rulez: unknown key 'rulez'", "did you mean 'rules'?"),
        ),
        (
            '[snapshot]\nchunk-size = "big"\n',
            ("snapshot.chunk-size: expected an integer", "'big'"),
        ),
        (
            '[snapshot]\nmode = "sometimes"\n',
            ("snapshot.mode: unknown snapshot mode 'sometimes'", "allowed: initial, never"),
        ),
    ],
    ids=["syntax", "unknown-key", "wrong-type", "bad-value"],
)
def test_malformed_config_file(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    table: str,
    tmp_path: Path,
    toml: str,
    words: tuple[str, ...],
) -> None:
    path = tmp_path / "changefeed.toml"
    path.write_text(toml)
    result = cli.create("cf", source_uri, sink_uri, "--config", str(path), "--filter-rule", table)
    refused(cli, result, *words)


def test_unreachable_source_sink_and_server(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    table: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
) -> None:
    rule = ("--filter-rule", table, *NEVER)
    dead = str(free_port())
    err = refused(
        cli,
        cli.create("cf", source_uri.replace(str(source_db.port), dead), sink_uri, *rule),
        "FAILED_PRECONDITION: source-uri: cannot connect to the source",
        f"127.0.0.1:{dead}",
        "check that the server runs and that host and port are right",
    )
    assert source_db.password not in err
    err = refused(
        cli,
        cli.create("cf", source_uri, sink_uri.replace(str(sink_db.port), dead), *rule),
        "FAILED_PRECONDITION: sink-uri: cannot connect to the sink",
        "check that the server runs",
    )
    assert sink_db.password not in err
    result = cli("changefeed", "list", "--server", f"127.0.0.1:{dead}")
    assert result.code == 3 and "Traceback" not in result.err
    assert f"cannot reach the cdc-server at 127.0.0.1:{dead}" in result.err


@pytest.mark.parametrize(
    ("variable", "value", "need"),
    [("binlog_format", "STATEMENT", "ROW"), ("binlog_row_image", "MINIMAL", "FULL")],
)
def test_source_without_row_binlog(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    table: str,
    source_db: MariaDBServer,
    variable: str,
    value: str,
    need: str,
) -> None:
    execute(source_db, f"SET GLOBAL {variable} = '{value}'")
    try:
        result = cli.create("cf", source_uri, sink_uri, "--filter-rule", table, *NEVER)
    finally:
        execute(source_db, f"SET GLOBAL {variable} = '{need}'")
    refused(
        cli,
        result,
        "FAILED_PRECONDITION: source-uri: the source's binlog cannot be captured",
        f"{variable}={value} (need {need})",
        "Set in the server config: log_bin=ON binlog_format=ROW binlog_row_image=FULL",
    )


def test_table_without_key(
    cli: Cli, source_uri: str, sink_uri: str, source_db: MariaDBServer, db: str
) -> None:
    execute(source_db, f"CREATE TABLE `{db}`.nokey (a INT, b INT, UNIQUE KEY (a))")
    table = f"{db}.nokey"
    # The MySQL sink writes by key: no snapshot setting can help.
    refused(
        cli,
        cli.create("cf", source_uri, sink_uri, "--filter-rule", table, *NEVER),
        f"FAILED_PRECONDITION: filter.rules: table {table} has no primary key",
        "add a primary key on the source",
        f"'!{table}'",
    )
    # Another sink can take it, but its snapshot needs a column to split by.
    refused(
        cli,
        cli.create("cf", source_uri, "blackhole://", "--filter-rule", table),
        f"snapshot.chunk-key-columns: table {table} has no primary key",
        f'chunk-key-columns = {{ "{table}" = "<column>" }}',
    )
    created = cli.create("cf", source_uri, "blackhole://", "--filter-rule", table, *NEVER)
    assert created.json()["state"] == "normal"


def test_unsupported_column_type(
    cli: Cli, source_uri: str, sink_uri: str, source_db: MariaDBServer, db: str
) -> None:
    execute(source_db, f"CREATE TABLE `{db}`.hosts (id INT PRIMARY KEY, ip INET6)")
    refused(
        cli,
        cli.create("cf", source_uri, sink_uri, "--filter-rule", f"{db}.*", *NEVER),
        f"FAILED_PRECONDITION: filter.rules: table {db}.hosts has column 'ip' of type inet6",
        "cannot be captured",
        f"'!{db}.hosts'",
    )


def test_purged_start_position(
    cli: Cli, source_uri: str, sink_uri: str, table: str, source_db: MariaDBServer
) -> None:
    old = str(position_now(source_db)).split()[0]
    kept = purge_binlogs_before_newest(source_db)
    refused(
        cli,
        cli.create("cf", source_uri, sink_uri, "--filter-rule", table, *NEVER, "--start-pos", old),
        f"FAILED_PRECONDITION: start-position: start position {old} is not on the source",
        f"it keeps binlog files {kept} .. {kept}",
        "start a new changefeed with snapshot mode 'initial'",
    )
