"""How to reach etcd: endpoints, TLS files, credentials, key prefix.

Endpoints are written ``host:port`` (a leading ``http://`` or ``https://`` is
accepted and dropped: TLS is on exactly when a CA file is given). Every
problem is a ``ConfigError`` naming the setting, what is wrong and an example.
The password never appears in ``repr()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.errors import ConfigError
from cdc.store.keys import InvalidKeyError, cluster_prefix, normalize_prefix

__all__ = ["DEFAULT_PREFIX", "EtcdConfig", "split_endpoint"]

DEFAULT_PREFIX = cluster_prefix()
_EXAMPLE = "127.0.0.1:2379,etcd-2.example:2379"


def _endpoint_error(text: str, why: str) -> ConfigError:
    return ConfigError(
        "etcd.endpoints", f"endpoint {text!r} {why}; write host:port, e.g. {_EXAMPLE}"
    )


def split_endpoint(text: str) -> tuple[str, int]:
    """``(host, port)`` of one endpoint; IPv6 hosts keep their brackets (``[::1]``)."""
    if not isinstance(text, str):
        raise ConfigError("etcd.endpoints", f"endpoint must be a string, got {text!r}")
    body = text.strip()
    lowered = body.lower()
    for scheme in ("http://", "https://"):
        if lowered.startswith(scheme):
            body = body[len(scheme) :]
            break
    body = body.rstrip("/")
    if not body:
        raise _endpoint_error(text, "is empty")
    if "@" in body:
        raise ConfigError(
            "etcd.endpoints",
            "credentials do not belong in an endpoint; set the etcd user and password instead",
        )
    if "/" in body or "?" in body:
        raise _endpoint_error(text, "has a path or query")
    if body.startswith("["):
        host, bracket, rest = body.partition("]")
        host += bracket
        if not bracket or not rest.startswith(":"):
            raise _endpoint_error(text, "has an IPv6 host but no ':port' after ']'")
        port_text = rest[1:]
    else:
        host, colon, port_text = body.rpartition(":")
        if not colon:
            raise _endpoint_error(text, "has no port")
        if ":" in host:
            raise _endpoint_error(text, "looks like IPv6; put the address in brackets: [::1]:2379")
    if not host or host == "[]":
        raise _endpoint_error(text, "has no host")
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _endpoint_error(text, f"has port {port_text!r}, not a number from 1 to 65535")
    return host, int(port_text)


def _normalize(text: str) -> str:
    host, port = split_endpoint(text)
    return f"{host}:{port}"


@dataclass(frozen=True)
class EtcdConfig:
    """Connection settings of an ``EtcdStore``.

    ``prefix`` is the cluster's key prefix (``/cdc/<cluster-id>``). TLS is used
    when ``ca`` is set; ``cert``/``key`` add a client certificate. ``user`` and
    ``password`` enable etcd authentication. ``dial_timeout`` bounds
    connecting and every single request, in seconds.
    """

    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    dial_timeout: float = 5.0

    def __post_init__(self) -> None:
        raw = self.endpoints
        items = self.parse_endpoints(raw) if isinstance(raw, str) else tuple(raw)
        if not items:
            raise ConfigError("etcd.endpoints", f"no endpoint given; e.g. {_EXAMPLE}")
        normalized = tuple(dict.fromkeys(_normalize(e) for e in items))
        object.__setattr__(self, "endpoints", normalized)
        try:
            object.__setattr__(self, "prefix", normalize_prefix(self.prefix))
        except InvalidKeyError as exc:
            raise ConfigError("etcd.prefix", str(exc)) from None
        if (self.cert is None) != (self.key is None):
            raise ConfigError(
                "etcd.cert", "a client certificate needs both the cert and the key file"
            )
        if self.cert is not None and self.ca is None:
            raise ConfigError("etcd.ca", "a client certificate needs TLS: set the CA file too")
        if (self.user is None) != (self.password is None):
            raise ConfigError("etcd.user", "etcd authentication needs both user and password")
        if self.user == "":
            raise ConfigError("etcd.user", "must not be empty")
        timeout = self.dial_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigError(
                "etcd.dial-timeout", f"must be a positive number of seconds, got {timeout!r}"
            )

    @staticmethod
    def parse_endpoints(text: str) -> tuple[str, ...]:
        """``("host:port", ...)`` from a comma-separated list such as ``"h1:2379,h2:2379"``."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("etcd.endpoints", f"no endpoint given; e.g. {_EXAMPLE}")
        parts = [part.strip() for part in text.split(",")]
        if any(not part for part in parts):
            raise ConfigError("etcd.endpoints", f"{text!r} has an empty entry; e.g. {_EXAMPLE}")
        return tuple(dict.fromkeys(_normalize(part) for part in parts))

    @property
    def tls(self) -> bool:
        """Whether connections use TLS."""
        return self.ca is not None
