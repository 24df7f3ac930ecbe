"""ALTER TABLE: its clauses, their kinds, and the schema changes they make.

sqlglot parses some ALTER TABLE statements whole but turns the whole statement
into an opaque command when one clause is beyond it (``ADD COLUMN (a, b)``,
``CONVERT TO CHARACTER SET``, partition clauses, ``ADD INDEX IF NOT EXISTS``).
So the clauses are split at top-level commas here, each classified by its
first words, and only the pieces that carry a column definition or a key list
go to sqlglot. A partition clause runs to the end of the statement (``DROP
PARTITION p1, p2`` holds bare commas). Kinds: the one kind of all clauses,
``alter table`` when they differ; ``ALGORITHM``/``LOCK``/``FORCE``/``WITH
VALIDATION`` are neutral.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from cdc.model import DdlKind, TableName
from cdc.schema.changes import (
    AddColumns,
    AddKey,
    AlterAction,
    AlterTable,
    Change,
    ChangeColumn,
    ConvertCharset,
    DropColumn,
    DropIndex,
    DropPrimaryKey,
    Placement,
    RenameColumn,
    RenameTo,
    SetDefault,
)
from cdc.schema.columns import canonical_charset, column_spec
from cdc.schema.dialect import DdlSyntaxError, Word
from cdc.schema.reader import (
    Cursor,
    closing_paren,
    key_list,
    parse_sql,
    quote_name,
    read_elements,
    split_top_level,
    upper_at,
)

__all__ = ["read_alter_table"]

K = DdlKind


def read_alter_table(
    c: Cursor,
) -> tuple[DdlKind, tuple[TableName, ...], tuple[Change, ...]]:
    """Kind, tables and changes of an ALTER TABLE whose ``TABLE`` word ``c`` has just passed."""
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
    return kind, tuple(tables), changes


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
    first, second = upper_at(words, 0), upper_at(words, 1)
    if first == "PARTITION" or (first == "REMOVE" and second == "PARTITIONING"):
        return True
    return first in _PARTITION_VERBS and second == "PARTITION"


def _alter_clauses(words: list[Word]) -> list[list[Word]]:
    """Top-level clauses; a partition clause runs to the end (its lists hold bare commas)."""
    for k in range(len(words)):
        if (k == 0 or words[k - 1].upper == ",") and _is_partition_clause(words[k:]):
            head = words[: k - 1] if k else []
            return [*split_top_level(head), words[k:]]
    return split_top_level(words)


_NEUTRAL_OPTIONS = {"ALGORITHM", "LOCK", "WITH", "WITHOUT", "FORCE"}
_CHARSET_WORDS = {"CHARACTER", "CHARSET", "COLLATE", "CHAR"}

ClauseResult = tuple[list[DdlKind], list[AlterAction], list[TableName]]


def _read_clause(c: Cursor, words: list[Word]) -> ClauseResult:
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
    """Kinds of a table-option clause (``ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT 'x'``).

    Charset words give the charset kind, COMMENT the comment kind, any other
    option name (a bare word that is not a value) plain ``alter table``.
    """
    kinds: list[DdlKind] = []
    for k, word in enumerate(words):
        value_position = upper_at(words, k - 1) in ("=", "CHARSET", "COLLATE", "SET", "COMMENT")
        if word.upper in _CHARSET_WORDS:
            kinds.append(K.MODIFY_TABLE_CHARSET_AND_COLLATE)
        elif word.upper == "COMMENT":
            kinds.append(K.MODIFY_TABLE_COMMENT)
        elif word.kind == "word" and word.upper not in ("DEFAULT", "SET") and not value_position:
            kinds.append(K.ALTER_TABLE)
    return kinds or [K.ALTER_TABLE]


def _partition_clause(c: Cursor, words: list[Word]) -> ClauseResult:
    first, second = upper_at(words, 0), upper_at(words, 1)
    extra: list[TableName] = []
    if first == "EXCHANGE":
        inner = Cursor(words, c.sql, c.default_schema)
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


def _clause_cursor(c: Cursor, words: list[Word]) -> Cursor:
    return Cursor(words, c.sql, c.default_schema)


def _add_clause(c: Cursor, words: list[Word]) -> ClauseResult:
    if _is_partition_clause(words):
        return _partition_clause(c, words)
    cur = _clause_cursor(c, words)
    cur.expect("ADD")
    if cur.accept("CONSTRAINT") and cur.peek() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
        cur.name()
    if cur.accept("PRIMARY", "KEY"):
        return [K.ADD_PRIMARY_KEY], [AddKey(True, key_list(c, cur.rest()))], []
    if cur.accept("UNIQUE"):
        cur.accept("INDEX") or cur.accept("KEY")
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        return [K.ADD_INDEX], [AddKey(False, key_list(c, cur.rest()), if_not_exists)], []
    if cur.peek() in ("INDEX", "KEY", "FULLTEXT", "SPATIAL"):
        return [K.ADD_INDEX], [], []
    if cur.peek() in ("FOREIGN", "CHECK", "PERIOD", "SYSTEM"):
        return [K.ALTER_TABLE], [], []
    cur.accept("COLUMN")
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    if cur.peek() == "(":
        body = cur.rest()
        specs, primary, uniques = read_elements(c, body[1 : closing_paren(body, 0)])
        actions: list[AlterAction] = [AddColumns(specs, None, if_not_exists)]
        if primary:
            actions.append(AddKey(True, primary))
        actions.extend(AddKey(False, key) for key in uniques)
        return [K.ADD_COLUMN], actions, []
    column_def, placement = _column_def(c, "ADD COLUMN", cur.rest())
    spec = column_spec(column_def)
    return [K.ADD_COLUMN], [AddColumns((spec,), placement, if_not_exists)], []


def _column_def(
    c: Cursor, verb: str, words: list[Word], old: str | None = None
) -> tuple[exp.ColumnDef, Placement]:
    """sqlglot's reading of ``name type attrs [FIRST | AFTER col]``."""
    prefix = (
        f"ALTER TABLE _t {verb} {quote_name(old)} "
        if old is not None
        else f"ALTER TABLE _t {verb} "
    )
    tree = parse_sql(prefix + c.text(words))
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


