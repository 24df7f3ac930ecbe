"""Files as the sink: the URI, its protocols and its parameters.

::

    file:///var/lib/cdc/out?protocol=csv&file-size=64MiB&flush-interval=5s

A protocol the file sink does not write (``parquet``) is refused when the URI
is parsed: a changefeed created with it could only fail and retry forever.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote

from cdc.errors import ConfigError
from cdc.sink.kind import NoPassword
from cdc.uri.grammar import (
    ParamCheck,
    check_params,
    parse_query,
    render_query,
    split_scheme,
    suggest,
    with_defaults,
)
from cdc.uri.units import format_size, parse_duration, parse_size

__all__ = [
    "FILE_SINK_PARAMS",
    "FILE_SINK_PROTOCOLS",
    "FileProtocol",
    "FileSinkURI",
    "file_protocol",
    "parse_file_sink",
]

_MIN_FILE_SIZE = 1024
_EXAMPLE = "file:///var/lib/cdc/out?protocol=csv"


class FileProtocol(enum.Enum):
    """How a file sink encodes changes (the file sink writes ``FILE_SINK_PROTOCOLS``)."""

    CANAL_JSON = "canal-json"
    CSV = "csv"
    PARQUET = "parquet"


#: The protocols the file sink writes (its codecs, ``cdc.sink.file.sink.codec_for``).
FILE_SINK_PROTOCOLS = (FileProtocol.CANAL_JSON, FileProtocol.CSV)


@dataclass(frozen=True)
class FileSinkURI(NoPassword):
    """Files under an absolute directory, rolled over by size and flushed on an interval."""

    path: str
    protocol: FileProtocol = FileProtocol.CANAL_JSON
    file_size: int = 64 * 1024 * 1024
    flush_interval: float = 5.0
    params: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def scheme(self) -> str:
        return "file"

    @property
    def masked(self) -> str:
        return self.unmasked()

    def unmasked(self) -> str:
        return f"file://{quote(self.path, safe='/')}{render_query(self.params)}"

    def describe(self) -> dict[str, Any]:
        """The effective settings for printing."""
        return {
            "kind": "file",
            "uri": self.masked,
            "path": self.path,
            "protocol": self.protocol.value,
            "file-size": format_size(self.file_size),
            "flush-interval-seconds": self.flush_interval,
        }

    def __str__(self) -> str:
        return self.masked


def file_protocol(value: str, field: str) -> FileProtocol:
    """The :class:`FileProtocol` named ``value`` that the file sink writes, or an error
    listing the ones it does (a protocol it cannot write would fail the changefeed forever)."""
    choices = [p.value for p in FILE_SINK_PROTOCOLS]
    try:
        protocol = FileProtocol(value.strip().lower())
    except ValueError:
        raise ConfigError(
            field,
            f"unknown protocol {value!r}; {suggest(value, choices)}"
            f"supported: {', '.join(choices)}, e.g. protocol=canal-json",
        ) from None
    if protocol not in FILE_SINK_PROTOCOLS:
        raise ConfigError(
            field,
            f"the file sink does not write protocol={protocol.value} yet; "
            f"supported: {', '.join(choices)}, e.g. protocol=canal-json",
        )
    return protocol


def _file_size(value: str, field: str) -> int:
    size = parse_size(value, field=field)
    if size < _MIN_FILE_SIZE:
        raise ConfigError(field, f"{value!r} is too small; at least 1KiB, e.g. file-size=64MiB")
    return size


def _flush_interval(value: str, field: str) -> float:
    interval = parse_duration(value, field=field)
    if interval <= 0:
        raise ConfigError(field, f"{value!r} must be longer than zero, e.g. flush-interval=5s")
    return interval


#: The query parameters of a file sink URI, each with its check.
FILE_SINK_PARAMS: Mapping[str, ParamCheck] = MappingProxyType(
    {
        "protocol": file_protocol,
        "file-size": _file_size,
        "flush-interval": _flush_interval,
    }
)


def parse_file_sink(text: str, field: str, defaults: Mapping[str, str]) -> FileSinkURI:
    """``file:///absolute/path?...``; ``defaults`` fill the parameters it lacks."""
    _, rest = split_scheme(text, field, _EXAMPLE)
    raw_path, _, query = rest.partition("?")
    if not raw_path.startswith("/"):
        # what follows any '@' only: user information before it may hold a password
        where = raw_path.partition("/")[0].rpartition("@")[2]
        raise ConfigError(
            field,
            f"file sinks need an absolute path and no host ({where!r} was read as a host or "
            f"a relative path); write three slashes, e.g. {_EXAMPLE}",
        )
    params = with_defaults(parse_query(query, field, FILE_SINK_PARAMS), defaults)
    typed = check_params(params, FILE_SINK_PARAMS, field=field)
    settings = {
        attribute: typed[name]
        for name, attribute in (
            ("protocol", "protocol"),
            ("file-size", "file_size"),
            ("flush-interval", "flush_interval"),
        )
        if name in typed
    }
    return FileSinkURI(unquote(raw_path), params=params, **settings)
