"""Source and sink URIs: parsing, validation, and keeping passwords out of sight.

A changefeed names its source and its sink by URI, as TiCDC does::

    mysql://repl:secret@10.0.0.5:3306/?server-id=1001&time-zone=UTC      (source)
    mysql://root:secret@127.0.0.1:3307/?worker-count=16                  (sink)
    file:///var/lib/cdc/out?protocol=csv&file-size=64MiB&flush-interval=5s
    blackhole://

Parsed URIs are frozen dataclasses whose ``str()`` and ``repr()`` never show
the password; ``unmasked()`` gives the text to connect with. A password can
also be given by reference (``password-env=VAR`` or ``password-file=/path``),
resolved only where a connection is made, so that a stored changefeed need not
hold it. Every problem is a :class:`ConfigError` naming the URI field (or the
``<field>.<parameter>``) with what is allowed and an example.

A URI names only a sink that can run: ``pull://`` (a ring clients pull from)
and file protocols the file sink does not write (``parquet``) are refused
here, the one parser every path uses (``cdcctl config check``, changefeed
create and update, in cdcctl and in the server), because a changefeed created
with them could only fail and retry forever.
"""

from __future__ import annotations

import difflib
import enum
import ipaddress
import os
import re
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote

from cdc.config.units import format_size, parse_duration, parse_size
from cdc.errors import ConfigError
from cdc.masking import MASK, SECRET_PARAMS, mask_secret, mask_uri, userinfo_end

__all__ = [
    "FILE_SINK_PARAMS",
    "FILE_SINK_PROTOCOLS",
    "MYSQL_SCHEMES",
    "MYSQL_SINK_PARAMS",
    "RUNNABLE_SINK_SCHEMES",
    "SINK_PARAMS",
    "SINK_SCHEMES",
    "SOURCE_PARAMS",
    "BlackholeSinkURI",
    "FileProtocol",
    "FileSinkURI",
    "MySQLSinkURI",
    "MySQLURI",
    "PullSinkURI",
    "SinkURI",
    "SourceURI",
    "mask_secret",
    "mask_uri",
    "parse_sink_uri",
    "parse_source_uri",
]

MYSQL_SCHEMES = ("mysql", "mariadb")
SINK_SCHEMES = ("mysql", "mariadb", "file", "blackhole", "pull")
#: The sink schemes a changefeed can run with (``pull://`` is not served by cdc-server yet).
RUNNABLE_SINK_SCHEMES = ("mysql", "mariadb", "file", "blackhole")

_PASSWORD_REFS = frozenset({"password-env", "password-file"})
_TLS_PARAMS = frozenset({"ssl-ca", "ssl-cert", "ssl-key"})

SOURCE_PARAMS = frozenset(
    {"server-id", "time-zone", "heartbeat-interval"} | _TLS_PARAMS | _PASSWORD_REFS
)
MYSQL_SINK_PARAMS = frozenset(
    {
        "worker-count",
        "max-txn-row",
        "safe-mode",
        "transaction-atomicity",
        "load-data-rows",
        "time-zone",
    }
    | _TLS_PARAMS
    | _PASSWORD_REFS
)
FILE_SINK_PARAMS = frozenset({"protocol", "file-size", "flush-interval"})
#: The query parameters each sink scheme accepts.
SINK_PARAMS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "mysql": MYSQL_SINK_PARAMS,
        "mariadb": MYSQL_SINK_PARAMS,
        "file": FILE_SINK_PARAMS,
        "blackhole": frozenset(),
        "pull": frozenset(),
    }
)

_SERVER_ID_MAX = 2**32 - 1
_WORKER_COUNT_MAX = 1024
_MAX_TXN_ROW_MAX = 10_000
_LOAD_DATA_ROWS_MAX = 1_000_000
_MIN_FILE_SIZE = 1024
_HOSTNAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.\-]*[A-Za-z0-9_])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TZ_OFFSET = re.compile(r"[+-](0\d|1[0-4]):[0-5]\d")
_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})
_MYSQL_EXAMPLE = "mysql://repl@127.0.0.1:3306/?password-env=CDC_PASSWORD"


# --- small value parsers shared by the URI kinds -------------------------------------------


