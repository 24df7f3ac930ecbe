"""Outside the sink packages nobody asks which kind a sink URI is: they ask its kind
(cdc.sink.registry.kind_of) instead. A source scan for ``isinstance``/``issubclass``
on a ``*SinkURI`` class (or a ``match`` class pattern on one) fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = ("cdc", "capture", "owner", "processor", "sparkjobs", "bench", "examples", "scripts")
SINK_PACKAGE = ROOT / "cdc" / "sink"


def _names(node: ast.AST) -> list[str]:
    return [
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    ]


def kind_tests(source: str) -> list[int]:
    """Lines that test whether something is a ``*SinkURI`` by its class."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        classes: ast.AST | None = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
        ):
            classes = node.args[1]
        elif isinstance(node, ast.MatchClass):
            classes = node.cls
        if classes is not None and any(name.endswith("SinkURI") for name in _names(classes)):
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_what_it_looks_for() -> None:
    planted = (
        "from cdc.sink.mysql.uri import MySQLSinkURI\n"
        "ok = isinstance(uri, str)\n"
        "if isinstance(uri, MySQLSinkURI): pass\n"
        "if isinstance(uri, (int, uri_module.FileSinkURI)): pass\n"
        "match uri:\n"
        "    case BlackholeSinkURI(): pass\n"
    )
    assert kind_tests(planted) == [3, 4, 6]


def _source_files() -> list[Path]:
    files = []
    for name in SOURCE_ROOTS:
        files.extend(p for p in (ROOT / name).rglob("*.py") if SINK_PACKAGE not in p.parents)
    return sorted(files)


def test_the_scan_covers_the_source_tree() -> None:
    files = _source_files()
    assert ROOT / "capture" / "changefeed_checks.py" in files
    assert ROOT / "cdc" / "config" / "changefeed.py" in files
    assert not any(SINK_PACKAGE in p.parents for p in files)


@pytest.mark.parametrize("path", _source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_sink_kind_is_decided_by_its_uri_class_outside_the_sink_packages(path: Path) -> None:
    found = kind_tests(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.relative_to(ROOT)} lines {found} test a sink URI's class; ask its kind "
        "instead (cdc.sink.registry.kind_of(uri): a capability or hook of cdc.sink.kind.SinkKind)"
    )
