"""Changefeed configuration: TOML loading, CLI overrides, validation, storage round trip."""

import json
from pathlib import Path
from typing import Any

import pytest

from cdc.config import (
    DEFAULT_SUPPORTED_DDL,
    ChangefeedConfig,
    EventFilterRule,
    SnapshotMode,
    load_changefeed_config,
)
from cdc.errors import ConfigError
from cdc.model.events import DdlKind
from cdc.sink.blackhole import BlackholeSinkURI
from cdc.sink.file.uri import FileProtocol, FileSinkURI
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.uri.mysql import parse_source_uri

FULL = """
changefeed-id = "orders-to-dw"
source-uri = "mysql://repl@10.0.0.5:3306/?server-id=1001&password-env=CDC_SRC_PW"
sink-uri = "mysql://root@10.0.0.9:3306/?password-env=CDC_SINK_PW"
case-sensitive = true
supported-ddl = ["create table", "ADD COLUMN", "create database"]
store-credentials = false

[filter]
rules = ["shop.*", "!shop.tmp_*"]

[[filter.event-filters]]
matcher = ["shop.orders"]
ignore-event = ["delete", "Drop Table", "all ddl"]
ignore-sql = ["^drop", "add column"]
ignore-insert-value-expr = "id >= 100"
ignore-update-old-value-expr = "age < 18"
ignore-update-new-value-expr = "gender = 'male'"
ignore-delete-value-expr = "name = 'john'"

[[filter.event-filters]]
matcher = ["shop.audit_*"]
ignore-event = ["all dml"]

[sink]
worker-count = 16

[snapshot]
mode = "initial"
chunk-size = 1000
spark-master = "spark://master:7077"
chunk-key-columns = { "shop.audit_log" = "created_at" }
"""

