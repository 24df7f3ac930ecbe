"""The file sink (``file:///path?protocol=canal-json|csv``) and the reader of its files.

``FileSink`` writes a changefeed's changes under one folder in TiCDC's
storage-sink layout (:mod:`.layout`), as canal-json (:mod:`.canal_json`) or
csv (:mod:`.csv_format`) with every canonical value encoded exactly
(:mod:`.values`). ``read_changes`` and ``replay_into`` (:mod:`.reader`) need
nothing but the files to give the changes back or to rebuild the tables.

The names below are imported when first used (``cdc.lazy``): the file sink kind
parses its URI without the reader.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.sink.file.codec import FileFormatError
    from cdc.sink.file.reader import (
        FileSinkReader,
        ReplayError,
        ReplayStats,
        read_changes,
        replay_into,
    )
    from cdc.sink.file.sink import FileSink

__all__ = [
    "FileFormatError",
    "FileSink",
    "FileSinkReader",
    "ReplayError",
    "ReplayStats",
    "read_changes",
    "replay_into",
]

__getattr__ = exports(
    globals(),
    {
        "cdc.sink.file.codec": ("FileFormatError",),
        "cdc.sink.file.reader": (
            "FileSinkReader",
            "ReplayError",
            "ReplayStats",
            "read_changes",
            "replay_into",
        ),
        "cdc.sink.file.sink": ("FileSink",),
    },
)
