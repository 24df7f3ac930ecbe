"""The ``cdc.v1.SubscriptionService`` servicer: gRPC in front of the pull sinks of this server.

The server process keeps a :class:`SinkRegistry`; a changefeed running here
with a pull sink registers its :class:`PullSink` on start and unregisters it
on stop. Every request names its changefeed and is served by that sink; the
errors map to status codes as listed in ``cdc.subscription.errors`` and the
proto. ``Get`` holds a server thread while it waits (at most 60 s, and never
past the caller's deadline): size the server's thread pool for the clients.

With a :class:`Router` (cdc-server), a request for a changefeed without an
open sink here is answered with where it is served
(``cdc.subscription.routing``): UNAVAILABLE with the trailers
``cdc-serving-capture`` and ``cdc-serving-address`` when another capture
serves it, which the client library follows. Without one (a bare server in
tests), it is NOT_FOUND.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import grpc

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.logs import get_logger
from cdc.store import StoreError
from cdc.store.keys import InvalidKeyError, check_name
from cdc.subscription.codec import CodecError, events_to_batch, position_to_proto
from cdc.subscription.errors import (
    InvalidRequestError,
    NotPullableError,
    NotServedNowError,
    NotServingError,
    ServedElsewhereError,
    SubscriptionClosedError,
    UnknownChangefeedError,
    UnknownClientError,
)
from cdc.subscription.listing import list_subscriptions
from cdc.subscription.ring import OutOfOrderAckError, UnknownBatchError
from cdc.subscription.routing import Elsewhere, Refused, Router, Wait
from cdc.subscription.sink import MAX_WAIT, PullSink

__all__ = [
    "SERVING_ADDRESS",
    "SERVING_CAPTURE",
    "SERVICE_NAME",
    "SinkRegistry",
    "SubscriptionServicer",
    "add_subscription_service",
]

#: Trailers of an answer from a capture that does not serve the changefeed.
SERVING_CAPTURE = "cdc-serving-capture"
SERVING_ADDRESS = "cdc-serving-address"

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SubscriptionService"].full_name
#: Time kept back from the caller's deadline, so a batch is not handed out too late to arrive.
_DEADLINE_MARGIN = 0.2

log = get_logger(__name__)
R = TypeVar("R")


class SinkRegistry:
    """The pull sinks of the changefeeds running on this server, by changefeed id."""

    def __init__(self) -> None:
        self._sinks: dict[str, PullSink] = {}
        self._lock = threading.Lock()

    def register(self, sink: PullSink) -> None:
        """Serve ``sink``'s changefeed; it replaces a closed sink of the same changefeed."""
        with self._lock:
            current = self._sinks.get(sink.changefeed_id)
            if current is not None and current is not sink and not current.closed:
                raise ValueError(
                    f"changefeed {sink.changefeed_id!r} already has an open pull sink here"
                )
            self._sinks[sink.changefeed_id] = sink

    def unregister(self, sink: PullSink) -> None:
        """Stop serving ``sink`` (nothing happens if another sink took its place)."""
        with self._lock:
            if self._sinks.get(sink.changefeed_id) is sink:
                del self._sinks[sink.changefeed_id]

    def get(self, changefeed_id: str) -> PullSink:
        with self._lock:
            sink = self._sinks.get(changefeed_id)
        if sink is None:
            raise UnknownChangefeedError(changefeed_id)
        return sink

    def find(self, changefeed_id: str) -> PullSink | None:
        """The open sink of ``changefeed_id`` here, if any."""
        with self._lock:
            sink = self._sinks.get(changefeed_id)
        return None if sink is None or sink.closed else sink

    def replace(self, sink: PullSink) -> PullSink | None:
        """Serve ``sink``; the sink it replaces, if one was registered (the caller closes
        it: a stream that failed and one opened after it)."""
        with self._lock:
            previous = self._sinks.get(sink.changefeed_id)
            self._sinks[sink.changefeed_id] = sink
        return previous if previous is not sink else None

    def open_sinks(self) -> list[PullSink]:
        with self._lock:
            return [sink for sink in self._sinks.values() if not sink.closed]


def _status(exc: Exception) -> tuple[grpc.StatusCode, str] | None:
    """The gRPC status of an expected error, or None for a bug."""
    if isinstance(exc, UnknownChangefeedError | UnknownClientError):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, InvalidRequestError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, UnknownBatchError):
        return grpc.StatusCode.INVALID_ARGUMENT, f"batch_id: {exc}"
    if isinstance(exc, OutOfOrderAckError):
        return grpc.StatusCode.FAILED_PRECONDITION, f"batch_id: {exc}"
    if isinstance(
        exc,
        SubscriptionClosedError | NotServingError | ServedElsewhereError | NotServedNowError,
    ):
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    if isinstance(exc, NotPullableError):
        code = grpc.StatusCode.NOT_FOUND if exc.not_found else grpc.StatusCode.FAILED_PRECONDITION
        return code, str(exc)
    if isinstance(exc, StoreError):
        return grpc.StatusCode.UNAVAILABLE, f"cannot record the subscription in etcd: {exc}"
    return None


