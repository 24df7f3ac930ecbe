"""The admin and the read-only token against a real cdc-server (issue #18, capture.access).

The read-only token lists and queries; it cannot create, update, pause,
resume or remove (PERMISSION_DENIED, cdcctl exit 4, nothing changed). The
admin token can. Every refusal is logged with its method, never a token.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from security_helpers import RunningServer, cdc_server, run_server
from testkit import execute

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

ADMIN = f"admin-{secrets.token_hex(12)}"
READ = f"read-{secrets.token_hex(12)}"
PW_ENV = "CDC_ROLES_SOURCE_PW"


@pytest.fixture
def tokens(tmp_path: Path) -> dict[str, Path]:
    files = {"admin": tmp_path / "admin", "read": tmp_path / "read"}
    files["admin"].write_text(ADMIN + "\n")
    files["read"].write_text(READ + "\n")
    return files


@pytest.fixture
def server(
    etcd_server: EtcdServer, source_db: MariaDBServer, tokens: dict[str, Path], tmp_path: Path
) -> Iterator[RunningServer]:
    args = [f"--auth-token-file={tokens['admin']}", f"--read-token-file={tokens['read']}"]
    env = {PW_ENV: source_db.password}
    with cdc_server(etcd_server.endpoint, tmp_path / "server.log", args, env=env) as running:
        yield running


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _state(capsys: pytest.CaptureFixture[str], on: tuple[str, ...]) -> str:
    code, out, err = _cli(capsys, "changefeed", "query", "-c", "roles", "--simple", *on)
    assert code == 0, err
    return str(json.loads(out)["state"])


def test_the_read_only_token_reads_but_cannot_pause_or_change_anything(
    server: RunningServer,
    tokens: dict[str, Path],
    source_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    execute(source_db, f"CREATE TABLE `{source_database}`.t (id INT PRIMARY KEY)")
    admin = ("--server", server.address, "--token-file", str(tokens["admin"]))
    reader = ("--server", server.address, "--token-file", str(tokens["read"]))
    source = f"mysql://{source_db.user}@127.0.0.1:{source_db.port}/?password-env={PW_ENV}"
    spec = (
        "--changefeed-id", "roles", "--source-uri", source, "--sink-uri", "blackhole://",
        "--filter-rule", f"{source_database}.*", "--snapshot-mode", "never",
    )  # fmt: skip

    code, _, err = _cli(capsys, "changefeed", "create", *spec, *reader)
    assert code == 4
    assert "PERMISSION_DENIED: the read-only token may not call CreateChangefeed" in err
    code, _, err = _cli(capsys, "changefeed", "create", *spec, *admin)
    assert code == 0, err

    for argv in (
        ("changefeed", "list"),
        ("changefeed", "query", "-c", "roles"),
        ("capture", "list"),
    ):
        code, _, err = _cli(capsys, *argv, *reader)
        assert code == 0, (argv, err)

    store = server.store
    info = store.keys.changefeed_info("roles")
    before = store.get(info)
    for argv, rpc in (
        (("changefeed", "pause", "-c", "roles"), "PauseChangefeed"),
        (("changefeed", "resume", "-c", "roles"), "ResumeChangefeed"),
        (("changefeed", "remove", "-c", "roles"), "RemoveChangefeed"),
        (("changefeed", "update", *spec), "UpdateChangefeed"),
        (("changefeed", "snapshot", "-c", "roles", "--table", "db.t"), "SnapshotTable"),
    ):
        code, _, err = _cli(capsys, *argv, *reader)
        assert code == 4, (argv, err)
        assert f"PERMISSION_DENIED: the read-only token may not call {rpc}" in err
        assert "use the admin token (cdc-server --auth-token-file)" in err
    after = store.get(info)
    assert after is not None and before is not None and after.value == before.value
    assert _state(capsys, reader) == "normal"

    assert _cli(capsys, "changefeed", "pause", "-c", "roles", *admin)[0] == 0
    assert _state(capsys, reader) == "stopped"

    log = server.log.read_text()
    assert "refused a call to /cdc.v1.ChangefeedService/PauseChangefeed: the read-only" in log
    assert "(from ipv" in log
    assert ADMIN not in log and READ not in log


def test_raw_calls_get_permission_denied_and_the_server_keeps_serving(
    server: RunningServer,
) -> None:
    with grpc.insecure_channel(server.address) as channel:
        api = admin_pb2_grpc.ChangefeedServiceStub(channel)
        read = (("authorization", f"Bearer {READ}"),)
        with pytest.raises(grpc.RpcError) as info:
            api.PauseChangefeed(admin_pb2.ChangefeedRef(changefeed_id="x"), metadata=read)
        assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as info:
            api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), metadata=())
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        reply = api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), metadata=read)
        assert list(reply.changefeeds) == []


def test_a_read_token_without_an_admin_token_is_refused_at_start(tokens: dict[str, Path]) -> None:
    result = run_server(
        "--etcd=127.0.0.1:2379", "--addr=127.0.0.1:8300", f"--read-token-file={tokens['read']}"
    )
    assert result.returncode == 2
    assert "--read-token-file: a read-only token needs an admin token too" in result.stderr
    assert READ not in result.stderr and "Traceback" not in result.stderr
