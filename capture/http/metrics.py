"""``GET /metrics``: Prometheus' text format, for whoever may read ``capture.access.METRICS``.

One route shared by both listeners: ``--metrics-addr`` serves it alone
(``capture.metrics_endpoint``), ``--http-addr`` beside the API and the console.
"""

from __future__ import annotations

from prometheus_client import make_wsgi_app

from capture.access import METRICS
from capture.http.router import Route

__all__ = ["metrics_route"]


def metrics_route() -> Route:
    """The route; the answer is the process's default registry (``cdc.metrics``)."""
    return Route("GET", METRICS, METRICS, make_wsgi_app())
