"""Schema history: the schema of every captured table at every binlog position.

Initial schemas are read once from ``information_schema`` at the start
position (``loader``); from there every DDL in the binlog is parsed (``ddl``,
sqlglot's MySQL dialect stretched in ``dialect``) and applied in order
(``history``). A past event's meaning is never looked up on the live server,
whose schema may have moved on since.

The names below are imported when first used (``cdc.lazy``): the schema's error and
loader need no SQL parser.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.schema.ddl import apply_ddl, parse_ddl
    from cdc.schema.errors import DdlApplyError
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

__getattr__ = exports(
    globals(),
    {
        "cdc.schema.ddl": ("apply_ddl", "parse_ddl"),
        "cdc.schema.errors": ("DdlApplyError",),
        "cdc.schema.history": ("SchemaHistory",),
        "cdc.schema.loader": ("list_tables", "load_schemas", "load_table_schema"),
    },
)
