"""TiCDC's event filter: drop row changes and DDL by type, by SQL text, or by row values.

Each ``[[filter.event-filters]]`` rule applies to the tables its ``matcher``
accepts (table-filter syntax, :mod:`cdc.filter.table_filter`). An event is
dropped when ANY rule that applies to it says so::

    row change (table T, op)                 DDL (kind K, statement S)
      for each rule whose matcher accepts T    for each rule that applies (see below)
        ignore-event has op / 'all dml'?         ignore-event has K / 'all ddl'?
        value expression true on the image?      an ignore-sql regex found in S?
      -> ignored                               -> ignored

Row images tested by the value expressions (as TiCDC):

* insert: ``ignore-insert-value-expr`` on the after image;
* update: ``ignore-update-old-value-expr`` on the before image OR
  ``ignore-update-new-value-expr`` on the after image;
* delete: ``ignore-delete-value-expr`` on the before image.

Snapshot reads (``Op.READ``) count as inserts, for ``ignore-event = ["insert"]``
and for ``ignore-insert-value-expr`` alike: a row the snapshot reads is the
insert that created it. TiCDC has no separate snapshot op: its initial scan
emits existing rows as inserts and its event filter treats them so. Doing the
same keeps "a row the filter would have dropped on insert" out of the
downstream whether it was written before or after the snapshot. The snapshot's
Spark tasks apply it (``keep_reads``); an ``EventFilter`` pickles as its rules,
so it travels to them and is compiled again there.

``ignore-event`` accepts ``all dml``, ``all ddl``, ``insert``, ``update``,
``delete`` and every :class:`~cdc.model.events.DdlKind` name, with TiCDC's
aliases ``create database``/``drop database``. As in TiCDC, ``alter table``
covers every kind that is an ALTER TABLE clause or CREATE/DROP INDEX
(:data:`ALTER_TABLE_KINDS`); ``rename table`` stays its own kind.
``ignore-sql`` holds Python regular expressions searched case-insensitively
in DDL statements only (TiCDC uses Go's RE2, which shares the common syntax).

Which DDL a rule applies to: schema-level DDL (no tables) when the matcher
could accept a table of that schema (``matches_schema``, so ``matcher =
["test.t1"]`` also applies to ``DROP DATABASE test``, as TiCDC documents); a
rename by its old table name; any other DDL when the matcher accepts every
table the statement touches. A statement naming several tables is one event
and cannot be split, so a rule covering only some of them leaves it alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc.errors import ConfigError
from cdc.filter.expr_errors import ExpressionError
from cdc.filter.table_filter import TableFilter
from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.schema import TableName

if TYPE_CHECKING:
    from cdc.filter.expr import RowExpression

__all__ = ["ALTER_TABLE_KINDS", "DML_EVENTS", "EventFilter", "ignore_event_names"]

FIELD = "filter.event-filters"

#: The DML names of ``ignore-event``.
DML_EVENTS = ("insert", "update", "delete")
_ALL_DML = "all dml"
_ALL_DDL = "all ddl"
_ALIASES = {"create database": "create schema", "drop database": "drop schema"}

#: Kinds ``ignore-event = ["alter table"]`` covers: ALTER TABLE clauses and CREATE/DROP INDEX.
ALTER_TABLE_KINDS = frozenset(
    {
        DdlKind.ALTER_TABLE,
        DdlKind.ADD_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.ADD_INDEX,
        DdlKind.DROP_INDEX,
        DdlKind.ADD_PRIMARY_KEY,
        DdlKind.DROP_PRIMARY_KEY,
        DdlKind.ADD_TABLE_PARTITION,
        DdlKind.DROP_TABLE_PARTITION,
        DdlKind.TRUNCATE_TABLE_PARTITION,
        DdlKind.MODIFY_TABLE_COMMENT,
        DdlKind.MODIFY_TABLE_CHARSET_AND_COLLATE,
    }
)

_SCHEMA_KINDS = frozenset(
    {DdlKind.CREATE_SCHEMA, DdlKind.DROP_SCHEMA, DdlKind.MODIFY_SCHEMA_CHARSET_AND_COLLATE}
)
_SCHEMA_NAME = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(?:CREATE|DROP|ALTER)\s+(?:DATABASE|SCHEMA)\s+"
    r"(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?:`((?:``|[^`])+)`|([^\s;`/]+))",
    re.IGNORECASE | re.DOTALL,
)
#: The ``ignore-event`` name of each op; a snapshot read is the insert that created the row.
_OP_EVENT = {Op.CREATE: "insert", Op.READ: "insert", Op.UPDATE: "update", Op.DELETE: "delete"}
_EXPRESSIONS = (
    ("ignore_insert_value_expr", "ignore-insert-value-expr"),
    ("ignore_update_old_value_expr", "ignore-update-old-value-expr"),
    ("ignore_update_new_value_expr", "ignore-update-new-value-expr"),
    ("ignore_delete_value_expr", "ignore-delete-value-expr"),
)


def ignore_event_names() -> tuple[str, ...]:
    """Every name ``ignore-event`` accepts, for help texts and error messages."""
    kinds = tuple(kind.value for kind in DdlKind)
    return (_ALL_DML, _ALL_DDL, *DML_EVENTS, *kinds, *_ALIASES)


def _normalise(name: str) -> str:
    return " ".join(name.replace("_", " ").lower().split())


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(field, f"must be a list of strings, not {value!r}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(field, f"must be a list of strings; {item!r} is not a string")
    return items


@dataclass(frozen=True)
class _Rule:
    """One event-filter rule, compiled."""

    field: str
    matcher: TableFilter
    dml_events: frozenset[str]
    ddl_kinds: frozenset[DdlKind]
    sql: tuple[re.Pattern[str], ...]
    expressions: dict[str, RowExpression]

    def expression(self, key: str) -> RowExpression | None:
        return self.expressions.get(key)


def _compile_events(
    names: tuple[str, ...], field: str
) -> tuple[frozenset[str], frozenset[DdlKind]]:
    dml: set[str] = set()
    ddl: set[DdlKind] = set()
    for index, raw in enumerate(names):
        name = _normalise(raw)
        name = _ALIASES.get(name, name)
        if name == _ALL_DML:
            dml.update(DML_EVENTS)
        elif name == _ALL_DDL:
            ddl.update(DdlKind)
        elif name in DML_EVENTS:
            dml.add(name)
        else:
            try:
                kind = DdlKind.parse(name)
            except ValueError:
                raise ConfigError(
                    f"{field}[{index}]",
                    f"unknown event type {raw!r}; ignore-event accepts: "
                    + ", ".join(repr(n) for n in ignore_event_names()),
                ) from None
            ddl.update(ALTER_TABLE_KINDS if kind is DdlKind.ALTER_TABLE else (kind,))
    return frozenset(dml), frozenset(ddl)


def _compile_sql(patterns: tuple[str, ...], field: str) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for index, pattern in enumerate(patterns):
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            raise ConfigError(
                f"{field}[{index}]",
                f"invalid regular expression {pattern!r}: {exc}; e.g. '^drop', 'add column'",
            ) from None
    return tuple(compiled)


def _compile_rule(rule: Any, index: int, case_sensitive: bool) -> _Rule:
    field = f"{FIELD}[{index}]"
    matcher_rules = _strings(getattr(rule, "matcher", None), f"{field}.matcher")
    if not matcher_rules:
        raise ConfigError(
            f"{field}.matcher",
            "an event filter needs a matcher: the tables it applies to, e.g. ['shop.orders']",
        )
    matcher = TableFilter.parse(matcher_rules, case_sensitive, field=f"{field}.matcher")
    dml, ddl = _compile_events(
        _strings(rule.ignore_event, f"{field}.ignore-event"), f"{field}.ignore-event"
    )
    sql = _compile_sql(_strings(rule.ignore_sql, f"{field}.ignore-sql"), f"{field}.ignore-sql")
    expressions: dict[str, RowExpression] = {}
    for attribute, key in _EXPRESSIONS:
        text = getattr(rule, attribute)
        if text is None or (isinstance(text, str) and not text.strip()):
            continue
        # the SQL parser, imported for a rule that has an expression (see expr_errors.py)
        from cdc.filter.expr import compile_expression

        try:
            expressions[key] = compile_expression(text)
        except ExpressionError as exc:
            raise ConfigError(f"{field}.{key}", str(exc)) from None
    return _Rule(field, matcher, dml, ddl, sql, expressions)


def schema_of(event: DdlEvent) -> str:
    """The database a schema-level DDL acts on: named in the statement, else the default one."""
    found = _SCHEMA_NAME.match(event.statement)
    if found is None:
        return event.schema
    quoted, bare = found.groups()
    return quoted.replace("``", "`") if quoted is not None else bare


class EventFilter:
    """The compiled ``filter.event-filters`` of one changefeed; immutable, thread-safe.

    Construction validates every rule and raises :class:`ConfigError` naming
    the offending setting (``filter.event-filters[1].ignore-sql[0]``).
    """

    def __init__(self, rules: Sequence[Any], case_sensitive: bool = False) -> None:
        if isinstance(rules, str) or not isinstance(rules, Sequence):
            raise ConfigError(FIELD, f"must be a list of event filter rules, not {rules!r}")
        self.case_sensitive = case_sensitive
        self._source = tuple(rules)
        self._rules = tuple(
            _compile_rule(rule, index, case_sensitive) for index, rule in enumerate(rules)
        )
        self._by_table: dict[TableName, tuple[_Rule, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the rules it was built from (compiled again where it is unpickled)."""
        return (EventFilter, (self._source, self.case_sensitive))

    def _rules_for(self, table: TableName) -> tuple[_Rule, ...]:
        found = self._by_table.get(table)
        if found is None:
            found = tuple(r for r in self._rules if r.matcher.matches(table.schema, table.table))
            self._by_table[table] = found
        return found

    def should_ignore_row(self, change: RowChange) -> bool:
        """Whether ``change`` is dropped by its op (``ignore-event``) or its values.

        A snapshot read (``Op.READ``) is judged as the insert that created the
        row: ``ignore-event = ["insert"]`` and ``ignore-insert-value-expr`` on
        its image drop it, so the snapshot copies exactly the rows the binlog
        would have delivered.

        Raises :class:`ConfigError` when an expression cannot be evaluated on
        the row, e.g. it names a column the table does not have: a changefeed
        must stop rather than guess.
        """
        if not self._rules:
            return False
        event = _OP_EVENT[change.op]
        for rule in self._rules_for(change.table):
            if event in rule.dml_events or self._ignored_by_values(rule, event, change):
                return True
        return False

    def applies_to(self, table: TableName) -> bool:
        """Whether some rule matches ``table`` (its rows may be dropped by op or value)."""
        return bool(self._rules_for(table))

    def keeps_deleted_rows(self, table: TableName) -> bool:
        """Whether some rule may drop a delete of ``table`` (``ignore-event`` delete, or
        ``ignore-delete-value-expr``): its downstream may then hold rows the source no
        longer has, and a snapshot must not empty a key range before loading it."""
        return any(
            "delete" in rule.dml_events or rule.expression("ignore-delete-value-expr")
            for rule in self._rules_for(table)
        )

    def keep_reads(self, changes: Iterable[RowChange]) -> list[RowChange]:
        """The snapshot reads of ``changes`` that no rule ignores (as inserts, see above)."""
        if not self._rules:
            return list(changes)
        return [change for change in changes if not self.should_ignore_row(change)]

    def _ignored_by_values(self, rule: _Rule, event: str, change: RowChange) -> bool:
        checks: tuple[tuple[str, Mapping[str, Any] | None], ...]
        if event == "insert":
            checks = (("ignore-insert-value-expr", change.after),)
        elif event == "update":
            checks = (
                ("ignore-update-old-value-expr", change.before),
                ("ignore-update-new-value-expr", change.after),
            )
        else:
            checks = (("ignore-delete-value-expr", change.before),)
        for key, image in checks:
            expression = rule.expression(key)
            if expression is None or image is None:
                continue
            try:
                if expression.matches(image):
                    return True
            except ExpressionError as exc:
                raise ConfigError(
                    f"{rule.field}.{key}",
                    f"{exc} (row of {change.table} at {change.position})",
                ) from exc
        return False

    def _applies_to_ddl(self, rule: _Rule, event: DdlEvent) -> bool:
        if not event.tables:
            schema = schema_of(event) if event.kind in _SCHEMA_KINDS else event.schema
            return bool(schema) and rule.matcher.matches_schema(schema)
        if event.kind is DdlKind.RENAME_TABLE:
            old = event.tables[0]
            return rule.matcher.matches(old.schema, old.table)
        return all(rule.matcher.matches(t.schema, t.table) for t in event.tables)

    def should_ignore_ddl(self, event: DdlEvent) -> bool:
        """Whether ``event`` is dropped by its kind (``ignore-event``) or text (``ignore-sql``)."""
        for rule in self._rules:
            if not (rule.ddl_kinds or rule.sql) or not self._applies_to_ddl(rule, event):
                continue
            if event.kind in rule.ddl_kinds:
                return True
            if any(pattern.search(event.statement) for pattern in rule.sql):
                return True
        return False

    def verify_table(self, table: TableName, columns: Iterable[str]) -> None:
        """Check that every expression applying to ``table`` names only its ``columns``.

        Call it when a table's schema becomes known (changefeed creation, after
        DDL), so a typo fails the changefeed up front instead of on the first row.
        """
        names = list(columns)
        for rule in self._rules_for(table):
            for key, expression in rule.expressions.items():
                try:
                    expression.check_columns(names)
                except ExpressionError as exc:
                    raise ConfigError(f"{rule.field}.{key}", f"table {table}: {exc}") from None

    def __repr__(self) -> str:
        return f"EventFilter({len(self._rules)} rule(s), case_sensitive={self.case_sensitive})"
