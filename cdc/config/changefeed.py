"""A changefeed's configuration: loaded from TOML and CLI flags, stored in etcd.

The file follows TiCDC's changefeed layout where it applies, plus our own
``[snapshot]`` table::

    changefeed-id = "orders-to-dw"
    source-uri = "mysql://repl@10.0.0.5:3306/?server-id=1001&password-env=CDC_SRC_PW"
    sink-uri = "mysql://root@10.0.0.9:3306/?password-env=CDC_SINK_PW"
    case-sensitive = false
    # start-position = "mysql-bin.000042:4"   (only with [snapshot] mode = "never")
    # start-gtid = "0-1-100"                  (the same, by GTID)
    # target-position = "mysql-bin.000050:4"  (stop there; the changefeed finishes)
    # supported-ddl = ["create table", "add column"]
    # store-credentials = false

    [filter]
    rules = ["shop.*", "!shop.tmp_*"]
    # no-backfill = ["shop.events_*"]   tables `changefeed update` adds from these rules
    #                                    stream from the update, without a snapshot

    [[filter.event-filters]]
    matcher = ["shop.orders"]
    ignore-event = ["delete"]
    ignore-sql = ["^drop"]
    ignore-insert-value-expr = "id >= 100"

    [sink]                 # defaults for parameters the sink URI does not give itself
    worker-count = 16      # mysql:// and mariadb:// sinks
    # protocol = "csv"     # file:// (canal-json, csv) and kafka:// (canal-json, debezium)
    # dispatchers = [{ matcher = ["shop.*"], topic = "{schema}_{table}" }]   # kafka:// only

    [[sink.column-selectors]]          # the columns sent, every sink kind (TiCDC's)
    matcher = ["shop.users"]
    columns = ["*", "!photo"]

    [[sink.column-masks]]              # how sent columns are hidden (cdc.filter.columns)
    matcher = ["shop.users"]
    columns = ["email"]
    method = "hash"                    # hash | redact | truncate

    [snapshot]
    mode = "initial"       # initial | never | snapshot-only
    chunk-size = 8096
    spark-master = "local[*]"
    chunk-key-columns = { "shop.audit_log" = "created_at" }

Command-line flags override the file. The same tree, with ``"v": 1``, is what
:meth:`ChangefeedConfig.to_dict` writes to etcd and :meth:`from_dict` reads
back. Every error is a :class:`ConfigError` naming the dotted key.
"""

from __future__ import annotations

import difflib
import enum
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cdc.errors import ConfigError
from cdc.filter.columns import ColumnMask, ColumnRules, ColumnSelector
from cdc.filter.ddl_support import DEFAULT_SUPPORTED_DDL as _DEFAULT_SUPPORTED_KINDS
from cdc.filter.table_filter import TableFilter
from cdc.masking import MASK
from cdc.model.events import DdlKind
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.sink.kind import SinkURI
from cdc.sink.registry import find_kind, parse_sink_uri
from cdc.uri.mysql import MySQLURI, parse_source_uri

__all__ = [
    "DEFAULT_SUPPORTED_DDL",
    "DML_EVENTS",
    "FORMAT_VERSION",
    "OVERRIDE_KEYS",
    "ChangefeedConfig",
    "EventFilterRule",
    "SnapshotMode",
    "load_changefeed_config",
]

FORMAT_VERSION = 1


class SnapshotMode(enum.Enum):
    """Whether a changefeed reads its tables before following the binlog.

    INITIAL: snapshot every table, then stream from the snapshot's watermarks.
    NEVER: stream only, from ``start-position`` / ``start-gtid`` or the current position.
    SNAPSHOT_ONLY: snapshot every table, then finish.
    """

    INITIAL = "initial"
    NEVER = "never"
    SNAPSHOT_ONLY = "snapshot-only"


#: ``ignore-event`` names for row changes, as in TiCDC.
DML_EVENTS = ("insert", "update", "delete", "all dml")
_ALL_DDL = "all ddl"
# TiCDC accepts these spellings for the schema-level kinds.
_DDL_ALIASES = {"create database": "create schema", "drop database": "drop schema"}

#: What a database sink can apply by default (``supported-ddl``), by name in
#: ``DdlKind`` order: the kinds of :data:`cdc.filter.ddl_support.DEFAULT_SUPPORTED_DDL`.
DEFAULT_SUPPORTED_DDL: tuple[str, ...] = tuple(
    kind.value for kind in DdlKind if kind in _DEFAULT_SUPPORTED_KINDS
)

