"""The admin endpoint's security: TLS (optionally mutual) and bearer tokens with roles.

    --tls-cert F --tls-key F            TLS; clients verify the server against their CA
    ... --tls-ca F                      mutual TLS: a client certificate signed by this CA
                                        is required for every call, health checks included
    --auth-token-file F                 the admin token: every call needs
    (env CDC_AUTH_TOKEN_FILE)           "authorization: Bearer <token>", except
                                        grpc.health.v1.Health (probes carry no token)
    --read-token-file F                 a read-only token: queries and lists only
    (env CDC_READ_TOKEN_FILE)           (capture.access has the table of who may do what)

The files are read and checked once at start-up, so a bad file is a clear
error (exit code 2) rather than a failed handshake later. The token is
compared in constant time and never logged.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from capture.access import NO_TOKEN, TOKEN_REJECTED, AccessTokens, Refusal, authorize
from cdc.errors import ConfigError
from cdc.logs import ContextLogger, get_logger

__all__ = [
    "NO_TOKEN",
    "TOKEN_REJECTED",
    "AccessInterceptor",
    "ServerTLS",
    "load_server_tls",
]


@dataclass(frozen=True)
class ServerTLS:
    """The PEM contents the admin endpoint serves TLS with; ``client_ca`` turns on mutual TLS.

    ``http``: the same settings as a context for the HTTPS endpoint (/metrics).
    """

    cert_chain: bytes = field(repr=False)
    private_key: bytes = field(repr=False)
    client_ca: bytes | None = field(default=None, repr=False)
    http: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def _read(path: str, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(flag, f"cannot read {path}: {exc.strerror or exc}") from None


def load_server_tls(cert: str | None, key: str | None, ca: str | None) -> ServerTLS | None:
    """The TLS settings of the flags, checked (pair matches, CA parses); None without TLS."""
    if cert is None and key is None:
        if ca is not None:
            raise ConfigError(
                "--tls-ca", "client certificates need TLS: give --tls-cert and --tls-key too"
            )
        return None
    if cert is None or key is None:
        missing = "--tls-cert" if cert is None else "--tls-key"
        raise ConfigError(missing, "TLS needs both --tls-cert and --tls-key")
    chain, private_key = _read(cert, "--tls-cert"), _read(key, "--tls-key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ConfigError(
            "--tls-key",
            f"{cert} and {key} are not a PEM certificate and its private key ({exc.reason})",
        ) from None
    if ca is None:
        return ServerTLS(chain, private_key, http=context)
    client_ca = _read(ca, "--tls-ca")
    try:
        context.load_verify_locations(cafile=ca)
    except ssl.SSLError as exc:
        raise ConfigError("--tls-ca", f"{ca} holds no PEM CA certificate ({exc.reason})") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return ServerTLS(chain, private_key, client_ca, context)


class AccessInterceptor(grpc.ServerInterceptor):
    """Checks every call against the role its method needs (``capture.access``).

    A refused call is answered UNAUTHENTICATED or PERMISSION_DENIED and logged with
    its method and peer, never its token; the health service stays open for probes.
    """

    def __init__(self, tokens: AccessTokens) -> None:
        self._tokens = tokens
        self.log = get_logger(__name__)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        metadata = handler_call_details.invocation_metadata or ()
        values = [value for key, value in metadata if key == "authorization"]
        refusal = authorize(self._tokens, method, values[0] if values else None)
        if refusal is None:
            return handler
        return _refusing(handler, method, refusal, self.log)


def _refusing(
    handler: grpc.RpcMethodHandler, method: str, refusal: Refusal, log: ContextLogger
) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that logs and aborts with the refusal."""
    code = (
        grpc.StatusCode.PERMISSION_DENIED if refusal.permission else grpc.StatusCode.UNAUTHENTICATED
    )

    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        log.warning("refused a call to %s: %s (from %s)", method, refusal.message, context.peer())
        context.abort(code, refusal.message)

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)
