"""The consistency check (sync-diff-inspector's idea): are the target's tables the source's?

    tables matched by the filter on the source  ∪  on the target
        │  one side only ─────────────────────────────► missing-in-target / extra-in-target
        ▼
    line up the columns (schemas.pair_tables): missing / extra columns are differences
        │
    plan (thread pool): keyed tables split by the source's key (snapshot splitter:
        boundaries from the source, applied to both sides); keyless: one whole chunk
        │
    per chunk (thread pool, one reader pair per thread), inside a consistent
    snapshot on both sides:
        checksum on the source == checksum on the target?  ── yes ──► equal
        │ no
        fetch both sides' rows of the chunk, compare them (rows.py) ──► differing rows
        │
    DiffReport: per table rows, chunks, equal/different, each differing row

Plain SELECTs only, never a lock. A chunk whose checksums differ but whose
rows compare equal (e.g. a double printed differently by two server versions)
counts as equal: the rows decide. Data that changes while the check runs can
show as differences; check a target that has caught up and is quiet, or run
the check again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import pymysql

from cdc.diff.checksum import chunk_checksum
from cdc.diff.column_rules import apply_rules
from cdc.diff.defaults import DEFAULT_CHUNK_SIZE, DEFAULT_THREADS, MAX_THREADS
from cdc.diff.errors import DiffError, DiffInputError
from cdc.diff.report import DiffReport, RowDiff, TableReport, TableStatus
from cdc.diff.rows import CollationKeyMatcher, compare_keyed, compare_whole, fetch_rows
from cdc.diff.schemas import CompareMode, TablePairing, pair_tables
from cdc.diff.sessions import ReaderPool, consistent_snapshot, database_error
from cdc.filter.columns import ColumnRules
from cdc.filter.table_filter import TableFilter
from cdc.logs import get_logger
from cdc.model.schema import TableName, TableSchema
from cdc.schema.loader import list_tables, load_schemas
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.errors import SnapshotError
from cdc.snapshot.splitter import split_table
from cdc.uri.mysql import MySQLURI

__all__ = ["DEFAULT_CHUNK_SIZE", "DEFAULT_THREADS", "check"]

log = get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class _TablePlan:
    pairing: TablePairing
    chunks: tuple[SnapshotChunk, ...]
    note: str = ""


@dataclass(frozen=True)
class _ChunkOutcome:
    n: int
    rows_source: int
    rows_target: int
    diffs: tuple[RowDiff, ...]


def _validate(chunk_size: int, threads: int) -> None:
    for name, value, high in (("chunk_size", chunk_size, None), ("threads", threads, MAX_THREADS)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DiffInputError(f"{name} must be a whole number >= 1, not {value!r}")
        if high is not None and value > high:
            raise DiffInputError(f"{name} must be at most {high}, not {value}")


def _guarded(doing: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except pymysql.MySQLError as exc:
        raise database_error(exc, doing) from exc


def _whole_plan(pairing: TablePairing) -> _TablePlan:
    table = pairing.source.name
    if not pairing.source_columns:
        return _TablePlan(pairing, (), "no column on both sides: rows not compared")
    if pairing.source.key_columns:
        missing = [n for n in pairing.source.key_columns if n in pairing.missing_in_target]
        note = (
            f"key column(s) {', '.join(missing)} missing on the target: "
            "compared whole, rows as a multiset"
        )
    else:
        note = (
            "no primary key and no unique key on NOT NULL columns: "
            "compared whole, rows as a multiset"
        )
    chunk = SnapshotChunk(table, 0, pairing.source_columns[0].name)
    return _TablePlan(pairing, (chunk,), note)


def _plan(pool: ReaderPool, pairing: TablePairing, chunk_size: int) -> _TablePlan:
    if pairing.mode is CompareMode.WHOLE:
        return _whole_plan(pairing)
    source, _ = pool.pair()
    table = pairing.source.name
    try:
        chunks = _guarded(
            f"splitting {table}",
            lambda: split_table(source, pairing.source, chunk_size, tail=False),
        )
    except (SnapshotError, ValueError) as exc:
        log.warning("table %s: cannot split by key (%s); checked as one chunk", table, exc)
        chunk = SnapshotChunk(table, 0, pairing.key_names[0])
        return _TablePlan(pairing, (chunk,), f"not split into chunks: {exc}")
    return _TablePlan(pairing, tuple(chunks))


def _check_chunk(pool: ReaderPool, plan: _TablePlan, chunk: SnapshotChunk) -> _ChunkOutcome:
    source, target = pool.pair()
    pairing = plan.pairing
    table = pairing.source.name
    where, params = chunk.where_clause()
    keyed = pairing.mode is CompareMode.KEYED
    order = pairing.key if keyed else tuple(range(len(pairing.source_columns)))
    with consistent_snapshot(source, target):
        exprs = pairing.source_sql
        ours = chunk_checksum(source, table, pairing.source_columns, where, params, exprs)
        theirs = chunk_checksum(target, table, pairing.target_columns, where, params)
        if ours == theirs:
            return _ChunkOutcome(chunk.n, ours.rows, theirs.rows, ())
        source_rows = fetch_rows(source, table, pairing.source_columns, where, params, order, exprs)
        target_rows = fetch_rows(target, table, pairing.target_columns, where, params, order)
    names = pairing.column_names
    if keyed:
        matcher = CollationKeyMatcher(source, [pairing.source_columns[i] for i in pairing.key])
        diffs = compare_keyed(
            source_rows, target_rows, names, pairing.key, matcher if matcher.useful else None
        )
    else:
        diffs = compare_whole(source_rows, target_rows)
    if not diffs:
        log.info(
            "chunk %s: checksums differ but every row compares equal; counted as equal",
            chunk.describe(),
        )
    return _ChunkOutcome(chunk.n, ours.rows, theirs.rows, tuple(diffs))


def _run_all(executor: ThreadPoolExecutor, tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Runs ``tasks`` on ``executor``; the first failure cancels the rest and is raised."""
    futures: list[Future[T]] = [executor.submit(task) for task in tasks]
    try:
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in done:
            error = future.exception()
            if error is not None:
                raise error
        return [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise


def _table_report(plan: _TablePlan, outcomes: list[_ChunkOutcome]) -> TableReport:
    outcomes.sort(key=lambda o: o.n)
    rows = tuple(diff for o in outcomes for diff in o.diffs)
    pairing = plan.pairing
    differs = bool(rows) or pairing.columns_differ or not pairing.source_columns
    return TableReport(
        table=pairing.source.name,
        status=TableStatus.DIFFERENT if differs else TableStatus.EQUAL,
        pairing=pairing,
        chunks=len(plan.chunks),
        chunks_different=sum(1 for o in outcomes if o.diffs),
        rows_source=sum(o.rows_source for o in outcomes),
        rows_target=sum(o.rows_target for o in outcomes),
        rows=rows,
        note=plan.note,
    )


def _list(conn: Any, table_filter: TableFilter, side: str) -> list[TableName]:
    return _guarded(
        f"listing the tables on the {side}", lambda: list_tables(conn, table_filter.matches)
    )


def _schemas(conn: Any, tables: list[TableName], side: str) -> dict[TableName, TableSchema]:
    try:
        return _guarded(
            f"reading table definitions on the {side}", lambda: load_schemas(conn, tables)
        )
    except LookupError as exc:
        raise DiffError(f"a table vanished from the {side} during the check: {exc}") from exc


def _compare(
    pool: ReaderPool, pairings: list[TablePairing], chunk_size: int, threads: int
) -> list[TableReport]:
    """Plans every table, then checks every chunk, both on ``threads`` threads."""
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="diff") as executor:
        plans = _run_all(executor, [partial(_plan, pool, p, chunk_size) for p in pairings])
        work = [(plan, chunk) for plan in plans for chunk in plan.chunks]
        outcomes = _run_all(
            executor,
            [
                partial(
                    _guarded,
                    f"checking {chunk.describe()}",
                    partial(_check_chunk, pool, plan, chunk),
                )
                for plan, chunk in work
            ],
        )
    by_table: dict[TableName, list[_ChunkOutcome]] = {}
    for (plan, _), outcome in zip(work, outcomes, strict=True):
        by_table.setdefault(plan.pairing.source.name, []).append(outcome)
    return [_table_report(plan, by_table.get(plan.pairing.source.name, [])) for plan in plans]