_CHANGEFEED_ID = re.compile(r"[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*")
_CHANGEFEED_ID_MAX = 128
MAX_DECODE_WORKERS = 64
_SPARK_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?"
    r"|(spark|mesos|k8s)://\S+"
    r"|yarn"
)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    names = {str: "string", int: "integer", float: "float", list: "array", dict: "table"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _describe_value(value: Any) -> str:
    text = repr(value) if not isinstance(value, bool) else str(value).lower()
    return text if len(text) <= 60 else text[:57] + "..."


def _wrong_type(path: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(
        path, f"expected {expected}, got {_type_name(value)} {_describe_value(value)}"
    )


def _ddl_kind_name(name: str, path: str, allowed_extra: tuple[str, ...] = ()) -> str:
    """The canonical DdlKind value for ``name`` (TiCDC spelling, any case)."""
    if not isinstance(name, str):
        raise _wrong_type(path, "a string", name)
    wanted = " ".join(name.replace("_", " ").lower().split())
    if wanted in allowed_extra:
        return wanted
    try:
        return DdlKind.parse(_DDL_ALIASES.get(wanted, wanted)).value
    except ValueError:
        choices = [*allowed_extra, *(kind.value for kind in DdlKind)]
        close = difflib.get_close_matches(wanted, choices, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            path, f"unknown event {name!r}; {hint}allowed: {', '.join(choices)}"
        ) from None


def _check_table_rules(rules: tuple[str, ...], case_sensitive: bool, path: str) -> None:
    TableFilter.parse(rules, case_sensitive, field=path)


def _string_tuple(value: Any, path: str, example: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _wrong_type(path, f"an array of strings, e.g. {example}", value)
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _wrong_type(f"{path}[{index}]", "a string", item)
    return tuple(value)


@dataclass(frozen=True)
class EventFilterRule:
    """One ``[[filter.event-filters]]`` entry: which events of matching tables to drop.

    Only the structure is checked here (known event names, regexes that
    compile, table rules that parse); the SQL expressions are compiled by the
    filter that evaluates them. ``origin`` is the dotted key errors name.
    """

    matcher: tuple[str, ...]
    ignore_event: tuple[str, ...] = ()
    ignore_sql: tuple[str, ...] = ()
    ignore_insert_value_expr: str = ""
    ignore_update_old_value_expr: str = ""
    ignore_update_new_value_expr: str = ""
    ignore_delete_value_expr: str = ""
    origin: InitVar[str] = "event-filter"

    def __post_init__(self, origin: str) -> None:
        matcher = _string_tuple(self.matcher, f"{origin}.matcher", '["shop.orders"]')
        if not any(rule.strip() for rule in matcher):
            raise ConfigError(
                f"{origin}.matcher",
                'needs at least one table rule saying which tables it applies to, e.g. ["shop.*"]',
            )
        _check_table_rules(matcher, False, f"{origin}.matcher")
        events = _string_tuple(
            self.ignore_event, f"{origin}.ignore-event", '["insert", "drop table"]'
        )
        events = tuple(
            _ddl_kind_name(name, f"{origin}.ignore-event[{index}]", (*DML_EVENTS, _ALL_DDL))
            for index, name in enumerate(events)
        )
        sqls = _string_tuple(self.ignore_sql, f"{origin}.ignore-sql", '["^drop", "add column"]')
        for index, pattern in enumerate(sqls):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(
                    f"{origin}.ignore-sql[{index}]",
                    f"{pattern!r} is not a valid regular expression ({exc}); "
                    'e.g. "^drop table" or "add column"',
                ) from None
        for name in (
            "ignore_insert_value_expr",
            "ignore_update_old_value_expr",
            "ignore_update_new_value_expr",
            "ignore_delete_value_expr",
        ):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise _wrong_type(
                    f"{origin}.{name.replace('_', '-')}", "a SQL expression string", value
                )
        object.__setattr__(self, "matcher", matcher)
        object.__setattr__(self, "ignore_event", events)
        object.__setattr__(self, "ignore_sql", sqls)

    def to_dict(self) -> dict[str, Any]:
        """The TOML-shaped dict (dashed keys), empty settings left out."""
        data: dict[str, Any] = {"matcher": list(self.matcher)}
        for name in (
            "ignore_event",
            "ignore_sql",
            "ignore_insert_value_expr",
            "ignore_update_old_value_expr",
            "ignore_update_new_value_expr",
            "ignore_delete_value_expr",
        ):
            value = getattr(self, name)
            if value:
                data[name.replace("_", "-")] = list(value) if isinstance(value, tuple) else value
        return data


def _check_position(text: Any, path: str) -> Position:
    if not isinstance(text, str):
        raise _wrong_type(path, "a binlog position string like 'mysql-bin.000003:4'", text)
    try:
        return Position.parse(text)
    except ValueError as exc:
        raise ConfigError(path, str(exc)) from None


@dataclass(frozen=True)
class ChangefeedConfig:
    """Everything a changefeed needs, validated as a whole on construction.

    Strings are accepted where a parsed value is expected (URIs, the snapshot
    mode) and lists where tuples are, for convenience; they are converted.
    """

    changefeed_id: str
    source_uri: MySQLURI
    sink_uri: SinkURI
    rules: tuple[str, ...] = ("*.*",)
    case_sensitive: bool = False
    event_filters: tuple[EventFilterRule, ...] = ()
    snapshot_mode: SnapshotMode = SnapshotMode.INITIAL
    chunk_size: int = 8096
    chunk_key_columns: Mapping[str, str] = field(default_factory=dict, hash=False)
    spark_master: str = "local[*]"
    start_position: str | None = None
    start_gtid: str | None = None
    target_position: str | None = None
    supported_ddl: tuple[str, ...] = DEFAULT_SUPPORTED_DDL
    store_credentials: bool = False
    decode_workers: int | None = None
    """Processes decoding the binlog's rows on each capture (TiCDC's ``[mounter]
    worker-num``); 0 or None (the default) decodes in the reader's own thread: a worker
    did not take work off the capture's process (docs/data-path.md, "When workers pay")."""
    column_selectors: tuple[ColumnSelector, ...] = ()
    """``[[sink.column-selectors]]``: which columns are sent (``cdc.filter.columns``)."""
    column_masks: tuple[ColumnMask, ...] = ()
    """``[[sink.column-masks]]``: how sent columns are masked."""
    no_backfill: tuple[str, ...] = ()
    """``[filter] no-backfill``: table rules whose tables, when ``changefeed update`` adds
    them, stream from the update's position without a snapshot (``docs/operations.md``)."""

    def __post_init__(self) -> None:
        self._check_identity()
        self._check_filter()
        self._check_snapshot()
        self._check_positions()
        ddl = _string_tuple(self.supported_ddl, "supported-ddl", '["create table", "add column"]')
        self._set(
            "supported_ddl",
            tuple(_ddl_kind_name(name, f"supported-ddl[{i}]") for i, name in enumerate(ddl)),
        )
        if not isinstance(self.store_credentials, bool):
            raise _wrong_type(
                "store-credentials", "a boolean (true or false)", self.store_credentials
            )
        self._set("column_selectors", tuple(self.column_selectors))
        self._set("column_masks", tuple(self.column_masks))
        workers = self.decode_workers
        if workers is not None:
            if isinstance(workers, bool) or not isinstance(workers, int):
                raise _wrong_type("mounter.worker-num", "an integer", workers)
            if not 0 <= workers <= MAX_DECODE_WORKERS:
                raise ConfigError(
                    "mounter.worker-num",
                    f"{workers} is out of range; give 0 (decode in the reader's thread) to "
                    f"{MAX_DECODE_WORKERS} processes, or leave it out for the default (0)",
                )

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    @property
    def columns(self) -> ColumnRules:
        """The column selectors and masks, matched as the changefeed compares names."""
        return ColumnRules(self.column_selectors, self.column_masks, self.case_sensitive)

    def _check_identity(self) -> None:
        cid = self.changefeed_id
        if not isinstance(cid, str):
            raise _wrong_type("changefeed-id", "a string", cid)
        if _CHANGEFEED_ID.fullmatch(cid) is None or len(cid) > _CHANGEFEED_ID_MAX:
            raise ConfigError(
                "changefeed-id",
                f"{cid!r} is not a valid changefeed id; use letters and digits in groups joined "
                f"by single '-', at most {_CHANGEFEED_ID_MAX} characters, e.g. orders-to-dw",
            )
        if isinstance(self.source_uri, str):
            self._set("source_uri", parse_source_uri(self.source_uri))
        elif not isinstance(self.source_uri, MySQLURI):
            raise _wrong_type("source-uri", "a mysql:// URI", self.source_uri)
        if isinstance(self.sink_uri, str):
            self._set("sink_uri", parse_sink_uri(self.sink_uri))
        elif find_kind(self.sink_uri) is None:
            raise _wrong_type("sink-uri", "a sink URI", self.sink_uri)

    def _check_filter(self) -> None:
        if not isinstance(self.case_sensitive, bool):
            raise _wrong_type("case-sensitive", "a boolean (true or false)", self.case_sensitive)
        rules = _string_tuple(self.rules, "filter.rules", '["shop.*"]')
        if not any(rule.strip() and not rule.strip().startswith("#") for rule in rules):
            raise ConfigError(
                "filter.rules",
                'no table rule given, so no table would be captured; e.g. rules = ["*.*"]',
            )
        _check_table_rules(rules, self.case_sensitive, "filter.rules")
        self._set("rules", rules)
        no_backfill = _string_tuple(self.no_backfill, "filter.no-backfill", '["shop.events_*"]')
        if no_backfill:
            _check_table_rules(no_backfill, self.case_sensitive, "filter.no-backfill")
        self._set("no_backfill", no_backfill)
        filters = self.event_filters
        if isinstance(filters, EventFilterRule) or not isinstance(filters, list | tuple):
            raise _wrong_type("filter.event-filters", "an array of event filter rules", filters)
        for index, rule in enumerate(filters):
            if not isinstance(rule, EventFilterRule):
                raise _wrong_type(f"filter.event-filters[{index}]", "an event filter rule", rule)
        self._set("event_filters", tuple(filters))

    def _check_snapshot(self) -> None:
        mode: object = self.snapshot_mode  # may still be the text a config file gave
        if isinstance(mode, str):
            text = mode
            try:
                mode = SnapshotMode(text.strip().lower())
            except ValueError:
                choices = [m.value for m in SnapshotMode]
                close = difflib.get_close_matches(text, choices, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigError(
                    "snapshot.mode",
                    f"unknown snapshot mode {text!r}; {hint}allowed: {', '.join(choices)}",
                ) from None
        if not isinstance(mode, SnapshotMode):
            raise _wrong_type("snapshot.mode", "one of initial, never, snapshot-only", mode)
        self._set("snapshot_mode", mode)
        kind = find_kind(self.sink_uri)
        if kind is not None and kind.no_snapshot and mode is not SnapshotMode.NEVER:
            raise ConfigError(
                "snapshot.mode",
                f"{kind.name}:// sinks take no snapshot yet ({kind.no_snapshot}), and mode "
                f'{mode.value!r} starts with one; set [snapshot] mode = "never" (cdcctl: '
                "--snapshot-mode never): the changefeed then starts at the current binlog "
                "position or at start-position",
            )
        size = self.chunk_size
        if isinstance(size, bool) or not isinstance(size, int):
            raise _wrong_type("snapshot.chunk-size", "an integer", size)
        if size < 1:
            raise ConfigError(
                "snapshot.chunk-size", f"{size} rows is too few; at least 1, e.g. chunk-size = 8096"
            )
        columns = self.chunk_key_columns
        if not isinstance(columns, Mapping):
            raise _wrong_type(
                "snapshot.chunk-key-columns",
                'a table of "schema.table" = "column", e.g. { "shop.log" = "created_at" }',
                columns,
            )
        by_name: dict[str, str] = {}
        for table, column in columns.items():
            path = f'snapshot.chunk-key-columns."{table}"'
            try:
                name = TableName.parse(table) if isinstance(table, str) else None
            except ValueError:
                name = None
            if name is None:
                raise ConfigError(
                    path,
                    f"{table!r} is not a schema.table name; e.g. "
                    '{ "shop.audit_log" = "created_at" } (quote a dotted name: "`my.db`.t")',
                )
            if not isinstance(column, str) or not column.strip():
                raise _wrong_type(path, 'a column name, e.g. "created_at"', column)
            # Keyed by str(TableName), the form lookups use, however the user quoted it.
            by_name[str(name)] = column
        self._set("chunk_key_columns", MappingProxyType(by_name))
        master = self.spark_master
        if not isinstance(master, str):
            raise _wrong_type("snapshot.spark-master", "a string", master)
        if _SPARK_MASTER.fullmatch(master) is None:
            raise ConfigError(
                "snapshot.spark-master",
                f"{master!r} is not a Spark master URL; e.g. local[*], local[4], "
                "spark://host:7077, k8s://https://host:6443 or yarn",
            )

    def _check_positions(self) -> None:
        start = (
            None
            if self.start_position is None
            else _check_position(self.start_position, "start-position")
        )
        target = (
            None
            if self.target_position is None
            else _check_position(self.target_position, "target-position")
        )
        if self.start_gtid is not None:
            if not isinstance(self.start_gtid, str):
                raise _wrong_type("start-gtid", "a GTID set string", self.start_gtid)
            try:
                gtid = GtidSet.parse(self.start_gtid)
            except ValueError as exc:
                raise ConfigError("start-gtid", str(exc)) from None
            if not gtid:
                raise ConfigError(
                    "start-gtid", "is empty; give a GTID set such as '0-1-100', or leave it out"
                )
        if start is not None and self.start_gtid is not None:
            raise ConfigError(
                "start-gtid",
                "start-position and start-gtid are both set; give only one place to start",
            )
        started = "start-position" if start is not None else "start-gtid"
        if (start is not None or self.start_gtid is not None) and (
            self.snapshot_mode is not SnapshotMode.NEVER
        ):
            raise ConfigError(
                started,
                f"only applies with snapshot mode 'never'; mode {self.snapshot_mode.value!r} "
                'starts streaming where its snapshot ends. Set [snapshot] mode = "never" '
                f"or drop {started}",
            )
        if target is not None and self.snapshot_mode is SnapshotMode.SNAPSHOT_ONLY:
            raise ConfigError(
                "target-position",
                "does not apply with snapshot mode 'snapshot-only', which never reads the "
                "binlog; drop target-position or change the mode",
            )
        if start is not None and target is not None:
            try:
                ahead = target > start
            except ValueError as exc:
                raise ConfigError("target-position", str(exc)) from None
            if not ahead:
                raise ConfigError(
                    "target-position",
                    f"{self.target_position!r} is not after start-position "
                    f"{self.start_position!r}; the target must come later in the binlog",
                )

    def check_storable(self) -> None:
        """Raises if storing this changefeed would lose a password the servers need.

        With ``store_credentials=False`` an inline password is never written
        to etcd, so the servers could not connect: the password must then be
        given by reference (``password-env`` / ``password-file``).
        """
        if self.store_credentials:
            return
        for name, uri in (("source-uri", self.source_uri), ("sink-uri", self.sink_uri)):
            if uri.password:
                raise ConfigError(
                    name,
                    "has an inline password, but store-credentials is false, so the password "
                    "would not be stored and the servers could not connect; give it by "
                    "reference (?password-env=VAR or ?password-file=/path) or set "
                    "store-credentials = true",
                )

    def to_dict(self, mask: bool = True) -> dict[str, Any]:
        """The config as a JSON/TOML-ready tree with ``"v": 1``.

        ``mask=True`` (for display) replaces passwords by ``******``; such a
        dict cannot be read back by :meth:`from_dict`. ``mask=False`` is for
        storage: the password is included only when ``store_credentials`` is
        set, references such as ``password-env`` always are.
        """
        data: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "changefeed-id": self.changefeed_id,
            "source-uri": self._uri_text(self.source_uri, mask),
            "sink-uri": self._uri_text(self.sink_uri, mask),
            "case-sensitive": self.case_sensitive,
            "store-credentials": self.store_credentials,
            "supported-ddl": list(self.supported_ddl),
            "filter": {
                "rules": list(self.rules),
                "event-filters": [rule.to_dict() for rule in self.event_filters],
                **({"no-backfill": list(self.no_backfill)} if self.no_backfill else {}),
            },
            "snapshot": {
                "mode": self.snapshot_mode.value,
                "chunk-size": self.chunk_size,
                "spark-master": self.spark_master,
                "chunk-key-columns": dict(self.chunk_key_columns),
            },
        }
        if self.decode_workers is not None:
            data["mounter"] = {"worker-num": self.decode_workers}
        columns: dict[str, Any] = {}
        if self.column_selectors:
            columns["column-selectors"] = [s.to_dict() for s in self.column_selectors]
        if self.column_masks:
            columns["column-masks"] = [m.to_dict(mask_salt=mask) for m in self.column_masks]
        if columns:
            data["sink"] = columns
        for key, value in (
            ("start-position", self.start_position),
            ("start-gtid", self.start_gtid),
            ("target-position", self.target_position),
        ):
            if value is not None:
                data[key] = value
        return data

    def _uri_text(self, uri: MySQLURI | SinkURI, mask: bool) -> str:
        if mask:
            return str(uri)
        if not self.store_credentials:
            uri = uri.without_password()
        return uri.unmasked()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangefeedConfig:
        """Reads what :meth:`to_dict` (``mask=False``) wrote, switching on ``"v"``."""
        if not isinstance(data, Mapping):
            raise _wrong_type("v", "a stored changefeed config (a JSON object)", data)
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ConfigError(
                "v",
                f"unsupported changefeed config format version {version!r}; this build reads "
                f"version {FORMAT_VERSION}",
            )
        tree = {key: value for key, value in data.items() if key != "v"}
        config = _config_from_tree(tree)
        for name, uri in (("source-uri", config.source_uri), ("sink-uri", config.sink_uri)):
            if uri.password == MASK:
                raise ConfigError(
                    name,
                    "holds the mask '******' instead of a password: this dict came from "
                    "to_dict(mask=True), which is for display; store to_dict(mask=False)",
                )
        return config

    def table_rules_changed(self, other: ChangefeedConfig) -> bool:
        """Whether ``other`` captures another set of tables (its ``[filter] rules``)."""
        return self.rules != other.rules

    def other_changes(self, other: ChangefeedConfig) -> list[str]:
        """The settings, besides the table rules and ``no-backfill``, in which ``other``
        differs (TOML names): what a running changefeed cannot take without a pause."""
        ours, theirs = self.to_dict(mask=False), other.to_dict(mask=False)
        for tree in (ours, theirs):
            tree["filter"].pop("rules")
            tree["filter"].pop("no-backfill", None)
        changed = [key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key)]
        if "filter" in changed:
            changed.remove("filter")
            changed.append("filter.event-filters")
        return sorted(changed)

    def describe(self) -> dict[str, Any]:
        """A masked, human-readable view with the sink's effective settings."""
        data = self.to_dict(mask=True)
        del data["v"]
        columns = data.pop("sink", {})
        data["sink"] = {**self.sink_uri.describe(), **columns}
        return data


# --- the TOML tree ---------------------------------------------------------------------------

_TOP_KEYS = frozenset(
    {
        "changefeed-id",
        "source-uri",
        "sink-uri",
        "case-sensitive",
        "start-position",
        "start-gtid",
        "target-position",
        "supported-ddl",
        "store-credentials",
        "filter",
        "sink",
        "snapshot",
        "mounter",
    }
)
_TABLE_KEYS: Mapping[str, frozenset[str]] = {
    "filter": frozenset({"rules", "event-filters", "no-backfill"}),
    "sink": frozenset(
        {"protocol", "worker-count", "dispatchers", "column-selectors", "column-masks"}
    ),
    "snapshot": frozenset({"mode", "chunk-size", "spark-master", "chunk-key-columns"}),
    "mounter": frozenset({"worker-num"}),
    "filter.event-filters": frozenset(
        {
            "matcher",
            "ignore-event",
            "ignore-sql",
            "ignore-insert-value-expr",
            "ignore-update-old-value-expr",
            "ignore-update-new-value-expr",
            "ignore-delete-value-expr",
        }
    ),
    "sink.column-selectors": frozenset({"matcher", "columns"}),
    "sink.column-masks": frozenset(
        {"matcher", "columns", "method", "salt", "length", "replacement"}
    ),
}

#: CLI override keys and the TOML key each one replaces.
OVERRIDE_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "changefeed_id": ("changefeed-id",),
        "source_uri": ("source-uri",),
        "sink_uri": ("sink-uri",),
        "snapshot_mode": ("snapshot", "mode"),
        "start_position": ("start-position",),
        "start_gtid": ("start-gtid",),
        "target_position": ("target-position",),
        "rules": ("filter", "rules"),
        "chunk_size": ("snapshot", "chunk-size"),
        "spark_master": ("snapshot", "spark-master"),
        "decode_workers": ("mounter", "worker-num"),
    }
)


