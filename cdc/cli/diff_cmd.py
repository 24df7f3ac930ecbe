"""`cdcctl diff`: is the target's data the source's? (sync-diff-inspector for this project)

    cdcctl diff --source-uri mysql://... --target-uri mysql://... \\
        [--filter 'db.*' --filter '!db.tmp'] [--chunk-size 10000] [--threads 4] \\
        [--columns-from cf.toml] [--fix-sql FILE] [--output json|table]

``--columns-from`` compares as a changefeed with that TOML file delivers: its
``[[sink.column-selectors]]`` leave columns out, its ``[[sink.column-masks]]``
are applied to the source's values (``cdc.diff.column_rules``).

Exit codes: 0 every table is equal; 1 differences found (the report on stdout
lists them), or the check failed midway (the error on stderr); 2 bad input
(malformed URI or filter, a filter matching no table, a login the server
refuses); 3 a server could not be reached.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path
from typing import Any

from cdc.cli import exitcodes
from cdc.cli.output import FORMATS, emit, error
from cdc.config.changefeed import column_rules
from cdc.diff.defaults import DEFAULT_CHUNK_SIZE, DEFAULT_THREADS, MAX_THREADS
from cdc.diff.errors import DiffError, DiffInputError, DiffUnavailableError
from cdc.diff.report import DiffReport, TableReport, display_value
from cdc.errors import ConfigError
from cdc.filter.columns import ColumnRules
from cdc.filter.table_filter import TableFilter
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.uri.mysql import MySQLURI, parse_source_uri

#: The exit code of a check that found differences.
DIFFERENCES_FOUND = exitcodes.FAILED

_SUMMARY_COLUMNS = ("table", "status", "rows", "chunks", "differences", "note")
_ROW_COLUMNS = ("table", "kind", "key", "columns")


def _count(high: int | None) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < 1 or (high is not None and value > high):
            limit = f"1..{high}" if high is not None else ">= 1"
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed {limit}")
        return value

    return parse


def register(commands: argparse._SubParsersAction) -> None:
    diff = commands.add_parser(
        "diff",
        help="compare the tables of a source and a target database, row by row",
        description="Checksums each table chunk by chunk on both servers, narrows differing "
        "chunks to the differing rows, and optionally writes SQL that fixes the target. "
        "Reads are plain SELECTs in consistent snapshots; nothing is locked.",
        epilog="Exit codes: 0 equal, 1 differences found (or the check failed midway), "
        "2 bad input, 3 a server could not be reached.",
    )
    diff.add_argument(
        "--source-uri", required=True, help="mysql://user:pass@host:3306/ (the reference)"
    )
    diff.add_argument(
        "--target-uri", required=True, help="mysql://user:pass@host:3306/ (compared with it)"
    )
    diff.add_argument(
        "--filter",
        dest="rules",
        action="append",
        metavar="RULE",
        help="table filter rule, repeatable (TiDB syntax): --filter 'db.*' --filter '!db.tmp' "
        "(default: every table outside the system schemas)",
    )
    diff.add_argument(
        "--case-sensitive", action="store_true", help="match filter rules case-sensitively"
    )
    diff.add_argument(
        "--chunk-size",
        type=_count(None),
        default=DEFAULT_CHUNK_SIZE,
        help=f"rows per checksum chunk (default {DEFAULT_CHUNK_SIZE})",
    )
    diff.add_argument(
        "--threads",
        type=_count(MAX_THREADS),
        default=DEFAULT_THREADS,
        help=f"chunks checked in parallel, one connection pair each (default {DEFAULT_THREADS})",
    )
    diff.add_argument(
        "--columns-from",
        type=Path,
        metavar="CF_TOML",
        help="a changefeed TOML file: compare as its [[sink.column-selectors]] and "
        "[[sink.column-masks]] deliver (excluded columns left out, masked ones masked)",
    )
    diff.add_argument(
        "--fix-sql",
        type=Path,
        metavar="FILE",
        help="write REPLACE/DELETE statements that make the target equal to the source",
    )
    diff.add_argument(
        "--output", "-o", choices=FORMATS, default=argparse.SUPPRESS, help="output format"
    )
    diff.set_defaults(run=_run)


def _target(text: str) -> MySQLURI:
    """A target is a MySQL/MariaDB server; a changefeed's sink URI may be pasted as it is."""
    sink = parse_sink_uri(text, field="target-uri")
    database = kind_of(sink).database(sink)
    if database is None:
        raise ConfigError(
            "target-uri",
            f"{sink.scheme}:// is not a database; the target must be mysql:// or mariadb://, "
            "e.g. mysql://cdc@127.0.0.1:3307/?password-env=CDC_TARGET_PASSWORD",
        )
    return database


