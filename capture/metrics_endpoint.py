"""``/metrics`` of a cdc-server: Prometheus text over HTTP, or HTTPS, behind the tokens.

    cdc-server --metrics-addr H:P                       http://H:P/metrics, open
    ... --tls-cert F --tls-key F                         https://H:P/metrics, the admin API's
                                                         certificate
    ... --tls-ca F                                       and a client certificate signed by F
    ... --auth-token-file F [--read-token-file R]        "Authorization: Bearer <token>", the
                                                         read-only or the admin one
                                                         (capture.access: METRICS needs READ)

A refused scrape gets 401 (no token or an unknown one) or 403, a one-line
reason, and one log line without the token. The TLS handshake runs in the
request's own thread, so a client that never finishes it holds no other scrape.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import make_wsgi_app

from capture.access import METRICS, AccessTokens, authorize
from cdc.logs import ContextLogger, get_logger

__all__ = ["MetricsEndpoint"]

_Start = Callable[[str, list[tuple[str, str]]], Any]
_App = Callable[[dict[str, Any], _Start], Iterable[bytes]]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None, log: ContextLogger):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.tls, self.log = tls, log
        super().__init__((host, port), _Quiet)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        if self.tls is None:
            return conn, address
        # the handshake happens on the first read, in the request's thread
        return self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a failed handshake or a client gone mid-answer: one line, no traceback on stderr
        self.log.info("metrics request from %s failed", client_address[0])


class _Quiet(WSGIRequestHandler):
    timeout = 30  # seconds a client may take to send its request (and to finish TLS)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one a few seconds per Prometheus)."""


def _guarded(app: _App, tokens: AccessTokens, log: ContextLogger) -> _App:
    def guarded(environ: dict[str, Any], start_response: _Start) -> Iterable[bytes]:
        refusal = authorize(tokens, METRICS, environ.get("HTTP_AUTHORIZATION"))
        if refusal is None:
            return app(environ, start_response)
        peer = environ.get("REMOTE_ADDR", "?")
        log.warning("refused a call to %s: %s (from %s)", METRICS, refusal.message, peer)
        status = "403 Forbidden" if refusal.permission else "401 Unauthorized"
        headers = [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("WWW-Authenticate", 'Bearer realm="cdc-server"'),
        ]
        start_response(status, headers)
        return [refusal.message.encode() + b"\n"]

    return guarded


class MetricsEndpoint:
    """Serves ``/metrics`` on ``host:port`` on its own daemon thread, until ``stop``.

    ``tls``: the server context (the admin API's certificate, and client CA when
    mutual); None for plain HTTP. Binding happens in the constructor, so a taken
    port raises ``OSError`` at once.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        tokens: AccessTokens | None = None,
    ) -> None:
        log = get_logger(__name__)
        self._server = _Server(host, port, tls, log)
        self._server.set_app(_guarded(make_wsgi_app(), tokens or AccessTokens(), log))
        self.scheme = "https" if tls is not None else "http"
        self.address = f"{host}:{self._server.server_port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}/metrics"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
