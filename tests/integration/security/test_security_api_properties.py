"""The admin API under bad input (issue #18): property-based tests against a real cdc-server.

Hypothesis sends every RPC of ``cdc.v1.ChangefeedService`` and ``CaptureService``
what a careless or hostile client could: raw bytes that are no protobuf at all,
string fields holding invalid UTF-8, unknown fields and wire types, 10 MB
strings, JSON configs of the wrong shape, wrong types, negative and huge
numbers, unknown enum values (snapshot modes, DDL kinds, sink protocols),
odd identifiers. After every example:

* the answer is a clean status: never UNKNOWN or INTERNAL (an unhandled
  exception, a traceback in the server's log), and INVALID_ARGUMENT for input
  that cannot be read;
* the server still answers its health check;
* nothing was written to etcd: the cluster's keys, captures and owner aside,
  are what they were.

Sources in the generated configs point at 127.0.0.1 ports nobody listens on,
so a config that passes every check of its own is refused by the source check
(FAILED_PRECONDITION) without waiting on a network. The example counts keep the
whole module near half a minute on the test machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from security_helpers import RunningServer, cdc_server

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc, capture_pb2
from cdc.api.health import is_serving
from cdc.playground.etcd import EtcdServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

_CF = "/cdc.v1.ChangefeedService/"
METHODS = (
    f"{_CF}CreateChangefeed",
    f"{_CF}UpdateChangefeed",
    f"{_CF}PauseChangefeed",
    f"{_CF}ResumeChangefeed",
    f"{_CF}RemoveChangefeed",
    f"{_CF}GetChangefeed",
    f"{_CF}ListChangefeeds",
    f"{_CF}ListCaptures",
    f"{_CF}SnapshotTable",
    "/cdc.v1.CaptureService/GetCapture",
)
NEVER = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
TEN_MB = 10 * 1024 * 1024

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Api:
    """Raw and typed calls to one server, and what etcd and its log hold."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        self.channel = grpc.insecure_channel(
            server.address, options=[("grpc.max_send_message_length", 2 * TEN_MB)]
        )
        self.stub = admin_pb2_grpc.ChangefeedServiceStub(self.channel)
        self.baseline = self.keys()

    def raw(self, method: str, payload: bytes) -> grpc.StatusCode:
        call = self.channel.unary_unary(method)
        try:
            call(payload, timeout=30)
        except grpc.RpcError as error:
            return self._checked(error)
        return grpc.StatusCode.OK

    def typed(self, method: str, request: Any) -> grpc.StatusCode:
        try:
            getattr(self.stub, method)(request, timeout=30)
        except grpc.RpcError as error:
            return self._checked(error)
        return grpc.StatusCode.OK

    def _checked(self, error: grpc.RpcError) -> grpc.StatusCode:
        code = error.code()
        assert code not in NEVER, (code, error.details())
        return code

    def keys(self) -> dict[str, bytes]:
        """Every key of the cluster but the live captures' and the owner's."""
        store = self.server.store
        return {
            item.key: item.value
            for item in store.get_prefix(store.keys.prefix_of())
            if "/capture/" not in item.key
            and not item.key.endswith("/owner")
            and "/owner/" not in item.key
        }

    def unchanged(self) -> None:
        assert is_serving(self.server.address, timeout=10), "the server stopped serving"
        assert self.keys() == self.baseline, "a refused request wrote to etcd"


