"""A small Python client of ``cdc.v1.SubscriptionService``.

    captures = ["cdc-0:8300", "cdc-1:8300", "cdc-2:8300"]      # any of them, or one Service
    with SubscriptionClient(captures, "orders-feed", "billing", ["shop.*"]) as client:
        while True:
            batch = client.get(max_events=500, timeout=1.0)
            for event in batch.events:
                handle(event)                 # RowChange or DdlEvent, canonical values
            if batch:
                client.ack(batch.batch_id)

Delivery is at least once: after any error (server restart, lost connection,
a deadline, the changefeed moving to another capture) call :meth:`subscribe`
again; every batch not acked is handed out again, so handling an event twice
must be harmless (dedupe by position and key when it is not). Batches are
acked in the order they were received.

Routing: a changefeed is served by the one capture running its tables. Any
other answers with that capture's address (trailer ``cdc-serving-address``),
and the client moves there: :meth:`subscribe` follows at once, the other
calls raise and the next :meth:`subscribe` goes there. A call the server
does not answer (UNAVAILABLE without an address, or a deadline) moves the
client to the next of the addresses it was given, so a client given every
capture (or a Service in front of them) finds the new one after a capture dies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import grpc

from cdc.api.channel import ClientSecurity, open_channel
from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.model.position import Position
from cdc.subscription.codec import event_from_proto, position_from_proto
from cdc.subscription.service import SERVING_ADDRESS
from cdc.subscription.subscription import EventBatch

__all__ = ["MAX_HOPS", "RPC_TIMEOUT", "SubscriptionClient", "SubscriptionRpcError"]

#: Deadline of every call, on top of a Get's own wait.
RPC_TIMEOUT = 10.0
#: How many redirects one subscribe follows (the tables may move while it follows them).
MAX_HOPS = 3
#: No limit on what a Get receives: the server cuts batches at about 8 MiB, but one row
#: (a LONGBLOB) may be larger than gRPC's default 4 MiB on its own.
_CHANNEL_OPTIONS = (("grpc.max_receive_message_length", -1),)
#: Codes after which the client tries the next address it was given.
_GONE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
R = TypeVar("R")


class SubscriptionRpcError(RuntimeError):
    """A call failed; ``code`` is the gRPC status (NOT_FOUND, INVALID_ARGUMENT, ...).

    ``redirect``: the address of the capture serving the changefeed, when the server
    answered with one (the client has moved there)."""

    def __init__(
        self, method: str, code: grpc.StatusCode, details: str, redirect: str | None = None
    ) -> None:
        self.method = method
        self.code = code
        self.details = details
        self.redirect = redirect
        super().__init__(f"{method} failed: {code.name}: {details}")


class SubscriptionClient:
    """One client id's subscription to one changefeed, reached through ``target``: one
    capture's address or several (module docstring, "Routing").

    ``rules`` are table filter rules (``["shop.*"]``); they are needed the
    first time a client id subscribes and replace its rules when given again.
    ``security``: TLS and the bearer token, as for the admin API. Use it as a
    context manager (subscribes on entry, closes on exit) or call
    :meth:`subscribe` and :meth:`close` yourself.
    """

    def __init__(
        self,
        target: str | Sequence[str],
        changefeed_id: str,
        client_id: str,
        rules: Sequence[str] = (),
        *,
        security: ClientSecurity | None = None,
    ) -> None:
        seeds = (target,) if isinstance(target, str) else tuple(target)
        if not seeds or not all(isinstance(t, str) and t for t in seeds):
            raise ValueError(f"give at least one server address HOST:PORT, not {target!r}")
        self.seeds = seeds
        self.changefeed_id = changefeed_id
        self.client_id = client_id
        self.rules = tuple(rules)
        self.security = security or ClientSecurity()
        self._next_seed = 1
        self.target = seeds[0]
        self._channel = open_channel(self.target, self.security, _CHANNEL_OPTIONS)
        self._stub = pb_grpc.SubscriptionServiceStub(self._channel)

    def __enter__(self) -> SubscriptionClient:
        try:
            self.subscribe()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _move(self, target: str) -> None:
        """Talk to ``target`` from the next call on."""
        if target == self.target:
            return
        self._channel.close()
        self.target = target
        self._channel = open_channel(target, self.security, _CHANNEL_OPTIONS)
        self._stub = pb_grpc.SubscriptionServiceStub(self._channel)

    def _call(self, method: str, call: Callable[[], R]) -> R:
        try:
            return call()
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            details = (exc.details() if hasattr(exc, "details") else "") or str(exc)
            trailers = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
            redirect = dict(trailers or ()).get(SERVING_ADDRESS)
            if isinstance(redirect, str) and redirect:
                self._move(redirect)
            elif code in _GONE and len(self.seeds) > 1:
                self._move(self.seeds[self._next_seed % len(self.seeds)])
                self._next_seed += 1
                redirect = None
            else:
                redirect = None
            raise SubscriptionRpcError(method, code, details, redirect) from None

    def _routed(self, method: str, call: Callable[[], R]) -> R:
        """``_call``, again at the address a redirect names (at most ``MAX_HOPS`` times)."""
        hops = 0
        while True:
            try:
                return self._call(method, call)
            except SubscriptionRpcError as exc:
                hops += 1
                if exc.redirect is None or hops > MAX_HOPS:
                    raise

    def subscribe(self) -> Position | None:
        """Subscribe or resume, at the capture serving the changefeed (redirects followed);
        unacked batches come again. The acked position the server keeps for this client
        (None: nothing yet): a progress marker, not a filter: see ``cdc.subscription``."""
        request = pb.SubscribeRequest(
            changefeed_id=self.changefeed_id, client_id=self.client_id, filter_rules=self.rules
        )
        response = self._routed(
            "Subscribe", lambda: self._stub.Subscribe(request, timeout=RPC_TIMEOUT)
        )
        self.rules = tuple(response.filter_rules)
        if response.HasField("acked_position"):
            return position_from_proto(response.acked_position)
        return None

    def get(self, max_events: int = 100, timeout: float = 1.0) -> EventBatch:
        """Up to ``max_events`` events, waiting up to ``timeout`` seconds for the first;
        the empty batch (id 0, needs no ack) when none came."""
        request = pb.GetRequest(
            changefeed_id=self.changefeed_id,
            client_id=self.client_id,
            max_events=max_events,
            timeout_ms=round(timeout * 1000),
        )
        reply = self._call("Get", lambda: self._stub.Get(request, timeout=timeout + RPC_TIMEOUT))
        return EventBatch(reply.batch_id, tuple(event_from_proto(e) for e in reply.events))

    def ack(self, batch_id: int) -> Position | None:
        """Confirm a batch (the oldest not yet acked); the acked position after it."""
        request = pb.AckRequest(
            changefeed_id=self.changefeed_id, client_id=self.client_id, batch_id=batch_id
        )
        response = self._call("Ack", lambda: self._stub.Ack(request, timeout=RPC_TIMEOUT))
        if response.HasField("acked_position"):
            return position_from_proto(response.acked_position)
        return None

    def rollback(self) -> int:
        """Have every batch not acked handed out again; how many events that is."""
        request = pb.RollbackRequest(changefeed_id=self.changefeed_id, client_id=self.client_id)
        response = self._call("Rollback", lambda: self._stub.Rollback(request, timeout=RPC_TIMEOUT))
        return response.redelivered

    def unsubscribe(self) -> bool:
        """End the subscription for good (its acked position is forgotten), at the capture
        serving the changefeed (redirects followed)."""
        request = pb.UnsubscribeRequest(changefeed_id=self.changefeed_id, client_id=self.client_id)
        response = self._routed(
            "Unsubscribe", lambda: self._stub.Unsubscribe(request, timeout=RPC_TIMEOUT)
        )
        return response.removed

    def close(self) -> None:
        """Close the channel; the subscription stays (unacked batches come again)."""
        self._channel.close()
