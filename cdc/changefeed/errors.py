"""What the changefeed lifecycle refuses, each with what to do instead."""

from __future__ import annotations

from cdc.errors import ConfigError
from cdc.schema.errors import DdlApplyError
from cdc.source.checks import ChangesUnavailable
from cdc.store.errors import ValueFormatError
from cdc.typeconv import UnsupportedType

__all__ = [
    "ChangefeedError",
    "ChangefeedExists",
    "ChangefeedNotFound",
    "InvalidTransition",
    "NotStopped",
    "UpdateRefused",
    "is_permanent",
]


class ChangefeedError(Exception):
    """Base of the lifecycle errors."""


class ChangefeedExists(ChangefeedError):
    def __init__(self, changefeed_id: str) -> None:
        self.changefeed_id = changefeed_id
        super().__init__(
            f"changefeed {changefeed_id} exists already; pick another id, or update it "
            "(pause it first) or remove it"
        )


class ChangefeedNotFound(ChangefeedError, LookupError):
    def __init__(self, changefeed_id: str) -> None:
        self.changefeed_id = changefeed_id
        super().__init__(
            f"changefeed {changefeed_id} does not exist; list the changefeeds to check its id"
        )


class InvalidTransition(ChangefeedError):
    """A state change the state diagram does not allow (see ``ChangefeedState``)."""


class NotStopped(ChangefeedError):
    """An update of a changefeed that is not paused."""

    def __init__(self, changefeed_id: str, state: str) -> None:
        self.changefeed_id = changefeed_id
        super().__init__(
            f"changefeed {changefeed_id} is {state}: its configuration can only be updated "
            "while it is stopped; pause it, update it, then resume it"
        )


class UpdateRefused(NotStopped):
    """An update the changefeed cannot take in its state (a setting other than the table
    rules while it runs, any change while it is in error, or before the owner applied the
    previous table rules)."""

    def __init__(self, changefeed_id: str, message: str) -> None:
        self.changefeed_id = changefeed_id
        ChangefeedError.__init__(self, f"changefeed {changefeed_id}: {message}")


def is_permanent(exc: BaseException) -> bool:
    """Whether retrying cannot cure ``exc``: the changefeed then fails and needs the user.

    A configuration that does not parse, a DDL the schema history cannot
    follow, changes the binlog no longer has (a purged position, rows logged
    as statements) and a column type no converter exists for stay wrong however
    often they are retried; everything else (unreachable servers, a sink error,
    a lost connection) may pass.
    """
    return isinstance(
        exc,
        ConfigError | DdlApplyError | ValueFormatError | ChangesUnavailable | UnsupportedType,
    )