def _columns(path: Path | None) -> ColumnRules | None:
    """The column rules of a changefeed TOML file; None without one."""
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            tree = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError("columns-from", f"cannot read {str(path)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("columns-from", f"{str(path)!r}: TOML syntax error: {exc}") from None
    sink = tree.get("sink", {})
    if not isinstance(sink, dict):
        raise ConfigError("columns-from", f"{str(path)!r}: [sink] must be a table")
    rules = column_rules(sink)
    case_sensitive = tree.get("case-sensitive", False)
    if not isinstance(case_sensitive, bool):
        raise ConfigError("columns-from", f"{str(path)!r}: case-sensitive must be a boolean")
    return ColumnRules(
        rules.get("column_selectors", ()), rules.get("column_masks", ()), case_sensitive
    )


def _check_fix_path(path: Path | None) -> None:
    if path is None:
        return
    if path.is_dir():
        raise ConfigError("fix-sql", f"{str(path)!r} is a directory; give a file name")
    if not path.parent.is_dir():
        raise ConfigError(
            "fix-sql", f"the directory {str(path.parent)!r} does not exist; create it first"
        )


def _summary_rows(report: DiffReport) -> list[dict[str, Any]]:
    rows = []
    for table in report.tables:
        compared = table.pairing is not None
        rows.append(
            {
                "table": str(table.table),
                "status": table.status.value,
                "rows": f"{table.rows_source} / {table.rows_target}" if compared else "",
                "chunks": f"{table.chunks_different} of {table.chunks} differ" if compared else "",
                "differences": len(table.rows),
                "note": _note(table),
            }
        )
    return rows


def _note(table: TableReport) -> str:
    parts = []
    if table.missing_columns:
        parts.append("columns missing in target: " + ", ".join(table.missing_columns))
    if table.extra_columns:
        parts.append("columns extra in target: " + ", ".join(table.extra_columns))
    for item in table.type_differences:
        parts.append(f"{item.column}: {item.source_type} vs {item.target_type}")
    if table.note:
        parts.append(table.note)
    return "; ".join(parts)


def _difference_rows(report: DiffReport) -> list[dict[str, Any]]:
    rows = []
    for table in report.tables:
        if table.pairing is None:
            continue
        names, keys = table.pairing.column_names, table.pairing.key_names
        for diff in table.rows:
            data = diff.to_dict(names, keys)
            shown = data.get("key", data.get("row"))
            rows.append(
                {
                    "table": str(table.table),
                    "kind": diff.kind.value,
                    "key": json.dumps(shown, ensure_ascii=False, default=display_value),
                    "columns": ", ".join(diff.columns),
                }
            )
    return rows


def _print(report: DiffReport, fmt: str, fix: dict[str, Any] | None) -> None:
    if fmt == "json":
        data = report.to_dict()
        if fix is not None:
            data["fix_sql"] = fix
        emit(data, fmt)
        return
    emit(_summary_rows(report), fmt, columns=_SUMMARY_COLUMNS)
    differences = _difference_rows(report)
    if differences:
        emit(differences, fmt, columns=_ROW_COLUMNS)
    if fix is not None:
        emit(fix, fmt)


def _run(args: argparse.Namespace) -> int:
    source = parse_source_uri(args.source_uri, field="source-uri")
    target = _target(args.target_uri)
    table_filter = TableFilter.parse(args.rules or ["*.*"], args.case_sensitive, field="filter")
    _check_fix_path(args.fix_sql)
    columns = _columns(args.columns_from)
    # the checker reads tables with the SQL parser: imported when a check runs
    from cdc.diff.checker import check
    from cdc.diff.fixsql import write_fix_sql

    try:
        report = check(
            source,
            target,
            table_filter,
            chunk_size=args.chunk_size,
            threads=args.threads,
            columns=columns,
        )
    except DiffInputError as exc:
        error(str(exc))
        return exitcodes.BAD_INPUT
    except DiffUnavailableError as exc:
        error(str(exc))
        return exitcodes.UNAVAILABLE
    except DiffError as exc:
        error(f"the check failed: {exc}")
        return exitcodes.FAILED
    fix = None
    if args.fix_sql is not None:
        try:
            statements = write_fix_sql(report, args.fix_sql)
        except OSError as exc:
            error(f"cannot write the fix SQL to {str(args.fix_sql)!r}: {exc}")
            return exitcodes.FAILED
        fix = {"path": str(args.fix_sql), "statements": statements}
    _print(report, args.output, fix)
    return exitcodes.OK if report.equal else DIFFERENCES_FOUND
