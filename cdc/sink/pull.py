"""The pull sink kind (``pull://``): changes wait in rings for clients to pull.

The rings, their service and the client are ``cdc.subscription``; this
module is the kind's seam. The rings live in the cdc-server process that runs
the changefeed's tables, which installs its :class:`PullHost` at start
(``serve_pull``): the kind opens sinks and records the owner's DDL through
it, since the sink layer cannot reach the subscription layer above it.

* ``one_writer``: one subscription holds a changefeed's whole ordered stream,
  so the owner schedules all of its tables on one capture.
* No snapshot yet: snapshot chunks are written by Spark tasks in other
  processes, which cannot reach the rings, so a changefeed with a pull sink
  must use snapshot mode ``never`` (refused at create otherwise).
* DDL: the owner records each DDL it applies; the capture serving the
  changefeed hands it to the clients before the rows after it
  (``cdc.subscription.ddl_log``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cdc.model.events import DdlEvent
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.kind import BareSinkURI, SinkKind

if TYPE_CHECKING:
    from cdc.sink.chunks import ChunkSink

__all__ = ["PULL", "PullHost", "PullKind", "PullSinkURI", "serve_pull"]


@dataclass(frozen=True)
class PullSinkURI(BareSinkURI):
    """Changes wait in a ring for clients to pull (get / ack / rollback)."""

    kind = "pull"


class PullHost(Protocol):
    """What a cdc-server process offers the pull kind (``cdc.subscription.host``)."""

    def open(self, changefeed_id: str, writable: Callable[[], bool] | None) -> Sink:
        """The changefeed's pull sink on this capture, registered with its service."""

    def record_ddl(self, changefeed_id: str, ddl: DdlEvent) -> None:
        """The owner applied ``ddl``: record it for the capture serving the changefeed."""


_host: PullHost | None = None


def serve_pull(host: PullHost | None) -> None:
    """Installs the process's pull host (None: removes it). One cdc-server per process."""
    global _host
    _host = host


def _served(uri: PullSinkURI, what: str) -> PullHost:
    if _host is None:
        raise SinkError(
            f"{uri.masked}: {what} needs the subscription service of a cdc-server process, "
            "and none runs here; pull sinks run inside cdc-server only"
        )
    return _host


class PullKind(SinkKind[PullSinkURI]):
    """See the module docstring."""

    name = "pull"
    schemes = ("pull",)
    uri_type = PullSinkURI
    one_writer = True
    no_snapshot = (
        "snapshot rows are written by Spark tasks in other processes, which cannot reach "
        "the subscription rings"
    )
    no_failover = (
        "its clients acknowledge positions as file:offset without the source they were read "
        "on, so acknowledgements of the old server could not be told from the new one's"
    )

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
        return _served(uri, "a pull sink").open(changefeed_id, writable)

    def apply_ddl(self, uri: PullSinkURI, ddl: DdlEvent, changefeed_id: str) -> None:
        """Records the DDL for the capture serving the changefeed (module docstring)."""
        _served(uri, "recording a DDL for pull clients").record_ddl(changefeed_id, ddl)

    def chunk_sink(self, uri: PullSinkURI, changefeed_id: str) -> ChunkSink:
        raise SinkError(f"{uri.masked}: pull sinks take no snapshot chunks ({self.no_snapshot})")


PULL = PullKind()