def _home_of(key: str, prefix: str) -> str:
    """Where a key that is unknown under ``prefix`` does belong, as a hint (or "")."""
    if prefix and key in _TOP_KEYS:
        return "it belongs at the top level, before any [table]; "
    for name, keys in _TABLE_KEYS.items():
        if key in keys and name != prefix:
            brackets = f"[[{name}]]" if "." in name else f"[{name}]"
            return f"it belongs in {brackets}; "
    return ""


def _check_keys(table: Mapping[str, Any], allowed: frozenset[str], prefix: str) -> None:
    for key in table:
        if key in allowed:
            continue
        path = f"{prefix}.{key}" if prefix else key
        close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else _home_of(str(key), prefix)
        where = f"[{prefix}]" if prefix else "the top level"
        raise ConfigError(
            path, f"unknown key {key!r}; {hint}allowed in {where}: {', '.join(sorted(allowed))}"
        )


def _table(tree: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = tree.get(key, {})
    if not isinstance(value, Mapping):
        raise _wrong_type(path, f"a table ([{path}])", value)
    return value


def _get(table: Mapping[str, Any], key: str, path: str, kind: type, expected: str) -> Any:
    value = table[key]
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise _wrong_type(path, expected, value)
    return value


def _required(tree: Mapping[str, Any], key: str, example: str) -> str:
    if key not in tree:
        raise ConfigError(
            key, f"is missing; pass --{key} or set it in the config file, e.g. {key} = {example}"
        )
    return _get(tree, key, key, str, "a string")


def _config_from_tree(tree: Mapping[str, Any]) -> ChangefeedConfig:
    """Builds a config from a TOML-shaped tree; every key is checked for name and type."""
    _check_keys(tree, _TOP_KEYS, "")
    filter_table = _table(tree, "filter", "filter")
    sink_table = _table(tree, "sink", "sink")
    snapshot_table = _table(tree, "snapshot", "snapshot")
    mounter_table = _table(tree, "mounter", "mounter")
    for name in ("filter", "sink", "snapshot", "mounter"):
        _check_keys(_table(tree, name, name), _TABLE_KEYS[name], name)

    changefeed_id = _required(tree, "changefeed-id", '"orders-to-dw"')
    source = parse_source_uri(
        _required(tree, "source-uri", '"mysql://repl@127.0.0.1:3306/?server-id=1001"')
    )
    sink_text = _required(tree, "sink-uri", '"blackhole://"')
    defaults: dict[str, str] = {}
    if "protocol" in sink_table:
        defaults["protocol"] = _get(sink_table, "protocol", "sink.protocol", str, "a string")
    if "worker-count" in sink_table:
        count = _get(sink_table, "worker-count", "sink.worker-count", int, "an integer")
        defaults["worker-count"] = str(count)
    if "dispatchers" in sink_table:
        rules = _get(sink_table, "dispatchers", "sink.dispatchers", list, "an array of tables")
        defaults["dispatchers"] = json.dumps(rules, separators=(",", ":"))
    # column-selectors and column-masks are the changefeed's, not the sink URI's
    sink = parse_sink_uri(sink_text, defaults=defaults)

    settings: dict[str, Any] = {}
    kind: type
    for key, attribute, kind, expected in (
        ("case-sensitive", "case_sensitive", bool, "a boolean (true or false)"),
        ("start-position", "start_position", str, "a string like 'mysql-bin.000003:4'"),
        ("start-gtid", "start_gtid", str, "a GTID set string like '0-1-100'"),
        ("target-position", "target_position", str, "a string like 'mysql-bin.000003:4'"),
        ("supported-ddl", "supported_ddl", list, 'an array of DDL kinds, e.g. ["create table"]'),
        ("store-credentials", "store_credentials", bool, "a boolean (true or false)"),
    ):
        if key in tree:
            settings[attribute] = _get(tree, key, key, kind, expected)
    if "rules" in filter_table:
        settings["rules"] = _get(
            filter_table, "rules", "filter.rules", list, 'an array of strings, e.g. ["shop.*"]'
        )
    if "no-backfill" in filter_table:
        settings["no_backfill"] = _get(
            filter_table,
            "no-backfill",
            "filter.no-backfill",
            list,
            'an array of table rules, e.g. ["shop.events_*"]',
        )
    if "event-filters" in filter_table:
        settings["event_filters"] = _event_filters(filter_table["event-filters"])
    for key, attribute, kind, expected in (
        ("mode", "snapshot_mode", str, "a string: initial, never or snapshot-only"),
        ("chunk-size", "chunk_size", int, "an integer"),
        ("spark-master", "spark_master", str, "a string like 'local[*]'"),
        ("chunk-key-columns", "chunk_key_columns", dict, 'a table like { "db.t" = "col" }'),
    ):
        if key in snapshot_table:
            settings[attribute] = _get(snapshot_table, key, f"snapshot.{key}", kind, expected)
    if "worker-num" in mounter_table:
        settings["decode_workers"] = _get(
            mounter_table, "worker-num", "mounter.worker-num", int, "an integer"
        )
    settings.update(column_rules(sink_table))
    return ChangefeedConfig(changefeed_id, source, sink, **settings)


def column_rules(sink_table: Mapping[str, Any]) -> dict[str, Any]:
    """``column_selectors`` and ``column_masks`` from a ``[sink]`` table (also what
    ``cdcctl diff --columns-from`` reads of a changefeed file)."""
    out: dict[str, Any] = {}
    for key, attribute, kind in (
        ("column-selectors", "column_selectors", ColumnSelector),
        ("column-masks", "column_masks", ColumnMask),
    ):
        if key not in sink_table:
            continue
        path = f"sink.{key}"
        entries = sink_table[key]
        if not isinstance(entries, list):
            raise _wrong_type(path, f"an array of tables ([[{path}]])", entries)
        rules = []
        for index, entry in enumerate(entries):
            where = f"{path}[{index}]"
            if not isinstance(entry, Mapping):
                raise _wrong_type(where, "a table with matcher = [...] and columns = [...]", entry)
            _check_keys(entry, _TABLE_KEYS[path], where)
            for required in ("matcher", "columns") + (("method",) if kind is ColumnMask else ()):
                if required not in entry:
                    raise ConfigError(f"{where}.{required}", f"is missing; see [[{path}]]")
            kwargs = {name.replace("-", "_"): value for name, value in entry.items()}
            rules.append(kind(**kwargs, origin=where))
        out[attribute] = tuple(rules)
    return out


def _event_filters(value: Any) -> tuple[EventFilterRule, ...]:
    if not isinstance(value, list):
        raise _wrong_type(
            "filter.event-filters", "an array of tables ([[filter.event-filters]])", value
        )
    rules = []
    for index, entry in enumerate(value):
        path = f"filter.event-filters[{index}]"
        if not isinstance(entry, Mapping):
            raise _wrong_type(path, "a table with matcher = [...]", entry)
        _check_keys(entry, _TABLE_KEYS["filter.event-filters"], path)
        if "matcher" not in entry:
            raise ConfigError(
                f"{path}.matcher",
                'is missing; say which tables the rule applies to, e.g. matcher = ["shop.*"]',
            )
        kwargs = {key.replace("-", "_"): item for key, item in entry.items()}
        for key in ("matcher", "ignore_event", "ignore_sql"):
            if key in kwargs and not isinstance(kwargs[key], list):
                raise _wrong_type(
                    f"{path}.{key.replace('_', '-')}", "an array of strings", kwargs[key]
                )
        rules.append(EventFilterRule(**kwargs, origin=path))
    return tuple(rules)


def _apply_overrides(tree: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Writes CLI values into the tree; None means "flag not given"."""
    given = {key: value for key, value in overrides.items() if value is not None}
    for key in given:
        if key not in OVERRIDE_KEYS:
            close = difflib.get_close_matches(key, sorted(OVERRIDE_KEYS), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                key, f"unknown override {key!r}; {hint}allowed: {', '.join(sorted(OVERRIDE_KEYS))}"
            )
    # A start given on the command line replaces the file's start, whichever kind it is.
    if "start_position" in given or "start_gtid" in given:
        tree.pop("start-position", None)
        tree.pop("start-gtid", None)
    for key, value in given.items():
        *tables, leaf = OVERRIDE_KEYS[key]
        node = tree
        for table in tables:
            child = node.get(table)
            if not isinstance(child, dict):
                child = {} if child is None else child
                node[table] = child
            node = child
        if isinstance(value, SnapshotMode):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        elif (
            key in ("chunk_size", "decode_workers")
            and isinstance(value, str)
            and value.strip().isdigit()
        ):
            value = int(value)
        node[leaf] = value


def load_changefeed_config(
    path: Path | None, overrides: Mapping[str, Any] | None = None
) -> ChangefeedConfig:
    """Reads a changefeed TOML file (if any) and applies CLI overrides on top.

    ``overrides`` keys are those of :data:`OVERRIDE_KEYS`; a None value means
    the flag was not given. A ``start_position`` or ``start_gtid`` override
    replaces both start keys of the file.
    """
    tree: dict[str, Any] = {}
    if path is not None:
        where = str(path)
        try:
            with open(path, "rb") as handle:
                tree = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(
                where, "config file not found; check the path, e.g. --config ./changefeed.toml"
            ) from None
        except IsADirectoryError:
            raise ConfigError(where, "is a directory; give the changefeed's .toml file") from None
        except PermissionError:
            raise ConfigError(where, "config file is not readable (permission denied)") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                where, f"config file is not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(where, f"TOML syntax error: {exc}") from None
    _apply_overrides(tree, overrides or {})
    return _config_from_tree(tree)
