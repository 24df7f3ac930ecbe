"""The sink kinds, by scheme: the one place that lists them (``cdc.sink.kind``).

    mysql://, mariadb://  cdc.sink.mysql.kind.MYSQL        tables in a database
    file://               cdc.sink.file.kind.FILE          change files under a folder
    kafka://              cdc.sink.kafka.kind.KAFKA        topics on a Kafka cluster
    blackhole://          cdc.sink.blackhole.BLACKHOLE     discards (benchmarks, tests)
    pull://               cdc.sink.pull.PULL               rings clients pull from (cdc-server)

:func:`parse_sink_uri` is the one parser every path uses (``cdcctl config
check``, changefeed create and update, in cdcctl and in the server);
:func:`kind_of` gives a parsed URI's kind, which the rest of the code asks
instead of testing the URI's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from cdc.errors import ConfigError
from cdc.sink.base import SinkError
from cdc.sink.blackhole import BLACKHOLE
from cdc.sink.file.kind import FILE
from cdc.sink.kafka.kind import KAFKA
from cdc.sink.kind import SinkKind, SinkURI
from cdc.sink.mysql.kind import MYSQL
from cdc.sink.pull import PULL
from cdc.uri.grammar import check_params, split_scheme, unsupported_scheme

__all__ = [
    "KINDS",
    "RUNNABLE_SINK_SCHEMES",
    "SINK_SCHEMES",
    "find_kind",
    "kind_for_scheme",
    "kind_of",
    "parse_sink_uri",
]

#: Every sink kind, in the order error messages list their schemes.
KINDS: tuple[SinkKind[Any], ...] = (MYSQL, FILE, KAFKA, BLACKHOLE, PULL)

_BY_SCHEME: Mapping[str, SinkKind[Any]] = MappingProxyType(
    {scheme: kind for kind in KINDS for scheme in kind.schemes}
)
SINK_SCHEMES = tuple(_BY_SCHEME)
#: The sink schemes a changefeed can run with.
RUNNABLE_SINK_SCHEMES = tuple(scheme for scheme, kind in _BY_SCHEME.items() if kind.runnable)

_SINK_EXAMPLE = "mysql://root@127.0.0.1:3306/ or blackhole://"


def kind_for_scheme(scheme: str, *, field: str = "sink-uri") -> SinkKind[Any]:
    """The kind a (lower-case) scheme names; a ``ConfigError`` naming ``field`` lists the
    schemes a changefeed can run with, and the closest one, when it names none."""
    kind = _BY_SCHEME.get(scheme)
    if kind is None:
        raise unsupported_scheme(scheme, RUNNABLE_SINK_SCHEMES, field, _SINK_EXAMPLE)
    return kind


def find_kind(uri: object) -> SinkKind[Any] | None:
    """The kind of a parsed sink URI; None for anything else."""
    for kind in KINDS:
        if kind.owns(uri):
            return kind
    return None


def kind_of(uri: object) -> SinkKind[Any]:
    """The kind of a parsed sink URI; ``SinkError`` for anything else."""
    kind = find_kind(uri)
    if kind is None:
        raise SinkError(
            f"no sink for {type(uri).__name__} ({uri!r:.80}); expected a parsed sink URI "
            "(cdc.sink.registry.parse_sink_uri)"
        )
    return kind


def parse_sink_uri(
    text: str,
    *,
    field: str = "sink-uri",
    defaults: Mapping[str, str] | None = None,
    defaults_field: str = "sink",
) -> SinkURI:
    """Parses and validates a sink URI of any kind a changefeed can run with.

    ``defaults`` supplies query parameters the URI does not give itself (the
    ``[sink]`` table of a changefeed file); they are checked first, with errors
    naming ``<defaults_field>.<parameter>``, and then become part of the URI
    so that its text carries them.
    """
    scheme, _ = split_scheme(text, field, _SINK_EXAMPLE)
    kind = kind_for_scheme(scheme, field=field)
    if not kind.runnable:
        listed = ", ".join(f"{s}://" for s in RUNNABLE_SINK_SCHEMES)
        raise ConfigError(
            field,
            f"{scheme}:// sinks are not served by cdc-server yet ({kind.not_served}), so the "
            f"changefeed could never run; supported: {listed}",
        )
    extra = dict(defaults or {})
    for name in extra:
        if name not in kind.params:
            applies = ", ".join(
                f"{s}://" for other in KINDS if name in other.params for s in other.schemes
            )
            raise ConfigError(
                f"{defaults_field}.{name}",
                f"{name!r} applies to {applies or 'no'} sinks, but the sink URI is {scheme}://; "
                "remove it or change the sink",
            )
    check_params(extra, kind.params, field=defaults_field)
    return kind.parse(text, field, extra)
