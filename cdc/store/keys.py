"""Every etcd key of a cluster: built here, parsed here, nowhere else.

All shared state of one cluster lives under one prefix, ``/cdc/<cluster-id>``
by default (``cluster_prefix()``)::

    /cdc/<cluster>/
    ├── owner                                      OwnerKey: election key, under the owner's lease
    ├── capture/<capture-id>                      CaptureKey: addr, version; capture's lease
    ├── changefeed/
    │   ├── info/<changefeed-id>                  ChangefeedInfoKey: the config (masked)
    │   ├── status/<changefeed-id>                ChangefeedStatusKey: state, checkpoint...
    │   └── history/<changefeed-id>               ChangefeedHistoryKey: who did what, when
    │                                             (kept after a remove)
    ├── task/<changefeed-id>/<table>              TaskKey: capture running the table
    ├── table-checkpoint/<changefeed-id>/<table>  TableCheckpointKey: durable position
    ├── stream-progress/<changefeed-id>/<capture-id>/<reader>
    │                                             StreamProgressKey: position every table
    │                                             a capture's binlog reader holds has
    │                                             reached (docs/etcd-layout.md)
    ├── snapshot/<changefeed-id>/<table>/<n>      SnapshotChunkKey: bounds, high watermark
    ├── snapshot-plan/<changefeed-id>/<table>     SnapshotPlanKey: a shared plan's schema
    │                                             and chunk count (issue #16)
    ├── snapshot-share/<changefeed-id>/<table>/<n> SnapshotShareKey: chunks n*S..n*S+S-1 of
    │                                             a shared plan, the capture the owner gave
    │                                             them to, their state
    ├── snapshot-request/<changefeed-id>/<table>  SnapshotRequestKey: an operator's re-snapshot
    │                                             of a streaming table (its predicate, state)
    ├── barrier/<changefeed-id>                   BarrierKey: the current DDL barrier
    ├── subscription/<changefeed-id>/<client-id>  SubscriptionKey: a pull client's ack
    └── subscription-ddl/<changefeed-id>          SubscriptionDdlKey: the last DDL a pull
                                                  changefeed's owner applied (for its clients)

``<table>`` is ``str(TableName)``: ``schema.table``, a part holding a dot or a
backtick backtick-quoted (```shop-eu.v2`.orders``), see ``table_name`` /
``split_table``; chunk ``n`` of a table has the chunk id ``<table>:n``
(``chunk_id`` / ``parse_chunk_id``).

Each key kind is a frozen dataclass whose ``str()`` is the full key and whose
``parse(key, prefix)`` reverses it; ``parse_key`` finds the kind of any key.
Range reads use ``prefix_of(prefix, kind, *leading parts)``, which always ends
with ``/`` so that changefeed ``cf1`` never matches ``cf10``. ``KeySpace``
binds a prefix once so callers write ``keys.task(cf, table)``.

Names are single key segments: they must be non-empty and contain no ``/``
(nor control characters).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Self, TypeVar, overload

from cdc.model.schema import TableName

__all__ = [
    "DEFAULT_CLUSTER_ID",
    "KINDS",
    "BarrierKey",
    "CaptureKey",
    "ChangefeedHistoryKey",
    "ChangefeedInfoKey",
    "ChangefeedStatusKey",
    "InvalidKeyError",
    "Key",
    "KeySpace",
    "OwnerKey",
    "SnapshotChunkKey",
    "SnapshotPlanKey",
    "SnapshotRequestKey",
    "SnapshotShareKey",
    "StreamProgressKey",
    "SubscriptionDdlKey",
    "SubscriptionKey",
    "TableCheckpointKey",
    "TaskKey",
    "check_name",
    "chunk_id",
    "cluster_prefix",
    "normalize_prefix",
    "parse_chunk_id",
    "parse_key",
    "prefix_of",
    "split_table",
    "table_name",
]

DEFAULT_CLUSTER_ID = "default"
ROOT = "/cdc"


class InvalidKeyError(ValueError):
    """A name cannot be part of a key, or a string is not a key of the expected kind."""


def check_name(what: str, value: object) -> str:
    """``value`` if it can be one key segment, else ``InvalidKeyError`` naming ``what``."""
    if not isinstance(value, str):
        raise InvalidKeyError(f"{what} must be a string, got {type(value).__name__} {value!r}")
    if not value:
        raise InvalidKeyError(f"{what} must not be empty")
    if "/" in value:
        raise InvalidKeyError(
            f"{what} {value!r} must not contain '/': it is one segment of an etcd key"
        )
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidKeyError(f"{what} {value!r} must not contain control characters")
    return value


def cluster_prefix(cluster_id: str = DEFAULT_CLUSTER_ID) -> str:
    """The key prefix of cluster ``cluster_id``: ``/cdc/<cluster_id>``."""
    return f"{ROOT}/{check_name('cluster id', cluster_id)}"


def normalize_prefix(prefix: str) -> str:
    """``prefix`` without trailing ``/``; it must be absolute and have no empty segment."""
    if not isinstance(prefix, str):
        raise InvalidKeyError(f"key prefix must be a string, got {type(prefix).__name__}")
    stripped = prefix.rstrip("/")
    if not stripped.startswith("/"):
        raise InvalidKeyError(
            f"key prefix {prefix!r} must start with '/' and name at least one segment, "
            f"e.g. {cluster_prefix()!r}"
        )
    for segment in stripped[1:].split("/"):
        if not segment:
            raise InvalidKeyError(f"key prefix {prefix!r} must not contain an empty segment ('//')")
        check_name(f"segment of key prefix {prefix!r}", segment)
    return stripped


def table_name(schema: str, table: str) -> str:
    """The ``schema.table`` form used in keys and chunk ids: ``str(TableName)``."""
    check_name("schema name", schema)
    check_name("table name", table)
    return str(TableName(schema, table))


def split_table(name: str) -> tuple[str, str]:
    """``(schema, table)`` of a name made by ``table_name`` (``TableName.parse``)."""
    check_name("table", name)
    try:
        parsed = TableName.parse(name)
    except ValueError as exc:
        raise InvalidKeyError(
            f"table {name!r} must be written 'schema.table', e.g. 'shop.orders' or "
            f"'`shop-eu.v2`.orders' ({exc})"
        ) from None
    if str(parsed) != name:
        raise InvalidKeyError(
            f"table {name!r} is not in the key form of its name, {str(parsed)!r}: "
            "a part is backtick-quoted exactly when it holds a dot or a backtick "
            "or starts or ends with a blank"
        )
    return parsed.schema, parsed.table


def _check_table(name: str) -> str:
    split_table(name)
    return name


def _check_index(what: str, n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidKeyError(f"{what} must be a non-negative integer, got {n!r}")
    return n


def _parse_index(what: str, text: str) -> int:
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise InvalidKeyError(f"{what} {text!r} is not a non-negative integer without leading 0")
    return int(text)


def chunk_id(table: str, n: int) -> str:
    """The id of chunk ``n`` of ``table`` (``schema.table``): ``schema.table:n``."""
    return f"{_check_table(table)}:{_check_index('chunk number', n)}"


def parse_chunk_id(text: str) -> tuple[str, str, int]:
    """``(schema, table, n)`` of a chunk id made by ``chunk_id``."""
    if not isinstance(text, str):
        raise InvalidKeyError(f"chunk id must be a string, got {type(text).__name__}")
    table, colon, n = text.rpartition(":")
    if not colon or not table:
        raise InvalidKeyError(f"chunk id {text!r} must be 'schema.table:n', e.g. 'shop.orders:3'")
    schema, name = split_table(table)
    return schema, name, _parse_index(f"chunk number in chunk id {text!r}", n)


@dataclass(frozen=True)
class Key:
    """Base of every key kind: ``prefix`` plus the kind's segments.

    ``kind`` is the fixed path below the prefix; the dataclass fields after
    ``prefix`` are the variable segments, in key order.
    """

    kind: ClassVar[str]
    prefix: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", normalize_prefix(self.prefix))
        for field in self._segment_fields():
            self._check_segment(field.name, getattr(self, field.name))

    @classmethod
    def _segment_fields(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if f.name != "prefix"]

    @classmethod
    def _check_segment(cls, name: str, value: object) -> object:
        what = name.replace("_", " ")
        if name == "table":
            return _check_table(check_name(what, value))
        if name == "n":
            return _check_index("chunk number", value)
        return check_name(what, value)

    def segments(self) -> tuple[str, ...]:
        """The variable segments of this key, as strings, in key order."""
        return tuple(str(getattr(self, f.name)) for f in self._segment_fields())

    def __str__(self) -> str:
        return "/".join((self.prefix, self.kind, *self.segments()))

    @classmethod
    def parse(cls, key: str, prefix: str) -> Self:
        """The key of this kind that ``str()``s to ``key``, else ``InvalidKeyError``."""
        base = f"{normalize_prefix(prefix)}/{cls.kind}"
        fields = cls._segment_fields()
        if not isinstance(key, str):
            raise InvalidKeyError(f"etcd key must be a string, got {type(key).__name__}")
        if not fields:
            if key != base:
                raise InvalidKeyError(f"{key!r} is not a {cls.__name__} (expected {base!r})")
            return cls(prefix)
        if not key.startswith(base + "/"):
            raise InvalidKeyError(f"{key!r} is not a {cls.__name__} (expected {base}/...)")
        parts = key[len(base) + 1 :].split("/")
        if len(parts) != len(fields):
            layout = "/".join(f"<{f.name}>" for f in fields)
            raise InvalidKeyError(f"{key!r} is not a {cls.__name__} (expected {base}/{layout})")
        values: list[object] = []
        for field, part in zip(fields, parts, strict=True):
            if field.name == "n":
                values.append(_parse_index(f"chunk number in key {key!r}", part))
            else:
                values.append(part)
        return cls(prefix, *values)


@dataclass(frozen=True)
class OwnerKey(Key):
    """The election key: exists while an owner holds it, under that owner's lease."""

    kind: ClassVar[str] = "owner"


