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
skipped) and its options (only the default charset/collation matter), and an
ALTER TABLE into its top-level clauses, each classified by its first words and
parsed on its own. See ``dialect.py`` for the type-level workarounds.

Kinds follow TiCDC's names. ``CHANGE COLUMN`` is ``modify column`` (as in
TiDB), ``ALTER COLUMN ... SET/DROP DEFAULT`` too; CREATE/DROP TEMPORARY TABLE
is ``other`` (temporary tables are not replicated). ``tables``: a rename lists
(old, new) per pair; ``CREATE TABLE t LIKE s`` lists (t, s); ``EXCHANGE
PARTITION ... WITH TABLE u`` adds u.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from cdc.model import DdlEvent, DdlKind, Flavor, Position, TableName, TableSchema
from cdc.schema.changes import (
    AddColumns,
    AddKey,
    AlterAction,
    AlterTable,
    Change,
    ChangeColumn,
    ConvertCharset,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropIndex,
    DropPrimaryKey,
    DropSchema,
    DropTables,
    Placement,
    RenameColumn,
    RenameTables,
    RenameTo,
    SetDefault,
    apply_changes,
)
from cdc.schema.columns import ColumnSpec, canonical_charset, column_spec, key_column
from cdc.schema.dialect import (
    BinlogMySQL,
    DdlSyntaxError,
    Word,
    normalize_table_ddl,
    tokenize,
    unwrap_executable_comments,
)

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
            "DDL at %s read as kind 'other' (tables %s): %s; statement: %.300s",
            position,
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
        return _read_statement(_Cursor(words, text, default_schema))
    except (DdlSyntaxError, ValueError, KeyError, ParseError, TokenError) as exc:
        return Analysis(K.OTHER, _fallback_tables(words, text, default_schema), problem=str(exc))


def _is_table_statement(words: list[Word]) -> bool:
    """CREATE/ALTER TABLE or CREATE INDEX: the statements :func:`normalize_table_ddl` is for."""
    head = [w.upper for w in words[:6]]
    if not head or head[0] not in ("CREATE", "ALTER"):
        return False
    return ("TABLE" in head or "INDEX" in head) and "VIEW" not in head


class _Cursor:
    """Walks the words of one statement."""

    def __init__(self, words: list[Word], sql: str, default_schema: str) -> None:
        end = next((i for i, w in enumerate(words) if w.upper == ";"), len(words))
        self.words = words[:end]
        self.sql = sql
        self.default_schema = default_schema
        self.i = 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.words[j].upper if 0 <= j < len(self.words) else ""

    def at_end(self) -> bool:
        return self.i >= len(self.words)

    def accept(self, *seq: str) -> bool:
        if all(self.peek(k) == word for k, word in enumerate(seq)):
            self.i += len(seq)
            return True
        return False

    def expect(self, *seq: str) -> None:
        if not self.accept(*seq):
            found = " ".join(w.text for w in self.words[self.i : self.i + 3]) or "end of statement"
            raise DdlSyntaxError(f"expected {' '.join(seq)}, found {found!r}")

    def name(self) -> str:
        if self.at_end() or not self.words[self.i].is_name:
            found = self.words[self.i].text if not self.at_end() else "end of statement"
            raise DdlSyntaxError(f"expected a name, found {found!r}")
        self.i += 1
        return self.words[self.i - 1].text

    def table(self) -> TableName:
        first = self.name()
        if self.peek() == "." and self.i + 1 < len(self.words) and self.words[self.i + 1].is_name:
            self.i += 1
            return TableName(first, self.name())
        if not self.default_schema:
            raise DdlSyntaxError(f"table {first!r} is unqualified and no database is selected")
        return TableName(self.default_schema, first)

    def table_list(self) -> list[TableName]:
        tables = [self.table()]
        while self.accept(","):
            tables.append(self.table())
        return tables

    def rest(self) -> list[Word]:
        words = self.words[self.i :]
        self.i = len(self.words)
        return words

    def text(self, words: list[Word]) -> str:
        return self.sql[words[0].start : words[-1].end + 1] if words else ""


def _split(words: list[Word]) -> list[list[Word]]:
    """Split at top-level commas (parentheses nest)."""
    parts: list[list[Word]] = [[]]
    depth = 0
    for word in words:
        if word.upper == "(":
            depth += 1
        elif word.upper == ")":
            depth -= 1
        if word.upper == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(word)
    return [part for part in parts if part]


