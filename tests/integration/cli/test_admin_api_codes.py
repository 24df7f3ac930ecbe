"""The admin API's status codes, straight through gRPC against a real cdc-server."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.config import ChangefeedConfig
from cdc.store.keys import ChangefeedInfoKey, ChangefeedStatusKey

pytestmark = pytest.mark.integration


@pytest.fixture
def api(admin_server) -> Iterator[admin_pb2_grpc.ChangefeedServiceStub]:
    with grpc.insecure_channel(admin_server.address) as channel:
        yield admin_pb2_grpc.ChangefeedServiceStub(channel)


def _config(**tree) -> admin_pb2.ChangefeedConfigJson:
    return admin_pb2.ChangefeedConfigJson(json=json.dumps({"v": 1, **tree}))


def _valid(cid: str, source_uri: str, rule: str, sink: str = "blackhole://") -> dict:
    config = ChangefeedConfig(cid, source_uri, sink, rules=(rule,), snapshot_mode="never")
    return config.to_dict(mask=False)


def _code(call, request) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=60)
    return info.value.code(), info.value.details()


def test_invalid_argument_names_the_field(api, source_uri: str) -> None:
    code, details = _code(
        api.CreateChangefeed,
        admin_pb2.CreateChangefeedRequest(
            config=_config(**{"changefeed-id": "cf", "source-uri": "http://x", "sink-uri": "x"})
        ),
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("source-uri:")

    tree = _valid("cf", source_uri, "a.*")
    tree["snapshot"]["chunk-size"] = 0
    code, details = _code(
        api.CreateChangefeed, admin_pb2.CreateChangefeedRequest(config=_config(**tree))
    )
    assert (code, details.split(":")[0]) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "snapshot.chunk-size",
    )

    code, details = _code(api.GetChangefeed, admin_pb2.ChangefeedRef())
    assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "changefeed-id")
    code, details = _code(api.GetChangefeed, admin_pb2.ChangefeedRef(changefeed_id="a/b"))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "changefeed id" in details


def test_not_found(api) -> None:
    ref = admin_pb2.ChangefeedRef(changefeed_id="nope")
    for call in (api.GetChangefeed, api.PauseChangefeed, api.ResumeChangefeed):
        code, details = _code(call, ref)
        assert code is grpc.StatusCode.NOT_FOUND, call
        assert "nope does not exist" in details
    assert _code(api.RemoveChangefeed, ref)[0] is grpc.StatusCode.NOT_FOUND


def test_already_exists_and_update_while_running(
    api, admin_server, source_uri: str, source_table: str
) -> None:
    request = admin_pb2.CreateChangefeedRequest(
        config=admin_pb2.ChangefeedConfigJson(
            json=json.dumps(_valid("codes", source_uri, source_table))
        )
    )
    created = api.CreateChangefeed(request, timeout=60)
    assert (created.changefeed_id, created.status.state) == ("codes", "normal")
    code, details = _code(api.CreateChangefeed, request)
    assert code is grpc.StatusCode.ALREADY_EXISTS
    assert "exists already" in details

    update = admin_pb2.UpdateChangefeedRequest(config=request.config)
    code, details = _code(api.UpdateChangefeed, update)
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert "pause it" in details

    ref = admin_pb2.ChangefeedRef(changefeed_id="codes")
    assert api.PauseChangefeed(ref, timeout=30).status.state == "stopped"
    assert api.UpdateChangefeed(update, timeout=30).status.state == "stopped"
    assert api.ResumeChangefeed(ref, timeout=30).status.state == "normal"
    api.RemoveChangefeed(ref, timeout=30)
    assert _code(api.GetChangefeed, ref)[0] is grpc.StatusCode.NOT_FOUND


def test_create_checks_fail_before_anything_is_written(
    api,
    admin_server,
    source_uri: str,
    source_table: str,
    sink_uri: str,
    tmp_path: Path,
) -> None:
    def create(tree: dict) -> tuple[grpc.StatusCode, str]:
        message = admin_pb2.ChangefeedConfigJson(json=json.dumps(tree))
        return _code(api.CreateChangefeed, admin_pb2.CreateChangefeedRequest(config=message))

    code, details = create(_valid("checks", source_uri, "no_such_db.*"))
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert details.startswith("filter.rules:") and "match no table" in details

    # The sink database has no binlog: as a source it fails the binlog check.
    code, details = create(_valid("checks", sink_uri, source_table))
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert "binlog" in details

    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, details = create(_valid("checks", source_uri, source_table, f"file://{a_file}/out"))
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert "is not a directory" in details

    dead = "mysql://root@127.0.0.1:1/"
    code, details = create(_valid("checks", source_uri, source_table, dead))
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert details.startswith("sink-uri:") and "cannot connect" in details

    assert api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), timeout=30).changefeeds == []
    store = admin_server.store
    assert store.get_prefix(store.keys.prefix_of(ChangefeedInfoKey)) == []
    assert store.get_prefix(store.keys.prefix_of(ChangefeedStatusKey)) == []


def test_list_captures_marks_the_owner(api, admin_server) -> None:
    deadline = time.monotonic() + 15
    while True:
        captures = api.ListCaptures(admin_pb2.ListCapturesRequest(), timeout=30).captures
        if [(c.id, c.is_owner) for c in captures] == [("admin-1", True)]:
            break
        assert time.monotonic() < deadline, captures
        time.sleep(0.2)
    assert captures[0].address == admin_server.address