def _check_tables(
    pool: ReaderPool,
    source: MySQLURI,
    table_filter: TableFilter,
    chunk_size: int,
    threads: int,
    columns: ColumnRules | None,
) -> list[TableReport]:
    source_conn, target_conn = pool.pair()
    source_tables = _list(source_conn, table_filter, "source")
    if not source_tables:
        raise DiffInputError(
            f"the table filter {list(table_filter.rules)} matches no table on the source "
            f"{source}; name the tables to compare, e.g. --filter 'shop.*' "
            "--filter '!shop.tmp_*'"
        )
    target_tables = _list(target_conn, table_filter, "target")
    both = [t for t in source_tables if t in set(target_tables)]
    source_schemas = _schemas(source_conn, both, "source")
    target_schemas = _schemas(target_conn, both, "target")
    pairings = [pair_tables(source_schemas[t], target_schemas[t]) for t in both]
    if columns:
        pairings = [apply_rules(p, columns) for p in pairings]
    reports = _compare(pool, pairings, chunk_size, threads)
    reports += [
        TableReport(t, TableStatus.MISSING_IN_TARGET)
        for t in source_tables
        if t not in set(target_tables)
    ]
    reports += [
        TableReport(t, TableStatus.EXTRA_IN_TARGET)
        for t in target_tables
        if t not in set(source_tables)
    ]
    return sorted(reports, key=lambda r: (r.table.schema, r.table.table))


def check(
    source: MySQLURI,
    target: MySQLURI,
    table_filter: TableFilter,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    threads: int = DEFAULT_THREADS,
    columns: ColumnRules | None = None,
) -> DiffReport:
    """Compares the tables ``table_filter`` matches on ``source`` with the same tables on
    ``target`` and reports every difference (see the module doc).

    ``columns``: a changefeed's column selectors and masks; the tables are compared as
    it delivers them (excluded columns left out, masked ones masked on the source).

    Raises :class:`DiffInputError` (nothing matched, login refused, bad sizes),
    :class:`DiffUnavailableError` (a server did not answer) or :class:`DiffError`
    (a statement failed midway).
    """
    _validate(chunk_size, threads)
    started = time.monotonic()
    pool = ReaderPool(source, target)
    try:
        reports = _check_tables(pool, source, table_filter, chunk_size, threads, columns)
    finally:
        pool.close()
    for report in reports:
        log.info(
            "table %s: %s, %d source rows, %d chunk(s), %d differing row(s)",
            report.table,
            report.status.value,
            report.rows_source,
            report.chunks,
            len(report.rows),
        )
    return DiffReport(
        source=str(source),
        target=str(target),
        rules=tuple(table_filter.rules),
        chunk_size=chunk_size,
        threads=threads,
        tables=tuple(reports),
        elapsed_seconds=time.monotonic() - started,
    )
