"""The errors of pull subscriptions; the service turns each into one gRPC status.

UnknownChangefeedError      NOT_FOUND
UnknownClientError          NOT_FOUND
InvalidRequestError         INVALID_ARGUMENT (``field`` names the request field)
ring.UnknownBatchError      INVALID_ARGUMENT (field batch_id)
ring.OutOfOrderAckError     FAILED_PRECONDITION
SubscriptionClosedError     UNAVAILABLE (the changefeed is stopping)
"""

from __future__ import annotations

__all__ = [
    "InvalidRequestError",
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
