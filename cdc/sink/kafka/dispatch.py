"""Which topic and partition a change goes to: TiCDC's ``[sink] dispatchers``.

::

    [sink]
    dispatchers = [
      { matcher = ["shop.orders"], topic = "{schema}_{table}", partition = "index-value" },
      { matcher = ["shop.*"], topic = "shop-events", partition = "table" },
    ]

The first rule whose ``matcher`` (table filter syntax, case-insensitive)
matches the table decides; a table no rule matches goes to the URI's topic,
partitioned by key. ``topic`` is a topic name or an expression with
``{schema}`` and ``{table}``; characters a Kafka topic cannot hold are written
``_`` (as TiCDC does). ``partition``:

* ``index-value`` (also ``default``): by the row's key values, so every change
  of one row goes to one partition, in binlog order;
* ``table``: by table, so every change of one table goes to one partition (a
  consumer sees a table's changes in order across keys).

``ts`` and ``columns`` are refused: they spread one row's changes over
partitions, and a consumer could then apply them out of order.

The partition is ``crc32`` of the key's JSON text ``{"<column>":"<text>",...}``
(the canal-json key), seeded with the ``crc32`` of ``[schema, table]``,
modulo the partition count: the same in every process (Python's ``hash`` is
salted per process), so a snapshot chunk written by a Spark worker and the
binlog changes of the same row written by a capture land in one partition.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cdc.errors import ConfigError
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName

__all__ = [
    "DispatchRule",
    "Dispatcher",
    "PartitionBy",
    "key_partition",
    "parse_dispatchers",
    "table_partition",
    "valid_topic",
]

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_NOT_TOPIC = re.compile(r"[^A-Za-z0-9._-]")
_EXPRESSION_PART = re.compile(r"\{schema\}|\{table\}|[A-Za-z0-9._-]")
_RULE_KEYS = frozenset({"matcher", "topic", "partition"})
_EXAMPLE = (
    'dispatchers = [{ matcher = ["shop.*"], topic = "{schema}_{table}", '
    'partition = "index-value" }]'
)


class PartitionBy(enum.Enum):
    """How a rule spreads a topic's messages over its partitions."""

    KEY = "index-value"
    TABLE = "table"


_PARTITION_NAMES = {
    "index-value": PartitionBy.KEY,
    "default": PartitionBy.KEY,
    "table": PartitionBy.TABLE,
}
_REFUSED_PARTITIONS = {
    "ts": "it spreads one row's changes over partitions by commit time",
    "columns": "a row whose chosen columns change would move to another partition",
    "rowid": "there is no row id in MySQL",
}


def valid_topic(topic: str, field: str) -> str:
    """``topic`` if Kafka accepts it as a topic name, else a ConfigError."""
    if _TOPIC.fullmatch(topic) is None or topic in (".", ".."):
        raise ConfigError(
            field,
            f"{topic!r} is not a Kafka topic name; use 1 to 249 of A-Z a-z 0-9 . _ -, "
            "e.g. cdc-events",
        )
    return topic


@dataclass(frozen=True)
class DispatchRule:
    """One ``[sink] dispatchers`` entry: which tables, which topic, how partitioned.

    ``topic`` empty: the URI's default topic."""

    matcher: tuple[str, ...]
    topic: str = ""
    partition: PartitionBy = PartitionBy.KEY

    def describe(self) -> dict[str, Any]:
        """The rule as the TOML wrote it (and as the URI carries it)."""
        data: dict[str, Any] = {"matcher": list(self.matcher), "partition": self.partition.value}
        if self.topic:
            data["topic"] = self.topic
        return data


