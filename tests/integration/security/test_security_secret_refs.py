"""Password references only to what the operator lends (issue #18), through a real cdc-server.

The server runs with one ``--secrets-dir`` and the default ``CDC_`` prefix. A
changefeed naming any other file (``/etc/hostname``, a way out of the
directory with ``..`` or a symbolic link) or variable (``HOME``, the server's
own etcd password) is refused at create and at update with INVALID_ARGUMENT
naming what is lent, and nothing is written to etcd; a changefeed already
stored with such a reference (by an older server, or one with other flags)
fails when the server resolves it, with the same message, and never connects.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from security_helpers import RunningServer, cdc_server
from testkit import execute

from cdc.changefeed import ChangefeedStore
from cdc.cli.main import main as cdcctl
from cdc.config import load_changefeed_config
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

NOT_LENT = "is not in a directory this cdc-server reads passwords from"


@pytest.fixture
def secrets_dir(tmp_path: Path, source_db: MariaDBServer) -> Path:
    directory = tmp_path / "secrets"
    directory.mkdir()
    (directory / "source.password").write_text(source_db.password + "\n")
    (directory / "escape").symlink_to("/etc/hostname")
    return directory


@pytest.fixture
def server(etcd_server: EtcdServer, tmp_path: Path, secrets_dir: Path) -> Iterator[RunningServer]:
    args = [f"--secrets-dir={secrets_dir}"]
    env = {"CDC_ETCD_PASSWORD": "the-servers-own-etcd-password"}
    with cdc_server(etcd_server.endpoint, tmp_path / "server.log", args, env=env) as running:
        yield running


@pytest.fixture
def table(source_db: MariaDBServer, source_database: str) -> str:
    execute(source_db, f"CREATE TABLE `{source_database}`.t (id INT PRIMARY KEY)")
    return source_database


def _source(db: MariaDBServer, ref: str) -> str:
    return f"mysql://{db.user}@127.0.0.1:{db.port}/?{ref}"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _etcd(server: RunningServer) -> dict[str, bytes]:
    store = server.store
    return {item.key: item.value for item in store.get_prefix(store.keys.prefix_of())}


def _changefeed_keys(server: RunningServer) -> list[str]:
    return [key for key in _etcd(server) if "/changefeed/" in key]


@pytest.mark.parametrize(
    ("uri_field", "ref", "message"),
    [
        ("source-uri", "password-file=/etc/hostname", f"/etc/hostname {NOT_LENT}"),
        ("source-uri", "password-file={secrets}/../outside", NOT_LENT),
        ("source-uri", "password-file={secrets}/escape", "(that is /etc/hostname)"),
        ("sink-uri", "password-file=/etc/hostname", f"/etc/hostname {NOT_LENT}"),
        ("source-uri", "password-env=HOME", "their names start with CDC_"),
        ("source-uri", "password-env=CDC_ETCD_PASSWORD", "one of this cdc-server's own settings"),
    ],
)
def test_a_reference_the_server_does_not_lend_is_refused_at_create(
    server: RunningServer,
    secrets_dir: Path,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    table: str,
    capsys: pytest.CaptureFixture[str],
    uri_field: str,
    ref: str,
    message: str,
) -> None:
    ref = ref.format(secrets=secrets_dir)
    allowed = f"password-file={secrets_dir}/source.password"
    source = _source(source_db, ref if uri_field == "source-uri" else allowed)
    sink = (
        f"mysql://{sink_db.user}@127.0.0.1:{sink_db.port}/?{ref}"
        if uri_field == "sink-uri"
        else "blackhole://"
    )
    before = _etcd(server)
    code, out, err = _cli(
        capsys,
        "changefeed", "create", "--server", server.address, "--changefeed-id", "refs",
        "--source-uri", source, "--sink-uri", sink, "--filter-rule", f"{table}.*",
        "--snapshot-mode", "never",
    )  # fmt: skip
    assert (code, out) == (2, ""), err
    kind = ref.split("=", 1)[0]
    assert f"INVALID_ARGUMENT: {uri_field}.{kind}: " in err and message in err
    if kind == "password-file":
        assert f"reads them in {secrets_dir}" in err and "--secrets-dir DIR" in err
    assert "the-servers-own-etcd-password" not in err
    assert _etcd(server) == before


def test_an_update_to_a_reference_not_lent_is_refused_and_keeps_the_config(
    server: RunningServer,
    secrets_dir: Path,
    source_db: MariaDBServer,
    table: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    on = ("--server", server.address)
    common = ("--sink-uri", "blackhole://", "--filter-rule", f"{table}.*", "--snapshot-mode")
    allowed = _source(source_db, f"password-file={secrets_dir}/source.password")
    code, _, err = _cli(
        capsys, "changefeed", "create", *on, "--changefeed-id", "upd",
        "--source-uri", allowed, *common, "never",
    )  # fmt: skip
    assert code == 0, err
    assert _cli(capsys, "changefeed", "pause", "-c", "upd", *on)[0] == 0
    info_before = _etcd(server)[str(server.store.keys.changefeed_info("upd"))]
    code, _, err = _cli(
        capsys, "changefeed", "update", *on, "--changefeed-id", "upd",
        "--source-uri", _source(source_db, "password-file=/etc/hostname"), *common, "never",
    )  # fmt: skip
    assert code == 2
    assert f"INVALID_ARGUMENT: source-uri.password-file: /etc/hostname {NOT_LENT}" in err
    assert _etcd(server)[str(server.store.keys.changefeed_info("upd"))] == info_before
    code, out, err = _cli(capsys, "changefeed", "query", "-c", "upd", *on)
    assert code == 0 and "source.password" in json.loads(out)["config"]["source-uri"], err


def test_a_stored_reference_no_longer_lent_fails_the_changefeed_closed(
    server: RunningServer,
    source_db: MariaDBServer,
    table: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Written straight to etcd (as a server with other flags would have): the server that
    runs it refuses to read the file when it connects, and says why."""
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": "stale",
            "source_uri": _source(source_db, "password-file=/etc/hostname"),
            "sink_uri": "blackhole://",
            "rules": [f"{table}.*"],
            "snapshot_mode": "never",
        },
    )
    ChangefeedStore(server.store).create(config)
    on = server.address
    deadline = time.monotonic() + 60
    while True:
        code, out, err = _cli(capsys, "changefeed", "query", "-c", "stale", "--server", on)
        assert code == 0, err
        shown = json.loads(out)
        if shown["state"] == "failed":
            break
        assert time.monotonic() < deadline, f"the changefeed did not fail: {shown}"
        time.sleep(0.2)
    assert f"source-uri.password-file: /etc/hostname {NOT_LENT}" in shown["error"]
    assert NOT_LENT in server.log.read_text()