@dataclass(frozen=True)
class CaptureKey(Key):
    """One running capture, under the capture's lease."""

    kind: ClassVar[str] = "capture"
    capture_id: str


@dataclass(frozen=True)
class ChangefeedInfoKey(Key):
    """A changefeed's configuration (credentials masked)."""

    kind: ClassVar[str] = "changefeed/info"
    changefeed_id: str


@dataclass(frozen=True)
class ChangefeedStatusKey(Key):
    """A changefeed's state, checkpoint, resolved position and error."""

    kind: ClassVar[str] = "changefeed/status"
    changefeed_id: str


@dataclass(frozen=True)
class TaskKey(Key):
    """Assignment of one table pipeline of a changefeed to a capture."""

    kind: ClassVar[str] = "task"
    changefeed_id: str
    table: str


@dataclass(frozen=True)
class TableCheckpointKey(Key):
    """The durable position of one table pipeline, reported by its processor."""

    kind: ClassVar[str] = "table-checkpoint"
    changefeed_id: str
    table: str


@dataclass(frozen=True)
class StreamProgressKey(Key):
    """How far one binlog reader of a capture has brought every table it holds."""

    kind: ClassVar[str] = "stream-progress"
    changefeed_id: str
    capture_id: str
    reader: str


@dataclass(frozen=True)
class SnapshotPlanKey(Key):
    """A table's snapshot plan shared out over the captures: its schema and chunk count."""

    kind: ClassVar[str] = "snapshot-plan"
    changefeed_id: str
    table: str


