"""The admin API's bearer token, against a real cdc-server: missing, wrong, right, health."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from security_helpers import RunningServer, cdc_server

from capture.main import main as server_main
from capture.security import NO_TOKEN, TOKEN_REJECTED
from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc, capture_pb2, capture_pb2_grpc
from cdc.api.health import is_serving
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer

pytestmark = pytest.mark.integration

TOKEN = f"tok-{secrets.token_hex(12)}"
WRONG = f"wrong-{secrets.token_hex(12)}"


@pytest.fixture(scope="module")
def token_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("tokens")
    files = {"right": directory / "right", "wrong": directory / "wrong", "empty": directory / "e"}
    files["right"].write_text(f"{TOKEN}\n")
    files["wrong"].write_text(WRONG)
    files["empty"].write_text("\n")
    return files


@pytest.fixture(scope="module")
def token_server(
    etcd_server: EtcdServer, token_files: dict[str, Path], tmp_path_factory
) -> Iterator[RunningServer]:
    """A cdc-server taking its token file from the environment (CDC_AUTH_TOKEN_FILE)."""
    log = tmp_path_factory.mktemp("token") / "server.log"
    env = {"CDC_AUTH_TOKEN_FILE": str(token_files["right"])}
    with cdc_server(etcd_server.endpoint, log, env=env) as server:
        yield server


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cdcctl_without_token_or_with_a_wrong_one_exits_4(
    token_server: RunningServer, token_files: dict[str, Path], capsys, monkeypatch
) -> None:
    monkeypatch.delenv("CDC_TOKEN_FILE", raising=False)
    server = ("--server", token_server.address)
    code, out, err = _cli(capsys, "changefeed", "list", *server)
    assert (code, out) == (4, "")
    assert f"refused the request (UNAUTHENTICATED: {NO_TOKEN})" in err
    code, _, err = _cli(
        capsys, "capture", "list", *server, "--token-file", str(token_files["wrong"])
    )
    assert code == 4 and f"UNAUTHENTICATED: {TOKEN_REJECTED}" in err
    code, _, err = _cli(capsys, "changefeed", "query", "-c", "x", *server)
    assert code == 4 and NO_TOKEN in err


def test_cdcctl_with_the_token(
    token_server: RunningServer, token_files: dict[str, Path], capsys, monkeypatch
) -> None:
    server = ("--server", token_server.address)
    code, out, err = _cli(
        capsys, "capture", "list", *server, "--token-file", str(token_files["right"])
    )
    assert code == 0, err
    assert [c["id"] for c in json.loads(out)] == ["sec-1"]
    monkeypatch.setenv("CDC_TOKEN_FILE", str(token_files["right"]))
    code, out, err = _cli(capsys, "changefeed", "list", *server)
    assert (code, json.loads(out)) == (0, []), err
    code, _, err = _cli(capsys, "changefeed", "query", "-c", "nope", *server)
    assert code == 2 and "NOT_FOUND" in err


def test_bad_token_files_are_bad_input(
    token_server: RunningServer, token_files: dict[str, Path], tmp_path: Path, capsys
) -> None:
    server = ("changefeed", "list", "--server", token_server.address)
    code, _, err = _cli(capsys, *server, "--token-file", str(token_files["empty"]))
    assert code == 2 and "--token-file:" in err and "is empty" in err
    code, _, err = _cli(capsys, *server, "--token-file", str(tmp_path / "none"))
    assert code == 2 and "--token-file: cannot read" in err
    args = ["--etcd=127.0.0.1:2379", "--addr=127.0.0.1:8300"]
    assert server_main([*args, f"--auth-token-file={token_files['empty']}"]) == 2
    assert "--auth-token-file:" in capsys.readouterr().err


@contextmanager
def _stubs(address: str) -> Iterator[tuple[Any, Any, Any]]:
    with grpc.insecure_channel(address) as channel:
        yield (
            admin_pb2_grpc.ChangefeedServiceStub(channel),
            capture_pb2_grpc.CaptureServiceStub(channel),
            health_pb2_grpc.HealthStub(channel),
        )


def test_raw_grpc_calls_need_the_token_but_health_does_not(token_server: RunningServer) -> None:
    listing = admin_pb2.ListChangefeedsRequest()
    with _stubs(token_server.address) as (api, capture, health):
        for metadata, message in (
            ((), NO_TOKEN),
            ((("authorization", TOKEN),), NO_TOKEN),
            ((("authorization", f"Bearer {WRONG}"),), TOKEN_REJECTED),
            ((("authorization", f"Bearer {TOKEN}x"),), TOKEN_REJECTED),
        ):
            for call, request in (
                (api.ListChangefeeds, listing),
                (capture.GetCapture, capture_pb2.GetCaptureRequest()),
            ):
                with pytest.raises(grpc.RpcError) as info:
                    call(request, metadata=metadata, timeout=10)
                assert (info.value.code(), info.value.details()) == (
                    grpc.StatusCode.UNAUTHENTICATED,
                    message,
                )
        right = (("authorization", f"Bearer {TOKEN}"),)
        assert list(api.ListChangefeeds(listing, metadata=right, timeout=10).changefeeds) == []
        assert capture.GetCapture(capture_pb2.GetCaptureRequest(), metadata=right).id == "sec-1"
        reply = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert is_serving(token_server.address)


def test_the_server_never_logs_a_token(token_server: RunningServer) -> None:
    with _stubs(token_server.address) as (api, _, _):
        for metadata in ((), (("authorization", f"Bearer {WRONG}"),)):
            with pytest.raises(grpc.RpcError):
                api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), metadata=metadata)
    log = token_server.log.read_text()
    assert f"refused a call to /cdc.v1.ChangefeedService/ListChangefeeds: {NO_TOKEN}" in log
    assert TOKEN_REJECTED in log
    assert "bearer token travels in clear text without TLS" in log
    assert TOKEN not in log and WRONG not in log