def _topic_expression(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(field, f"must be a non-empty string, e.g. {_EXAMPLE}")
    rest = _EXPRESSION_PART.sub("", value)
    if rest or len(value) > 249:
        raise ConfigError(
            field,
            f"{value!r} is not a topic expression; use A-Z a-z 0-9 . _ - and the placeholders "
            '{schema} and {table}, at most 249 characters, e.g. topic = "{schema}_{table}"',
        )
    return value


def _partition(value: Any, field: str) -> PartitionBy:
    name = value.strip().lower() if isinstance(value, str) else value
    by = _PARTITION_NAMES.get(name) if isinstance(name, str) else None
    if by is not None:
        return by
    why = _REFUSED_PARTITIONS.get(name) if isinstance(name, str) else None
    reason = f"partition = {name!r} is refused: {why}" if why else f"unknown partition {value!r}"
    raise ConfigError(field, f'{reason}; use "index-value" (by key, the default) or "table"')


def _rule(entry: Any, field: str) -> DispatchRule:
    if not isinstance(entry, dict):
        raise ConfigError(field, f"must be a table with matcher = [...], e.g. {_EXAMPLE}")
    unknown = sorted(set(entry) - _RULE_KEYS)
    if unknown:
        raise ConfigError(
            f"{field}.{unknown[0]}",
            f"unknown key {unknown[0]!r}; allowed: {', '.join(sorted(_RULE_KEYS))}",
        )
    matcher = entry.get("matcher")
    if not isinstance(matcher, list) or not matcher or not all(isinstance(m, str) for m in matcher):
        raise ConfigError(
            f"{field}.matcher", 'must be a non-empty array of table rules, e.g. ["shop.*"]'
        )
    TableFilter.parse(matcher, False, f"{field}.matcher")
    topic = _topic_expression(entry["topic"], f"{field}.topic") if "topic" in entry else ""
    partition = _partition(entry.get("partition", "index-value"), f"{field}.partition")
    return DispatchRule(tuple(matcher), topic, partition)


def parse_dispatchers(text: str, field: str) -> tuple[DispatchRule, ...]:
    """The rules of a ``dispatchers`` parameter (a JSON array of rule objects)."""
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(field, f"not a JSON array of rules ({exc}); e.g. {_EXAMPLE}") from None
    if not isinstance(entries, list):
        raise ConfigError(field, f"must be an array of rules, e.g. {_EXAMPLE}")
    return tuple(_rule(entry, f"{field}[{i}]") for i, entry in enumerate(entries))


def dispatchers_param(rules: Sequence[DispatchRule]) -> str:
    """The ``dispatchers`` parameter text of ``rules`` (compact JSON)."""
    return json.dumps([rule.describe() for rule in rules], separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def _seed(table: TableName) -> int:
    text = json.dumps([table.schema, table.table], ensure_ascii=False, separators=(",", ":"))
    return zlib.crc32(text.encode("utf-8"))


def key_partition(table: TableName, key_json: bytes, partitions: int) -> int:
    """The partition of a row by its key (``KeyTexts.json``: the key values as text)."""
    return zlib.crc32(key_json, _seed(table)) % partitions


def table_partition(table: TableName, partitions: int) -> int:
    """The partition of every row of ``table`` under a ``table`` rule."""
    return _seed(table) % partitions


class Dispatcher:
    """Decides topics and partitioning for the tables of one sink (rules compiled once)."""

    def __init__(self, default_topic: str, rules: Sequence[DispatchRule]) -> None:
        self.default_topic = default_topic
        self._rules = [(TableFilter.parse(list(r.matcher), False), r) for r in rules]
        self._cache: dict[TableName, tuple[str, PartitionBy]] = {}

    def route(self, table: TableName) -> tuple[str, PartitionBy]:
        """The topic of ``table``'s messages and how they are partitioned."""
        found = self._cache.get(table)
        if found is None:
            found = (self.default_topic, PartitionBy.KEY)
            for matcher, rule in self._rules:
                if matcher.matches(table.schema, table.table):
                    topic = rule.topic or self.default_topic
                    found = (_expand(topic, table), rule.partition)
                    break
            self._cache[table] = found
        return found

    def topic(self, table: TableName) -> str:
        return self.route(table)[0]


def _expand(expression: str, table: TableName) -> str:
    topic = expression.replace("{schema}", _NOT_TOPIC.sub("_", table.schema)).replace(
        "{table}", _NOT_TOPIC.sub("_", table.table)
    )
    return topic[:249]
