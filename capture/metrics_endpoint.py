"""``/metrics`` of a cdc-server: Prometheus text over HTTP, or HTTPS, behind the tokens.

    cdc-server --metrics-addr H:P                       http://H:P/metrics, open
    ... --tls-cert F --tls-key F                         https://H:P/metrics, the admin API's
                                                         certificate
    ... --tls-ca F                                       and a client certificate signed by F
    ... --auth-token-file F [--read-token-file R]        "Authorization: Bearer <token>", the
                                                         read-only or the admin one
                                                         (capture.access: METRICS needs READ)
    cdc-server --http-addr H:P                           the same /metrics on the listener
                                                         that also serves the JSON API and
                                                         the console (capture.http)

A refused scrape gets 401 (no token or an unknown one) or 403, a one-line
reason, and one log line without the token (``capture.http.router``).
"""

from __future__ import annotations

import ssl

from capture.access import AccessTokens
from capture.http.listener import HttpListener
from capture.http.metrics import metrics_route
from capture.http.router import Router
from cdc.logs import get_logger

__all__ = ["MetricsEndpoint"]


class MetricsEndpoint:
    """Serves ``/metrics`` alone on ``host:port`` on its own daemon thread, until ``stop``.

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
        router = Router([metrics_route()], tokens or AccessTokens(), get_logger(__name__))
        self._listener = HttpListener(host, port, router, tls=tls, name="metrics")
        self.scheme = self._listener.scheme
        self.address = self._listener.address

    @property
    def url(self) -> str:
        return f"{self._listener.base_url}/metrics"

    def stop(self) -> None:
        self._listener.stop()