@dataclass(frozen=True)
class SnapshotShareKey(Key):
    """Share ``n`` of a shared snapshot plan: a run of its chunks, the capture running it."""

    kind: ClassVar[str] = "snapshot-share"
    changefeed_id: str
    table: str
    n: int


@dataclass(frozen=True)
class SnapshotChunkKey(Key):
    """Snapshot chunk ``n`` of a table: bounds, state, high watermark."""

    kind: ClassVar[str] = "snapshot"
    changefeed_id: str
    table: str
    n: int

    @property
    def chunk_id(self) -> str:
        """``schema.table:n``."""
        return chunk_id(self.table, self.n)


@dataclass(frozen=True)
class SnapshotRequestKey(Key):
    """An operator's re-snapshot of one streaming table (``cdc.changefeed.snapshot_request``):
    its predicate and state; its chunks are the table's ``SnapshotChunkKey`` records."""

    kind: ClassVar[str] = "snapshot-request"
    changefeed_id: str
    table: str


@dataclass(frozen=True)
class BarrierKey(Key):
    """The current DDL barrier of a changefeed."""

    kind: ClassVar[str] = "barrier"
    changefeed_id: str


@dataclass(frozen=True)
class SubscriptionKey(Key):
    """The acked cursor of one pull client of a changefeed."""

    kind: ClassVar[str] = "subscription"
    changefeed_id: str
    client_id: str


