"""Which columns of a table leave the changefeed, and which are masked: the rules as configured.

    [[sink.column-selectors]]             TiCDC's: the columns that are sent
    matcher = ["shop.users"]
    columns = ["*", "!photo", "!notes_*"]

    [[sink.column-masks]]                 ours: how a sent column's values are hidden
    matcher = ["shop.users"]
    columns = ["email", "phone"]
    method = "hash"                       hash | redact | truncate
    salt = "..."                          hash: prefixed to each value before SHA-256
    # length = 4                          truncate: characters kept
    # replacement = "***"                 redact: what every non-NULL value becomes

Why under ``[sink]``, TiCDC's place (its ``column-selectors``): what they
decide is what reaches the sink, for every sink kind alike, and a TiCDC user
already knows the section. Masks sit beside them in the same form.

Selection (TiCDC's): for a table, the first selector whose ``matcher``
accepts it applies (none: every column is sent). Its patterns are globs
(``*``, ``?``, ``[a-z]``) matched against column names case-insensitively, as
MySQL names columns; ``!`` excludes. The last pattern that matches a column
decides; a column no pattern matches is not sent. Patterns that are all
exclusions start from every column (``["!photo"]`` is ``["*", "!photo"]``).

Masks: every mask whose matcher accepts the table applies to the columns its
patterns match (no ``!`` there). ``cdc.filter.column_plan`` turns the rules
and one table schema into what is applied to rows and checks it against the
schema (keys, types); ``cdc.filter.column_masks`` holds the methods.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field

from cdc.errors import ConfigError
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName

__all__ = [
    "ColumnMask",
    "ColumnRules",
    "ColumnSelector",
    "MaskMethod",
    "TableColumnRules",
    "column_matches",
]

SELECTORS = "sink.column-selectors"
MASKS = "sink.column-masks"


class MaskMethod(enum.Enum):
    """How a masked column's non-NULL values are hidden (NULL stays NULL)."""

    HASH = "hash"  # lower-case hex SHA-256 of salt + value (64 characters)
    REDACT = "redact"  # the replacement text
    TRUNCATE = "truncate"  # the first ``length`` characters


def _strings(value: object, path: str, example: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(path, f"must be an array of strings, e.g. {example}")
    if not value or not all(v.strip() for v in value):
        raise ConfigError(path, f"needs at least one non-empty entry, e.g. {example}")
    return tuple(v.strip() for v in value)


def _check_matcher(matcher: tuple[str, ...], path: str) -> None:
    TableFilter.parse(matcher, False, path)


def _check_pattern(pattern: str, path: str) -> None:
    body = pattern[1:] if pattern.startswith("!") else pattern
    if not body or body.startswith("!"):
        raise ConfigError(path, f"{pattern!r} is not a column pattern; e.g. 'email', 'note_*'")
    if body.count("[") != body.count("]"):
        raise ConfigError(path, f"{pattern!r} has an unbalanced '[' in its character class")


def column_matches(pattern: str, column: str) -> bool:
    """Whether the glob ``pattern`` (no ``!``) names ``column``, case-insensitively."""
    return fnmatch.fnmatchcase(column.lower(), pattern.lower())


def is_literal(pattern: str) -> bool:
    """Whether a pattern names one column (no wildcard): such a column must exist."""
    return not any(ch in pattern for ch in "*?[")


@dataclass(frozen=True)
class ColumnSelector:
    """One ``[[sink.column-selectors]]`` entry (TiCDC's ``matcher`` and ``columns``)."""

    matcher: tuple[str, ...]
    columns: tuple[str, ...]
    origin: InitVar[str] = SELECTORS

    def __post_init__(self, origin: str) -> None:
        matcher = _strings(self.matcher, f"{origin}.matcher", '["shop.users"]')
        _check_matcher(matcher, f"{origin}.matcher")
        columns = _strings(self.columns, f"{origin}.columns", '["*", "!photo"]')
        for index, pattern in enumerate(columns):
            _check_pattern(pattern, f"{origin}.columns[{index}]")
        object.__setattr__(self, "matcher", matcher)
        object.__setattr__(self, "columns", columns)

    def to_dict(self) -> dict[str, object]:
        return {"matcher": list(self.matcher), "columns": list(self.columns)}


@dataclass(frozen=True)
class ColumnMask:
    """One ``[[sink.column-masks]]`` entry: a method for the columns its patterns match."""

    matcher: tuple[str, ...]
    columns: tuple[str, ...]
    method: MaskMethod
    salt: str = ""
    length: int | None = None
    replacement: str = "***"
    origin: InitVar[str] = MASKS

    def __post_init__(self, origin: str) -> None:
        matcher = _strings(self.matcher, f"{origin}.matcher", '["shop.users"]')
        _check_matcher(matcher, f"{origin}.matcher")
        columns = _strings(self.columns, f"{origin}.columns", '["email"]')
        for index, pattern in enumerate(columns):
            _check_pattern(pattern, f"{origin}.columns[{index}]")
            if pattern.startswith("!"):
                raise ConfigError(
                    f"{origin}.columns[{index}]",
                    f"{pattern!r}: a mask names the columns it masks, it excludes none; leave "
                    "columns out with [[sink.column-selectors]]",
                )
        method = self.method
        if isinstance(method, str):
            try:
                method = MaskMethod(method.strip().lower())
            except ValueError:
                allowed = ", ".join(m.value for m in MaskMethod)
                raise ConfigError(
                    f"{origin}.method", f"unknown mask method {method!r}; allowed: {allowed}"
                ) from None
        if not isinstance(method, MaskMethod):
            raise ConfigError(f"{origin}.method", "must be one of hash, redact, truncate")
        if not isinstance(self.salt, str):
            raise ConfigError(f"{origin}.salt", "must be a string")
        if not isinstance(self.replacement, str):
            raise ConfigError(f"{origin}.replacement", "must be a string")
        length = self.length
        if method is MaskMethod.TRUNCATE:
            if isinstance(length, bool) or not isinstance(length, int) or length < 1:
                raise ConfigError(
                    f"{origin}.length",
                    "truncate keeps the first `length` characters: give a whole number >= 1, "
                    "e.g. length = 4",
                )
        elif length is not None:
            raise ConfigError(f"{origin}.length", f"applies to truncate only, not {method.value}")
        if method is not MaskMethod.HASH and self.salt:
            raise ConfigError(f"{origin}.salt", f"applies to hash only, not {method.value}")
        object.__setattr__(self, "matcher", matcher)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "method", method)

    def to_dict(self, *, mask_salt: bool = False) -> dict[str, object]:
        data: dict[str, object] = {
            "matcher": list(self.matcher),
            "columns": list(self.columns),
            "method": self.method.value,
        }
        if self.method is MaskMethod.HASH and self.salt:
            data["salt"] = "******" if mask_salt else self.salt
        if self.method is MaskMethod.TRUNCATE:
            data["length"] = self.length
        if self.method is MaskMethod.REDACT:
            data["replacement"] = self.replacement
        return data


