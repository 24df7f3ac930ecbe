"""Calls the admin API's servicers in-process, so the HTTP API does exactly what gRPC does.

    HTTP route ─► call(servicer.PauseChangefeed, request) ─► the same validation,
                  lifecycle write, masking and log line as a gRPC call
                  └─ context.abort(code, message) ─► ApiError(HTTP status, message)

The servicers abort with a gRPC status code and a masked message; here that
becomes the HTTP status an operator expects (``_HTTP``). An exception the
servicer does not map is logged with its traceback and answered 500 without
its text (it may quote anything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import grpc

from cdc.logs import get_logger

__all__ = ["ApiError", "call"]

_HTTP: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 413,
    grpc.StatusCode.UNAVAILABLE: 503,
}

_Reply = TypeVar("_Reply")


class ApiError(Exception):
    """An answer other than 200: the HTTP ``status``, the gRPC ``code`` name and a message
    (already masked by the servicer)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Context:
    """The part of ``grpc.ServicerContext`` the servicers use: ``abort``."""

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise ApiError(_HTTP.get(code, 500), code.name, details)

    def peer(self) -> str:
        return "http"


def call(method: Callable[[Any, Any], _Reply], request: Any) -> _Reply:
    """``method(request, context)`` of a servicer; ``ApiError`` for whatever it refuses."""
    try:
        return method(request, _Context())
    except ApiError:
        raise
    except Exception:
        get_logger(__name__).exception("%s failed", getattr(method, "__name__", method))
        raise ApiError(500, "INTERNAL", "the server failed; its log says why") from None
