"""Changefeeds that could never run are refused at create and update (issue 13).

A sink that cannot run as configured (``pull://`` with a snapshot: it takes
none yet), a file protocol the file sink does not write (``parquet``), and an
event filter whose value expression names a column a matched table lacks:
each used to be accepted and then fail and retry forever. Now cdcctl exits 2
with one line naming the field and the reason, the server answers
INVALID_ARGUMENT to any client, and nothing is written. docs/bad-input.md
lists the cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from badinput_helpers import Cli
from testkit import execute

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.config import ChangefeedConfig
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never")


def refused(result: Any, *words: str) -> str:
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    assert result.err.startswith("cdcctl: error: ") and result.err.count("\n") == 1, result.err
    for word in words:
        assert word in result.err, (word, result.err)
    return result.err


def grpc_create(address: str, tree: dict[str, Any]) -> grpc.RpcError:
    """CreateChangefeed straight through the API (no cdcctl parsing); the error it raised."""
    request = admin_pb2.CreateChangefeedRequest(
        config=admin_pb2.ChangefeedConfigJson(json=json.dumps(tree))
    )
    with grpc.insecure_channel(address) as channel, pytest.raises(grpc.RpcError) as info:
        admin_pb2_grpc.ChangefeedServiceStub(channel).CreateChangefeed(request, timeout=60)
    return info.value


@pytest.fixture
def table(source_db: MariaDBServer, db: str) -> str:
    execute(source_db, f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, v INT)")
    return f"{db}.items"


def test_sinks_that_cannot_run(
    cli: Cli, server, source_uri: str, table: str, tmp_path: Path
) -> None:
    rule = ("--filter-rule", table, *NEVER)
    refused(
        cli.create("cf", source_uri, "pull://", "--filter-rule", table),
        "snapshot.mode: pull:// sinks take no snapshot yet",
        'set [snapshot] mode = "never" (cdcctl: --snapshot-mode never)',
    )
    refused(
        cli.create("cf", source_uri, f"file://{tmp_path}/out?protocol=parquet", *rule),
        "sink-uri.protocol: the file sink does not write protocol=parquet yet",
        "supported: canal-json, csv",
    )
    config_file = tmp_path / "changefeed.toml"
    config_file.write_text('[sink]\nprotocol = "parquet"\n')
    refused(
        cli.create("cf", source_uri, f"file://{tmp_path}/out", "--config", str(config_file), *rule),
        "sink.protocol: the file sink does not write protocol=parquet yet",
    )
    assert cli.list_ids() == []

    # A client that skips cdcctl's parsing gets the same answer from the server.
    config = ChangefeedConfig(
        "cf", source_uri, "blackhole://", rules=(table,), snapshot_mode="never"
    )
    for sink, mode, words in (
        ("pull://", "initial", "snapshot.mode: pull:// sinks take no snapshot yet"),
        (
            f"file://{tmp_path}/out?protocol=parquet",
            "never",
            "sink-uri.protocol: the file sink does not",
        ),
    ):
        tree = config.to_dict(mask=False)
        tree["sink-uri"] = sink
        tree["snapshot"]["mode"] = mode
        error = grpc_create(server.address, tree)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert error.details().startswith(words), error.details()
    assert cli.list_ids() == []

    # update replaces the config of a paused changefeed: the same refusal, nothing changed
    created = cli.create("cf", source_uri, "blackhole://", *rule)
    assert created.json()["state"] == "normal"
    assert cli("changefeed", "pause", "-c", "cf").code == 0
    update = ("changefeed", "update", "--changefeed-id", "cf", "--source-uri", source_uri)
    refused(
        cli(*update, "--sink-uri", "pull://", "--filter-rule", table),
        "snapshot.mode: pull:// sinks take no snapshot yet",
    )
    refused(
        cli(*update, "--sink-uri", f"file://{tmp_path}/out?protocol=parquet", *rule),
        "sink-uri.protocol: the file sink does not write protocol=parquet yet",
    )
    assert cli.query("cf")["config"]["sink-uri"] == "blackhole://"


def test_event_filter_expression_on_a_missing_column(
    cli: Cli, server, source_uri: str, source_db: MariaDBServer, db: str, tmp_path: Path
) -> None:
    execute(source_db, f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, v INT)")
    execute(source_db, f"CREATE TABLE `{db}`.prices (id INT PRIMARY KEY, price INT)")

    def create(matcher: str) -> Any:
        path = tmp_path / "changefeed.toml"
        path.write_text(
            f'[[filter.event-filters]]\nmatcher = ["{matcher}"]\n'
            'ignore-insert-value-expr = "price > 100"\n'
        )
        return cli.create(
            "cf",
            source_uri,
            "blackhole://",
            "--config",
            str(path),
            "--filter-rule",
            f"{db}.*",
            *NEVER,
        )

    # the rule matches both tables; items has no column price
    err = refused(
        create(f"{db}.*"),
        "INVALID_ARGUMENT: filter.event-filters[0].ignore-insert-value-expr",
        f"table {db}.items",
        "unknown column 'price'",
        "id, v",
    )
    assert "prices" not in err
    assert cli.list_ids() == []
    # a rule matching only the table that has the column is accepted
    assert create(f"{db}.prices").json()["state"] == "normal"
