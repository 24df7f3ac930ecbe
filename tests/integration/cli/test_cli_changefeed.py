"""Every `cdcctl changefeed` command and `cdcctl capture list` against a real cdc-server."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from cdc.cli.main import main
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration


class Cli:
    """Runs cdcctl in-process; every output is kept for the password check."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.seen: list[str] = []

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        self.seen += [out, err]
        return code, out, err

    def json(self, *argv: str) -> object:
        code, out, err = self(*argv)
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(admin_server, capsys, monkeypatch) -> Cli:
    monkeypatch.setenv("CDC_SERVER", admin_server.address)
    return Cli(capsys)


def _create_flags(cid: str, source_uri: str, rule: str, sink: str = "blackhole://") -> list[str]:
    return [
        "--changefeed-id",
        cid,
        "--source-uri",
        source_uri,
        "--sink-uri",
        sink,
        "--filter-rule",
        rule,
        "--snapshot-mode",
        "never",
    ]


def _wait_for_tables(cli: Cli, cid: str) -> dict:
    deadline = time.monotonic() + 30
    while True:
        data = cli.json("changefeed", "query", "-c", cid)
        if data["tables"] and all(t["capture"] for t in data["tables"]):
            return data
        assert time.monotonic() < deadline, f"the owner did not schedule the table: {data}"
        time.sleep(0.3)


def test_every_changefeed_command(
    cli: Cli, admin_server, source_uri: str, source_table: str, tmp_path: Path
) -> None:
    captures = cli.json("capture", "list")
    assert [(c["id"], c["address"]) for c in captures] == [("admin-1", admin_server.address)]
    code, out, _ = cli("-o", "table", "capture", "list")
    assert code == 0 and "admin-1" in out

    created = cli.json("changefeed", "create", *_create_flags("cf-1", source_uri, source_table))
    assert (created["id"], created["state"]) == ("cf-1", "normal")
    assert created["config"]["source-uri"] == source_uri

    code, _, err = cli("changefeed", "create", *_create_flags("cf-1", source_uri, source_table))
    assert code == 2 and "ALREADY_EXISTS" in err

    listed = cli.json("changefeed", "list")
    assert [(c["id"], c["state"]) for c in listed] == [("cf-1", "normal")]
    code, out, _ = cli("-o", "table", "changefeed", "list")
    assert code == 0 and "cf-1" in out

    queried = _wait_for_tables(cli, "cf-1")
    table = source_table.replace("*", "items")
    assert [(t["table"], t["capture"]) for t in queried["tables"]] == [(table, "admin-1")]
    simple = cli.json("changefeed", "query", "-c", "cf-1", "--simple")
    assert set(simple) == {"id", "state", "checkpoint", "resolved", "error"}

    code, out, err = cli(
        "changefeed", "query", "-c", "cf-1", "--watch", "--count", "2", "--interval", "0.2"
    )
    assert code == 0, err
    assert out.count("changefeed cf-1  state normal") == 2
    assert table in out and "checkpoint" in out

    sink_dir = tmp_path / "files"
    new_flags = _create_flags("cf-1", source_uri, source_table, f"file://{sink_dir}")
    code, _, err = cli("changefeed", "update", *new_flags)
    assert code == 2 and "FAILED_PRECONDITION" in err and "pause it" in err

    assert cli.json("changefeed", "pause", "-c", "cf-1")["state"] == "stopped"
    updated = cli.json("changefeed", "update", *new_flags)
    assert updated["config"]["sink-uri"] == f"file://{sink_dir}"
    assert cli.json("changefeed", "resume", "-c", "cf-1")["state"] == "normal"
    assert cli.json("changefeed", "remove", "-c", "cf-1") == {"id": "cf-1", "removed": True}

    code, _, err = cli("changefeed", "query", "-c", "cf-1")
    assert code == 2 and "NOT_FOUND" in err and "cf-1 does not exist" in err
    assert cli.json("changefeed", "list") == []


def test_create_refuses_bad_input_before_writing(
    cli: Cli, source_uri: str, source_table: str, source_db: MariaDBServer
) -> None:
    code, _, err = cli("changefeed", "create", *_create_flags("cf-2", source_uri, "nodb.*"))
    assert code == 2 and "filter.rules" in err and "match no table" in err

    inline = f"mysql://{source_db.user}:{source_db.password}@127.0.0.1:{source_db.port}/"
    code, _, err = cli("changefeed", "create", *_create_flags("cf-2", inline, source_table))
    assert code == 2 and "inline password" in err and "password-env" in err

    code, _, err = cli("changefeed", "create", *_create_flags("cf-2", "http://x", source_table))
    assert code == 2 and "source-uri" in err

    code, _, err = cli("changefeed", "query", "-c", "cf-2", "--count", "2")
    assert code == 2 and "--count" in err
    assert cli.json("changefeed", "list") == []


def test_server_missing_or_unreachable(cli: Cli, monkeypatch) -> None:
    monkeypatch.delenv("CDC_SERVER")
    code, _, err = cli("changefeed", "list")
    assert code == 2 and "--server" in err
    monkeypatch.delenv("CDC_ETCD", raising=False)
    code, _, err = cli("capture", "list")
    assert code == 2 and "--server" in err
    code, _, err = cli("changefeed", "list", "--server", f"127.0.0.1:{free_port()}")
    assert code == 3 and "cannot reach the cdc-server" in err
    code, _, err = cli("capture", "list", "--server", f"127.0.0.1:{free_port()}")
    assert code == 3


def test_no_password_in_output_or_etcd_unless_stored(
    cli: Cli,
    admin_server,
    source_uri: str,
    sink_uri: str,
    source_table: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
) -> None:
    secrets = (source_db.password, sink_db.password)
    cli.json("changefeed", "create", *_create_flags("by-ref", source_uri, source_table, sink_uri))
    _wait_for_tables(cli, "by-ref")
    cli("changefeed", "query", "-c", "by-ref", "--watch", "--count", "1", "--interval", "0.1")
    cli("-o", "table", "changefeed", "query", "-c", "by-ref")
    cli("changefeed", "list")
    cli("changefeed", "pause", "-c", "by-ref")
    store = admin_server.store
    values = [item.value.decode() for item in store.get_prefix(store.keys.prefix_of())]
    assert any("by-ref" in v for v in values)
    for secret in secrets:
        assert not any(secret in v for v in values)

    # Asked to store: etcd holds the sink password, the output never shows it.
    password = quote(sink_db.password, safe="")
    inline_sink = f"mysql://{sink_db.user}:{password}@127.0.0.1:{sink_db.port}/"
    config = Path(admin_server.log.parent / "stored.toml")
    config.write_text("store-credentials = true\n")
    created = cli.json(
        "changefeed",
        "create",
        "--config",
        str(config),
        *_create_flags("stored", source_uri, source_table, inline_sink),
    )
    assert created["config"]["store-credentials"] is True
    cli("changefeed", "query", "-c", "stored")
    stored = store.get(store.keys.changefeed_info("stored"))
    assert stored is not None and sink_db.password in stored.value.decode()

    for text in cli.seen:
        for secret in secrets:
            assert secret not in text
    log = admin_server.log.read_text()
    for secret in secrets:
        assert secret not in log
