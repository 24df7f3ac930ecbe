"""The errors of pull subscriptions; the service turns each into one gRPC status.

UnknownChangefeedError      NOT_FOUND
UnknownClientError          NOT_FOUND
InvalidRequestError         INVALID_ARGUMENT (``field`` names the request field)
ring.UnknownBatchError      INVALID_ARGUMENT (field batch_id)
ring.OutOfOrderAckError     FAILED_PRECONDITION
SubscriptionClosedError     UNAVAILABLE (the changefeed is stopping)
NotServingError             UNAVAILABLE (this capture's lease is not known alive)
ServedElsewhereError        UNAVAILABLE, with trailers cdc-serving-capture/-address
NotServedNowError           UNAVAILABLE (moving, starting, paused: retry)
NotPullableError            NOT_FOUND (no such changefeed) or FAILED_PRECONDITION
"""

from __future__ import annotations

__all__ = [
    "InvalidRequestError",
    "NotPullableError",
    "NotServedNowError",
    "NotServingError",
    "ServedElsewhereError",
    "SubscriptionClosedError",
    "SubscriptionError",
    "UnknownChangefeedError",
    "UnknownClientError",
]


class SubscriptionError(Exception):
    """Base of the errors below."""


class UnknownChangefeedError(SubscriptionError):
    def __init__(self, changefeed_id: str) -> None:
        self.changefeed_id = changefeed_id
        super().__init__(
            f"changefeed {changefeed_id!r} has no pull sink running on this server; check "
            "the changefeed id and that the changefeed runs here with a pull sink"
        )


class UnknownClientError(SubscriptionError):
    def __init__(self, changefeed_id: str, client_id: str) -> None:
        self.changefeed_id = changefeed_id
        self.client_id = client_id
        super().__init__(
            f"client {client_id!r} has not subscribed to changefeed {changefeed_id!r}; "
            "call Subscribe first"
        )


class InvalidRequestError(SubscriptionError):
    """A malformed request field; ``str()`` starts with the field's name."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class SubscriptionClosedError(SubscriptionError):
    def __init__(self, changefeed_id: str) -> None:
        self.changefeed_id = changefeed_id
        super().__init__(
            f"the pull sink of changefeed {changefeed_id!r} is closed (the changefeed is "
            "stopping); subscribe again once it runs"
        )


class NotServingError(SubscriptionError):
    def __init__(self, changefeed_id: str) -> None:
        self.changefeed_id = changefeed_id
        super().__init__(
            f"this capture's lease is not known to be alive, so it no longer serves changefeed "
            f"{changefeed_id!r} (its tables may run elsewhere); subscribe again, at another "
            "capture if this one does not recover"
        )


class ServedElsewhereError(SubscriptionError):
    """Another capture serves the changefeed; the status carries its id and address."""

    def __init__(self, changefeed_id: str, capture_id: str, address: str) -> None:
        self.changefeed_id = changefeed_id
        self.capture_id = capture_id
        self.address = address
        super().__init__(
            f"changefeed {changefeed_id!r} is served by capture {capture_id} at {address}, "
            "not here: subscribe there (trailer cdc-serving-address)"
        )


class NotServedNowError(SubscriptionError):
    """No capture can serve the changefeed now; ``str()`` says why."""


class NotPullableError(SubscriptionError):
    """The changefeed cannot be pulled: it does not exist (``not_found``), its sink is
    not pull://, or it has failed or finished."""

    def __init__(self, reason: str, *, not_found: bool = False) -> None:
        self.not_found = not_found
        super().__init__(reason)
