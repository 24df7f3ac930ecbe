"""The reader's server-free parts: CREATE TABLE from a schema, schema renaming in DDL,
repairing a file that crosses the checkpoint, clear errors for broken roots, and the
example CLI's listing mode."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.sink.file import FileFormatError, FileSink, FileSinkReader, read_changes
from cdc.sink.file.ddlgen import DdlGenError, create_table_sql
from cdc.sink.file.reader import map_schemas
from cdc.sink.file.uri import FileSinkURI
from cdc.sink.registry import parse_sink_uri

T = TableName("shop", "orders")
ID = Column("id", "int", "int(11)", nullable=False)
NOTE = Column("note", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_bin")
SCHEMA = TableSchema(T, (ID, NOTE), ("id",))


def uri(root: Path, protocol: str = "canal-json") -> FileSinkURI:
    parsed = parse_sink_uri(f"file://{root}?protocol={protocol}")
    assert isinstance(parsed, FileSinkURI)
    return parsed


def write(root: Path, offsets: list[int], protocol: str = "canal-json") -> list[RowChange]:
    changes = [
        RowChange(T, Op.CREATE, None, {"id": o, "note": "n"}, (o,), Position("binlog.000001", o))
        for o in offsets
    ]
    sink = FileSink(uri(root, protocol), lambda t: SCHEMA, "cf-1")
    try:
        sink.write_rows(changes)
        sink.flush()
    finally:
        sink.close()
    return changes


def test_create_table_sql() -> None:
    schema = TableSchema(
        TableName("shop", "odd`name"),
        (
            ID,
            NOTE,
            Column("e", "enum", "enum('?','b')", elements=("😀", "it's \\ ok"), charset="utf8mb4"),
            Column("bin", "varbinary", "varbinary(8)", charset="binary"),
            Column("tx", "text", "text", charset="latin1"),
            Column("g", "int", "int(11)", generated=True),
        ),
        ("id",),
        (("note",), ("tx",)),
    )
    assert create_table_sql(schema, TableName("copy", "t")) == (
        "CREATE TABLE `copy`.`t` (\n"
        "  `id` int(11) NOT NULL,\n"
        "  `note` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,\n"
        "  `e` enum('😀','it''s \\\\ ok') CHARACTER SET utf8mb4 NULL,\n"
        "  `bin` varbinary(8) NULL,\n"
        "  `tx` text CHARACTER SET latin1 NULL,\n"
        "  `g` int(11) NULL,\n"
        "  PRIMARY KEY (`id`),\n"
        "  UNIQUE KEY (`note`)\n"
        ")"
    )
    assert create_table_sql(schema).startswith("CREATE TABLE `shop`.`odd``name` (")
    blob_key = TableSchema(T, (Column("b", "blob", "blob", nullable=False),), ("b",))
    with pytest.raises(DdlGenError, match="prefix length"):
        create_table_sql(blob_key)


def test_map_schemas_renames_qualifiers_only() -> None:
    mapping = {"src": "dst"}
    assert map_schemas("RENAME TABLE src.a TO `src`.b", mapping) == (
        "RENAME TABLE `dst`.a TO `dst`.b"
    )
    assert map_schemas("ALTER TABLE a ADD c varchar(9) DEFAULT 'src.x'", mapping) == (
        "ALTER TABLE a ADD c varchar(9) DEFAULT 'src.x'"
    )
    assert map_schemas("DROP TABLE other.src", mapping) == "DROP TABLE other.src"
    assert map_schemas("ALTER TABLE src.a ADD x int", {}) == "ALTER TABLE src.a ADD x int"


@pytest.mark.parametrize("per_table", [True, False], ids=["table-checkpoint", "older-root"])
def test_reopen_cuts_a_file_that_crosses_the_checkpoint(tmp_path: Path, per_table: bool) -> None:
    """The table's checkpoint bounds its files; a root written before there were table
    checkpoints (no ``tables``) is cut at its one checkpoint."""
    changes = write(tmp_path, [100, 200, 300, 400, 500], "csv")
    metadata = json.loads((tmp_path / "metadata").read_text())
    at_300 = Position("binlog.000001", 300).to_dict()
    if per_table:
        metadata["tables"][str(T)] = at_300
    else:
        metadata["checkpoint"] = at_300
        del metadata["tables"]
    (tmp_path / "metadata").write_text(json.dumps(metadata))
    assert list(FileSinkReader(tmp_path).changes()) == changes[:3]
    sink = FileSink(uri(tmp_path, "csv"), lambda t: SCHEMA, "cf-1")
    sink.close()
    assert (
        list(FileSinkReader(tmp_path).table_changes(T, Position("binlog.000001", 10**9)))
        == (changes[:3])
    )


def test_broken_roots_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="no such folder"):
        read_changes(tmp_path / "missing")
    with pytest.raises(FileFormatError, match="no metadata file"):
        read_changes(tmp_path)
    write(tmp_path, [100, 200])
    data = tmp_path / "shop/orders/0/CDC00000001.json"
    lines = data.read_bytes().splitlines(keepends=True)
    data.write_bytes(lines[0] + b'{"_position": "nope"}\n')
    with pytest.raises(FileFormatError, match=r"CDC00000001.json:2: field '_position'"):
        list(read_changes(tmp_path))
    (tmp_path / "shop/orders/0/schema.json").write_text('{"v": 2}')
    with pytest.raises(FileFormatError, match="unsupported schema.json format version 2"):
        read_changes(tmp_path)


def load_cli() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "examples" / "file_sink_reader.py"
    spec = importlib.util.spec_from_file_location("file_sink_reader", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_lists_changes_and_refuses_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, [100, 200])
    cli = load_cli()
    assert cli.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "changefeed cf-1, protocol canal-json" in out
    assert "binlog.000001:200  CREATE shop.orders key=(200,)" in out
    assert out.rstrip().endswith("2 changes")

    assert cli.main([str(tmp_path), "--map", "nonsense"]) == 2
    assert "--map: 'nonsense' is not SOURCE=TARGET" in capsys.readouterr().err
    assert cli.main([str(tmp_path), "--target", "file:///x"]) == 2
    assert "must be a mysql://" in capsys.readouterr().err
    assert cli.main([str(tmp_path / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err
