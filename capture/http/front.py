"""``cdc-server --http-addr H:P``: one listener for /metrics, the JSON API and the console.

    HttpFront(...)                   binds H:P (OSError at once when taken), starts
      ├─ /metrics                    Prometheus (capture.http.metrics)
      ├─ /api/v1/...                 the JSON API (capture.http.api)
      ├─ / and /assets/...           the console (capture.http.assets)
      └─ LagSampler                  the last hour of lag, in memory (lag_history)

Same TLS and tokens as the admin API: HTTPS with its certificate (and client
certificates under --tls-ca), every route checked by ``capture.access``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from capture.access import AccessTokens
from capture.admin_service import ChangefeedServicer
from capture.http.api import api_routes
from capture.http.assets import console_routes
from capture.http.lag_history import LagHistory, LagSampler
from capture.http.listener import HttpListener
from capture.http.metrics import metrics_route
from capture.http.reader import ConsoleReader
from capture.http.router import Router
from capture.info_service import CaptureServicer
from cdc.logs import get_logger
from cdc.store import EtcdStore

__all__ = ["HttpFront", "HttpServices"]


@dataclass(frozen=True)
class HttpServices:
    """What the routes read and call: the store and the admin API's servicers."""

    store: EtcdStore
    changefeeds: ChangefeedServicer
    capture: CaptureServicer


class HttpFront:
    """The listener and the lag sampler of ``--http-addr``; ``stop()`` ends both."""

    def __init__(
        self,
        host: str,
        port: int,
        services: HttpServices,
        *,
        tls: ssl.SSLContext | None = None,
        tokens: AccessTokens | None = None,
        history: LagHistory | None = None,
    ) -> None:
        reader = ConsoleReader(services.store)
        self.history = history or LagHistory()
        routes = [
            metrics_route(),
            *api_routes(reader, services.changefeeds, services.capture, self.history),
            *console_routes(),
        ]
        router = Router(routes, tokens or AccessTokens(), get_logger(__name__))
        self._listener = HttpListener(host, port, router, tls=tls, name="http")
        self._sampler = LagSampler(reader.lags, self.history).start()

    @property
    def url(self) -> str:
        """The console's address (``http(s)://host:port/``)."""
        return f"{self._listener.base_url}/"

    def stop(self) -> None:
        self._sampler.stop()
        self._listener.stop()