@dataclass(frozen=True)
class TableColumnRules:
    """The rules one table is under: its selector's patterns (None: every column) and the
    masks that apply to it."""

    table: TableName
    patterns: tuple[str, ...] | None
    masks: tuple[ColumnMask, ...]

    def selects(self, column: str) -> bool:
        """Whether ``column`` is sent (TiCDC's rule: the last matching pattern decides)."""
        patterns = self.patterns
        if patterns is None:
            return True
        if all(p.startswith("!") for p in patterns):
            patterns = ("*", *patterns)
        chosen = False
        for pattern in patterns:
            negative = pattern.startswith("!")
            if column_matches(pattern[1:] if negative else pattern, column):
                chosen = not negative
        return chosen

    def mask_of(self, column: str) -> list[ColumnMask]:
        """Every mask naming ``column`` (more than one is refused by the plan)."""
        return [m for m in self.masks if any(column_matches(p, column) for p in m.columns)]


@dataclass(frozen=True)
class ColumnRules:
    """A changefeed's selectors and masks; ``for_table`` says which apply to a table."""

    selectors: tuple[ColumnSelector, ...] = ()
    masks: tuple[ColumnMask, ...] = ()
    case_sensitive: bool = False
    _filters: tuple[tuple[TableFilter, ...], tuple[TableFilter, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_filters",
            (
                tuple(TableFilter.parse(s.matcher, self.case_sensitive) for s in self.selectors),
                tuple(TableFilter.parse(m.matcher, self.case_sensitive) for m in self.masks),
            ),
        )

    def __bool__(self) -> bool:
        return bool(self.selectors or self.masks)

    def __reduce__(self) -> tuple[object, ...]:
        # pickled into Spark tasks as the rules; the filters are compiled again there
        return (ColumnRules, (self.selectors, self.masks, self.case_sensitive))

    def for_table(self, table: TableName) -> TableColumnRules | None:
        """The rules of ``table``; None when none applies (every column, unmasked)."""
        selectors, masks = self._filters
        patterns: tuple[str, ...] | None = None
        for selector, matcher in zip(self.selectors, selectors, strict=True):
            if matcher.matches(table.schema, table.table):
                patterns = selector.columns
                break
        applied = tuple(
            m
            for m, f in zip(self.masks, masks, strict=True)
            if f.matches(table.schema, table.table)
        )
        if patterns is None and not applied:
            return None
        return TableColumnRules(table, patterns, applied)

    @classmethod
    def of(
        cls, selectors: Sequence[ColumnSelector], masks: Sequence[ColumnMask], case_sensitive: bool
    ) -> ColumnRules:
        return cls(tuple(selectors), tuple(masks), case_sensitive)
