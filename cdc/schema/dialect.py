"""sqlglot's MySQL dialect, stretched to read the DDL that MySQL 8 and MariaDB log.

sqlglot (MySQL dialect) parses column definitions, key lists and most ALTER
clauses well. Where it falls short for MySQL/MariaDB DDL, this module works
around it in two small ways, and ``ddl.py`` reads statement *structure* (which
clause, which table) from tokens itself:

* :class:`BinlogMySQL`, a dialect subclass (sqlglot's documented extension point):

  - type aliases sqlglot maps wrongly or not at all: ``INT8`` (sqlglot: TINYINT,
    MySQL: BIGINT), ``REAL`` (sqlglot: FLOAT, MySQL: DOUBLE), ``LONG`` /
    ``LONG VARCHAR`` (sqlglot: BIGINT / error, MySQL: MEDIUMTEXT),
    ``LONG VARBINARY``, ``INT3``, ``MIDDLEINT``, ``NATIONAL [VAR]CHAR``,
    ``NCHAR VARCHAR``, ``VARCHARACTER``;
  - type names sqlglot does not know at all (``POINT``, ``POLYGON`` and the other
    spatial types, MariaDB's ``INET4`` / ``INET6``) are read as user-defined
    types, which keep their name and parameters;
  - ``RENAME`` is not swallowed into one opaque command token, so ``RENAME
    TABLE a TO b, c TO d`` can be read token by token (sqlglot cannot parse it).

* :func:`normalize_table_ddl`, token-level rewrites of CREATE/ALTER TABLE text
  before sqlglot sees it (strings, comments and quoted names are never touched):

  - MariaDB's ``PERSISTENT`` generated columns become ``STORED``;
  - ``USING BTREE|HASH|RTREE`` and ``ASC``/``DESC`` in key lists are dropped
    (sqlglot rejects ``PRIMARY KEY USING BTREE (a)`` and ``(a DESC, b)``);
  - ``WITH|WITHOUT SYSTEM VERSIONING`` is dropped (schema-neutral, unparsed);
  - ``FLOAT[(m,d)] UNSIGNED`` becomes the user-defined type ``float_unsigned``
    (sqlglot raises "Cannot convert FLOAT to unsigned");
  - column attributes sqlglot rejects and that do not change the columns we
    model are dropped: MariaDB ``COMPRESSED[=zlib]`` and ``REF_SYSTEM_ID=n``,
    MySQL ``SRID n``, ``COLUMN_FORMAT x``, ``STORAGE DISK|MEMORY``;
  - ``SERIAL DEFAULT VALUE`` becomes ``NOT NULL AUTO_INCREMENT UNIQUE``.

* :func:`unwrap_executable_comments`: ``/*!50100 ... */`` and ``/*M!100100 ... */``
  are executed by the server, so their content is part of the statement (a
  tokenizer would drop it as a comment).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

__all__ = [
    "BinlogMySQL",
    "DdlSyntaxError",
    "Word",
    "normalize_table_ddl",
    "tokenize",
    "unwrap_executable_comments",
]


class DdlSyntaxError(ValueError):
    """A statement (or part of one) this package cannot read."""


class BinlogMySQL(MySQL):
    """MySQL dialect plus the MySQL/MariaDB type aliases and names sqlglot misses."""

    SUPPORTS_USER_DEFINED_TYPES = True

    class Tokenizer(MySQL.Tokenizer):
        COMMANDS = MySQL.Tokenizer.COMMANDS - {TokenType.RENAME}
        KEYWORDS = {
            **MySQL.Tokenizer.KEYWORDS,
            "INT8": TokenType.BIGINT,
            "REAL": TokenType.DOUBLE,
            "LONG": TokenType.MEDIUMTEXT,
            "LONG VARCHAR": TokenType.MEDIUMTEXT,
            "LONG CHAR VARYING": TokenType.MEDIUMTEXT,
            "LONG VARBINARY": TokenType.MEDIUMBLOB,
            "INT3": TokenType.MEDIUMINT,
            "MIDDLEINT": TokenType.MEDIUMINT,
            "NATIONAL CHAR": TokenType.NCHAR,
            "NATIONAL CHARACTER": TokenType.NCHAR,
            "NATIONAL VARCHAR": TokenType.NVARCHAR,
            "NATIONAL CHAR VARYING": TokenType.NVARCHAR,
            "NATIONAL CHARACTER VARYING": TokenType.NVARCHAR,
            "NCHAR VARCHAR": TokenType.NVARCHAR,
            "NCHAR VARYING": TokenType.NVARCHAR,
            "VARCHARACTER": TokenType.VARCHAR,
        }


_DIALECT = BinlogMySQL()

_PUNCTUATION = {
    TokenType.L_PAREN: "(",
    TokenType.R_PAREN: ")",
    TokenType.COMMA: ",",
    TokenType.DOT: ".",
    TokenType.EQ: "=",
    TokenType.SEMICOLON: ";",
}


@dataclass(frozen=True)
class Word:
    """One word of a statement: a keyword or bare name, a quoted name, a string, punctuation.

    sqlglot emits some keyword pairs as one token (``PRIMARY KEY``); they are
    split back into words so statement shapes can be matched word by word.
    ``start``/``end`` are the token's character span (``end`` inclusive).
    """

    text: str
    kind: str  # "word", "quoted", "string", "number", "punct"
    start: int
    end: int

    @property
    def upper(self) -> str:
        """The keyword spelling; quoted names and strings never match a keyword."""
        return self.text.upper() if self.kind in ("word", "punct") else ""

    @property
    def is_name(self) -> bool:
        """Could this word name a table or column (bare or quoted)?"""
        return self.kind in ("word", "quoted", "number")


def _words_of(token: Token) -> list[Word]:
    if token.token_type in _PUNCTUATION:
        return [Word(_PUNCTUATION[token.token_type], "punct", token.start, token.end)]
    if token.token_type == TokenType.IDENTIFIER:
        return [Word(token.text, "quoted", token.start, token.end)]
    if token.token_type in (TokenType.STRING, TokenType.NATIONAL_STRING):
        return [Word(token.text, "string", token.start, token.end)]
    if token.token_type == TokenType.NUMBER:
        return [Word(token.text, "number", token.start, token.end)]
    parts = token.text.split()
    if len(parts) <= 1:
        return [Word(token.text, "word", token.start, token.end)]
    return [Word(part, "word", token.start, token.end) for part in parts]


def tokenize(sql: str) -> list[Word]:
    """The statement's words (comments dropped); raises :class:`DdlSyntaxError`."""
    try:
        tokens = _DIALECT.tokenize(sql)
    except TokenError as exc:
        raise DdlSyntaxError(f"cannot tokenize statement: {exc}") from None
    return [word for token in tokens for word in _words_of(token)]


