"""The JSON API: a few reads and three actions, each route doing one gRPC method.

    route                                     operation (capture.access)   role
    GET    /api/v1/changefeeds                ListChangefeeds              read
    GET    /api/v1/changefeeds/{id}           GetChangefeed                read
    GET    /api/v1/changefeeds/{id}/lag       GetChangefeed                read
    GET    /api/v1/captures                   ListCaptures                 read
    GET    /api/v1/capture                    CaptureService/GetCapture    read
    POST   /api/v1/changefeeds/{id}/pause     PauseChangefeed              admin
    POST   /api/v1/changefeeds/{id}/resume    ResumeChangefeed             admin
    DELETE /api/v1/changefeeds/{id}           RemoveChangefeed             admin

Reads go through the shared readers (``ConsoleReader``); actions and the
capture reads call the admin API's own servicers (``grpc_bridge``), so they
validate, write, mask and log exactly as the gRPC calls do. An action must
say ``Content-Type: application/json``: a page of another site cannot send
that without the browser asking first (a CORS preflight, never granted), so
without tokens a foreign page still cannot pause a changefeed. Errors are
``{"error": <gRPC code name>, "message": ...}`` with the matching HTTP status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from capture.admin_service import ChangefeedServicer
from capture.http.grpc_bridge import ApiError, call
from capture.http.lag_history import LagHistory
from capture.http.listener import App, StartResponse
from capture.http.reader import ConsoleReader
from capture.http.router import PARAMS, SECURITY_HEADERS, Route
from capture.http.views import masked
from capture.info_service import CaptureServicer
from cdc.api.gen.cdc.v1 import admin_pb2, capture_pb2
from cdc.changefeed import ChangefeedNotFound
from cdc.errors import ConfigError
from cdc.logs import get_logger
from cdc.store import StoreError
from cdc.store.keys import InvalidKeyError

__all__ = ["api_routes"]

_SERVICE = "/cdc.v1.ChangefeedService/"
_STATUS = {200: "200 OK", 400: "400 Bad Request", 401: "401 Unauthorized",
           403: "403 Forbidden", 404: "404 Not Found", 409: "409 Conflict",
           413: "413 Content Too Large", 415: "415 Unsupported Media Type",
           500: "500 Internal Server Error", 503: "503 Service Unavailable"}  # fmt: skip

Handler = Callable[[dict[str, str]], Any]


def _answer(start_response: StartResponse, status: int, body: Any) -> list[bytes]:
    data = json.dumps(masked(body), separators=(",", ":")).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(data))),
        *SECURITY_HEADERS,
    ]
    start_response(_STATUS.get(status, f"{status} Error"), headers)
    return [data]


def _reading(exc: Exception) -> ApiError | None:
    """The answer to a reader's exception (as admin_service maps them), None if unknown."""
    if isinstance(exc, ChangefeedNotFound):
        return ApiError(404, "NOT_FOUND", str(exc))
    if isinstance(exc, ConfigError | InvalidKeyError):
        return ApiError(400, "INVALID_ARGUMENT", str(exc))
    if isinstance(exc, StoreError):
        return ApiError(503, "UNAVAILABLE", f"etcd: {exc}")
    return None


def _json(handler: Handler, *, action: bool = False) -> App:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if action and not environ.get("CONTENT_TYPE", "").startswith("application/json"):
            message = "send actions with Content-Type: application/json"
            return _answer(start_response, 415, {"error": "INVALID_ARGUMENT", "message": message})
        try:
            return _answer(start_response, 200, handler(environ[PARAMS]))
        except ApiError as exc:
            error = exc
        except Exception as exc:
            known = _reading(exc)
            if known is None:
                get_logger(__name__).exception("%s failed", environ.get("PATH_INFO"))
                known = ApiError(500, "INTERNAL", "the server failed; its log says why")
            error = known
        body = {"error": error.code, "message": error.message}
        return _answer(start_response, error.status, body)

    return app


def _ref(params: dict[str, str]) -> admin_pb2.ChangefeedRef:
    return admin_pb2.ChangefeedRef(changefeed_id=params["id"])


def _state(reply: admin_pb2.Changefeed) -> dict[str, Any]:
    return {"id": reply.changefeed_id, "state": reply.status.state}


def api_routes(
    reader: ConsoleReader,
    changefeeds: ChangefeedServicer,
    capture: CaptureServicer,
    history: LagHistory,
) -> list[Route]:
    """The routes of the table above."""

    def lag(params: dict[str, str]) -> dict[str, Any]:
        reader.changefeeds_store.get(params["id"])  # 404 for a changefeed that is not there
        points = history.series(params["id"], time.time())
        return {"window": history.window, "interval": history.interval, "points": points}

    def captures(_: dict[str, str]) -> list[dict[str, Any]]:
        reply = call(changefeeds.ListCaptures, admin_pb2.ListCapturesRequest())
        return [
            {"id": c.id, "address": c.address, "version": c.version,
             "started_at": c.started_at, "is_owner": c.is_owner}
            for c in reply.captures
        ]  # fmt: skip

    def this_capture(_: dict[str, str]) -> dict[str, Any]:
        info = call(capture.GetCapture, capture_pb2.GetCaptureRequest())
        return {"id": info.id, "address": info.address, "version": info.version,
                "is_owner": info.is_owner, "owner": info.owner_id or None,
                "cluster": info.cluster_id}  # fmt: skip

    def pause(params: dict[str, str]) -> dict[str, Any]:
        return _state(call(changefeeds.PauseChangefeed, _ref(params)))

    def resume(params: dict[str, str]) -> dict[str, Any]:
        return _state(call(changefeeds.ResumeChangefeed, _ref(params)))

    def remove(params: dict[str, str]) -> dict[str, Any]:
        reply = call(changefeeds.RemoveChangefeed, _ref(params))
        return {"id": reply.changefeed_id, "removed": True}

    one = "/api/v1/changefeeds/{id}"
    return [
        Route("GET", "/api/v1/changefeeds", f"{_SERVICE}ListChangefeeds",
              _json(lambda _: reader.changefeeds())),
        Route("GET", one, f"{_SERVICE}GetChangefeed",
              _json(lambda p: reader.changefeed(p["id"]))),
        Route("GET", f"{one}/lag", f"{_SERVICE}GetChangefeed", _json(lag)),
        Route("GET", "/api/v1/captures", f"{_SERVICE}ListCaptures", _json(captures)),
        Route("GET", "/api/v1/capture", "/cdc.v1.CaptureService/GetCapture",
              _json(this_capture)),
        Route("POST", f"{one}/pause", f"{_SERVICE}PauseChangefeed", _json(pause, action=True)),
        Route("POST", f"{one}/resume", f"{_SERVICE}ResumeChangefeed",
              _json(resume, action=True)),
        Route("DELETE", one, f"{_SERVICE}RemoveChangefeed", _json(remove, action=True)),
    ]  # fmt: skip
