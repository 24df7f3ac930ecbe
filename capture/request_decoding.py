"""Requests that are not the protobuf message they claim to be: INVALID_ARGUMENT, not INTERNAL.

gRPC's Python server parses a request before any of our code runs, and
answers one that does not parse (a string field holding invalid UTF-8, a
truncated message, a wire type the field does not have) with INTERNAL
"Exception deserializing request!" and a traceback in the log, as if the
server were broken. This interceptor hands every method its raw bytes and
parses them itself, so such a request gets::

    INVALID_ARGUMENT  the request is not a valid cdc.v1.ChangefeedRef (Error parsing message ...)

with one log line, and the method runs exactly as before on a request that
parses. Nothing of the request is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc

from cdc.logs import ContextLogger, get_logger

__all__ = ["DecodingInterceptor"]

_Parse = Callable[[bytes], Any]


class DecodingInterceptor(grpc.ServerInterceptor):
    def __init__(self) -> None:
        self.log = get_logger(__name__)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        decode = _Decoder(handler.request_deserializer, handler_call_details.method, self.log)
        return _raw_handler(handler, decode)


class _Decoder:
    """Parses one request with the method's own deserializer, or aborts the call."""

    def __init__(self, parse: _Parse, method: str, log: ContextLogger) -> None:
        self._parse = parse
        self._method = method
        message = getattr(getattr(parse, "__self__", None), "DESCRIPTOR", None)
        self.what = getattr(message, "full_name", "request")
        self._log = log

    def __call__(self, raw: bytes, context: grpc.ServicerContext) -> Any:
        try:
            return self._parse(raw)
        except Exception as exc:  # DecodeError, or whatever a deserializer raises
            self._log.info(
                "refused a request to %s: not a valid %s (%d bytes, from %s)",
                self._method,
                self.what,
                len(raw),
                context.peer(),
            )
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the request is not a valid {self.what} ({type(exc).__name__}: {exc})",
            )

    def each(self, raws: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[Any]:
        for raw in raws:
            yield self(raw, context)


def _raw_handler(handler: grpc.RpcMethodHandler, decode: _Decoder) -> grpc.RpcMethodHandler:
    """``handler`` taking raw bytes and parsing them with ``decode`` first."""
    serializer = handler.response_serializer
    if handler.unary_unary is not None:
        unary_unary = handler.unary_unary
        return grpc.unary_unary_rpc_method_handler(
            lambda raw, context: unary_unary(decode(raw, context), context),
            response_serializer=serializer,
        )
    if handler.unary_stream is not None:
        unary_stream = handler.unary_stream
        return grpc.unary_stream_rpc_method_handler(
            lambda raw, context: unary_stream(decode(raw, context), context),
            response_serializer=serializer,
        )
    if handler.stream_unary is not None:
        stream_unary = handler.stream_unary
        return grpc.stream_unary_rpc_method_handler(
            lambda raws, context: stream_unary(decode.each(raws, context), context),
            response_serializer=serializer,
        )
    stream_stream = handler.stream_stream
    return grpc.stream_stream_rpc_method_handler(
        lambda raws, context: stream_stream(decode.each(raws, context), context),
        response_serializer=serializer,
    )