MINIMAL = """
changefeed-id = "cf1"
source-uri = "mysql://repl:pw@127.0.0.1:3306/"
sink-uri = "blackhole://"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "changefeed.toml"
    path.write_text(text)
    return path


def load_error(tmp_path: Path, text: str, overrides: dict[str, Any] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_changefeed_config(write(tmp_path, text), overrides or {})
    return info.value


def make(**changes: Any) -> ChangefeedConfig:
    settings: dict[str, Any] = {
        "changefeed_id": "cf1",
        "source_uri": "mysql://repl:pw@127.0.0.1:3306/",
        "sink_uri": "blackhole://",
    }
    settings.update(changes)
    return ChangefeedConfig(**settings)


# --- loading ---------------------------------------------------------------------------------


def test_load_full_file(tmp_path: Path) -> None:
    config = load_changefeed_config(write(tmp_path, FULL), {})
    assert config.changefeed_id == "orders-to-dw"
    assert config.source_uri.server_id == 1001
    assert config.source_uri.password_env == "CDC_SRC_PW"
    assert isinstance(config.sink_uri, MySQLSinkURI)
    assert config.sink_uri.worker_count == 16
    assert config.case_sensitive is True
    assert config.rules == ("shop.*", "!shop.tmp_*")
    first, second = config.event_filters
    assert first == EventFilterRule(
        matcher=("shop.orders",),
        ignore_event=("delete", "drop table", "all ddl"),
        ignore_sql=("^drop", "add column"),
        ignore_insert_value_expr="id >= 100",
        ignore_update_old_value_expr="age < 18",
        ignore_update_new_value_expr="gender = 'male'",
        ignore_delete_value_expr="name = 'john'",
    )
    assert second.ignore_event == ("all dml",)
    assert config.snapshot_mode is SnapshotMode.INITIAL
    assert config.chunk_size == 1000
    assert config.spark_master == "spark://master:7077"
    assert dict(config.chunk_key_columns) == {"shop.audit_log": "created_at"}
    assert config.supported_ddl == ("create table", "add column", "create schema")
    assert config.store_credentials is False


def test_defaults(tmp_path: Path) -> None:
    config = load_changefeed_config(write(tmp_path, MINIMAL), {})
    assert config.rules == ("*.*",)
    assert config.case_sensitive is False
    assert config.event_filters == ()
    assert config.snapshot_mode is SnapshotMode.INITIAL
    assert config.chunk_size == 8096
    assert dict(config.chunk_key_columns) == {}
    assert config.spark_master == "local[*]"
    assert config.start_position is config.start_gtid is config.target_position is None
    assert config.supported_ddl == DEFAULT_SUPPORTED_DDL
    assert "create table" in DEFAULT_SUPPORTED_DDL and "create view" not in DEFAULT_SUPPORTED_DDL
    assert all(DdlKind(kind) for kind in DEFAULT_SUPPORTED_DDL)
    assert config.store_credentials is False
    assert isinstance(config.sink_uri, BlackholeSinkURI)


def test_sink_table_protocol_for_file_sink(tmp_path: Path) -> None:
    text = MINIMAL.replace("blackhole://", "file:///var/out") + '[sink]\nprotocol = "csv"\n'
    config = load_changefeed_config(write(tmp_path, text), {})
    assert isinstance(config.sink_uri, FileSinkURI)
    assert config.sink_uri.protocol is FileProtocol.CSV
    assert config.sink_uri.unmasked() == "file:///var/out?protocol=csv"


def test_sink_uri_parameter_beats_sink_table(tmp_path: Path) -> None:
    text = MINIMAL.replace("blackhole://", "mysql://root@h/?worker-count=2")
    config = load_changefeed_config(write(tmp_path, text + "[sink]\nworker-count = 9\n"), {})
    assert isinstance(config.sink_uri, MySQLSinkURI) and config.sink_uri.worker_count == 2


def test_sink_table_key_for_the_wrong_sink(tmp_path: Path) -> None:
    err = load_error(tmp_path, MINIMAL + "[sink]\nworker-count = 4\n")
    assert err.field == "sink.worker-count"
    assert "applies to mysql://, mariadb:// sinks, but the sink URI is blackhole://" in err.message


def test_only_overrides_without_file() -> None:
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": "cf2",
            "source_uri": "mysql://repl@h/?password-env=PW",
            "sink_uri": "blackhole://",
            "snapshot_mode": SnapshotMode.NEVER,
            "start_gtid": "0-1-100",
            "target_position": "mysql-bin.000009:4",
            "rules": ("a.*", "b.c"),
            "chunk_size": "64",
            "spark_master": "local[2]",
            "start_position": None,
        },
    )
    assert config.changefeed_id == "cf2"
    assert config.snapshot_mode is SnapshotMode.NEVER
    assert config.start_gtid == "0-1-100"
    assert config.target_position == "mysql-bin.000009:4"
    assert config.rules == ("a.*", "b.c")
    assert config.chunk_size == 64
    assert config.spark_master == "local[2]"


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    text = 'start-position = "mysql-bin.000001:4"\n' + FULL
    text = text.replace('mode = "initial"', 'mode = "never"')
    config = load_changefeed_config(
        write(tmp_path, text),
        {
            "changefeed_id": "from-cli",
            "sink_uri": "mysql://other@h3/?max-txn-row=9",
            "snapshot_mode": None,
            "chunk_size": 7,
            "rules": ["x.*"],
            "spark_master": "local[3]",
            "start_gtid": "0-1-5",
        },
    )
    assert config.changefeed_id == "from-cli"
    assert isinstance(config.sink_uri, MySQLSinkURI)
    assert (config.sink_uri.connection.user, config.sink_uri.max_txn_row) == ("other", 9)
    assert config.sink_uri.worker_count == 16  # the file's [sink] defaults still apply
    assert config.chunk_size == 7
    assert config.rules == ("x.*",)
    assert config.spark_master == "local[3]"
    assert config.snapshot_mode is SnapshotMode.NEVER  # None means "flag not given"
    # a start given on the command line replaces the file's start of the other kind
    assert config.start_gtid == "0-1-5" and config.start_position is None
    assert config.source_uri.server_id == 1001  # untouched keys come from the file


def test_unknown_override_key() -> None:
    with pytest.raises(ConfigError) as info:
        load_changefeed_config(None, {"chunksize": 4})
    assert info.value.field == "chunksize"
    assert "did you mean 'chunk_size'?" in info.value.message


# --- file and syntax errors ---------------------------------------------------------------------


def test_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_changefeed_config(missing, {})
    assert info.value.field == str(missing)
    assert "config file not found" in info.value.message


def test_config_path_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_changefeed_config(tmp_path, {})


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    err = load_error(tmp_path, MINIMAL + "[snapshot\nmode = 1\n")
    assert err.field == str(tmp_path / "changefeed.toml")
    assert "TOML syntax error" in err.message
    assert "line 5, column 10" in err.message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "changefeed.toml"
    path.write_bytes(b'changefeed-id = "\xff"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_changefeed_config(path, {})


@pytest.mark.parametrize(
    ("extra", "field", "fragments"),
    [
        (
            '[snapshot]\nchunk-size = "big"\n',
            "snapshot.chunk-size",
            ["expected an integer, got string 'big'"],
        ),
        ("[snapshot]\nchunk-size = 1.5\n", "snapshot.chunk-size", ["got float 1.5"]),
        ("[snapshot]\nchunk-size = true\n", "snapshot.chunk-size", ["got boolean true"]),
        ('case-sensitive = "yes"\n', "case-sensitive", ["expected a boolean", "string 'yes'"]),
        ("store-credentials = 1\n", "store-credentials", ["expected a boolean", "integer 1"]),
        ('[filter]\nrules = "shop.*"\n', "filter.rules", ["expected an array of strings"]),
        ("[filter]\nrules = [1]\n", "filter.rules[0]", ["expected a string, got integer 1"]),
        ('filter = "x"\n', "filter", ["expected a table"]),
        ('[sink]\nworker-count = "8"\n', "sink.worker-count", ["expected an integer"]),
        ("[snapshot]\nmode = 1\n", "snapshot.mode", ["expected a string"]),
        ('[snapshot]\nchunk-key-columns = ["a"]\n', "snapshot.chunk-key-columns", ["got array"]),
        ("start-position = 4\n", "start-position", ["got integer 4"]),
        ('supported-ddl = "create table"\n', "supported-ddl", ["expected an array"]),
        (
            '[[filter.event-filters]]\nmatcher = "shop.*"\n',
            "filter.event-filters[0].matcher",
            ["expected an array of strings"],
        ),
        (
            '[[filter.event-filters]]\nmatcher = ["a.b"]\nignore-insert-value-expr = 3\n',
            "filter.event-filters[0].ignore-insert-value-expr",
            ["expected a SQL expression string"],
        ),
    ],
)
def test_type_errors(tmp_path: Path, extra: str, field: str, fragments: list[str]) -> None:
    err = load_error(tmp_path, MINIMAL + extra)
    assert err.field == field
    for fragment in fragments:
        assert fragment in err.message


@pytest.mark.parametrize(
    ("extra", "field", "fragments"),
    [
        (
            "[snapshot]\nchunk-sise = 3\n",
            "snapshot.chunk-sise",
            ["unknown key 'chunk-sise'", "did you mean 'chunk-size'?", "allowed in [snapshot]"],
        ),
        (
            "chunk-size = 3\n",
            "chunk-size",
            ["unknown key 'chunk-size'", "it belongs in [snapshot]"],
        ),
        (
            '[snapshot]\nrules = ["a.*"]\n',
            "snapshot.rules",
            ["it belongs in [filter]"],
        ),
        (
            '[filter]\nsink-uri = "pull://"\n',
            "filter.sink-uri",
            ["it belongs at the top level"],
        ),
        (
            "[sink]\nmax-txn-row = 3\n",
            "sink.max-txn-row",
            ["unknown key 'max-txn-row'", "column-selectors, dispatchers, protocol, worker-count"],
        ),
        (
            '[[filter.event-filters]]\nmatcher = ["a.b"]\nignore-events = ["insert"]\n',
            "filter.event-filters[0].ignore-events",
            ["did you mean 'ignore-event'?"],
        ),
        ("force-replicate = true\n", "force-replicate", ["allowed in the top level"]),
        ("v = 1\n", "v", ["unknown key 'v'"]),
    ],
)
def test_unknown_keys(tmp_path: Path, extra: str, field: str, fragments: list[str]) -> None:
    err = load_error(tmp_path, MINIMAL + extra)
    assert err.field == field
    for fragment in fragments:
        assert fragment in err.message


@pytest.mark.parametrize("key", ["changefeed-id", "source-uri", "sink-uri"])
def test_required_keys(tmp_path: Path, key: str) -> None:
    text = "\n".join(line for line in MINIMAL.splitlines() if not line.startswith(key))
    err = load_error(tmp_path, text)
    assert err.field == key
    assert f"is missing; pass --{key}" in err.message


def test_uri_errors_surface_with_their_field(tmp_path: Path) -> None:
    err = load_error(tmp_path, MINIMAL.replace("blackhole://", "mysql://root@h/?workers=3"))
    assert err.field == "sink-uri.workers"
    assert "did you mean 'worker-count'?" in err.message


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("cid", ["a", "orders-to-dw", "A1-b2-C3", "x" * 128])
def test_valid_changefeed_ids(cid: str) -> None:
    assert make(changefeed_id=cid).changefeed_id == cid


@pytest.mark.parametrize("cid", ["", "-a", "a-", "a--b", "a_b", "a.b", "ä", "x" * 129])
def test_invalid_changefeed_ids(cid: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(changefeed_id=cid)
    assert info.value.field == "changefeed-id"
    assert "e.g. orders-to-dw" in info.value.message


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"rules": ()}, "filter.rules", "no table rule given"),
        ({"rules": ("# comment",)}, "filter.rules", "no table rule given"),
        ({"rules": ("shop",)}, "filter.rules[0]", "invalid table filter rule 'shop'"),
        ({"rules": ("a.*", "@rules.txt")}, "filter.rules[1]", "(@file) is not supported"),
        ({"chunk_size": 0}, "snapshot.chunk-size", "at least 1"),
        ({"chunk_size": "10"}, "snapshot.chunk-size", "expected an integer"),
        ({"snapshot_mode": "full"}, "snapshot.mode", "allowed: initial, never, snapshot-only"),
        ({"snapshot_mode": "snapshot_only"}, "snapshot.mode", "did you mean 'snapshot-only'?"),
        ({"spark_master": "local[0]"}, "snapshot.spark-master", "e.g. local[*]"),
        ({"spark_master": "http://x"}, "snapshot.spark-master", "not a Spark master URL"),
        (
            {"chunk_key_columns": {"audit_log": "ts"}},
            'snapshot.chunk-key-columns."audit_log"',
            "not a schema.table name",
        ),
        (
            {"chunk_key_columns": {"shop.log": ""}},
            'snapshot.chunk-key-columns."shop.log"',
            "expected a column name",
        ),
        ({"supported_ddl": ("create tabel",)}, "supported-ddl[0]", "did you mean 'create table'?"),
        ({"supported_ddl": ("insert",)}, "supported-ddl[0]", "unknown event 'insert'"),
        ({"case_sensitive": 1}, "case-sensitive", "expected a boolean"),
        ({"source_uri": "pull://"}, "source-uri", "unsupported scheme 'pull://'"),
        ({"sink_uri": 5}, "sink-uri", "expected a sink URI"),
        ({"sink_uri": "pull://"}, "snapshot.mode", "pull:// sinks take no snapshot yet"),
        (
            {"sink_uri": "pull://", "snapshot_mode": "snapshot-only"},
            "snapshot.mode",
            'set [snapshot] mode = "never"',
        ),
        (
            {"event_filters": ({"matcher": ["a.b"]},)},
            "filter.event-filters[0]",
            "expected an event",
        ),
    ],
)
def test_field_validation(changes: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(**changes)
    assert info.value.field == field
    assert fragment in info.value.message


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[*]",
        "local[8]",
        "local[4,2]",
        "spark://h:7077",
        "yarn",
        "k8s://https://k:6443",
    ],
)
def test_spark_masters(master: str) -> None:
    assert make(spark_master=master).spark_master == master


def test_start_position_needs_snapshot_mode_never() -> None:
    with pytest.raises(ConfigError) as info:
        make(start_position="mysql-bin.000003:4")
    assert info.value.field == "start-position"
    assert "only applies with snapshot mode 'never'" in info.value.message
    assert '[snapshot] mode = "never"' in info.value.message
    with pytest.raises(ConfigError) as info:
        make(start_gtid="0-1-5", snapshot_mode=SnapshotMode.SNAPSHOT_ONLY)
    assert info.value.field == "start-gtid"
    config = make(start_position="mysql-bin.000003:4", snapshot_mode="never")
    assert config.start_position == "mysql-bin.000003:4"


def test_start_position_and_gtid_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="both set; give only one place to start"):
        make(start_position="mysql-bin.000003:4", start_gtid="0-1-5", snapshot_mode="never")


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"start_position": "mysql-bin.000003"}, "start-position", "FILE:OFFSET"),
        ({"start_position": "mysql-bin.000003:x"}, "start-position", "non-numeric offset"),
        ({"target_position": "bin:4"}, "target-position", "must end in '.<number>'"),
        ({"start_gtid": "not-a-gtid"}, "start-gtid", "bad GTID"),
        ({"start_gtid": " "}, "start-gtid", "is empty"),
        (
            {"start_position": "mysql-bin.000003:400", "target_position": "mysql-bin.000003:4"},
            "target-position",
            "is not after start-position",
        ),
        (
            {"start_position": "mysql-bin.000003:4", "target_position": "mariadb-bin.000009:4"},
            "target-position",
            "different binlogs",
        ),
    ],
)
def test_position_validation(changes: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(snapshot_mode="never", **changes)
    assert info.value.field == field
    assert fragment in info.value.message


def test_target_position() -> None:
    config = make(
        snapshot_mode="never",
        start_position="mysql-bin.000009:4",
        target_position="mysql-bin.000010:4",
    )
    assert config.target_position == "mysql-bin.000010:4"
    assert make(target_position="mysql-bin.000010:4").snapshot_mode is SnapshotMode.INITIAL
    with pytest.raises(ConfigError, match="snapshot-only") as info:
        make(target_position="mysql-bin.000010:4", snapshot_mode="snapshot-only")
    assert info.value.field == "target-position"


def test_mysql_gtid_start() -> None:
    gtid = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"
    assert make(snapshot_mode="never", start_gtid=gtid).start_gtid == gtid


# --- event filters ------------------------------------------------------------------------------


def test_event_filter_normalises_event_names() -> None:
    rule = EventFilterRule(
        matcher=["shop.*"],  # type: ignore[arg-type]
        ignore_event=["INSERT", "drop_table", "create database", "drop database", "All DDL"],  # type: ignore[arg-type]
    )
    assert rule.matcher == ("shop.*",)
    assert rule.ignore_event == ("insert", "drop table", "create schema", "drop schema", "all ddl")


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"matcher": ()}, "event-filter.matcher", "needs at least one table rule"),
        ({"matcher": ("shop",)}, "event-filter.matcher[0]", "invalid table filter rule"),
        (
            {"matcher": ("a.b",), "ignore_event": ("inserts",)},
            "event-filter.ignore-event[0]",
            "did you mean 'insert'?",
        ),
        (
            {"matcher": ("a.b",), "ignore_event": ("truncate",)},
            "event-filter.ignore-event[0]",
            "allowed: insert, update, delete, all dml, all ddl, create schema",
        ),
        (
            {"matcher": ("a.b",), "ignore_sql": ("^drop", "add (column")},
            "event-filter.ignore-sql[1]",
            "not a valid regular expression",
        ),
    ],
)
def test_event_filter_errors(kwargs: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        EventFilterRule(**kwargs)
    assert info.value.field == field
    assert fragment in info.value.message


def test_event_filter_errors_in_a_file_name_the_entry(tmp_path: Path) -> None:
    text = MINIMAL + (
        '[[filter.event-filters]]\nmatcher = ["a.b"]\n'
        '[[filter.event-filters]]\nmatcher = ["a.c"]\nignore-sql = ["("]\n'
    )
    err = load_error(tmp_path, text)
    assert err.field == "filter.event-filters[1].ignore-sql[0]"
    err = load_error(tmp_path, MINIMAL + '[[filter.event-filters]]\nignore-event = ["insert"]\n')
    assert err.field == "filter.event-filters[0].matcher"
    assert "is missing" in err.message


# --- storage ------------------------------------------------------------------------------------


def test_round_trip_through_json(tmp_path: Path) -> None:
    config = load_changefeed_config(write(tmp_path, FULL), {})
    stored = json.loads(json.dumps(config.to_dict(mask=False)))
    assert stored["v"] == 1
    assert ChangefeedConfig.from_dict(stored) == config


def test_round_trip_every_setting() -> None:
    config = make(
        sink_uri="file:///out?protocol=csv&file-size=1MiB&flush-interval=200ms",
        rules=("a.*",),
        case_sensitive=True,
        event_filters=(EventFilterRule(matcher=("a.b",), ignore_sql=("^drop",)),),
        snapshot_mode="never",
        chunk_size=10,
        chunk_key_columns={"a.b": "c"},
        spark_master="local[2]",
        start_gtid="0-1-5",
        target_position="mysql-bin.000002:4",
        supported_ddl=("create table",),
        store_credentials=True,
        decode_workers=3,
    )
    again = ChangefeedConfig.from_dict(config.to_dict(mask=False))
    assert again == config
    assert again.source_uri.password == "pw"


def test_stored_dict_without_credentials_drops_only_the_inline_password() -> None:
    config = make(
        source_uri="mysql://repl:pw@h/?server-id=3",
        sink_uri="mysql://root@h2/?password-env=SINK_PW",
    )
    stored = config.to_dict(mask=False)
    assert stored["source-uri"] == "mysql://repl@h:3306/?server-id=3"
    assert stored["sink-uri"] == "mysql://root@h2:3306/?password-env=SINK_PW"
    again = ChangefeedConfig.from_dict(stored)
    assert again.source_uri.password == ""
    assert again.source_uri.server_id == 3
    assert isinstance(again.sink_uri, MySQLSinkURI)
    assert again.sink_uri.connection.password_env == "SINK_PW"


def test_check_storable() -> None:
    with pytest.raises(ConfigError) as info:
        make().check_storable()
    assert info.value.field == "source-uri"
    assert "password-env" in info.value.message and "store-credentials" in info.value.message
    with pytest.raises(ConfigError) as info:
        make(source_uri="mysql://r@h/", sink_uri="mysql://root:pw@h2/").check_storable()
    assert info.value.field == "sink-uri"
    make(store_credentials=True).check_storable()
    make(source_uri="mysql://r@h/?password-env=X").check_storable()


def test_from_dict_rejects_versions_and_masked_dicts() -> None:
    config = make(store_credentials=True)
    data = config.to_dict(mask=False)
    with pytest.raises(ConfigError, match="unsupported changefeed config format version 2"):
        ChangefeedConfig.from_dict({**data, "v": 2})
    without_version = {key: value for key, value in data.items() if key != "v"}
    with pytest.raises(ConfigError, match="version None"):
        ChangefeedConfig.from_dict(without_version)
    with pytest.raises(ConfigError, match=r"to_dict\(mask=True\)") as info:
        ChangefeedConfig.from_dict(config.to_dict(mask=True))
    assert info.value.field == "source-uri"
    with pytest.raises(ConfigError, match="unknown key 'extra'"):
        ChangefeedConfig.from_dict({**data, "extra": 1})
    with pytest.raises(ConfigError, match="expected a stored changefeed config"):
        ChangefeedConfig.from_dict([1])  # type: ignore[arg-type]


def test_describe() -> None:
    config = make(sink_uri="mysql://root:pw@h2:3307/?worker-count=3")
    described = config.describe()
    assert "v" not in described
    assert described["source-uri"] == "mysql://repl:******@127.0.0.1:3306/"
    assert described["sink"]["worker-count"] == 3
    assert described["sink"]["uri"] == "mysql://root:******@h2:3307/?worker-count=3"
    assert described["snapshot"]["mode"] == "initial"
    json.dumps(described)


def test_config_is_frozen_and_accepts_parsed_uris() -> None:
    source = parse_source_uri("mysql://repl@h/")
    config = make(source_uri=source)
    assert config.source_uri is source
    with pytest.raises(AttributeError):
        config.chunk_size = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.chunk_key_columns["a.b"] = "c"  # type: ignore[index]


# --- decode workers ([mounter] worker-num) -----------------------------------------------------


def test_decode_workers_from_the_file_and_the_flag(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "\n[mounter]\nworker-num = 2\n")
    assert load_changefeed_config(path, {}).decode_workers == 2
    assert load_changefeed_config(path, {"decode_workers": "0"}).decode_workers == 0
    assert load_changefeed_config(write(tmp_path, MINIMAL), {}).decode_workers is None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("-1", "out of range"), ("65", "out of range"), ('"two"', "expected an integer")],
)
def test_decode_workers_errors_name_the_key(tmp_path: Path, value: str, fragment: str) -> None:
    error = load_error(tmp_path, MINIMAL + f"\n[mounter]\nworker-num = {value}\n")
    assert error.field == "mounter.worker-num"
    assert fragment in str(error)


def test_a_pull_sink_runs_without_a_snapshot() -> None:
    config = make(sink_uri="pull://", snapshot_mode="never")
    assert str(config.sink_uri) == "pull://"
