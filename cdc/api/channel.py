"""Client channels to a cdc-server's admin endpoint: plain, TLS or mutual TLS, with a token.

    ClientSecurity()                         plain text
    ClientSecurity(ca=...)                   TLS, the server verified against ``ca``
    ClientSecurity(ca=..., cert=..., key=...)  mutual TLS (the server's --tls-ca)
    server_name=...                          the name the server's certificate must carry,
                                             when it differs from the host dialled (a probe
                                             of 127.0.0.1 against a certificate for a DNS name)
    token=...                                "authorization: Bearer <token>" on every call
    user=...                                 "cdc-user: <name>" on every call: who the client
                                             says it is, for the changefeed audit history
                                             (cdcctl sends its OS user; claimed, not proven)

The token goes as call metadata through an interceptor, so it also works on
a plain-text channel (gRPC's own call credentials refuse those); there it
travels in clear text, as the server warns at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from cdc.errors import ConfigError

__all__ = ["ClientSecurity", "open_channel", "read_token_file"]


@dataclass(frozen=True)
class ClientSecurity:
    """TLS files (paths) and the bearer token a client presents; all optional.

    Errors name cdcctl's flags (--tls-ca, --tls-cert, --tls-key).
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    token: str | None = field(default=None, repr=False)
    server_name: str | None = None
    user: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            missing = "--tls-cert" if self.cert is None else "--tls-key"
            raise ConfigError(missing, "a client certificate needs both --tls-cert and --tls-key")
        if self.cert is not None and self.ca is None:
            raise ConfigError(
                "--tls-ca", "a client certificate needs TLS: give the server's CA with --tls-ca"
            )
        if self.server_name is not None and self.ca is None:
            raise ConfigError(
                "--tls-server-name", "checks the server's certificate: give --tls-ca too"
            )

    @property
    def tls(self) -> bool:
        return self.ca is not None

    def credentials(self) -> grpc.ChannelCredentials | None:
        """The TLS credentials (files read now); None for plain text."""
        if self.ca is None:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "--tls-ca"),
            private_key=_read(self.key, "--tls-key") if self.key else None,
            certificate_chain=_read(self.cert, "--tls-cert") if self.cert else None,
        )


def _read(path: str, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(flag, f"cannot read {path}: {exc.strerror or exc}") from None


def read_token_file(path: str, flag: str) -> str:
    """The token on the first line of ``path``, surrounding white space dropped.

    ConfigError names ``flag`` when the file cannot be read or holds no token.
    """
    lines = _read(path, flag).decode("utf-8", errors="replace").splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise ConfigError(flag, f"{path} is empty; put the token on its first line")
    return token


def open_channel(
    target: str,
    security: ClientSecurity | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.Channel:
    """A channel to ``target`` (HOST:PORT) as ``security`` says; close it (or use ``with``).

    ``options``: gRPC channel arguments (a pull client's message size limit)."""
    security = security or ClientSecurity()
    credentials = security.credentials()
    if credentials is None:
        channel = grpc.insecure_channel(target, options=list(options))
    else:
        name = security.server_name
        tls = [("grpc.ssl_target_name_override", name)] if name else []
        channel = grpc.secure_channel(target, credentials, options=[*tls, *options])
    metadata = [] if security.token is None else [("authorization", f"Bearer {security.token}")]
    if security.user:
        metadata.append(("cdc-user", _printable(security.user)))
    if not metadata:
        return channel
    return grpc.intercept_channel(channel, _Metadata(metadata))


def _printable(text: str) -> str:
    """``text`` as a metadata value may carry it (printable ASCII, escapes for the rest)."""
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    return "".join(c if " " <= c <= "~" else "?" for c in escaped)[:200]


class _Metadata(grpc.UnaryUnaryClientInterceptor):
    """Adds the token (``authorization: Bearer <token>``) and the user to every (unary) call."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def intercept_unary_unary(
        self,
        continuation: Callable[[Any, Any], Any],
        client_call_details: grpc.ClientCallDetails,
        request: Any,
    ) -> Any:
        details = client_call_details
        metadata = [*(details.metadata or ()), *self._metadata]
        return continuation(_CallDetails(details, metadata), request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, details: grpc.ClientCallDetails, metadata: list[tuple[str, str]]) -> None:
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = getattr(details, "wait_for_ready", None)
        self.compression = getattr(details, "compression", None)
