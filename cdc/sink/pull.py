"""The pull sink kind (``pull://``): changes wait in a ring for clients to pull.

The ring and its service are ``cdc.subscription``; cdc-server does not serve
pull changefeeds yet, so the kind is not runnable: its URI is refused when a
changefeed is parsed, and it is never opened as a sink.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.kind import NoPassword, SinkKind
from cdc.uri.grammar import check_bare, split_scheme

__all__ = ["PULL", "PullKind", "PullSinkURI"]


@dataclass(frozen=True)
class PullSinkURI(NoPassword):
    """Changes wait in a ring for clients to pull (get / ack / rollback)."""

    @property
    def scheme(self) -> str:
        return "pull"

    @property
    def masked(self) -> str:
        return "pull://"

    def unmasked(self) -> str:
        return self.masked

    def describe(self) -> dict[str, Any]:
        return {"kind": "pull", "uri": self.masked}

    def __str__(self) -> str:
        return self.masked


class PullKind(SinkKind[PullSinkURI]):
    """See the module docstring."""

    name = "pull"
    schemes = ("pull",)
    uri_type = PullSinkURI
    not_served = "no service hands their changes to clients"

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> PullSinkURI:
        scheme, rest = split_scheme(text, field, "pull://")
        check_bare(scheme, rest, field)
        return PullSinkURI()

    def open(
        self,
        uri: PullSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        raise SinkError(
            f"{uri.masked}: pull sinks are served by the subscription service, not opened "
            "directly; clients get / ack / rollback batches through it"
        )


PULL = PullKind()
