"""Schema history: the schema of every captured table at every binlog position.

Initial schemas are read once from ``information_schema`` at the start
position (``loader``); from there every DDL in the binlog is parsed (``ddl``,
sqlglot's MySQL dialect stretched in ``dialect``) and applied in order
(``history``). A past event's meaning is never looked up on the live server,
whose schema may have moved on since.
"""

from cdc.schema.changes import DdlApplyError
from cdc.schema.ddl import apply_ddl, parse_ddl
from cdc.schema.history import SchemaHistory
from cdc.schema.loader import list_tables, load_schemas, load_table_schema

__all__ = [
    "DdlApplyError",
    "SchemaHistory",
    "apply_ddl",
    "list_tables",
    "load_schemas",
    "load_table_schema",
    "parse_ddl",
]