@dataclass(frozen=True)
class SubscriptionDdlKey(Key):
    """The last DDL the owner applied to a pull changefeed, which its serving capture
    hands to the clients in binlog order (``cdc.subscription.ddl_log``)."""

    kind: ClassVar[str] = "subscription-ddl"
    changefeed_id: str


@dataclass(frozen=True)
class ChangefeedHistoryKey(Key):
    """A changefeed's audit history (``cdc.changefeed.history``); outlives the changefeed."""

    kind: ClassVar[str] = "changefeed/history"
    changefeed_id: str


_KeyT = TypeVar("_KeyT", bound=Key)

#: Every key kind, in the order of the tree above.
KINDS: tuple[type[Key], ...] = (
    OwnerKey,
    CaptureKey,
    ChangefeedInfoKey,
    ChangefeedStatusKey,
    TaskKey,
    TableCheckpointKey,
    StreamProgressKey,
    SnapshotChunkKey,
    SnapshotPlanKey,
    SnapshotShareKey,
    SnapshotRequestKey,
    BarrierKey,
    SubscriptionKey,
    SubscriptionDdlKey,
    ChangefeedHistoryKey,
)

#: Kinds holding state of one changefeed (first segment is the changefeed id). The
#: history is not state: a remove keeps it, so that it still tells who removed it.
CHANGEFEED_KINDS: tuple[type[Key], ...] = tuple(
    k for k in KINDS[2:] if k is not ChangefeedHistoryKey
)


def parse_key(key: str, prefix: str) -> Key:
    """The typed key that ``str()``s to ``key``, whatever its kind."""
    base = normalize_prefix(prefix)
    if not isinstance(key, str) or not key.startswith(base + "/"):
        raise InvalidKeyError(f"{key!r} is not under the cluster prefix {base!r}")
    rest = key[len(base) + 1 :]
    for kind in KINDS:
        if rest == kind.kind or rest.startswith(kind.kind + "/"):
            return kind.parse(key, base)
    known = ", ".join(k.kind for k in KINDS)
    raise InvalidKeyError(f"{key!r} is of no known kind (known: {known})")


def prefix_of(prefix: str, kind: type[Key] | None = None, *parts: str | int) -> str:
    """The range prefix of all keys of ``kind`` whose leading segments are ``parts``.

    ``prefix_of(p)`` covers the whole cluster, ``prefix_of(p, TaskKey)`` every
    task, ``prefix_of(p, SnapshotChunkKey, cf, "db.t")`` the chunks of one
    table. The result ends with ``/``.
    """
    base = normalize_prefix(prefix)
    if kind is None:
        if parts:
            raise InvalidKeyError("prefix_of: segments given without a key kind")
        return base + "/"
    fields = kind._segment_fields()
    if not fields:
        raise InvalidKeyError(f"{kind.__name__} is a single key, not a range")
    if len(parts) >= len(fields):
        raise InvalidKeyError(
            f"prefix_of({kind.__name__}) takes at most {len(fields) - 1} leading "
            f"segments ({', '.join(f.name for f in fields[:-1]) or 'none'}), got {len(parts)}"
        )
    checked = [str(kind._check_segment(f.name, v)) for f, v in zip(fields, parts, strict=False)]
    return "/".join((base, kind.kind, *checked)) + "/"


