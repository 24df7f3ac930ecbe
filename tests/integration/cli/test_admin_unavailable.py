"""UNAVAILABLE (exit code 3) when the server answers but its etcd does not."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli.main import main
from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration


def test_etcd_down_is_unavailable(
    server_starter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client, peer = free_port(), free_port()
    etcd = EtcdServer(EtcdSpec("private", tmp_path / "etcd", client, peer), die_with_parent=True)
    etcd.start()
    try:
        with server_starter(etcd.endpoint, {}, tmp_path / "server.log", "down") as server:
            etcd.stop()
            with grpc.insecure_channel(server.address) as channel:
                api = admin_pb2_grpc.ChangefeedServiceStub(channel)
                with pytest.raises(grpc.RpcError) as info:
                    api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), timeout=60)
            assert info.value.code() is grpc.StatusCode.UNAVAILABLE
            assert main(["changefeed", "list", "--server", server.address]) == 3
            assert "UNAVAILABLE" in capsys.readouterr().err
            etcd.start()
    finally:
        etcd.stop()
