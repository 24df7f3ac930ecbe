"""Table filter rules in the syntax of TiDB's table filter (tidb-tools ``pkg/table-filter``).

A changefeed captures the tables its ``filter.rules`` accept; event filters use
the same rules (``matcher``) to say which tables they apply to. Decision for a
table ``schema.table``::

    system schema (mysql, information_schema, performance_schema, sys)?  -> rejected
    walk the rules from the LAST to the first:
        first rule whose schema and table patterns both match decides:
            plain rule -> accepted, ``!`` rule -> rejected
    no rule matches -> rejected

Rule syntax, one rule per string (``[!]schema.table``):

* plain names of identifier characters ``[0-9a-zA-Z$_]`` and any non-ASCII character;
* wildcards as in fnmatch(3): ``*`` (any run), ``?`` (one character), ``[a-z]``
  (one character of a class), ``[!a-z]`` (one character not in the class);
* ``\\`` escapes a punctuation character (``db\\.x.*`` is schema ``db.x``); it may
  not precede a letter or digit (reserved) nor end a rule;
* ```quoted``` or ``"quoted"`` names are taken literally (double the quote to
  include it); a part is quoted whole or not at all;
* ``/regex/`` matches when the name *contains* a match of the Python regular
  expression (TiDB uses Go's RE2 dialect: the common syntax is the same);
* a leading ``!`` turns the rule into an exclusion;
* blank rules and rules starting with ``#`` are ignored, as in TiDB.

TiDB's ``@file`` import is not supported: list the rules in the config instead.

Matching is case-insensitive unless ``case_sensitive=True`` (TiCDC's
``case-sensitive`` option). System schemas are compared case-insensitively
and are never captured, whatever the rules say.

Why a hand-written parser: no maintained PyPI library implements this syntax
(quoting, escapes, ``[!..]`` classes, regexes, last-match-wins), and
``fnmatch`` alone gets both the escapes and the precedence wrong. Every pattern
is translated once into an anchored regular expression (or a plain string
comparison when it has no wildcard).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cdc.errors import ConfigError

__all__ = ["RULE_SYNTAX", "SYSTEM_SCHEMAS", "TableFilter", "is_system_schema"]

#: Schemas of the server itself; MariaDB uses the same four names (``sys`` since 10.6).
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

RULE_SYNTAX = (
    "rule syntax: [!]SCHEMA.TABLE where each part is a name, a wildcard pattern "
    "(* any run, ? one character, [a-z] a class, [!a-z] a negated class), "
    'a `backquoted` or "double-quoted" literal name, or a /regex/; '
    "escape punctuation with \\; e.g. 'shop.*', '!shop.tmp_*', 'db?.t[0-9]*', '`my.db`.*'"
)

_CACHE_LIMIT = 65536
_REGEX_PART = re.compile(r"/(?:\\.|[^/\\])+/")
_DOUBLE_QUOTED = re.compile(r'"(?:""|[^"])+"')
_BACKQUOTED = re.compile(r"`(?:``|[^`])+`")
_CLASS = re.compile(r"\[!?(?:\\[^0-9a-zA-Z]|[^\\\]])+\]")


def is_system_schema(schema: str) -> bool:
    """True for the server's own schemas, which a changefeed never captures."""
    return schema.lower() in SYSTEM_SCHEMAS


def _is_identifier_char(ch: str) -> bool:
    return not ch.isascii() or ch.isalnum() or ch in "$_"


class _RuleError(Exception):
    """A syntax error inside one rule; turned into a ConfigError naming the rule."""


@dataclass(frozen=True)
class _Pattern:
    """One compiled schema or table pattern."""

    literal: str | None
    regex: re.Pattern[str] | None
    matches_all: bool = False

    def match(self, name: str, fold: bool) -> bool:
        if self.literal is not None:
            return (name.lower() if fold else name) == self.literal
        assert self.regex is not None
        return self.regex.search(name) is not None


