"""The HTTP front's routing and access checks, without a server (capture.http.router, api)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

import pytest

from capture.access import CONSOLE, METRICS, REQUIRED, AccessTokens, Role
from capture.http.api import api_routes
from capture.http.assets import CONTENT_SECURITY_POLICY, console_routes
from capture.http.lag_history import LagHistory
from capture.http.metrics import metrics_route
from capture.http.router import PARAMS, Route, Router
from cdc.logs import get_logger

ADMIN, READ = "a" * 32, "r" * 32
TOKENS = AccessTokens(ADMIN, READ)


class Answer:
    def __init__(self, app: Any, environ: dict[str, Any]) -> None:
        self.status = ""
        self.headers: dict[str, str] = {}

        def start(status: str, headers: list[tuple[str, str]]) -> None:
            self.status, self.headers = status, dict(headers)

        body: Iterable[bytes] = app(environ, start)
        self.body = b"".join(body)

    @property
    def code(self) -> int:
        return int(self.status.split()[0])


def _echo(environ: dict[str, Any], start: Any) -> list[bytes]:
    start("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(environ[PARAMS]).encode()]


def _call(router: Router, method: str, path: str, token: str | None = None) -> Answer:
    environ: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path}
    if token is not None:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return Answer(router, environ)


OPS = "/cdc.v1.ChangefeedService/"
ROUTER = Router(
    [
        Route("GET", "/api/v1/changefeeds/{id}", f"{OPS}GetChangefeed", _echo),
        Route("POST", "/api/v1/changefeeds/{id}/pause", f"{OPS}PauseChangefeed", _echo),
        Route("GET", "/assets/{name}", CONSOLE, _echo),
        Route("GET", "/metrics", METRICS, _echo),
    ],
    TOKENS,
    get_logger("test.router"),
)


def test_a_path_parameter_is_one_percent_decoded_segment() -> None:
    answer = _call(ROUTER, "GET", "/api/v1/changefeeds/a%20b", READ)
    assert answer.code == 200 and json.loads(answer.body) == {"id": "a b"}
    assert _call(ROUTER, "GET", "/api/v1/changefeeds/a/b", READ).code == 404
    assert _call(ROUTER, "GET", "/api/v1/changefeeds/", READ).code == 404


def test_unknown_paths_and_methods() -> None:
    assert _call(ROUTER, "GET", "/nothing", ADMIN).code == 404
    answer = _call(ROUTER, "DELETE", "/api/v1/changefeeds/x", ADMIN)
    assert answer.code == 405 and answer.headers["Allow"] == "GET"
    assert _call(ROUTER, "HEAD", "/api/v1/changefeeds/x", READ).code == 200


def test_refusals_follow_capture_access(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    none = _call(ROUTER, "GET", "/api/v1/changefeeds/x")
    assert none.code == 401 and json.loads(none.body)["error"] == "UNAUTHENTICATED"
    assert none.headers["WWW-Authenticate"].startswith("Bearer")
    wrong = _call(ROUTER, "GET", "/api/v1/changefeeds/x", "x" * 32)
    assert wrong.code == 401 and json.loads(wrong.body)["message"] == "bearer token rejected"
    read = _call(ROUTER, "POST", "/api/v1/changefeeds/x/pause", READ)
    assert read.code == 403
    assert json.loads(read.body) == {
        "error": "PERMISSION_DENIED",
        "message": "the read-only token may not call PauseChangefeed: it changes the cluster; "
        "use the admin token (cdc-server --auth-token-file)",
    }
    assert _call(ROUTER, "POST", "/api/v1/changefeeds/x/pause", ADMIN).code == 200
    metrics = _call(ROUTER, "GET", "/metrics")
    assert metrics.code == 401 and metrics.headers["Content-Type"].startswith("text/plain")
    assert _call(ROUTER, "GET", "/assets/app.js").code == 200
    assert "refused a call to /cdc.v1.ChangefeedService/PauseChangefeed" in caplog.text
    assert READ not in caplog.text and ADMIN not in caplog.text


def test_without_tokens_everything_is_open() -> None:
    router = Router(ROUTER._routes, AccessTokens(), get_logger("test.router"))
    assert _call(router, "POST", "/api/v1/changefeeds/x/pause").code == 200


def test_every_route_names_an_operation_of_the_access_table() -> None:
    routes = [
        *api_routes(None, None, None, LagHistory()),  # type: ignore[arg-type]
        *console_routes(),
        metrics_route(),
    ]
    roles = {(r.method, r.path): REQUIRED[r.operation] for r in routes}
    actions = {("POST", "pause"), ("POST", "resume"), ("DELETE", "{id}")}
    for (method, path), role in roles.items():
        if (method, path.rsplit("/", 1)[-1]) in actions:
            assert role is Role.ADMIN, path
        elif path.startswith("/api/") or path == METRICS:
            assert role is Role.READ, path
        else:
            assert role is None, path
    assert len(roles) == 11


def test_console_files_are_served_with_a_strict_policy() -> None:
    router = Router(console_routes(), TOKENS, get_logger("test.router"))
    page = _call(router, "GET", "/")
    assert page.code == 200 and b'<script type="module" src="/assets/app.js">' in page.body
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert page.headers["X-Frame-Options"] == "DENY"
    script = _call(router, "GET", "/assets/app.js")
    assert script.headers["Content-Type"].startswith("text/javascript")
    for missing in ("/assets/nothing.js", "/assets/..%2Fapi.py", "/assets/index.html"):
        assert _call(router, "GET", missing).code == 404, missing
    for text in (page.body, script.body):
        assert b"http://" not in text and b"https://" not in text  # no CDN, no other origin
