"""Row changes logged as SQL statements: which tables they may write, and whether to refuse.

A session with ``binlog_format=STATEMENT`` (or ``MIXED``) writes its row
changes to the binlog as query events (``LOAD DATA`` as an Execute_load_query
event), not as row events. Their rows can never be captured, so a changefeed
that passes such a statement by on a captured table loses them silently. The
puller asks :func:`classify_statement` about every query event that is not
BEGIN/COMMIT and refuses the ones that may write a captured table.

The rule is fail closed::

    leading keyword (comments and /*!...*/ unwrapped)
      transaction control, DDL, accounts, admin ...... not a row change
      INSERT / REPLACE / LOAD DATA|XML ............... its target table (read from the head)
      UPDATE / DELETE ................................ every table outside subqueries (sqlglot)
      anything else (SELECT f(), DO, CALL, unknown) .. tables unknown
    tables unknown (unparsable, no table found) -> may write a captured table -> refuse

Unqualified names take the query event's default schema; with none, the
tables are unknown. What the statement cannot show is not seen: a trigger on
the written table or a stored function it calls may write a captured table,
and a view is judged by its own name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from cdc.model.schema import TableName
from cdc.schema.dialect import unwrap_executable_comments

TableMatcher = Callable[[TableName], bool]
"""True when the table is captured (a temporary table never is)."""

# First words of statements that change no rows: transaction control, DDL
# (the DDL path reads those), accounts and administration.
_NOT_ROWS = frozenset(
    {
        "BEGIN",
        "START",
        "COMMIT",
        "ROLLBACK",
        "XA",
        "SAVEPOINT",
        "RELEASE",
        "SET",
        "FLUSH",
        "GRANT",
        "REVOKE",
        "CREATE",
        "ALTER",
        "DROP",
        "RENAME",
        "TRUNCATE",
        "ANALYZE",
        "OPTIMIZE",
        "REPAIR",
        "CHECK",
        "CHECKSUM",
        "INSTALL",
        "UNINSTALL",
        "RESET",
        "PURGE",
        "LOCK",
        "UNLOCK",
        "BACKUP",
    }
)

_IDENT = r"(?:`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[\w$]+)"
_NAME = rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?"
_STRING = r"(?:'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
_FIRST_WORD = re.compile(r"[A-Za-z_]+")
_INSERT_HEAD = re.compile(
    rf"(INSERT|REPLACE)\s+(?:(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE)\s+)*(?:INTO\s+)?{_NAME}",
    re.IGNORECASE,
)
_LOAD_HEAD = re.compile(
    rf"LOAD\s+(DATA|XML)\s+(?:(?:LOW_PRIORITY|CONCURRENT|LOCAL)\s+)*INFILE\s+{_STRING}\s*"
    rf"(?:(?:REPLACE|IGNORE)\s+)?INTO\s+TABLE\s+{_NAME}",
    re.IGNORECASE | re.DOTALL,
)
_CHANGE_MODIFIERS = re.compile(
    r"(UPDATE|DELETE)((?:\s+(?:LOW_PRIORITY|QUICK|IGNORE)(?=\s))*)", re.IGNORECASE
)
_SET_STATEMENT = re.compile(r"SET\s+STATEMENT\b", re.IGNORECASE)
_CREATE_TEMPORARY = re.compile(
    rf"CREATE\s+(?:OR\s+REPLACE\s+)?TEMPORARY\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}",
    re.IGNORECASE,
)
_DROP_TABLES = re.compile(r"DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?", re.IGNORECASE)
_NAME_LIST_ITEM = re.compile(rf"\s*{_NAME}\s*(,)?")
_REDACT = re.compile(rf"(`(?:[^`]|``)*`)|{_STRING}|(?<![\w$])\d[\w.]*")
_SHAPE_LIMIT = 200


@dataclass(frozen=True)
class StatementVerdict:
    """What one statement from the binlog means for a changefeed.

    ``rows``: the statement changes rows (so its changes are missing from the
    row events). ``tables``: the tables it may write, default schema filled in;
    None when they cannot be told. ``captured``: those of them the matcher
    captures. ``refuse``: it changes rows and may write a captured table.
    ``verb``: its leading words (``INSERT``, ``LOAD DATA``, ``SELECT`` ...).
    """

    rows: bool
    verb: str
    tables: tuple[TableName, ...] | None
    captured: tuple[TableName, ...]

    @property
    def refuse(self) -> bool:
        return self.rows and (self.tables is None or bool(self.captured))


def classify_statement(
    statement: str, default_schema: str, captured: TableMatcher
) -> StatementVerdict:
    """The verdict on a query event's statement: may it write a table that `captured` accepts?

    `default_schema` is the event's current database ('' for none). Never
    raises: a statement it cannot read is a row change on unknown tables.
    """
    text = _head(unwrap_executable_comments(statement))
    word = _first_word(text)
    if word == "SET" and _SET_STATEMENT.match(text):
        inner = _after_set_statement(text)
        if inner is None:
            return StatementVerdict(True, "SET STATEMENT", None, ())
        return classify_statement(inner, default_schema, captured)
    if word in _NOT_ROWS or not text:
        return StatementVerdict(False, word, (), ())
    if word in ("INSERT", "REPLACE"):
        verb, tables = word, _head_target(_INSERT_HEAD.match(text), default_schema)
    elif word == "LOAD":
        load = _LOAD_HEAD.match(text)
        verb = f"LOAD {load.group(1).upper()}" if load else "LOAD"
        tables = _head_target(load, default_schema)
    elif word in ("UPDATE", "DELETE"):
        verb, tables = word, _changed_tables(text, default_schema)
    else:
        verb, tables = word or "unreadable statement", None
    hits = () if tables is None else tuple(t for t in tables if captured(t))
    return StatementVerdict(True, verb, tables, hits)


def statement_shape(statement: str) -> str:
    """The statement with every literal replaced by ``?``, cut to 200 characters.

    For messages and the changefeed's status: it names the statement's form
    and tables, never the values it wrote.
    """
    text = _head(unwrap_executable_comments(statement))
    shape = " ".join(_REDACT.sub(lambda m: m.group(1) or "?", text).split())
    return shape if len(shape) <= _SHAPE_LIMIT else shape[: _SHAPE_LIMIT - 3] + "..."


class TemporaryTables:
    """The temporary tables each session (binlog thread id) has created and not dropped.

    Only statement-logged sessions write temporary tables to the binlog, and
    their writes to them are no rows of any captured table: a temporary table
    hides the base table of the same name for that session. Tables created
    before the reader started are unknown, so their writes are judged by name.
    """

    def __init__(self) -> None:
        self._by_thread: dict[int, set[TableName]] = {}

    def observe(self, thread: int, statement: str, default_schema: str) -> None:
        """Follows CREATE TEMPORARY TABLE and DROP [TEMPORARY] TABLE of session `thread`."""
        text = _head(unwrap_executable_comments(statement))
        created = _CREATE_TEMPORARY.match(text)
        if created is not None:
            name = _table_name(created.group(1), created.group(2), default_schema)
            if name is not None:
                self._by_thread.setdefault(thread, set()).add(name)
            return
        dropped = _DROP_TABLES.match(text)
        known = self._by_thread.get(thread)
        if dropped is None or not known:
            return
        for name in _name_list(text[dropped.end() :], default_schema):
            known.discard(name)
        if not known:
            del self._by_thread[thread]

    def matcher(self, thread: int, captured: TableMatcher) -> TableMatcher:
        """`captured`, except for the temporary tables of session `thread`."""
        temporary = self._by_thread.get(thread)
        if not temporary:
            return captured
        return lambda table: table not in temporary and captured(table)


def _head(text: str) -> str:
    """`text` without leading whitespace, comments and opening parentheses."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace() or text[i] == "(":
            i += 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
        elif text[i] == "#" or text.startswith("--", i):
            close = text.find("\n", i)
            i = n if close < 0 else close + 1
        else:
            break
    return text[i:].rstrip().rstrip(";").rstrip()


def _first_word(text: str) -> str:
    match = _FIRST_WORD.match(text)
    return match.group(0).upper() if match else ""


def _after_set_statement(text: str) -> str | None:
    """The statement inside MariaDB's ``SET STATEMENT var=value, ... FOR statement``."""
    try:
        tokens = sqlglot.tokenize(text, read="mysql")
    except TokenError:
        return None
    depth = 0
    for token in tokens:
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        elif depth == 0 and token.text.upper() == "FOR":
            return text[token.end + 1 :]
    return None


def _unquote(identifier: str) -> str:
    if identifier[0] == "`":
        return identifier[1:-1].replace("``", "`")
    if identifier[0] == '"':
        return identifier[1:-1].replace('""', '"')
    return identifier


def _table_name(first: str, second: str | None, default_schema: str) -> TableName | None:
    if second is not None:
        return TableName(_unquote(first), _unquote(second))
    return TableName(default_schema, _unquote(first)) if default_schema else None


def _head_target(match: re.Match[str] | None, default_schema: str) -> tuple[TableName, ...] | None:
    if match is None:
        return None
    name = _table_name(match.group(2), match.group(3), default_schema)
    return None if name is None else (name,)


def _name_list(text: str, default_schema: str) -> list[TableName]:
    names: list[TableName] = []
    pos = 0
    while True:
        item = _NAME_LIST_ITEM.match(text, pos)
        if item is None:
            return names
        name = _table_name(item.group(1), item.group(2), default_schema)
        if name is not None:
            names.append(name)
        if item.group(3) is None:
            return names
        pos = item.end()


def _changed_tables(text: str, default_schema: str) -> tuple[TableName, ...] | None:
    """Tables an UPDATE or DELETE names outside subqueries (which it only reads); None if unsure.

    Aliases and joined tables count too: which of them a multi-table statement
    writes is not worth guessing, and counting one too many is safe.
    """
    plain = _CHANGE_MODIFIERS.sub(lambda m: m.group(1), text, count=1)
    try:
        trees = sqlglot.parse(plain, read="mysql")
    except (ParseError, TokenError, ValueError, RecursionError):
        return None
    names: list[TableName] = []
    for tree in trees:
        if not isinstance(tree, (exp.Update, exp.Delete)):
            return None
        tables = [
            t for t in tree.find_all(exp.Table) if t.name and t.find_ancestor(exp.Select) is None
        ]
        for table in tables:
            if table.db:
                names.append(TableName(table.db, table.name))
            elif any(_names_it(other, table.name) for other in tables if other is not table):
                continue
            elif default_schema:
                names.append(TableName(default_schema, table.name))
            else:
                return None
    return tuple(dict.fromkeys(names)) or None


def _names_it(table: exp.Table, name: str) -> bool:
    """`DELETE a FROM db.t AS a` names its target by alias, `DELETE t FROM db.t` by name."""
    return table.alias == name or (bool(table.db) and table.name == name)