@dataclass(frozen=True)
class _Rule:
    text: str
    schema: _Pattern
    table: _Pattern
    positive: bool


class _RuleParser:
    """Parses one rule string; ``fold`` compiles every pattern case-insensitively."""

    def __init__(self, text: str, fold: bool) -> None:
        self.text = text
        self.fold = fold
        self.flags = re.DOTALL | (re.IGNORECASE if fold else 0)

    def parse(self, line: str) -> _Rule:
        positive = True
        if line.startswith("!"):
            positive = False
            line = line[1:]
        schema, rest = self._pattern(line, "schema")
        if not rest:
            raise _RuleError("missing '.' and table pattern after the schema pattern")
        if rest[0] != ".":
            raise _RuleError(f"expected '.' between schema and table patterns, found {rest[0]!r}")
        table, rest = self._pattern(rest[1:], "table")
        if rest:
            raise _RuleError(f"stray text {rest!r} after the table pattern")
        return _Rule(self.text, schema, table, positive)

    def _pattern(self, line: str, part: str) -> tuple[_Pattern, str]:
        if not line or line[0] == ".":
            raise _RuleError(f"empty {part} pattern")
        first = line[0]
        if first == "/":
            found = _REGEX_PART.match(line)
            if found is None:
                raise _RuleError(f"unterminated /regex/ in the {part} pattern")
            body = found.group()[1:-1]
            try:
                regex = re.compile(body, self.flags)
            except re.error as exc:
                raise _RuleError(f"invalid regular expression /{body}/: {exc}") from None
            return _Pattern(None, regex), line[found.end() :]
        if first in '`"':
            found = (_BACKQUOTED if first == "`" else _DOUBLE_QUOTED).match(line)
            if found is None:
                raise _RuleError(f"unclosed or empty {first}quoted{first} {part} name")
            name = found.group()[1:-1].replace(first * 2, first)
            return self._literal(name), line[found.end() :]
        return self._wildcard(line, part)

    def _literal(self, name: str) -> _Pattern:
        return _Pattern(name.lower() if self.fold else name, None)

    def _wildcard(self, line: str, part: str) -> tuple[_Pattern, str]:
        literal: list[str] = []
        regex: list[str] = []
        is_literal = True
        only_stars = True
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == ".":
                break
            if ch == "\\":
                if i + 1 >= len(line):
                    raise _RuleError("'\\' at the end of the rule (use [ ] for a trailing space)")
                escaped = line[i + 1]
                if escaped.isascii() and escaped.isalnum():
                    raise _RuleError(
                        f"cannot escape a letter or digit ('\\{escaped}'): reserved for future use"
                    )
                literal.append(escaped)
                regex.append(re.escape(escaped))
                only_stars = False
                i += 2
            elif ch == "*":
                is_literal = False
                regex.append(".*")
                i += 1
            elif ch == "?":
                is_literal = False
                only_stars = False
                regex.append(".")
                i += 1
            elif ch == "[":
                found = _CLASS.match(line, i)
                negated = line.startswith("[!", i)
                body = found.group()[2 if negated else 1 : -1] if found else ""
                if found is None or not body:
                    raise _RuleError(
                        f"unclosed or empty character class at {line[i:]!r} in the {part} pattern"
                    )
                is_literal = False
                only_stars = False
                regex.append(_class_regex(negated, body))
                i = found.end()
            elif _is_identifier_char(ch):
                literal.append(ch)
                regex.append(re.escape(ch))
                only_stars = False
                i += 1
            else:
                raise _RuleError(
                    f"unexpected special character {ch!r} in the {part} pattern "
                    "(escape it with \\ or quote the name)"
                )
        rest = line[i:]
        if is_literal:
            return self._literal("".join(literal)), rest
        try:
            compiled = re.compile("^" + "".join(regex) + r"\Z", self.flags)
        except re.error as exc:
            raise _RuleError(f"invalid wildcard pattern in the {part}: {exc}") from None
        return _Pattern(None, compiled, matches_all=only_stars), rest