def _closing(words: list[Word], i: int) -> int:
    """Index of the ``)`` matching the ``(`` at ``words[i]``."""
    depth = 0
    for j in range(i, len(words)):
        if words[j].upper == "(":
            depth += 1
        elif words[j].upper == ")":
            depth -= 1
            if depth == 0:
                return j
    raise DdlSyntaxError("unbalanced parentheses")


def _parse(sql: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(sql, dialect=BinlogMySQL)
    except (ParseError, TokenError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DdlSyntaxError(f"sqlglot cannot parse {sql!r}: {first}") from None
    if tree is None or isinstance(tree, exp.Command):
        raise DdlSyntaxError(f"sqlglot cannot parse {sql!r}")
    return tree


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _read_statement(c: _Cursor) -> Analysis:
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


def _read_create(c: _Cursor) -> Analysis:
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


def _view_name(c: _Cursor) -> TableName | None:
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


def _read_create_table(c: _Cursor, temporary: bool, replace: bool) -> Analysis:
    if_not_exists = c.accept("IF", "NOT", "EXISTS")
    table = c.table()
    kind = K.OTHER if temporary else K.CREATE_TABLE
    like = c.accept("LIKE") or (c.peek() == "(" and c.peek(1) == "LIKE" and c.accept("(", "LIKE"))
    if like:
        source = c.table()
        change = CreateTableLike(table, source, if_not_exists and not replace)
        return Analysis(kind, (table, source), () if temporary else (change,))
    if c.peek() != "(" or temporary:
        return Analysis(kind, (table,))
    words = c.rest()
    close = _closing(words, 0)
    specs, primary, uniques = _read_elements(c, words[1:close])
    charset, collation = _table_charset(words[close + 1 :])
    change = CreateTable(
        table, specs, primary, uniques, charset, collation, if_not_exists and not replace
    )
    return Analysis(kind, (table,), (change,))


_SKIPPED_ELEMENTS = ("INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK")


def _is_schema_element(part: list[Word]) -> bool:
    """Columns and PRIMARY/UNIQUE keys shape the schema; other indexes and constraints don't."""
    first = part[0].upper
    if first == "CONSTRAINT":
        following = [w.upper for w in part[1:3]]
        return "PRIMARY" in following or "UNIQUE" in following
    if first == "PERIOD" and len(part) > 1 and part[1].upper == "FOR":
        return False
    return first not in _SKIPPED_ELEMENTS


def _read_elements(
    c: _Cursor, words: list[Word]
) -> tuple[tuple[ColumnSpec, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Columns, primary key and unique keys (definition order) of a CREATE TABLE element list."""
    kept = [c.text(part) for part in _split(words) if _is_schema_element(part)]
    if not kept:
        raise DdlSyntaxError("CREATE TABLE without columns")
    tree = _parse(f"CREATE TABLE _t ({', '.join(kept)})")
    schema = tree.this
    if not isinstance(schema, exp.Schema):
        raise DdlSyntaxError("CREATE TABLE element list not understood")
    specs: list[ColumnSpec] = []
    primary: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    for element in schema.expressions:
        inner = element.expressions if isinstance(element, exp.Constraint) else [element]
        for item in inner:
            if isinstance(item, exp.ColumnDef):
                spec = column_spec(item)
                specs.append(spec)
                if spec.primary_key:
                    primary = (spec.name,)
                if spec.unique or spec.type_name == "serial":
                    uniques.append((spec.name,))
            elif isinstance(item, exp.PrimaryKey):
                primary = _key_parts(item.expressions) or ()
            elif isinstance(item, exp.UniqueColumnConstraint):
                key = _key_parts(_unique_parts(item))
                if key:
                    uniques.append(key)
    if not specs:
        raise DdlSyntaxError("CREATE TABLE without columns")
    return tuple(specs), primary, tuple(uniques)


def _unique_parts(unique: exp.UniqueColumnConstraint) -> list[exp.Expression]:
    schema = unique.this
    return list(schema.expressions) if isinstance(schema, exp.Schema) else []


def _key_parts(parts: list[exp.Expression]) -> tuple[str, ...] | None:
    """Key column names; None when any part is an expression (a functional key)."""
    names = [key_column(part) for part in parts]
    if not names or any(name is None for name in names):
        return None
    return tuple(name for name in names if name is not None)


def _table_charset(words: list[Word]) -> tuple[str | None, str | None]:
    """``[DEFAULT] CHARSET|CHARACTER SET [=] x`` and ``[DEFAULT] COLLATE [=] y`` in table options."""
    charset = collation = None
    k = 0
    while k < len(words):
        word = words[k].upper
        if word in ("SELECT", "AS", "IGNORE", "REPLACE", "PARTITION", "("):
            break
        step = 2 if word in ("CHARACTER", "CHAR") and _upper(words, k + 1) == "SET" else 1
        if word in ("CHARSET", "COLLATE") or step == 2:
            k += step
            if _upper(words, k) == "=":
                k += 1
            if k < len(words):
                value = words[k].text.lower()
                if word == "COLLATE":
                    collation = value
                else:
                    charset = canonical_charset(value)
        k += 1
    return charset, collation


def _upper(words: list[Word], k: int) -> str:
    return words[k].upper if 0 <= k < len(words) else ""


def _read_create_index(c: _Cursor, unique: bool) -> Analysis:
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
    columns = _key_list(c, c.rest())
    return Analysis(K.ADD_INDEX, (table,), (AlterTable(table, (AddKey(False, columns, True),)),))


def _key_list(c: _Cursor, words: list[Word]) -> tuple[str, ...] | None:
    """Column names of the first parenthesised key part list in ``words``."""
    start = next((k for k, w in enumerate(words) if w.upper == "("), None)
    if start is None:
        raise DdlSyntaxError("key without a column list")
    parts = c.text(words[start : _closing(words, start) + 1])
    tree = _parse(f"ALTER TABLE _t ADD UNIQUE {parts}")
    unique = next(iter(tree.find_all(exp.UniqueColumnConstraint)), None)
    if unique is None:
        raise DdlSyntaxError(f"cannot read key parts {parts!r}")
    return _key_parts(_unique_parts(unique))


def _read_drop(c: _Cursor) -> Analysis:
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


def _read_rename(c: _Cursor) -> Analysis:
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


def _read_alter(c: _Cursor) -> Analysis:
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
    if_exists = c.accept("IF", "EXISTS")
    table = c.table()
    if c.accept("WAIT"):
        c.i += 1
    c.accept("NOWAIT")
    kinds: list[DdlKind] = []
    tables = [table]
    actions: list[AlterAction] = []
    for clause in _alter_clauses(c.rest()):
        clause_kinds, clause_actions, extra = _read_clause(c, clause)
        kinds.extend(clause_kinds)
        actions.extend(clause_actions)
        tables.extend(extra)
    distinct = set(kinds)
    kind = distinct.pop() if len(distinct) == 1 else K.ALTER_TABLE
    changes = (AlterTable(table, tuple(actions), if_exists),) if actions else ()
    return Analysis(kind, tuple(tables), changes)


_PARTITION_VERBS = {
    "ADD",
    "DROP",
    "TRUNCATE",
    "COALESCE",
    "REORGANIZE",
    "EXCHANGE",
    "ANALYZE",
    "CHECK",
    "OPTIMIZE",
    "REBUILD",
    "REPAIR",
    "DISCARD",
    "IMPORT",
    "CONVERT",
}


def _is_partition_clause(words: list[Word]) -> bool:
    first, second = _upper(words, 0), _upper(words, 1)
    if first in ("PARTITION", "REMOVE") or (first == "PARTITION" and second == "BY"):
        return True
    return first in _PARTITION_VERBS and second in ("PARTITION", "PARTITIONING")


def _alter_clauses(words: list[Word]) -> list[list[Word]]:
    """Top-level clauses; a partition clause runs to the end (its lists hold bare commas)."""
    for k, word in enumerate(words):
        if (k == 0 or words[k - 1].upper == ",") and _is_partition_clause(words[k:]):
            head = words[: k - 1] if k else []
            return [*_split(head), words[k:]]
    return _split(words)


_NEUTRAL_OPTIONS = {"ALGORITHM", "LOCK", "WITH", "WITHOUT", "FORCE"}
_CHARSET_WORDS = {"CHARACTER", "CHARSET", "COLLATE", "CHAR"}

ClauseResult = tuple[list[DdlKind], list[AlterAction], list[TableName]]


def _read_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    first = words[0].upper
    reader = _CLAUSE_READERS.get(first)
    if reader is not None:
        return reader(c, words)
    if _is_partition_clause(words):
        return _partition_clause(c, words)
    if first in _NEUTRAL_OPTIONS:
        return [], [], []
    return _table_options(words), [], []


def _table_options(words: list[Word]) -> list[DdlKind]:
    """Kinds of a table-option clause (``ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT 'x'``)."""
    kinds: list[DdlKind] = []
    k = 0
    while k < len(words):
        word = words[k].upper
        if word in _CHARSET_WORDS:
            kinds.append(K.MODIFY_TABLE_CHARSET_AND_COLLATE)
        elif word == "COMMENT":
            kinds.append(K.MODIFY_TABLE_COMMENT)
        elif word not in ("DEFAULT", "SET", "=", "") and words[k].kind == "word":
            if _upper(words, k - 1) not in ("=", "CHARSET", "COLLATE", "SET", "COMMENT"):
                kinds.append(K.ALTER_TABLE)
        k += 1
    return kinds or [K.ALTER_TABLE]


def _partition_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    first, second = _upper(words, 0), _upper(words, 1)
    extra: list[TableName] = []
    if first == "EXCHANGE":
        inner = _Cursor(words, c.sql, c.default_schema)
        while not inner.at_end() and not inner.accept("WITH", "TABLE"):
            inner.i += 1
        if not inner.at_end():
            extra.append(inner.table())
    if second == "PARTITION" and first in ("ADD", "DROP", "TRUNCATE"):
        kind = {
            "ADD": K.ADD_TABLE_PARTITION,
            "DROP": K.DROP_TABLE_PARTITION,
            "TRUNCATE": K.TRUNCATE_TABLE_PARTITION,
        }[first]
        return [kind], [], extra
    return [K.ALTER_TABLE], [], extra


def _clause_cursor(c: _Cursor, words: list[Word]) -> _Cursor:
    return _Cursor(words, c.sql, c.default_schema)


def _add_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    if _is_partition_clause(words):
        return _partition_clause(c, words)
    cur = _clause_cursor(c, words)
    cur.expect("ADD")
    if cur.accept("CONSTRAINT") and cur.peek() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
        cur.name()
    if cur.accept("PRIMARY", "KEY"):
        return [K.ADD_PRIMARY_KEY], [AddKey(True, _key_list(c, cur.rest()))], []
    if cur.accept("UNIQUE"):
        cur.accept("INDEX") or cur.accept("KEY")
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        return [K.ADD_INDEX], [AddKey(False, _key_list(c, cur.rest()), if_not_exists)], []
    if cur.peek() in ("INDEX", "KEY", "FULLTEXT", "SPATIAL"):
        return [K.ADD_INDEX], [], []
    if cur.peek() in ("FOREIGN", "CHECK", "PERIOD", "SYSTEM"):
        return [K.ALTER_TABLE], [], []
    cur.accept("COLUMN")
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    if cur.peek() == "(":
        body = cur.rest()
        specs, primary, uniques = _read_elements(c, body[1:_closing(body, 0)])
        actions: list[AlterAction] = [AddColumns(specs, None, if_not_exists)]
        if primary:
            actions.append(AddKey(True, primary))
        actions.extend(AddKey(False, key) for key in uniques)
        return [K.ADD_COLUMN], actions, []
    column_def, placement = _column_def(c, "ADD COLUMN", cur.rest())
    spec = column_spec(column_def)
    return [K.ADD_COLUMN], [AddColumns((spec,), placement, if_not_exists)], []


def _column_def(
    c: _Cursor, verb: str, words: list[Word], old: str | None = None
) -> tuple[exp.ColumnDef, Placement]:
    """sqlglot's reading of ``name type attrs [FIRST | AFTER col]``."""
    prefix = f"ALTER TABLE _t {verb} {_quote(old)} " if old is not None else f"ALTER TABLE _t {verb} "
    tree = _parse(prefix + c.text(words))
    actions = tree.args.get("actions") or []
    if len(actions) != 1:
        raise DdlSyntaxError(f"cannot read column definition {c.text(words)!r}")
    action = actions[0]
    column_def = action.this if isinstance(action, exp.ModifyColumn) else action
    if not isinstance(column_def, exp.ColumnDef):
        raise DdlSyntaxError(f"cannot read column definition {c.text(words)!r}")
    return column_def, _placement(column_def)


def _placement(column_def: exp.ColumnDef) -> Placement:
    position = column_def.args.get("position")
    if not isinstance(position, exp.ColumnPosition):
        return None
    where = str(position.args.get("position") or "").lower()
    if where == "first":
        return ("first", None)
    return ("after", position.this.name if position.this is not None else None)


def _drop_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    if _is_partition_clause(words):
        return _partition_clause(c, words)
    cur = _clause_cursor(c, words)
    cur.expect("DROP")
    if cur.accept("PRIMARY", "KEY"):
        return [K.DROP_PRIMARY_KEY], [DropPrimaryKey()], []
    if cur.accept("INDEX") or cur.accept("KEY"):
        if_exists = cur.accept("IF", "EXISTS")
        name = cur.name()
        if name.upper() == "PRIMARY":
            return [K.DROP_PRIMARY_KEY], [DropPrimaryKey()], []
        return [K.DROP_INDEX], [DropIndex(name, if_exists)], []
    if cur.accept("CONSTRAINT"):
        cur.accept("IF", "EXISTS")
        return [K.ALTER_TABLE], [DropIndex(cur.name(), True)], []
    if cur.peek() in ("FOREIGN", "CHECK", "PERIOD", "SYSTEM"):
        return [K.ALTER_TABLE], [], []
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    name = cur.name()
    cur.accept("RESTRICT") or cur.accept("CASCADE")
    if not cur.at_end():
        raise DdlSyntaxError(f"unexpected {cur.words[cur.i].text!r} after DROP COLUMN {name}")
    return [K.DROP_COLUMN], [DropColumn(name, if_exists)], []


def _modify_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    cur = _clause_cursor(c, words)
    cur.expect("MODIFY")
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    column_def, placement = _column_def(c, "MODIFY COLUMN", cur.rest())
    spec = column_spec(column_def)
    return [K.MODIFY_COLUMN], [ChangeColumn(spec.name, spec, placement, if_exists)], []


def _change_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    cur = _clause_cursor(c, words)
    cur.expect("CHANGE")
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    old = cur.name()
    column_def, placement = _column_def(c, "CHANGE COLUMN", cur.rest(), old)
    spec = column_spec(column_def)
    return [K.MODIFY_COLUMN], [ChangeColumn(old, spec, placement, if_exists)], []


def _rename_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    cur = _clause_cursor(c, words)
    cur.expect("RENAME")
    if cur.accept("COLUMN"):
        old = cur.name()
        cur.expect("TO")
        return [K.RENAME_COLUMN], [RenameColumn(old, cur.name())], []
    if cur.accept("INDEX") or cur.accept("KEY"):
        return [K.ALTER_TABLE], [], []
    cur.accept("TO") or cur.accept("AS")
    new = cur.table()
    return [K.RENAME_TABLE], [RenameTo(new)], [new]


def _alter_column_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    cur = _clause_cursor(c, words)
    cur.expect("ALTER")
    if cur.peek() in ("INDEX", "KEY", "CONSTRAINT", "CHECK"):
        return [K.ALTER_TABLE], [], []
    cur.accept("COLUMN")
    cur.accept("IF", "EXISTS")
    name = cur.name()
    if cur.accept("DROP", "DEFAULT"):
        return [K.MODIFY_COLUMN], [SetDefault(name, None)], []
    if cur.accept("SET", "DEFAULT"):
        value = c.text(cur.rest())
        tree = _parse(f"CREATE TABLE _t ({_quote(name)} INT DEFAULT {value})")
        column_def = next(iter(tree.find_all(exp.ColumnDef)))
        return [K.MODIFY_COLUMN], [SetDefault(name, column_spec(column_def).default)], []
    return [K.MODIFY_COLUMN], [], []


def _convert_clause(c: _Cursor, words: list[Word]) -> ClauseResult:
    if _is_partition_clause(words):
        return _partition_clause(c, words)
    cur = _clause_cursor(c, words)
    cur.expect("CONVERT", "TO")
    if not (cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET")):
        raise DdlSyntaxError(f"cannot read {c.text(words)!r}")
    charset = canonical_charset(cur.name())
    collation = None
    if cur.accept("COLLATE"):
        collation = cur.name().lower()
    if charset is None or charset == "default":
        return [K.MODIFY_TABLE_CHARSET_AND_COLLATE], [], []
    return [K.MODIFY_TABLE_CHARSET_AND_COLLATE], [ConvertCharset(charset, collation)], []


_CLAUSE_READERS: dict[str, Callable[[_Cursor, list[Word]], ClauseResult]] = {
    "ADD": _add_clause,
    "DROP": _drop_clause,
    "MODIFY": _modify_clause,
    "CHANGE": _change_clause,
    "RENAME": _rename_clause,
    "ALTER": _alter_column_clause,
    "CONVERT": _convert_clause,
}


def _fallback_tables(words: list[Word], sql: str, default_schema: str) -> tuple[TableName, ...]:
    """Conservative: only names right after the head's TABLE keyword (or INDEX ... ON)."""
    c = _Cursor(words, sql, default_schema)
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
