"""Opening the sink a changefeed's URI names: its kind's ``open`` (``cdc.sink.registry``).

    mysql://, mariadb://  -> cdc.sink.mysql.MySQLSink
    file://               -> cdc.sink.file.FileSink
    blackhole://          -> cdc.sink.blackhole.BlackholeSink
    pull://               -> cdc.subscription.PullSink, through the process's pull host

Every failure to open is a ``SinkError``, the one error the changefeed turns into its
error state.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc.sink.base import SchemaLookup, Sink
from cdc.sink.kind import SinkURI
from cdc.sink.registry import kind_of

__all__ = ["open_sink"]


def open_sink(
    uri: SinkURI,
    schemas: SchemaLookup,
    changefeed_id: str,
    *,
    writable: Callable[[], bool] | None = None,
) -> Sink:
    """The sink for ``uri``, open and ready for ``write_rows``.

    ``writable`` fences a database sink: asked before every statement and
    commit (``MySQLSinkOptions.writable``); the pipelines pass their capture's
    lease liveness.

    Raises ``SinkError`` when it cannot be opened (unreachable or refusing
    server, unwritable directory) or when ``uri`` names no sink to open here.
    """
    return kind_of(uri).open(uri, schemas, changefeed_id, writable=writable)