@dataclass(frozen=True)
class KeySpace:
    """The keys of one cluster: ``KeySpace("/cdc/default").task("cf", "db.t")``."""

    prefix: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", normalize_prefix(self.prefix))

    def owner(self) -> OwnerKey:
        return OwnerKey(self.prefix)

    def capture(self, capture_id: str) -> CaptureKey:
        return CaptureKey(self.prefix, capture_id)

    def changefeed_info(self, changefeed_id: str) -> ChangefeedInfoKey:
        return ChangefeedInfoKey(self.prefix, changefeed_id)

    def changefeed_status(self, changefeed_id: str) -> ChangefeedStatusKey:
        return ChangefeedStatusKey(self.prefix, changefeed_id)

    def changefeed_history(self, changefeed_id: str) -> ChangefeedHistoryKey:
        return ChangefeedHistoryKey(self.prefix, changefeed_id)

    def task(self, changefeed_id: str, table: str) -> TaskKey:
        return TaskKey(self.prefix, changefeed_id, table)

    def table_checkpoint(self, changefeed_id: str, table: str) -> TableCheckpointKey:
        return TableCheckpointKey(self.prefix, changefeed_id, table)

    def stream_progress(
        self, changefeed_id: str, capture_id: str, reader: str
    ) -> StreamProgressKey:
        return StreamProgressKey(self.prefix, changefeed_id, capture_id, reader)

    def snapshot_chunk(self, changefeed_id: str, table: str, n: int) -> SnapshotChunkKey:
        return SnapshotChunkKey(self.prefix, changefeed_id, table, n)

    def snapshot_plan(self, changefeed_id: str, table: str) -> SnapshotPlanKey:
        return SnapshotPlanKey(self.prefix, changefeed_id, table)

    def snapshot_share(self, changefeed_id: str, table: str, n: int) -> SnapshotShareKey:
        return SnapshotShareKey(self.prefix, changefeed_id, table, n)

    def snapshot_request(self, changefeed_id: str, table: str) -> SnapshotRequestKey:
        return SnapshotRequestKey(self.prefix, changefeed_id, table)

    def barrier(self, changefeed_id: str) -> BarrierKey:
        return BarrierKey(self.prefix, changefeed_id)

    def subscription(self, changefeed_id: str, client_id: str) -> SubscriptionKey:
        return SubscriptionKey(self.prefix, changefeed_id, client_id)

    def subscription_ddl(self, changefeed_id: str) -> SubscriptionDdlKey:
        return SubscriptionDdlKey(self.prefix, changefeed_id)

    def prefix_of(self, kind: type[Key] | None = None, *parts: str | int) -> str:
        """See the module function ``prefix_of``."""
        return prefix_of(self.prefix, kind, *parts)

    @overload
    def parse(self, key: str) -> Key: ...
    @overload
    def parse(self, key: str, kind: type[_KeyT]) -> _KeyT: ...
    def parse(self, key: str, kind: type[Key] | None = None) -> Key:
        """See the module function ``parse_key``; with ``kind``, the key must be of that kind.

        Callers that read a range of one kind pass it, and get that kind back typed.
        """
        if kind is None:
            return parse_key(key, self.prefix)
        return kind.parse(key, self.prefix)

    def changefeed_scope(self, changefeed_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(keys, prefixes)`` that together hold every piece of state of a changefeed.

        Removing a changefeed deletes all of them; single-key kinds are exact
        keys (a prefix ``info/cf1`` would also match ``info/cf10``).
        """
        check_name("changefeed id", changefeed_id)
        keys: list[str] = []
        prefixes: list[str] = []
        for kind in CHANGEFEED_KINDS:
            if len(kind._segment_fields()) == 1:
                keys.append(prefix_of(self.prefix, kind) + changefeed_id)
            else:
                prefixes.append(prefix_of(self.prefix, kind, changefeed_id))
        return tuple(keys), tuple(prefixes)