def _drop_clause(c: Cursor, words: list[Word]) -> ClauseResult:
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


def _modify_clause(c: Cursor, words: list[Word]) -> ClauseResult:
    cur = _clause_cursor(c, words)
    cur.expect("MODIFY")
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    column_def, placement = _column_def(c, "MODIFY COLUMN", cur.rest())
    spec = column_spec(column_def)
    return [K.MODIFY_COLUMN], [ChangeColumn(spec.name, spec, placement, if_exists)], []


def _change_clause(c: Cursor, words: list[Word]) -> ClauseResult:
    cur = _clause_cursor(c, words)
    cur.expect("CHANGE")
    cur.accept("COLUMN")
    if_exists = cur.accept("IF", "EXISTS")
    old = cur.name()
    column_def, placement = _column_def(c, "CHANGE COLUMN", cur.rest(), old)
    spec = column_spec(column_def)
    return [K.MODIFY_COLUMN], [ChangeColumn(old, spec, placement, if_exists)], []


def _rename_clause(c: Cursor, words: list[Word]) -> ClauseResult:
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


def _alter_column_clause(c: Cursor, words: list[Word]) -> ClauseResult:
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
        tree = parse_sql(f"CREATE TABLE _t ({quote_name(name)} INT DEFAULT {value})")
        column_def = next(iter(tree.find_all(exp.ColumnDef)))
        return [K.MODIFY_COLUMN], [SetDefault(name, column_spec(column_def).default)], []
    return [K.MODIFY_COLUMN], [], []


def _convert_clause(c: Cursor, words: list[Word]) -> ClauseResult:
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


_CLAUSE_READERS: dict[str, Callable[[Cursor, list[Word]], ClauseResult]] = {
    "ADD": _add_clause,
    "DROP": _drop_clause,
    "MODIFY": _modify_clause,
    "CHANGE": _change_clause,
    "RENAME": _rename_clause,
    "ALTER": _alter_column_clause,
    "CONVERT": _convert_clause,
}