@pytest.fixture(scope="module")
def api(etcd_server: EtcdServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    log = tmp_path_factory.mktemp("api-properties") / "server.log"
    with cdc_server(etcd_server.endpoint, log) as server:
        client = Api(server)
        yield client
        client.channel.close()
        text = server.log.read_text()
        assert "Traceback" not in text and "Exception calling application" not in text, text[-4000:]
        assert "Exception deserializing request" not in text


# --- raw protobuf ---------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


_INVALID_UTF8 = st.sampled_from(
    [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"ok\x80ok", b"\xe2\x82"]
)


@st.composite
def malformed_messages(draw: st.DrawFn) -> bytes:
    """Bytes the method's request type cannot hold, or holds with unexpected content."""
    kind = draw(st.sampled_from(["bytes", "utf8", "nested-utf8", "unknown", "wiretype", "cut"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "utf8":  # field 1: ChangefeedRef.changefeed_id (a string)
        return _length_delimited(1, draw(_INVALID_UTF8))
    if kind == "nested-utf8":  # field 1 -> ChangefeedConfigJson.json (a string)
        return _length_delimited(1, _length_delimited(1, draw(_INVALID_UTF8)))
    if kind == "unknown":  # a field number no request has, of any wire type
        number = draw(st.integers(min_value=2, max_value=2**29 - 1))
        return _varint(number << 3 | 0) + _varint(draw(st.integers(0, 2**63)))
    if kind == "wiretype":  # field 1 as a varint where a string or message is expected
        return _varint(1 << 3 | 0) + _varint(draw(st.integers(0, 2**64 - 1)))
    return _length_delimited(1, b"x" * 10)[: draw(st.integers(1, 5))]  # truncated


@SETTINGS
@given(method=st.sampled_from(METHODS), payload=malformed_messages())
def test_malformed_requests_get_a_clean_status(api: Api, method: str, payload: bytes) -> None:
    api.raw(method, payload)
    api.unchanged()


def test_invalid_utf8_is_invalid_argument(api: Api) -> None:
    in_ref = _length_delimited(1, b"\xff\xfe")  # ChangefeedRef.changefeed_id
    in_config = _length_delimited(1, _length_delimited(1, b"\xc3\x28"))  # config.json
    for method in METHODS[:6]:
        payload = in_config if method.endswith(("CreateChangefeed", "UpdateChangefeed")) else in_ref
        assert api.raw(method, payload) is grpc.StatusCode.INVALID_ARGUMENT, method
    api.unchanged()


# --- typed requests -------------------------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_IDS = st.one_of(
    _TEXT,
    st.sampled_from(["", "/", "a/b", "..", "x" * 300, "\x00", "id\n", " ", "ümlaut", "-1"]),
)
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-1, 0, 2**31, 2**63, -(2**63) - 1]),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXT)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def closed_port_uris(draw: st.DrawFn, port: int) -> str:
    """MySQL URIs at a port nobody listens on, with good and bad parameters."""
    params = draw(
        st.lists(
            st.sampled_from(
                [
                    "server-id=-1",
                    "server-id=99999999999",
                    "heartbeat-interval=-3",
                    "time-zone=Mars/Olympus",
                    "password-env=HOME",
                    "password-file=/etc/hostname",
                    "ssl-ca=relative.pem",
                    "worker-count=-5",
                    "bogus=1",
                ]
            ),
            max_size=2,
        )
    )
    query = "?" + "&".join(params) if params else ""
    return f"mysql://u@127.0.0.1:{port}/{query}"