def _quoted_end(sql: str, i: int) -> int:
    """Index just past the quoted string or name starting at ``sql[i]``."""
    quote = sql[i]
    j = i + 1
    n = len(sql)
    while j < n:
        c = sql[j]
        if c == "\\" and quote != "`":
            j += 2
            continue
        if c == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return n


def unwrap_executable_comments(sql: str) -> str:
    """Replace ``/*!NNNNN text */`` and ``/*M!NNNNNN text */`` by `` text ``.

    The server runs such text when its version is at least NNNNN; every server
    this service supports is newer than the versions dumps and servers write.
    """
    if "/*" not in sql:
        return sql
    out: list[str] = []
    i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            end = _quoted_end(sql, i)
            out.append(sql[i:end])
            i = end
        elif sql.startswith("/*!", i) or sql.startswith("/*M!", i):
            body = i + (3 if sql[i + 2] == "!" else 4)
            while body < n and sql[body].isdigit():
                body += 1
            close = sql.find("*/", body)
            close = n if close < 0 else close
            out.append(" " + sql[body:close] + " ")
            i = close + 2
        elif sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            end = n if close < 0 else close + 2
            out.append(sql[i:end])
            i = end
        elif c == "#" or sql.startswith("-- ", i):
            close = sql.find("\n", i)
            end = n if close < 0 else close
            out.append(sql[i:end])
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


_INDEX_TYPES = {"BTREE", "HASH", "RTREE"}
_ATTRIBUTE_STOPS = {",", ")", "NOT", "NULL", "DEFAULT", "COMMENT", "CHARACTER", "CHARSET"}
# Words after which a bare word is a column name, never a column attribute.
_NAME_CONTEXT = {"(", ",", "COLUMN", "DROP", "ADD", "MODIFY", "CHANGE", "EXISTS", "AFTER", "TO"}


def normalize_table_ddl(sql: str) -> str:
    """Rewrite CREATE/ALTER TABLE text into a form sqlglot parses (see the module doc)."""
    words = tokenize(sql)
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)

    def upper(k: int) -> str:
        return words[k].upper if 0 <= k < len(words) else ""

    def drop(first: int, last: int) -> None:
        edits.append((words[first].start, words[last].end + 1, " "))

    k = 0
    while k < len(words):
        word = words[k].upper
        nxt = upper(k + 1)
        if word == "PERSISTENT":
            edits.append((words[k].start, words[k].end + 1, "STORED"))
        elif word == "USING" and nxt in _INDEX_TYPES:
            drop(k, k + 1)
            k += 1
        elif word in ("ASC", "DESC") and nxt in (",", ")"):
            drop(k, k)
        elif word in ("WITH", "WITHOUT") and nxt == "SYSTEM" and upper(k + 2) == "VERSIONING":
            drop(k, k + 2)
            k += 2
        elif word == "FLOAT":
            k = _rewrite_float_unsigned(words, k, edits)
        elif (
            word == "COMPRESSED"
            and upper(k - 1) not in _NAME_CONTEXT
            and (nxt in _ATTRIBUTE_STOPS or nxt in ("=", ""))
        ):
            last = k + 2 if nxt == "=" else k
            drop(k, last)
            k = last
        elif (
            (word == "SRID" and k + 1 < len(words) and words[k + 1].kind == "number")
            or (word == "COLUMN_FORMAT" and nxt in ("FIXED", "DYNAMIC", "DEFAULT"))
            or (word == "STORAGE" and nxt in ("DISK", "MEMORY"))
        ):
            drop(k, k + 1)
            k += 1
        elif word == "REF_SYSTEM_ID" and nxt == "=":
            drop(k, k + 2)
            k += 2
        elif word == "SERIAL" and nxt == "DEFAULT" and upper(k + 2) == "VALUE":
            edits.append((words[k].start, words[k + 2].end + 1, "NOT NULL AUTO_INCREMENT UNIQUE"))
            k += 2
        k += 1
    for start, end, replacement in sorted(edits, reverse=True):
        sql = sql[:start] + replacement + sql[end:]
    return sql


def _rewrite_float_unsigned(words: list[Word], k: int, edits: list[tuple[int, int, str]]) -> int:
    """``FLOAT [(m[,d])] UNSIGNED`` -> ``float_unsigned [(m[,d])]``; returns the last word used."""
    j = k + 1
    if j < len(words) and words[j].upper == "(":
        while j < len(words) and words[j].upper != ")":
            j += 1
        j += 1
    if j < len(words) and words[j].upper == "UNSIGNED":
        edits.append((words[k].start, words[k].end + 1, "float_unsigned"))
        edits.append((words[j].start, words[j].end + 1, " "))
        return j
    return k
