"""Opening the sink a changefeed's URI names.

    MySQLSinkURI      -> cdc.sink.mysql.MySQLSink
    FileSinkURI       -> cdc.sink.file.FileSink
    BlackholeSinkURI  -> cdc.sink.blackhole.BlackholeSink
    PullSinkURI       -> refused: pull subscriptions are served by the subscription service

Every failure to open is a ``SinkError``, the one error the changefeed turns into its
error state.
"""

from __future__ import annotations

from collections.abc import Callable

from cdc.config.uri import BlackholeSinkURI, FileSinkURI, MySQLSinkURI, PullSinkURI, SinkURI
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.blackhole import BlackholeSink
from cdc.sink.file import FileSink
from cdc.sink.mysql import MySQLSink
from cdc.sink.mysql.options import MySQLSinkOptions

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
    if isinstance(uri, MySQLSinkURI):
        return MySQLSink(uri, schemas, changefeed_id, MySQLSinkOptions(writable=writable))
    if isinstance(uri, BlackholeSinkURI):
        return BlackholeSink(uri, schemas, changefeed_id)
    if isinstance(uri, FileSinkURI):
        return FileSink(uri, schemas, changefeed_id)
    if isinstance(uri, PullSinkURI):
        raise SinkError(
            f"{uri.masked}: pull sinks are served by the subscription service, not opened "
            "directly; clients get / ack / rollback batches through it"
        )
    raise SinkError(
        f"no sink for {type(uri).__name__} ({uri!r:.80}); expected a parsed sink URI "
        "(cdc.config.uri.parse_sink_uri)"
    )
