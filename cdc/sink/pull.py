"""The pull sink kind (``pull://``): changes wait in a ring for clients to pull.

The ring and its service are ``cdc.subscription``; cdc-server does not serve
pull changefeeds yet, so the kind is not runnable: its URI is refused when a
changefeed is parsed, and it is never opened as a sink.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.kind import BareSinkURI, SinkKind

__all__ = ["PULL", "PullKind", "PullSinkURI"]


@dataclass(frozen=True)
class PullSinkURI(BareSinkURI):
    """Changes wait in a ring for clients to pull (get / ack / rollback)."""

    kind = "pull"


class PullKind(SinkKind[PullSinkURI]):
    """See the module docstring."""

    name = "pull"
    schemes = ("pull",)
    uri_type = PullSinkURI
    not_served = "no service hands their changes to clients"

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> PullSinkURI:
        return PullSinkURI.parse(text, field)

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
