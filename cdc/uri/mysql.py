"""MySQL and MariaDB connection URIs: the source's, and the base of a database sink's.

::

    mysql://repl:secret@10.0.0.5:3306/?server-id=1001&time-zone=UTC      (source)
    mysql://root@127.0.0.1:3307/?password-env=CDC_SINK_PASSWORD           (sink's connection)

A password can be given inline or by reference (``password-env=VAR`` or
``password-file=/path``), resolved only where a connection is made, so that a
stored changefeed need not hold it. ``str()`` and ``repr()`` mask it;
``unmasked()`` gives the text to connect with. The parameters a URI takes are
its parser's: :data:`SOURCE_PARAMS` for a source; a database sink adds its
write settings to :data:`CONNECTION_PARAMS` (``cdc.sink.mysql.uri``).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote

from cdc.errors import ConfigError
from cdc.masking import MASK, userinfo_end
from cdc.uri.cleartext import guarded_auth_plugins
from cdc.uri.grammar import (
    ParamCheck,
    absolute_path,
    check_params,
    check_scheme,
    env_name,
    int_value,
    parse_query,
    positive_seconds,
    render_query,
    split_scheme,
    time_zone,
)
from cdc.uri.secrets import SecretPolicy, current_policy

__all__ = [
    "CONNECTION_PARAMS",
    "MYSQL_SCHEMES",
    "SOURCE_PARAMS",
    "MySQLURI",
    "SourceURI",
    "parse_source_uri",
]

MYSQL_SCHEMES = ("mysql", "mariadb")

_SERVER_ID_MAX = 2**32 - 1
_HOSTNAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.\-]*[A-Za-z0-9_])?")
_MYSQL_EXAMPLE = "mysql://repl@127.0.0.1:3306/?password-env=CDC_PASSWORD"
_PASSWORD_REFS = frozenset({"password-env", "password-file"})
_TLS_PARAMS = frozenset({"ssl-ca", "ssl-cert", "ssl-key"})

#: The parameters of every MySQL connection: password references, TLS files, time zone.
CONNECTION_PARAMS: Mapping[str, ParamCheck] = MappingProxyType(
    {
        "time-zone": time_zone,
        "password-env": env_name,
        "password-file": lambda v, f: absolute_path(v, f, "password-file=/etc/cdc/source.pw"),
        "ssl-ca": lambda v, f: absolute_path(v, f, "ssl-ca=/etc/cdc/tls/ca.pem"),
        "ssl-cert": lambda v, f: absolute_path(v, f, "ssl-cert=/etc/cdc/tls/client.pem"),
        "ssl-key": lambda v, f: absolute_path(v, f, "ssl-key=/etc/cdc/tls/client-key.pem"),
    }
)

#: The parameters of a source URI: a connection's, the replica's server id and heartbeat.
SOURCE_PARAMS: Mapping[str, ParamCheck] = MappingProxyType(
    {
        "server-id": lambda v, f: int_value(v, f, 1, _SERVER_ID_MAX, "server-id=1001"),
        "heartbeat-interval": lambda v, f: positive_seconds(v, f, "heartbeat-interval=1.5"),
        **CONNECTION_PARAMS,
    }
)


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
    def parse(cls, text: str, *, field: str, params: Mapping[str, ParamCheck]) -> MySQLURI:
        """Parses ``mysql://user:password@host:port/?param=value``.

        User and password are percent-decoded; the last ``@`` ends the user
        information, so an unencoded ``@`` in a password still works.
        ``params``: the parameters this kind of URI takes, each with its check
        (:data:`SOURCE_PARAMS`, or a database sink's); every one given is checked.
        """
        example = _MYSQL_EXAMPLE
        scheme, rest = split_scheme(text, field, example)
        check_scheme(scheme, MYSQL_SCHEMES, field, example)
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
        given = parse_query(query, field, params)
        _check_password_refs(given, bool(password), field)
        _check_tls_params(given, field)
        check_params(given, params, field=field)
        return cls(scheme, user, password, host, port, given, field)

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

    def check_password_ref(self, policy: SecretPolicy) -> None:
        """ConfigError when ``policy`` does not lend the file or variable the password is
        read from (``cdc.uri.secrets``); nothing to check for an inline password."""
        if self.password_env is not None:
            policy.check_env(self.password_env, self.field_name)
        if self.password_file is not None:
            policy.check_file(self.password_file, self.field_name)

    def resolve_password(self) -> str:
        """The password to connect with: inline, from ``password-env`` or from ``password-file``.

        Resolved at connection time in the process that connects, so a stored
        changefeed can carry just the reference; only a file or variable this
        process's secret policy lends is read (ConfigError otherwise, before reading).
        """
        self.check_password_ref(current_policy())
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
            "auth_plugin_map": guarded_auth_plugins(),
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
        return f"{self.scheme}://{userinfo}@{host}:{self.port}/{render_query(self.params)}"

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


def _check_tls_params(params: Mapping[str, str], field: str) -> None:
    """TLS without ``ssl-ca`` verifies nothing: PyMySQL would hand a client certificate, and
    with ``sha256_password`` the password itself, to whatever server answers."""
    given = sorted({"ssl-cert", "ssl-key"} & params.keys())
    if given and "ssl-ca" not in params:
        raise ConfigError(
            field,
            f"{given[0]} without ssl-ca would use TLS without checking the server's "
            "certificate; add ssl-ca=/path/to/ca.pem, the CA that signed the server's certificate",
        )


def parse_source_uri(text: str, *, field: str = "source-uri") -> MySQLURI:
    """Parses and validates a source URI (``mysql://`` or ``mariadb://``).

    Parameters: ``server-id`` (1..2^32-1, unique among the source's replicas),
    ``ssl-ca``, ``ssl-cert``, ``ssl-key``, ``time-zone``, ``password-env``,
    ``password-file``, ``heartbeat-interval`` (seconds, > 0).
    """
    return MySQLURI.parse(text, field=field, params=SOURCE_PARAMS)
