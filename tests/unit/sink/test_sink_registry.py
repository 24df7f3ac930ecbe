"""The sink registry (cdc.sink.registry): every scheme names its kind, every kind is listed,
a parsed URI finds its kind again, and an unknown scheme gets the clear error."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import cdc.sink
from cdc.errors import ConfigError
from cdc.sink.base import SinkError
from cdc.sink.blackhole import BLACKHOLE, BlackholeSinkURI
from cdc.sink.file.kind import FILE
from cdc.sink.file.uri import FileSinkURI
from cdc.sink.kafka.kind import KAFKA
from cdc.sink.kafka.uri import KafkaSinkURI
from cdc.sink.kind import SinkKind
from cdc.sink.mysql.kind import MYSQL
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.sink.pull import PULL, PullSinkURI
from cdc.sink.registry import (
    KINDS,
    RUNNABLE_SINK_SCHEMES,
    SINK_SCHEMES,
    find_kind,
    kind_for_scheme,
    kind_of,
    parse_sink_uri,
)

EXPECTED = {
    "mysql": MYSQL,
    "mariadb": MYSQL,
    "file": FILE,
    "kafka": KAFKA,
    "blackhole": BLACKHOLE,
    "pull": PULL,
}


@pytest.mark.parametrize(("scheme", "kind"), EXPECTED.items())
def test_every_scheme_resolves_to_its_kind(scheme: str, kind: SinkKind) -> None:
    assert kind_for_scheme(scheme) is kind
    assert scheme in kind.schemes


def test_the_schemes_are_exactly_the_kinds_schemes_in_order() -> None:
    assert tuple(EXPECTED) == SINK_SCHEMES
    assert RUNNABLE_SINK_SCHEMES == ("mysql", "mariadb", "file", "kafka", "blackhole", "pull")
    assert all(kind.runnable for kind in (MYSQL, FILE, KAFKA, BLACKHOLE, PULL))


@pytest.mark.parametrize(
    ("text", "uri_type", "kind"),
    [
        ("mysql://root@127.0.0.1:3307/", MySQLSinkURI, MYSQL),
        ("MariaDB://root@127.0.0.1:3307/", MySQLSinkURI, MYSQL),
        ("file:///var/lib/cdc/out?protocol=csv", FileSinkURI, FILE),
        ("kafka://k1:9092,k2/cdc?protocol=debezium&partition-num=6", KafkaSinkURI, KAFKA),
        ("blackhole://", BlackholeSinkURI, BLACKHOLE),
        ("pull://", PullSinkURI, PULL),
    ],
)
def test_a_parsed_uri_finds_its_kind_again(text: str, uri_type: type, kind: SinkKind) -> None:
    uri = parse_sink_uri(text)
    assert type(uri) is uri_type is kind.uri_type
    assert kind_of(uri) is kind is find_kind(uri)
    assert uri.describe()["kind"] == kind.name
    assert parse_sink_uri(uri.unmasked()) == uri


def test_a_kind_takes_only_its_own_parameters() -> None:
    assert "worker-count" in MYSQL.params and "worker-count" not in FILE.params
    assert "protocol" in FILE.params and "protocol" not in MYSQL.params
    assert not BLACKHOLE.params and not PULL.params


@pytest.mark.parametrize(
    ("scheme", "fragments"),
    [
        (
            "pulsar",
            [
                "unsupported scheme 'pulsar://'",
                "mysql://, mariadb://, file://, kafka://, blackhole://, pull://",
            ],
        ),
        ("blakhole", ["did you mean 'blackhole'?"]),
        ("mysq", ["did you mean 'mysql'?"]),
    ],
)
def test_an_unknown_scheme_lists_the_supported_ones(scheme: str, fragments: list[str]) -> None:
    for call in (lambda: kind_for_scheme(scheme), lambda: parse_sink_uri(f"{scheme}://x/")):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.field == "sink-uri"
        for fragment in fragments:
            assert fragment in info.value.message


def test_a_kind_that_is_not_served_is_refused_when_parsed_but_still_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(PULL, "not_served", "no service hands their changes to clients")
    with pytest.raises(ConfigError, match="pull:// sinks are not served by cdc-server yet"):
        parse_sink_uri("pull://")
    assert kind_of(PullSinkURI()) is PULL


def test_pull_sinks_run_on_one_capture_and_take_no_snapshot() -> None:
    assert PULL.one_writer and PULL.no_snapshot
    assert not any(kind.no_snapshot for kind in (MYSQL, FILE, KAFKA, BLACKHOLE))


@pytest.mark.parametrize("thing", ["blackhole://", None, 3306, object()])
def test_anything_but_a_parsed_uri_has_no_kind(thing: object) -> None:
    assert find_kind(thing) is None
    with pytest.raises(SinkError, match="expected a parsed sink URI"):
        kind_of(thing)


def test_every_kind_defined_in_the_sink_packages_is_registered() -> None:
    """A new kind's package without its registry line would be unreachable."""
    root = Path(cdc.sink.__file__).parent
    for module in pkgutil.walk_packages([str(root)], prefix="cdc.sink."):
        importlib.import_module(module.name)
    defined: list[type] = []
    pending = list(SinkKind.__subclasses__())
    while pending:
        cls = pending.pop()
        defined.append(cls)
        pending.extend(cls.__subclasses__())
    registered = {type(kind) for kind in KINDS}
    assert {cls for cls in defined if cls.__module__.startswith("cdc.sink.")} == registered
    assert len({kind.uri_type for kind in KINDS}) == len(KINDS)
