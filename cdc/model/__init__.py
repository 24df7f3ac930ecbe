"""The core model: positions, GTID sets, table schemas and change events.

Pure values with no I/O; every other part of the service speaks in these types.
"""

from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.gtid import Flavor, GtidSet, MariadbGtid
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema

__all__ = [
    "Column",
    "DdlEvent",
    "DdlKind",
    "Flavor",
    "GtidSet",
    "MariadbGtid",
    "Op",
    "Position",
    "RowChange",
    "TableName",
    "TableSchema",
]
