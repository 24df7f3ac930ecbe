"""The MySQL / MariaDB sink: idempotent batched writes in parallel lanes (see ``sink.py``).

Modules, one idea each: ``statements`` (changes to idempotent SQL, REPLACE vs
ON DUPLICATE KEY UPDATE), ``routing`` (lane choice, collation-aware keys),
``markers`` (the lane-marker rule for the flushed position), ``lanes`` (the
worker threads), ``bulk`` (which upserts go as one LOAD DATA), ``loadfile``
(rows as LOAD DATA data), ``localfile`` (LOAD DATA LOCAL that sends only that
data), ``chunkload`` (snapshot chunks by LOAD DATA), ``downstream`` (connection
and retry), ``ddl`` (replay-safe DDL), ``errors`` (transient / already-applied /
permanent), ``strict`` (strict sessions and the warnings that mean a changed value).

The names below are imported when first used (``cdc.lazy``): the sink kind parses
its URI without the sink.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.sink.mysql.options import MySQLSinkOptions
    from cdc.sink.mysql.sink import MySQLSink

__all__ = ["MySQLSink", "MySQLSinkOptions"]

__getattr__ = exports(
    globals(),
    {
        "cdc.sink.mysql.options": ("MySQLSinkOptions",),
        "cdc.sink.mysql.sink": ("MySQLSink",),
    },
)