def _suggest(name: str, allowed: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def _int_value(value: str, field: str, low: int, high: int, example: str) -> int:
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise ConfigError(
            field, f"{value!r} is not an integer; expected a whole number, e.g. {example}"
        ) from None
    if not low <= number <= high:
        raise ConfigError(field, f"{number} is out of range; allowed {low}..{high}, e.g. {example}")
    return number


def _bool_value(value: str, field: str, example: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(field, f"{value!r} is not a boolean; write true or false, e.g. {example}")


def _positive_seconds(value: str, field: str, example: str) -> float:
    try:
        seconds = float(value.strip())
    except ValueError:
        raise ConfigError(field, f"{value!r} is not a number of seconds; e.g. {example}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(field, f"{value!r} must be a positive number of seconds, e.g. {example}")
    return seconds


def _absolute_path(value: str, field: str, example: str) -> str:
    if not value.startswith("/"):
        raise ConfigError(
            field,
            f"{value!r} is not an absolute path; every cdc-server reads it from its own "
            f"working directory, so give the full path, e.g. {example}",
        )
    return value


def _time_zone(value: str, field: str) -> str:
    if value.upper() == "SYSTEM" or _TZ_OFFSET.fullmatch(value):
        return value
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError(
            field,
            f"{value!r} is not a known time zone; write SYSTEM, an offset like +08:00, "
            "or a zone name like UTC or Asia/Shanghai",
        ) from None
    return value


def _parse_query(query: str, field: str, allowed: frozenset[str]) -> dict[str, str]:
    """``a=1&b=2`` as an ordered dict; unknown, duplicate and empty parameters are errors."""
    params: dict[str, str] = {}
    for piece in query.split("&"):
        if not piece:
            continue
        raw_name, sep, raw_value = piece.partition("=")
        name = unquote(raw_name).strip().lower()
        if name not in allowed:
            if allowed:
                hint = f"{_suggest(name, allowed)}allowed: {', '.join(sorted(allowed))}"
            else:
                hint = "this URI takes no parameters"
            if name in SECRET_PARAMS and "password-env" in allowed:
                hint = (
                    "a password goes before the host (mysql://user:password@host:3306/) or "
                    f"is named by password-env=VAR or password-file=/path; {hint}"
                )
            raise ConfigError(f"{field}.{name}", f"unknown parameter {name!r}; {hint}")
        if name in params:
            raise ConfigError(
                f"{field}.{name}", f"parameter {name!r} is given twice; keep one of them"
            )
        value = unquote(raw_value)
        if not sep or not value:
            raise ConfigError(
                f"{field}.{name}", f"parameter {name!r} has no value; write {name}=<value>"
            )
        params[name] = value
    return params


def _render_query(params: Mapping[str, str]) -> str:
    if not params:
        return ""
    return "?" + "&".join(f"{name}={quote(value, safe='/:,+')}" for name, value in params.items())


def _split_scheme(text: Any, field: str, expected: str) -> tuple[str, str]:
    if not isinstance(text, str):
        raise ConfigError(
            field, f"expected a URI string such as {expected}, got {type(text).__name__}"
        )
    scheme, sep, rest = text.strip().partition("://")
    if not sep or not scheme:
        raise ConfigError(field, f"not a URI: expected <scheme>://..., e.g. {expected}")
    if any(ch.isspace() for ch in rest):
        raise ConfigError(
            field, f"URI contains whitespace; percent-encode it (%20), e.g. {expected}"
        )
    if "#" in rest.rpartition("@")[2]:
        raise ConfigError(field, f"URI fragments ('#...') are not allowed, e.g. {expected}")
    return scheme.lower(), rest


def _check_scheme(scheme: str, supported: Iterable[str], field: str, example: str) -> None:
    if scheme not in supported:
        listed = ", ".join(f"{s}://" for s in supported)
        raise ConfigError(
            field,
            f"unsupported scheme {scheme + '://'!r}; {_suggest(scheme, supported)}"
            f"supported: {listed}, e.g. {example}",
        )


# --- MySQL / MariaDB connection URIs --------------------------------------------------------


@dataclass(frozen=True, repr=False)
class MySQLURI:
    """Where and how to connect to a MySQL or MariaDB server.

    ``params`` holds the query parameters as given (validated by the parser
    that built the URI); ``password`` is the percent-decoded inline password,
    empty when none or when given by reference. ``str()``/``repr()`` mask it.
    """

    scheme: str
    user: str
    password: str
    host: str
    port: int = 3306
    params: Mapping[str, str] = field(default_factory=dict, hash=False)
    field_name: str = field(default="uri", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @classmethod
    def parse(cls, text: str, *, field: str, allowed_params: frozenset[str]) -> MySQLURI:
        """Parses ``mysql://user:password@host:port/?param=value``.

        User and password are percent-decoded; the last ``@`` ends the user
        information, so an unencoded ``@`` in a password still works. The
        common parameters (password references, TLS files, time zone) are
        validated here; kind-specific ones by :func:`parse_source_uri` and
        :func:`parse_sink_uri`.
        """
        example = _MYSQL_EXAMPLE
        scheme, rest = _split_scheme(text, field, example)
        _check_scheme(scheme, MYSQL_SCHEMES, field, example)
        at = userinfo_end(rest)
        if at == -1:
            raise ConfigError(
                field,
                "missing user: expected mysql://user:password@host:port/, e.g. "
                f"{example}; percent-encode special characters in the password "
                "(@ as %40, ? as %3F, / as %2F)",
            )
        raw_user, _, raw_password = rest[:at].partition(":")
        user, password = unquote(raw_user), unquote(raw_password)
        if not user:
            raise ConfigError(field, f"missing user name before ':' or '@', e.g. {example}")
        host, port, path, query = _split_authority(rest[at + 1 :], field, example)
        if path not in ("", "/"):
            raise ConfigError(
                field,
                f"a database path ({path!r}) is not supported; tables are chosen with "
                f"[filter] rules, so end the URI with '/', e.g. {example}",
            )
        params = _parse_query(query, field, allowed_params)
        _check_password_refs(params, bool(password), field)
        check_params(params, field=field)
        return cls(scheme, user, password, host, port, params, field)

    @property
    def password_env(self) -> str | None:
        """The environment variable holding the password, if given by reference."""
        return self.params.get("password-env")

    @property
    def password_file(self) -> str | None:
        """The file holding the password, if given by reference."""
        return self.params.get("password-file")

    @property
    def server_id(self) -> int | None:
        """The replication ``server-id`` to read the binlog with, if configured."""
        value = self.params.get("server-id")
        return None if value is None else int(value)

    @property
    def heartbeat_interval(self) -> float | None:
        """Seconds between the source's binlog heartbeats, if configured."""
        value = self.params.get("heartbeat-interval")
        return None if value is None else float(value)

    @property
    def time_zone(self) -> str | None:
        """The session time zone to read temporal values in, if configured."""
        return self.params.get("time-zone")

    @property
    def ssl(self) -> Mapping[str, str]:
        """TLS files as PyMySQL's ``ssl`` argument wants them (``ca``, ``cert``, ``key``)."""
        return {
            name.removeprefix("ssl-"): value
            for name, value in self.params.items()
            if name in _TLS_PARAMS
        }

    def resolve_password(self) -> str:
        """The password to connect with: inline, from ``password-env`` or from ``password-file``.

        Resolved at connection time in the process that connects, so a stored
        changefeed can carry just the reference.
        """
        variable = self.password_env
        if variable is not None:
            value = os.environ.get(variable)
            if value is None:
                raise ConfigError(
                    f"{self.field_name}.password-env",
                    f"environment variable {variable} is not set in this process; set it "
                    f"for every cdc-server (e.g. export {variable}=...) or give the "
                    "password with password-file=/path",
                )
            return value
        path = self.password_file
        if path is not None:
            try:
                return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
            except FileNotFoundError:
                problem = "does not exist"
            except IsADirectoryError:
                problem = "is a directory, not a file"
            except PermissionError:
                problem = "is not readable by this process (permission denied)"
            except (OSError, UnicodeDecodeError) as exc:
                problem = f"cannot be read ({type(exc).__name__})"
            raise ConfigError(
                f"{self.field_name}.password-file",
                f"password file {path} {problem}; create it with the password on its first "
                "line, readable by the user running cdc-server (e.g. chmod 600)",
            )
        return self.password

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` (the password resolved now)."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.resolve_password(),
        }
        if self.ssl:
            kwargs["ssl"] = dict(self.ssl)
        return kwargs

    def without_password(self) -> MySQLURI:
        """This URI with the inline password dropped (references are kept)."""
        return replace(self, password="")

    def _render(self, password: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        userinfo = quote(self.user, safe="")
        if password:
            userinfo += ":" + password
        return f"{self.scheme}://{userinfo}@{host}:{self.port}/{_render_query(self.params)}"

    def unmasked(self) -> str:
        """The full URI text including the password; parsing it gives this URI back."""
        return self._render(quote(self.password, safe=""))

    def __str__(self) -> str:
        return self._render(MASK if self.password else "")

    def __repr__(self) -> str:
        password = MASK if self.password else ""
        return (
            f"MySQLURI(scheme={self.scheme!r}, user={self.user!r}, password={password!r}, "
            f"host={self.host!r}, port={self.port}, params={dict(self.params)!r})"
        )


#: A source is a MySQL or MariaDB server; the alias marks where a source is meant.
SourceURI = MySQLURI


def _split_authority(after: str, field: str, example: str) -> tuple[str, int, str, str]:
    """``host:port/path?query`` (after the ``@``) split and validated."""
    cut = len(after)
    for mark in "/?":
        index = after.find(mark)
        if index != -1:
            cut = min(cut, index)
    hostport, remainder = after[:cut], after[cut:]
    path, _, query = remainder.partition("?")
    if hostport.startswith("["):
        host, bracket, port_text = hostport[1:].partition("]")
        if not bracket:
            raise ConfigError(
                field, "IPv6 host is missing its closing ']', e.g. mysql://u@[::1]:3306/"
            )
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(field, f"{host!r} is not an IPv6 address, e.g. [::1]") from None
        if port_text and not port_text.startswith(":"):
            raise ConfigError(
                field, f"unexpected {port_text!r} after the IPv6 host; e.g. [::1]:3306"
            )
        port_text = port_text[1:] if port_text else ""
        has_port = bool(port_text) or hostport.endswith(":")
    else:
        if hostport.count(":") > 1:
            raise ConfigError(
                field, "IPv6 addresses must be written in brackets, e.g. mysql://u@[::1]:3306/"
            )
        host, colon, port_text = hostport.partition(":")
        has_port = bool(colon)
        if not host:
            raise ConfigError(field, f"missing host after '@', e.g. {example}")
        if _HOSTNAME.fullmatch(host) is None:
            raise ConfigError(
                field,
                f"{host!r} is not a valid host name or IPv4 address; "
                "e.g. 127.0.0.1 or db.example.com",
            )
    port = 3306
    if has_port:
        if not port_text:
            raise ConfigError(
                field,
                f"empty port after ':'; give a port or drop the ':' (default 3306), e.g. {example}",
            )
        if not port_text.isdigit():
            raise ConfigError(
                field, f"port {port_text!r} is not an integer; expected 1..65535, e.g. {example}"
            )
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise ConfigError(
                field, f"port {port} is out of range; expected 1..65535, e.g. {example}"
            )
    return host, port, path, query


def _check_password_refs(params: Mapping[str, str], inline_password: bool, field: str) -> None:
    refs = sorted(_PASSWORD_REFS & params.keys())
    if len(refs) > 1:
        raise ConfigError(
            field,
            "give the password one way only: password-env=VAR or password-file=/path, not both",
        )
    if refs and inline_password:
        raise ConfigError(
            field,
            f"the URI has both an inline password and {refs[0]}; drop one of them, e.g. "
            "mysql://repl@127.0.0.1:3306/?password-env=CDC_SOURCE_PASSWORD",
        )


def parse_source_uri(text: str, *, field: str = "source-uri") -> MySQLURI:
    """Parses and validates a source URI (``mysql://`` or ``mariadb://``).

    Parameters: ``server-id`` (1..2^32-1, unique among the source's replicas),
    ``ssl-ca``, ``ssl-cert``, ``ssl-key``, ``time-zone``, ``password-env``,
    ``password-file``, ``heartbeat-interval`` (seconds, > 0).
    """
    return MySQLURI.parse(text, field=field, allowed_params=SOURCE_PARAMS)


# --- sink URIs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MySQLSinkURI:
    """A MySQL or MariaDB database as the sink, with its write settings.

    ``load_data_rows``: from how many upserts of one table in one lane transaction
    these go as one ``LOAD DATA LOCAL INFILE`` (``cdc.sink.mysql.bulk``); 0: never,
    snapshot chunks included.
    """

    connection: MySQLURI
    worker_count: int = 8
    max_txn_row: int = 256
    safe_mode: bool = True
    transaction_atomicity: bool = False
    load_data_rows: int = 256

    @property
    def scheme(self) -> str:
        return self.connection.scheme

    @property
    def masked(self) -> str:
        return str(self.connection)

    def unmasked(self) -> str:
        return self.connection.unmasked()

    def describe(self) -> dict[str, Any]:
        """The effective settings, masked, for printing."""
        return {
            "kind": "mysql",
            "uri": self.masked,
            "worker-count": self.worker_count,
            "max-txn-row": self.max_txn_row,
            "safe-mode": self.safe_mode,
            "transaction-atomicity": self.transaction_atomicity,
            "load-data-rows": self.load_data_rows,
        }

    def __str__(self) -> str:
        return self.masked


class FileProtocol(enum.Enum):
    """How a file sink encodes changes (the file sink writes ``FILE_SINK_PROTOCOLS``)."""

    CANAL_JSON = "canal-json"
    CSV = "csv"
    PARQUET = "parquet"


#: The protocols the file sink writes (its codecs, ``cdc.sink.file.sink.codec_for``).
FILE_SINK_PROTOCOLS = (FileProtocol.CANAL_JSON, FileProtocol.CSV)


@dataclass(frozen=True)
class FileSinkURI:
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
        return f"file://{quote(self.path, safe='/')}{_render_query(self.params)}"

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


@dataclass(frozen=True)
class BlackholeSinkURI:
    """Discards every change; for benchmarks and tests of the upstream half."""

    @property
    def scheme(self) -> str:
        return "blackhole"

    @property
    def masked(self) -> str:
        return "blackhole://"

    def unmasked(self) -> str:
        return self.masked

    def describe(self) -> dict[str, Any]:
        return {"kind": "blackhole", "uri": self.masked}

    def __str__(self) -> str:
        return self.masked


@dataclass(frozen=True)
class PullSinkURI:
    """Changes wait in a ring for clients to pull (get / ack / rollback)."""

    @property
    def scheme(self) -> str:
        return "pull"

    @property
    def masked(self) -> str:
        return "pull://"

    def unmasked(self) -> str:
        return self.masked

    def describe(self) -> dict[str, Any]:
        return {"kind": "pull", "uri": self.masked}

    def __str__(self) -> str:
        return self.masked


SinkURI = MySQLSinkURI | FileSinkURI | BlackholeSinkURI | PullSinkURI

_SINK_EXAMPLE = "mysql://root@127.0.0.1:3306/ or blackhole://"


def file_protocol(value: str, field: str) -> FileProtocol:
    """The :class:`FileProtocol` named ``value`` that the file sink writes, or an error
    listing the ones it does (a protocol it cannot write would fail the changefeed forever)."""
    choices = [p.value for p in FILE_SINK_PROTOCOLS]
    try:
        protocol = FileProtocol(value.strip().lower())
    except ValueError:
        raise ConfigError(
            field,
            f"unknown protocol {value!r}; {_suggest(value, choices)}"
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


def _env_name(value: str, field: str) -> str:
    if _ENV_NAME.fullmatch(value) is None:
        raise ConfigError(
            field,
            f"{value!r} is not an environment variable name; use letters, digits and '_', "
            "e.g. password-env=CDC_SOURCE_PASSWORD",
        )
    return value


# One checker per query parameter: (raw value, dotted field) -> typed value.
_PARAM_CHECKS: Mapping[str, Callable[[str, str], Any]] = MappingProxyType(
    {
        "server-id": lambda v, f: _int_value(v, f, 1, _SERVER_ID_MAX, "server-id=1001"),
        "heartbeat-interval": lambda v, f: _positive_seconds(v, f, "heartbeat-interval=1.5"),
        "time-zone": _time_zone,
        "password-env": _env_name,
        "password-file": lambda v, f: _absolute_path(v, f, "password-file=/etc/cdc/source.pw"),
        "ssl-ca": lambda v, f: _absolute_path(v, f, "ssl-ca=/etc/cdc/tls/ca.pem"),
        "ssl-cert": lambda v, f: _absolute_path(v, f, "ssl-cert=/etc/cdc/tls/client.pem"),
        "ssl-key": lambda v, f: _absolute_path(v, f, "ssl-key=/etc/cdc/tls/client-key.pem"),
        "worker-count": lambda v, f: _int_value(v, f, 1, _WORKER_COUNT_MAX, "worker-count=8"),
        "max-txn-row": lambda v, f: _int_value(v, f, 1, _MAX_TXN_ROW_MAX, "max-txn-row=256"),
        "safe-mode": lambda v, f: _bool_value(v, f, "safe-mode=true"),
        "transaction-atomicity": lambda v, f: _bool_value(v, f, "transaction-atomicity=false"),
        "load-data-rows": lambda v, f: _int_value(
            v, f, 0, _LOAD_DATA_ROWS_MAX, "load-data-rows=256 (0: never LOAD DATA)"
        ),
        "protocol": file_protocol,
        "file-size": _file_size,
        "flush-interval": _flush_interval,
    }
)


def check_params(params: Mapping[str, str], *, field: str) -> dict[str, Any]:
    """Validates each parameter's value; returns them typed, keyed by parameter name.

    Errors name ``<field>.<parameter>``.
    """
    return {name: _PARAM_CHECKS[name](value, f"{field}.{name}") for name, value in params.items()}


def parse_sink_uri(
    text: str,
    *,
    field: str = "sink-uri",
    defaults: Mapping[str, str] | None = None,
    defaults_field: str = "sink",
) -> SinkURI:
    """Parses and validates a sink URI of any supported scheme.

    ``defaults`` supplies query parameters the URI does not give itself (the
    ``[sink]`` table of a changefeed file); they are checked first, with errors
    naming ``<defaults_field>.<parameter>``, and then become part of the URI
    so that its text carries them.
    """
    scheme, rest = _split_scheme(text, field, _SINK_EXAMPLE)
    if scheme not in RUNNABLE_SINK_SCHEMES and scheme in SINK_SCHEMES:
        listed = ", ".join(f"{s}://" for s in RUNNABLE_SINK_SCHEMES)
        raise ConfigError(
            field,
            f"{scheme}:// sinks are not served by cdc-server yet (no service hands their "
            f"changes to clients), so the changefeed could never run; supported: {listed}",
        )
    _check_scheme(scheme, RUNNABLE_SINK_SCHEMES, field, _SINK_EXAMPLE)
    extra = dict(defaults or {})
    allowed = SINK_PARAMS[scheme]
    for name in extra:
        if name not in allowed:
            kinds = [s for s in SINK_SCHEMES if name in SINK_PARAMS[s]]
            applies = ", ".join(f"{s}://" for s in kinds) or "no"
            raise ConfigError(
                f"{defaults_field}.{name}",
                f"{name!r} applies to {applies} sinks, but the sink URI is {scheme}://; "
                "remove it or change the sink",
            )
    check_params(extra, field=defaults_field)
    if scheme in MYSQL_SCHEMES:
        return _parse_mysql_sink(text, field, extra)
    if scheme == "file":
        return _parse_file_sink(rest, field, extra)
    if rest not in ("", "/"):
        if "?" in rest:
            _parse_query(rest.partition("?")[2], field, frozenset())
        raise ConfigError(
            field, f"{scheme}:// takes no host, path or parameters; write just {scheme}://"
        )
    return BlackholeSinkURI()


def _with_defaults(params: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    merged = dict(params)
    for name, value in defaults.items():
        merged.setdefault(name, value)
    return merged


def _parse_mysql_sink(text: str, field: str, defaults: Mapping[str, str]) -> MySQLSinkURI:
    connection = MySQLURI.parse(text, field=field, allowed_params=MYSQL_SINK_PARAMS)
    connection = replace(connection, params=_with_defaults(connection.params, defaults))
    typed = check_params(connection.params, field=field)
    settings = {
        attribute: typed[name]
        for name, attribute in (
            ("worker-count", "worker_count"),
            ("max-txn-row", "max_txn_row"),
            ("safe-mode", "safe_mode"),
            ("transaction-atomicity", "transaction_atomicity"),
            ("load-data-rows", "load_data_rows"),
        )
        if name in typed
    }
    return MySQLSinkURI(connection, **settings)


def _parse_file_sink(rest: str, field: str, defaults: Mapping[str, str]) -> FileSinkURI:
    raw_path, _, query = rest.partition("?")
    if not raw_path.startswith("/"):
        # what follows any '@' only: user information before it may hold a password
        where = raw_path.partition("/")[0].rpartition("@")[2]
        raise ConfigError(
            field,
            f"file sinks need an absolute path and no host ({where!r} was read as a host or "
            "a relative path); write three slashes, e.g. file:///var/lib/cdc/out?protocol=csv",
        )
    params = _with_defaults(_parse_query(query, field, FILE_SINK_PARAMS), defaults)
    typed = check_params(params, field=field)
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