def _class_regex(negated: bool, body: str) -> str:
    """Translate the inside of ``[...]``: ranges keep their ``-``, all else is literal."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            out.append(re.escape(body[i + 1]))
            i += 2
        elif ch == "-":
            out.append("-")
            i += 1
        else:
            out.append(re.escape(ch))
            i += 1
    return "[" + ("^" if negated else "") + "".join(out) + "]"


class TableFilter:
    """An ordered list of table rules; the last matching rule decides.

    Build it with :meth:`parse`. Instances are immutable and safe to share
    between threads; results are cached per name.
    """

    def __init__(self, rules: Sequence[_Rule], case_sensitive: bool, texts: tuple[str, ...]):
        self._rules = tuple(reversed(rules))
        self._fold = not case_sensitive
        self.case_sensitive = case_sensitive
        self.rules = texts
        self._table_cache: dict[tuple[str, str], bool] = {}
        self._schema_cache: dict[str, bool] = {}

    @classmethod
    def parse(
        cls,
        rules: Sequence[str],
        case_sensitive: bool = False,
        field: str = "filter.rules",
    ) -> TableFilter:
        """Compile ``rules``; a bad rule raises :class:`ConfigError` for ``field[i]``.

        The message quotes the rule, says what is wrong with it and shows
        :data:`RULE_SYNTAX`.
        """
        if isinstance(rules, str) or not isinstance(rules, Sequence):
            raise ConfigError(
                field,
                f"table filter rules must be a list of strings, not {rules!r}; e.g. ['shop.*']",
            )
        compiled: list[_Rule] = []
        for index, text in enumerate(rules):
            where = f"{field}[{index}]"
            if not isinstance(text, str):
                raise ConfigError(where, f"a table filter rule must be a string, not {text!r}")
            line = text.strip(" \t")
            if not line or line.startswith("#"):
                continue
            if line.startswith("@"):
                raise ConfigError(
                    where,
                    f"table filter rule {text!r}: importing rules from a file (@file) is not "
                    "supported; list the rules themselves",
                )
            try:
                compiled.append(_RuleParser(text, not case_sensitive).parse(line))
            except _RuleError as exc:
                raise ConfigError(
                    where, f"invalid table filter rule {text!r}: {exc}; {RULE_SYNTAX}"
                ) from None
        return cls(compiled, case_sensitive, tuple(rules))

    def matches(self, schema: str, table: str) -> bool:
        """Whether the table ``schema.table`` is captured."""
        key = (schema, table)
        cached = self._table_cache.get(key)
        if cached is not None:
            return cached
        result = not is_system_schema(schema) and self._decide(schema, table)
        if len(self._table_cache) >= _CACHE_LIMIT:
            self._table_cache.clear()
        self._table_cache[key] = result
        return result

    def matches_schema(self, schema: str) -> bool:
        """Whether some table of ``schema`` could be captured.

        False means the whole schema can be skipped: the deciding rule for it
        is an exclusion of all its tables (``!db.*``), or no rule names it.
        As in TiDB, a negative rule that excludes only some tables does not
        exclude the schema.
        """
        cached = self._schema_cache.get(schema)
        if cached is not None:
            return cached
        result = not is_system_schema(schema) and self._decide_schema(schema)
        if len(self._schema_cache) >= _CACHE_LIMIT:
            self._schema_cache.clear()
        self._schema_cache[schema] = result
        return result

    def _decide(self, schema: str, table: str) -> bool:
        for rule in self._rules:
            if rule.schema.match(schema, self._fold) and rule.table.match(table, self._fold):
                return rule.positive
        return False

    def _decide_schema(self, schema: str) -> bool:
        for rule in self._rules:
            if rule.schema.match(schema, self._fold) and (rule.positive or rule.table.matches_all):
                return rule.positive
        return False

    def __repr__(self) -> str:
        return f"TableFilter({list(self.rules)!r}, case_sensitive={self.case_sensitive})"
