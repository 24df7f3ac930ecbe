"""The console's files, shipped inside the package (``capture/http/console/``).

No CDN and no build step: the console is plain HTML, CSS and ES modules that
the browser loads as they are, from the server the operator already reaches,
so it works on machines without internet (docs/console.md says why this
approach). The files are read once at start; only those names are served, so
no path from a request ever reaches the file system.

    GET /                  index.html
    GET /assets/<name>     console.css, *.js (ES modules)

Open to anyone who reaches the listener (``capture.access.CONSOLE``): the
files hold no data and no secret; everything they show comes from the JSON
API, behind the tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any

from capture.access import CONSOLE
from capture.http.listener import App, StartResponse
from capture.http.router import PARAMS, SECURITY_HEADERS, Route, plain

__all__ = ["CONTENT_SECURITY_POLICY", "console_routes"]

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}

#: Only the console's own files and API; no inline script, no other origin, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _load() -> dict[str, tuple[str, bytes]]:
    folder = resources.files("capture.http").joinpath("console")
    files = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if item.is_file() and suffix in _TYPES:
            files[item.name] = (_TYPES[suffix], item.read_bytes())
    if "index.html" not in files:
        raise RuntimeError(f"the console's files are missing from the package ({folder})")
    return files


def _serve(files: dict[str, tuple[str, bytes]], fixed: str | None) -> App:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        name = fixed or environ[PARAMS]["name"]
        found = files.get(name)
        if found is None or name == "index.html" and fixed is None:
            return plain(start_response, "404 Not Found", f"{name}: no such file")
        kind, data = found
        headers = [
            ("Content-Type", kind),
            ("Content-Length", str(len(data))),
            ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
            *SECURITY_HEADERS,
        ]
        start_response("200 OK", headers)
        return [data]

    return app


def console_routes() -> list[Route]:
    """``/`` and ``/assets/<name>``: the page and its files."""
    files = _load()
    return [
        Route("GET", "/", CONSOLE, _serve(files, "index.html")),
        Route("GET", "/assets/{name}", CONSOLE, _serve(files, None)),
    ]
