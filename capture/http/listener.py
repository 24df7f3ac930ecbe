"""One threaded HTTP(S) listener of a cdc-server, serving a WSGI application.

    HttpListener(host, port, app, tls=None)   binds in the constructor (a taken port
                                              raises OSError at once), then serves on
                                              its own daemon thread until stop()

Shared by ``--metrics-addr`` (``/metrics`` alone) and ``--http-addr`` (``/metrics``,
the JSON API and the console). The TLS handshake runs in the request's own
thread, so a client that never finishes it holds no other request. Requests
are not logged (a Prometheus scrape or a console poll every few seconds);
refusals are, by the application.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from cdc.logs import ContextLogger, get_logger

__all__ = ["App", "HttpListener", "StartResponse"]

StartResponse = Callable[..., Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


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
        self.log.info("http request from %s failed", client_address[0])


class _Quiet(WSGIRequestHandler):
    timeout = 30  # seconds a client may take to send its request (and to finish TLS)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (scrapes and console polls come every few seconds)."""


class HttpListener:
    """Serves ``app`` on ``host:port`` (HTTPS with ``tls``) on a daemon thread, until ``stop``."""

    def __init__(
        self, host: str, port: int, app: App, *, tls: ssl.SSLContext | None = None, name: str
    ) -> None:
        self._server = _Server(host, port, tls, get_logger(__name__))
        self._server.set_app(app)
        self.scheme = "https" if tls is not None else "http"
        shown = f"[{host}]" if ":" in host else host
        self.address = f"{shown}:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.address}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