@st.composite
def configs(draw: st.DrawFn, port: int) -> str:
    """JSON text for ChangefeedConfigJson: shapeless, or shaped like a config with bad values."""
    if draw(st.booleans()):
        return json.dumps(draw(_JSON))
    value = st.one_of(_SCALARS, _JSON)
    tree: dict[str, Any] = {
        "v": draw(st.one_of(st.just(1), _SCALARS)),
        "changefeed-id": draw(st.one_of(_IDS, value)),
        "source-uri": draw(st.one_of(closed_port_uris(port), _TEXT, value)),
        "sink-uri": draw(
            st.one_of(
                st.sampled_from(["blackhole://", "file:///nonexistent/x", "kafka://", "pull://"]),
                closed_port_uris(port),
                _TEXT,
                value,
            )
        ),
        "filter": draw(
            st.one_of(
                st.fixed_dictionaries({"rules": st.lists(_TEXT, max_size=3)}),
                st.fixed_dictionaries({"rules": value, "event-filters": value}),
                value,
            )
        ),
        "snapshot": draw(
            st.one_of(
                st.fixed_dictionaries(
                    {
                        "mode": st.one_of(
                            st.sampled_from(["initial", "never", "sometimes", "", "INITIAL"]),
                            value,
                        ),
                        "chunk-size": st.one_of(_NUMBERS, value),
                    }
                ),
                value,
            )
        ),
    }
    optional = {
        "supported-ddl": st.one_of(st.lists(_TEXT, max_size=3), value),
        "start-position": st.one_of(st.sampled_from(["binlog.000001:-4", "x:y", ":"]), value),
        "start-gtid": st.one_of(st.sampled_from(["0-1-x", "zzz", "0-1-2,,"]), value),
        "store-credentials": value,
        "case-sensitive": value,
        "sink": st.one_of(st.fixed_dictionaries({"worker-count": _NUMBERS}), value),
        "unknown-key": value,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            tree[key] = draw(strategy)
    for key in draw(st.lists(st.sampled_from(sorted(tree)), max_size=2)):
        tree.pop(key, None)
    return json.dumps(tree)


@pytest.fixture(scope="module")
def closed_port() -> int:
    return free_port()


@SETTINGS
@given(data=st.data())
def test_config_requests_get_a_clean_status(
    api: Api, closed_port: int, data: st.DataObject
) -> None:
    text = data.draw(configs(closed_port))
    method = data.draw(st.sampled_from(["CreateChangefeed", "UpdateChangefeed"]))
    message = admin_pb2.ChangefeedConfigJson(json=text)
    request = (
        admin_pb2.CreateChangefeedRequest(config=message)
        if method == "CreateChangefeed"
        else admin_pb2.UpdateChangefeedRequest(config=message)
    )
    code = api.typed(method, request)
    assert code in {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
    }, (code, text)
    api.unchanged()


@SETTINGS
@given(
    method=st.sampled_from(
        ["PauseChangefeed", "ResumeChangefeed", "RemoveChangefeed", "GetChangefeed"]
    ),
    changefeed_id=_IDS,
)
def test_changefeed_refs_get_a_clean_status(api: Api, method: str, changefeed_id: str) -> None:
    code = api.typed(method, admin_pb2.ChangefeedRef(changefeed_id=changefeed_id))
    assert code in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}, code
    api.unchanged()


@SETTINGS
@given(changefeed_id=_IDS, table=_IDS, where=st.one_of(_TEXT, st.just("x" * 5000)))
def test_snapshot_requests_get_a_clean_status(
    api: Api, changefeed_id: str, table: str, where: str
) -> None:
    request = admin_pb2.SnapshotTableRequest(changefeed_id=changefeed_id, table=table, where=where)
    code = api.typed("SnapshotTable", request)
    assert code in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}, code
    api.unchanged()


def test_ten_megabyte_strings_are_refused_cleanly(api: Api) -> None:
    huge = "x" * TEN_MB
    requests = [
        ("GetChangefeed", admin_pb2.ChangefeedRef(changefeed_id=huge)),
        ("PauseChangefeed", admin_pb2.ChangefeedRef(changefeed_id=huge)),
        (
            "CreateChangefeed",
            admin_pb2.CreateChangefeedRequest(config=admin_pb2.ChangefeedConfigJson(json=huge)),
        ),
        (
            "UpdateChangefeed",
            admin_pb2.UpdateChangefeedRequest(
                config=admin_pb2.ChangefeedConfigJson(json=json.dumps({"v": 1, "x": huge}))
            ),
        ),
    ]
    for method, request in requests:
        code = api.typed(method, request)
        assert code in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
    # just under the server's limit: read and refused by the code, not the transport
    big = "y" * (3 * 1024 * 1024)
    assert api.typed("GetChangefeed", admin_pb2.ChangefeedRef(changefeed_id=big)) is (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    config = json.dumps({"v": 1, "changefeed-id": big})
    create = admin_pb2.CreateChangefeedRequest(config=admin_pb2.ChangefeedConfigJson(json=config))
    assert api.typed("CreateChangefeed", create) is grpc.StatusCode.INVALID_ARGUMENT
    api.unchanged()


def test_capture_service_ignores_unknown_fields(api: Api) -> None:
    assert api.raw("/cdc.v1.CaptureService/GetCapture", _varint(7 << 3) + b"\x01") is (
        grpc.StatusCode.OK
    )
    reply = api.channel.unary_unary(
        "/cdc.v1.CaptureService/GetCapture",
        request_serializer=capture_pb2.GetCaptureRequest.SerializeToString,
        response_deserializer=capture_pb2.CaptureInfo.FromString,
    )(capture_pb2.GetCaptureRequest(), timeout=10)
    assert reply.id == "sec-1"
    api.unchanged()
