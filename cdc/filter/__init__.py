"""Filters of a changefeed: which tables (table filter), which events (event filter), which DDL.

* :class:`TableFilter` decides which tables a changefeed captures (TiDB's
  table-filter syntax, last matching rule wins).
* :class:`EventFilter` drops row changes and DDL by type, SQL text or row
  values (TiCDC's ``[[filter.event-filters]]``).
* :func:`compile_expression` compiles the SQL row expressions the event
  filter uses; :mod:`cdc.filter.sqlvalues` holds their MySQL value semantics.
* :func:`is_supported` / :func:`ddl_skip_reason` say which DDL a sink applies.

The names below are imported when first used (``cdc.lazy``): a table filter needs no
SQL parser.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.filter.ddl_support import DEFAULT_SUPPORTED_DDL, ddl_skip_reason, is_supported
    from cdc.filter.event_filter import ALTER_TABLE_KINDS, EventFilter, ignore_event_names
    from cdc.filter.expr import (
        SUPPORTED_FUNCTIONS,
        ExpressionError,
        RowExpression,
        UnknownColumnError,
        compile_expression,
    )
    from cdc.filter.table_filter import RULE_SYNTAX, SYSTEM_SCHEMAS, TableFilter, is_system_schema

__all__ = [
    "ALTER_TABLE_KINDS",
    "DEFAULT_SUPPORTED_DDL",
    "RULE_SYNTAX",
    "SUPPORTED_FUNCTIONS",
    "SYSTEM_SCHEMAS",
    "EventFilter",
    "ExpressionError",
    "RowExpression",
    "TableFilter",
    "UnknownColumnError",
    "compile_expression",
    "ddl_skip_reason",
    "ignore_event_names",
    "is_supported",
    "is_system_schema",
]

__getattr__ = exports(
    globals(),
    {
        "cdc.filter.ddl_support": (
            "DEFAULT_SUPPORTED_DDL",
            "ddl_skip_reason",
            "is_supported",
        ),
        "cdc.filter.event_filter": (
            "ALTER_TABLE_KINDS",
            "EventFilter",
            "ignore_event_names",
        ),
        "cdc.filter.expr": (
            "SUPPORTED_FUNCTIONS",
            "ExpressionError",
            "RowExpression",
            "UnknownColumnError",
            "compile_expression",
        ),
        "cdc.filter.table_filter": (
            "RULE_SYNTAX",
            "SYSTEM_SCHEMAS",
            "TableFilter",
            "is_system_schema",
        ),
    },
)