class SubscriptionServicer(pb_grpc.SubscriptionServiceServicer):
    def __init__(self, registry: SinkRegistry, router: Router | None = None) -> None:
        self.registry = registry
        self.router = router

    def _sink(self, changefeed_id: str) -> PullSink:
        """The open sink of the changefeed here, or the error that says where it is."""
        if self.router is None:
            return self.registry.get(changefeed_id)
        sink = self.registry.find(changefeed_id)
        if sink is not None:
            return sink
        route = self.router.locate(changefeed_id)
        if isinstance(route, Elsewhere):
            raise ServedElsewhereError(changefeed_id, route.capture_id, route.address)
        if isinstance(route, Wait):
            raise NotServedNowError(route.reason)
        assert isinstance(route, Refused)
        raise NotPullableError(route.reason, not_found=route.not_found)

    def _serve(
        self,
        context: grpc.ServicerContext,
        method: str,
        changefeed_id: str,
        call: Callable[[PullSink], R],
    ) -> R:
        try:
            try:
                check_name("changefeed_id", changefeed_id)
            except InvalidKeyError as exc:
                raise InvalidRequestError("changefeed_id", str(exc)) from None
            return call(self._sink(changefeed_id))
        except Exception as exc:
            if isinstance(exc, ServedElsewhereError):
                context.set_trailing_metadata(
                    ((SERVING_CAPTURE, exc.capture_id), (SERVING_ADDRESS, exc.address))
                )
            status = _status(exc)
            if status is None:
                log.exception("%s on changefeed %r failed", method, changefeed_id)
                status = (grpc.StatusCode.INTERNAL, f"{method} failed: {exc}")
            context.abort(*status)
            raise AssertionError("context.abort returned") from exc

    def Subscribe(  # gRPC method name
        self, request: pb.SubscribeRequest, context: grpc.ServicerContext
    ) -> pb.SubscribeResponse:
        def call(sink: PullSink) -> pb.SubscribeResponse:
            result = sink.subscribe(request.client_id, list(request.filter_rules))
            response = pb.SubscribeResponse(filter_rules=result.rules, resumed=result.resumed)
            if result.acked is not None:
                position_to_proto(result.acked, response.acked_position)
            return response

        return self._serve(context, "Subscribe", request.changefeed_id, call)

    def Get(  # gRPC method name
        self, request: pb.GetRequest, context: grpc.ServicerContext
    ) -> pb.Batch:
        def call(sink: PullSink) -> pb.Batch:
            if request.timeout_ms > MAX_WAIT * 1000:
                raise InvalidRequestError(
                    "timeout_ms", f"must be 0 .. {MAX_WAIT * 1000:.0f}, not {request.timeout_ms}"
                )
            timeout = request.timeout_ms / 1000
            remaining = context.time_remaining()
            if remaining is not None and timeout > 0:
                timeout = min(timeout, max(0.0, remaining - _DEADLINE_MARGIN))
            batch = sink.get(request.client_id, request.max_events, timeout)
            try:
                return events_to_batch(batch.batch_id, batch.events)
            except CodecError as exc:
                raise RuntimeError(
                    f"batch {batch.batch_id} of client {request.client_id!r} cannot be "
                    f"encoded: {exc}"
                ) from exc

        return self._serve(context, "Get", request.changefeed_id, call)

    def Ack(  # gRPC method name
        self, request: pb.AckRequest, context: grpc.ServicerContext
    ) -> pb.AckResponse:
        def call(sink: PullSink) -> pb.AckResponse:
            acked = sink.ack(request.client_id, request.batch_id)
            response = pb.AckResponse()
            if acked is not None:
                position_to_proto(acked, response.acked_position)
            return response

        return self._serve(context, "Ack", request.changefeed_id, call)

    def Rollback(  # gRPC method name
        self, request: pb.RollbackRequest, context: grpc.ServicerContext
    ) -> pb.RollbackResponse:
        def call(sink: PullSink) -> pb.RollbackResponse:
            return pb.RollbackResponse(redelivered=sink.rollback(request.client_id))

        return self._serve(context, "Rollback", request.changefeed_id, call)

    def Unsubscribe(  # gRPC method name
        self, request: pb.UnsubscribeRequest, context: grpc.ServicerContext
    ) -> pb.UnsubscribeResponse:
        def call(sink: PullSink) -> pb.UnsubscribeResponse:
            return pb.UnsubscribeResponse(removed=sink.unsubscribe(request.client_id))

        return self._serve(context, "Unsubscribe", request.changefeed_id, call)

    def ListSubscriptions(  # gRPC method name
        self, request: pb.ListSubscriptionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSubscriptionsResponse:
        cf = request.changefeed_id
        try:
            if cf:
                try:
                    check_name("changefeed_id", cf)
                except InvalidKeyError as exc:
                    raise InvalidRequestError("changefeed_id", str(exc)) from None
            if self.router is None:
                raise NotServedNowError(
                    "this server does not read the cluster's subscriptions (no router)"
                )
            infos = list_subscriptions(self.router, self.registry, cf or None)
            return pb.ListSubscriptionsResponse(subscriptions=infos)
        except Exception as exc:
            status = _status(exc)
            if status is None:
                log.exception("ListSubscriptions %r failed", cf)
                status = (grpc.StatusCode.INTERNAL, f"ListSubscriptions failed: {exc}")
            context.abort(*status)
            raise AssertionError("context.abort returned") from exc


def add_subscription_service(
    server: grpc.Server, registry: SinkRegistry, router: Router | None = None
) -> str:
    """Serve the subscriptions of ``registry`` on ``server`` (routing clients with
    ``router`` when given); the service's full name (for reflection and health)."""
    servicer = SubscriptionServicer(registry, router)
    pb_grpc.add_SubscriptionServiceServicer_to_server(servicer, server)
    return SERVICE_NAME
