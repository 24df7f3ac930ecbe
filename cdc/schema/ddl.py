"""Reading DDL statements from the binlog: their kind, the tables they touch, their effect.

``parse_ddl`` never raises on a statement it cannot read: the binlog must keep
flowing, so such a statement becomes kind ``OTHER`` with the tables a
conservative fallback finds (the names right after ``TABLE`` in the head), and
a warning is logged. ``apply_ddl`` then leaves the schemas alone for it.

How a statement is read::

    text --unwrap /*!...*/--> text --normalize (CREATE/ALTER TABLE)--> words
      head words  -> statement shape (CREATE TABLE, ALTER TABLE clauses, RENAME ...)
      column definitions, key lists, ALTER clauses -> sqlglot (BinlogMySQL dialect)
      -> Analysis(kind, tables, changes)     [cached per (statement, default schema)]

Statement structure is read from tokens because that is where sqlglot falls
short: it cannot parse ``RENAME TABLE``, ``ALTER TABLE ... ADD COLUMN (a INT,
b INT)``, ``CONVERT TO CHARACTER SET``, ``ALTER IGNORE|ONLINE TABLE``, ``ADD
INDEX IF NOT EXISTS``, partition clauses (``PARTITION BY`` in CREATE TABLE,
``ADD|DROP|TRUNCATE PARTITION``), ``ALTER DATABASE``, many table options; and
it turns a whole CREATE TABLE into an opaque command when one of them appears.
So CREATE TABLE is cut into its element list (columns and PRIMARY/UNIQUE keys
go to sqlglot; plain indexes, foreign keys and checks are schema-neutral and
skipped) and its options (only the default charset/collation matter); an
ALTER TABLE is cut into its top-level clauses, each classified by its first
words and parsed on its own (``alter.py``). ``dialect.py`` holds the
type-level workarounds.

Kinds follow TiCDC's names. ``CHANGE COLUMN`` is ``modify column`` (as in
TiDB), ``ALTER COLUMN ... SET/DROP DEFAULT`` too; CREATE/DROP TEMPORARY TABLE
is ``other`` (temporary tables are not replicated). ``tables``: a rename lists
(old, new) per pair; ``CREATE TABLE t LIKE s`` lists (t, s); ``EXCHANGE
PARTITION ... WITH TABLE u`` adds u.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot.errors import ParseError, TokenError

from cdc.model import DdlEvent, DdlKind, Flavor, Position, TableName, TableSchema
from cdc.schema.alter import read_alter_table
from cdc.schema.changes import (
    AddKey,
    AlterTable,
    Change,
    CreateTable,
    CreateTableLike,
    DropIndex,
    DropPrimaryKey,
    DropSchema,
    DropTables,
    RenameTables,
    apply_changes,
)
from cdc.schema.dialect import (
    DdlSyntaxError,
    Word,
    normalize_table_ddl,
    tokenize,
    unwrap_executable_comments,
)
from cdc.schema.reader import Cursor, closing_paren, key_list, read_elements, table_charset

__all__ = ["Analysis", "analyze", "apply_ddl", "parse_ddl"]

log = logging.getLogger(__name__)

K = DdlKind


@dataclass(frozen=True)
class Analysis:
    """What a statement is and does: its kind, the tables it touches, its schema changes."""

    kind: DdlKind
    tables: tuple[TableName, ...]
    changes: tuple[Change, ...] = ()
    problem: str | None = None


def parse_ddl(statement: str, default_schema: str, position: Position) -> DdlEvent:
    """The DDL event of a binlog query event; unreadable statements become kind OTHER.

    ``default_schema`` is the query event's current database ('' when none);
    it qualifies unqualified names.
    """
    analysis = analyze(statement, default_schema)
    if analysis.problem is not None:
        log.warning(
            "DDL at %s read as kind '%s' (tables %s): %s; statement: %.300s",
            position,
            analysis.kind.value,
            ", ".join(str(t) for t in analysis.tables) or "none",
            analysis.problem,
            statement,
        )
    return DdlEvent(position, default_schema, analysis.tables, analysis.kind, statement)


def apply_ddl(
    schemas: Mapping[TableName, TableSchema],
    event: DdlEvent,
    *,
    flavor: Flavor = Flavor.MARIADB,
) -> dict[TableName, TableSchema]:
    """The table schemas after ``event``: a new dict, ``schemas`` untouched.

    Tables the statement changes get ``version + 1`` (a new table starts at 0);
    TRUNCATE, views, plain indexes and statements of kind OTHER change nothing.
    ``flavor`` picks the server's spelling of column types (``int(11)`` vs
    ``int``). Raises :class:`~cdc.schema.changes.DdlApplyError` when the DDL
    does not fit the schemas (a column it names is missing): the history and
    the server disagree, and going on would deliver rows in the wrong shape.
    """
    analysis = analyze(event.statement, event.schema)
    return apply_changes(schemas, analysis.changes, flavor)


@functools.lru_cache(maxsize=256)
def analyze(statement: str, default_schema: str) -> Analysis:
    """Read ``statement`` (cached: ``parse_ddl`` and ``apply_ddl`` read each DDL once)."""
    text = unwrap_executable_comments(statement)
    try:
        words = tokenize(text)
    except DdlSyntaxError as exc:
        return Analysis(K.OTHER, (), problem=str(exc))
    try:
        if _is_table_statement(words):
            text = normalize_table_ddl(text)
            words = tokenize(text)
        return _read_statement(Cursor(words, text, default_schema))
    except (DdlSyntaxError, ValueError, ParseError, TokenError) as exc:
        return Analysis(K.OTHER, _fallback_tables(words, text, default_schema), problem=str(exc))


def _is_table_statement(words: list[Word]) -> bool:
    """CREATE/ALTER TABLE or CREATE INDEX: the statements :func:`normalize_table_ddl` is for."""
    head = [w.upper for w in words[:6]]
    if not head or head[0] not in ("CREATE", "ALTER"):
        return False
    return ("TABLE" in head or "INDEX" in head) and "VIEW" not in head


def _read_statement(c: Cursor) -> Analysis:
    if c.accept("CREATE"):
        return _read_create(c)
    if c.accept("ALTER"):
        return _read_alter(c)
    if c.accept("DROP"):
        return _read_drop(c)
    if c.accept("RENAME"):
        if c.accept("TABLE") or c.accept("TABLES"):
            return _read_rename(c)
        return Analysis(K.OTHER, ())
    if c.accept("TRUNCATE"):
        c.accept("TABLE")
        return Analysis(K.TRUNCATE_TABLE, (c.table(),))
    return Analysis(K.OTHER, ())


def _read_create(c: Cursor) -> Analysis:
    replace = c.accept("OR", "REPLACE")
    if c.accept("DATABASE") or c.accept("SCHEMA"):
        c.accept("IF", "NOT", "EXISTS")
        schema = c.name()
        return Analysis(K.CREATE_SCHEMA, (), (DropSchema(schema),) if replace else ())
    temporary = c.accept("TEMPORARY")
    if c.accept("TABLE"):
        return _read_create_table(c, temporary, replace)
    while c.peek() in ("ONLINE", "OFFLINE"):
        c.accept(c.peek())
    unique = c.accept("UNIQUE")
    if unique or c.peek() in ("INDEX", "KEY", "FULLTEXT", "SPATIAL"):
        return _read_create_index(c, unique)
    view = _view_name(c)
    if view is not None:
        return Analysis(K.CREATE_VIEW, (view,))
    return Analysis(K.OTHER, ())


def _view_name(c: Cursor) -> TableName | None:
    """After CREATE/ALTER [options]: the name following VIEW, if this is a view statement."""
    for k in range(len(c.words) - c.i):
        word = c.peek(k)
        if word == "VIEW":
            c.i += k + 1
            c.accept("IF", "NOT", "EXISTS")
            return c.table()
        if word in ("AS", "TABLE", "FUNCTION", "PROCEDURE", "TRIGGER", "EVENT"):
            return None
    return None


def _read_create_table(c: Cursor, temporary: bool, replace: bool) -> Analysis:
    if_not_exists = c.accept("IF", "NOT", "EXISTS")
    table = c.table()
    kind = K.OTHER if temporary else K.CREATE_TABLE
    like = c.accept("LIKE") or (c.peek() == "(" and c.peek(1) == "LIKE" and c.accept("(", "LIKE"))
    if like:
        source = c.table()
        copy = CreateTableLike(table, source, if_not_exists and not replace)
        return Analysis(kind, (table, source), () if temporary else (copy,))
    if temporary:
        return Analysis(kind, (table,))
    if c.peek() != "(":
        return Analysis(kind, (table,), problem="no column list, so its columns are unknown")
    words = c.rest()
    close = closing_paren(words, 0)
    specs, primary, uniques = read_elements(c, words[1:close])
    charset, collation = table_charset(words[close + 1 :])
    change = CreateTable(
        table, specs, primary, uniques, charset, collation, if_not_exists and not replace, replace
    )
    return Analysis(kind, (table,), (change,))


def _read_create_index(c: Cursor, unique: bool) -> Analysis:
    c.accept("FULLTEXT") or c.accept("SPATIAL")
    if not (c.accept("INDEX") or c.accept("KEY")):
        return Analysis(K.OTHER, ())
    c.accept("IF", "NOT", "EXISTS")
    c.name()
    while not c.at_end() and c.peek() != "ON":
        c.i += 1
    c.expect("ON")
    table = c.table()
    if not unique:
        return Analysis(K.ADD_INDEX, (table,))
    columns = key_list(c, c.rest())
    return Analysis(K.ADD_INDEX, (table,), (AlterTable(table, (AddKey(False, columns, True),)),))


def _read_alter(c: Cursor) -> Analysis:
    if c.accept("DATABASE") or c.accept("SCHEMA"):
        options = {w.upper for w in c.rest()}
        if options & {"CHARACTER", "CHARSET", "COLLATE", "CHAR"}:
            return Analysis(K.MODIFY_SCHEMA_CHARSET_AND_COLLATE, ())
        return Analysis(K.OTHER, ())
    while c.peek() in ("ONLINE", "OFFLINE", "IGNORE"):
        c.accept(c.peek())
    if not c.accept("TABLE"):
        view = _view_name(c)
        return Analysis(K.OTHER, (view,) if view is not None else ())
    kind, tables, changes = read_alter_table(c)
    return Analysis(kind, tables, changes)


def _read_drop(c: Cursor) -> Analysis:
    if c.accept("DATABASE") or c.accept("SCHEMA"):
        c.accept("IF", "EXISTS")
        return Analysis(K.DROP_SCHEMA, (), (DropSchema(c.name()),))
    temporary = c.accept("TEMPORARY")
    if c.accept("TABLE") or c.accept("TABLES"):
        c.accept("IF", "EXISTS")
        tables = tuple(c.table_list())
        if temporary:
            return Analysis(K.OTHER, tables)
        return Analysis(K.DROP_TABLE, tables, (DropTables(tables),))
    if c.accept("VIEW"):
        c.accept("IF", "EXISTS")
        return Analysis(K.DROP_VIEW, tuple(c.table_list()))
    while c.peek() in ("ONLINE", "OFFLINE"):
        c.accept(c.peek())
    if c.accept("INDEX") or c.accept("KEY"):
        if_exists = c.accept("IF", "EXISTS")
        name = c.name()
        c.expect("ON")
        table = c.table()
        action = DropPrimaryKey() if name.upper() == "PRIMARY" else DropIndex(name, if_exists)
        kind = K.DROP_PRIMARY_KEY if isinstance(action, DropPrimaryKey) else K.DROP_INDEX
        return Analysis(kind, (table,), (AlterTable(table, (action,)),))
    return Analysis(K.OTHER, ())


def _read_rename(c: Cursor) -> Analysis:
    c.accept("IF", "EXISTS")
    pairs: list[tuple[TableName, TableName]] = []
    while True:
        old = c.table()
        c.expect("TO")
        pairs.append((old, c.table()))
        if not c.accept(","):
            break
    tables = tuple(t for pair in pairs for t in pair)
    return Analysis(K.RENAME_TABLE, tables, (RenameTables(tuple(pairs)),))


def _fallback_tables(words: list[Word], sql: str, default_schema: str) -> tuple[TableName, ...]:
    """Conservative: only the names right after the TABLE keyword of the statement's head."""
    c = Cursor(words, sql, default_schema)
    head = [c.peek(k) for k in range(6)]
    try:
        if "TABLE" in head and head[0] in ("CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"):
            c.i = head.index("TABLE") + 1
            c.accept("IF", "NOT", "EXISTS") or c.accept("IF", "EXISTS")
            if head[0] == "DROP":
                return tuple(c.table_list())
            tables = [c.table()]
            if head[0] == "RENAME" and c.accept("TO"):
                tables.append(c.table())
            return tuple(tables)
    except (DdlSyntaxError, ValueError):
        return ()
    return ()
