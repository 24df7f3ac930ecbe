"""Routes of the HTTP listener, each checked against ``capture.access`` before it runs.

    Route("GET", "/api/v1/changefeeds/{id}", GetChangefeed, handler)
        │
    Router: path and method ─► authorize(tokens, operation, Authorization header)
        │                          ├─ refused: 401 (no or unknown token) or 403 (read-only
        │                          │  token on an action), one log line, never the token;
        │                          │  JSON under /api/ ({"error": "PERMISSION_DENIED", ...})
        ▼                          └─ allowed: handler(environ, start_response)
    404 for an unknown path, 405 for a known path with another method

Every route names the operation it does: the gRPC method (``REQUIRED``'s
names), or an entry of its own (``/metrics``, the console's assets), so the
HTTP front answers exactly as the gRPC API does. Path parameters (``{id}``)
match one percent-decoded segment and reach the handler in
``environ["cdc.params"]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from capture.access import AccessTokens, Refusal, authorize
from capture.http.listener import App, StartResponse
from cdc.logs import ContextLogger

__all__ = ["PARAMS", "Route", "Router", "plain"]

PARAMS = "cdc.params"
_PARAM = re.compile(r"\{([a-z_]+)\}")

#: Headers on every answer: no framing, no sniffing, nothing cached, scripts only our own.
SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)


@dataclass(frozen=True)
class Route:
    """``method`` and ``path`` (``{name}`` matches one segment) served by ``app`` for
    whoever may do ``operation`` (a ``capture.access.REQUIRED`` name)."""

    method: str
    path: str
    operation: str
    app: App
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = _PARAM.split(self.path)
        regex = "".join(
            f"(?P<{part}>[^/]+)" if n % 2 else re.escape(part) for n, part in enumerate(parts)
        )
        object.__setattr__(self, "pattern", re.compile(regex + r"\Z"))

    def match(self, path: str) -> dict[str, str] | None:
        found = self.pattern.match(path)
        if found is None:
            return None
        return {name: unquote(value) for name, value in found.groupdict().items()}


def plain(
    start_response: StartResponse, status: str, text: str, *extra: tuple[str, str]
) -> list[bytes]:
    """A one-line text/plain answer."""
    headers = [("Content-Type", "text/plain; charset=utf-8"), *SECURITY_HEADERS, *extra]
    start_response(status, headers)
    return [text.encode() + b"\n"]


def _refuse(start_response: StartResponse, route: Route, refusal: Refusal) -> list[bytes]:
    """401 or 403 with the reason: JSON for the API (``{"error": <gRPC code>, ...}``, as its
    other errors), one text line elsewhere (/metrics)."""
    status = "403 Forbidden" if refusal.permission else "401 Unauthorized"
    challenge = ("WWW-Authenticate", 'Bearer realm="cdc-server"')
    if not route.path.startswith("/api/"):
        return plain(start_response, status, refusal.message, challenge)
    code = "PERMISSION_DENIED" if refusal.permission else "UNAUTHENTICATED"
    body = json.dumps({"error": code, "message": refusal.message}).encode()
    headers = [("Content-Type", "application/json"), *SECURITY_HEADERS, challenge]
    start_response(status, headers)
    return [body]


class Router:
    """The WSGI application of a listener: ``routes`` behind ``tokens``."""

    def __init__(self, routes: Sequence[Route], tokens: AccessTokens, log: ContextLogger) -> None:
        self._routes = tuple(routes)
        self._tokens = tokens
        self._log = log

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        allowed: list[str] = []
        for route in self._routes:
            params = route.match(path)
            if params is None:
                continue
            if route.method != method and not (route.method == "GET" and method == "HEAD"):
                allowed.append(route.method)
                continue
            refusal = authorize(self._tokens, route.operation, environ.get("HTTP_AUTHORIZATION"))
            if refusal is not None:
                peer = environ.get("REMOTE_ADDR", "?")
                self._log.warning(
                    "refused a call to %s: %s (from %s)", route.operation, refusal.message, peer
                )
                return _refuse(start_response, route, refusal)
            environ[PARAMS] = params
            return route.app(environ, start_response)
        if allowed:
            allow = ("Allow", ", ".join(sorted(set(allowed))))
            text = f"{path} answers {allow[1]} only, not {method}"
            return plain(start_response, "405 Method Not Allowed", text, allow)
        return plain(start_response, "404 Not Found", f"{path}: no such page")
