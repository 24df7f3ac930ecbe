"""Snapshot chunks as Spark tasks: a task per core, rows written from inside the task.

    driver (processor)                          executors, one task per core, each
    run_chunks(spark, source, schemas, chunks, writer)       running its chunks in turn
      chunk dicts ── parallelize(a group  ──►   read_chunk(...)            cdc.snapshot.reader
                     per core)                  writer.write(schema, chunk, ChunkResult)
      ◄─────────────── collect ──────────────   (chunk id, high/low watermark, rows | error)
    [ChunkOutcome] in chunk order: the caller records each successful chunk and its
    high watermark (etcd), and schedules the failed ones again

Why a task per core and not per chunk: Spark's cost of a Python task (launching it,
handing a worker the function and the data, the report) was paid once per chunk, and
at a job's start no chunk ran until the first tasks had reached their workers. In a
1M-row snapshot on 2 cores, tasks of 8 chunks a job (``bench/snapshot_bench.py``): 125
tasks kept the slots busy 81% of the time and cost the driver's JVM 2.5 s of CPU; a task
per core, 1.3 s, and the snapshot took 10-11 s instead of 14. A job's chunks are dealt
to the groups in turn (chunk i to group i mod cores), so each group gets as many
chunks of each table as the others, and the lower chunks are read first.

Plain functions, no etcd: tasks read and write rows, the driver keeps the books
(Flink CDC keeps split reading apart from split assignment). A task reports
success only after ``writer.write`` returned, i.e. after its rows are durable;
a failure inside a task becomes that chunk's ``error`` (masked text) instead of
failing the whole job, so the chunks that did finish can still be recorded.
Spark itself still retries tasks lost with their executor. A chunk may so be
written twice; sinks write by key, so the second write changes nothing.

Secrets. The source URI (with its password) travels only inside the pickled
task closure: never in a job description, an RDD name, a Spark conf or a log
line; errors coming back are masked (``mask_secret``), and :func:`spark_session`
sets Spark's redaction patterns so URIs with credentials are redacted from
anything Spark itself prints. Better still, give the password by reference:
``password-env=CDC_SOURCE_PASSWORD`` with ``spark.executorEnv.CDC_SOURCE_PASSWORD``
(Spark redacts conf values whose key matches "password"), or
``password-file=/path`` present on every executor; and enable
``spark.authenticate`` and ``spark.network.crypto.enabled`` so closures do not
cross the network in clear text.

Masters (``snapshot.spark-master``): the same code runs everywhere; what differs
is the environment the executors need:

* ``local[*]`` / ``local[N]``: nothing; workers run this interpreter
  (``PYSPARK_PYTHON`` is set to ``sys.executable``).
* ``spark://host:7077`` (standalone): every worker host has Python 3.11 with this
  project installed; point at it with ``spark.pyspark.python`` (or
  ``PYSPARK_PYTHON``) when its path differs from the driver's; workers must
  reach the driver (``spark.driver.host``) and the source and sink databases.
* ``k8s://https://api:6443``: ``spark.kubernetes.container.image`` = an image
  with this project installed, ``spark.kubernetes.namespace``,
  ``spark.kubernetes.authenticate.driver.serviceAccountName``; in client mode
  the driver must be reachable from the pods (``spark.driver.host`` = a headless
  service, ``spark.driver.port`` fixed); ``spark.pyspark.python`` = the
  interpreter inside the image.
* ``yarn``: ``HADOOP_CONF_DIR`` / ``YARN_CONF_DIR`` set for the driver; ship the
  environment with ``spark.archives=cdc-venv.tar.gz#env`` (venv-pack) and
  ``spark.pyspark.python=./env/bin/python``.
"""

from __future__ import annotations

import abc
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pymysql

from cdc.filter.column_plan import ColumnPlan, plan_columns
from cdc.filter.columns import ColumnRules
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.masking import MASK, mask_secret
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.chunks import ChunkSink, LinesRefused, RangeRepairer
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.reader import ChunkResult, read_chunk
from cdc.snapshot.repair import RepairOutcome, keys_held, read_repair
from cdc.snapshot.streamed import LineTarget, StreamedChunk, read_chunk_lines
from cdc.snapshot.textlines import LineOverflow, not_lean
from cdc.source.connect import connect
from cdc.source.flavor import detect
from cdc.typeconv import snapshot_connect_kwargs
from cdc.uri.mysql import MySQLURI, parse_source_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "REDACTION_REGEX",
    "REDACTION_STRING_REGEX",
    "ChunkOutcome",
    "ChunkWriter",
    "RepairWriter",
    "TOKEN_ATTEMPTS",
    "SinkWriter",
    "run_chunks",
    "session_conf",
    "spark_session",
    "worker_python",
]

log = get_logger(__name__)

#: Spark conf keys whose values Spark redacts in its UI and logs (its default plus URIs).
REDACTION_REGEX = r"(?i)secret|password|passwd|token|access[.]?key|uri"
#: A chunk write's fence token (``cdc.sink.mysql.chunkfence``) is the etcd revision its
#: capture proved it holds the chunk at, times this, plus the Spark task's attempt: a
#: task Spark runs again (its executor lost, perhaps only cut off and still running)
#: holds the chunk over the attempt it replaced.
TOKEN_ATTEMPTS = 1000
#: Text Spark redacts inside strings it prints (plans, descriptions): a URI's user:password.
REDACTION_STRING_REGEX = r"(?<=://)[^/@\s:]*:[^/\s]*(?=@)"
#: JVM options of the driver (``spark.driver.extraJavaOptions``; a conf entry replaces them).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class ChunkWriter(abc.ABC):
    """Where a task puts a chunk's rows.

    An instance is pickled into every task, so it holds configuration only
    (URI text, ids) and opens its connections inside :meth:`write`.
    """

    @abc.abstractmethod
    def write(self, schema: TableSchema, chunk: SnapshotChunk, result: ChunkResult) -> None:
        """Writes the chunk's rows (``result.rows``, or as READ row changes
        ``result.row_changes()``) and returns once they are durable."""

    def write_lines(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        read: Callable[[LineTarget], StreamedChunk],
    ) -> StreamedChunk | None:
        """The chunk read by ``read`` straight into where it goes, as ``LOAD DATA`` lines
        (``cdc.snapshot.streamed``); None when the sink takes rows only (the default)."""
        return None


def _open(sink_uri_text: str, changefeed_id: str) -> ChunkSink:
    """Where this worker writes the changefeed's chunks: the sink kind's ``chunk_sink``."""
    uri = parse_sink_uri(sink_uri_text)
    return kind_of(uri).chunk_sink(uri, changefeed_id)


_open_sinks: dict[tuple[str, str], ChunkSink] = {}
_open_repairs: dict[tuple[str, str], RangeRepairer] = {}

#: Seconds a Python worker keeps its sinks open after its last chunk. Workers live
#: as long as the capture's Spark session; connections kept open by them for good
#: would make the downstream's connections follow the snapshots run long ago.
IDLE_CLOSE = 1.0
_idle_lock = threading.Lock()
_idle_timer: threading.Timer | None = None


def _close_idle_sinks() -> None:
    with _idle_lock:
        opened: list[ChunkSink | RangeRepairer] = [*_open_sinks.values(), *_open_repairs.values()]
        for sink in opened:
            try:
                sink.close()
            except Exception as exc:  # closing an idle connection, nothing lost
                log.debug("closing an idle snapshot sink: %s", exc)
        _open_sinks.clear()
        _open_repairs.clear()


def _busy() -> None:
    """A partition starts: the worker's sinks stay open."""
    global _idle_timer
    with _idle_lock:
        if _idle_timer is not None:
            _idle_timer.cancel()
            _idle_timer = None


def _idle() -> None:
    """A partition ended: the worker's sinks close unless another starts within IDLE_CLOSE."""
    global _idle_timer
    with _idle_lock:
        if _idle_timer is not None:
            _idle_timer.cancel()
        _idle_timer = threading.Timer(IDLE_CLOSE, _close_idle_sinks)
        _idle_timer.daemon = True
        _idle_timer.start()


@dataclass(frozen=True, repr=False)
class SinkWriter(ChunkWriter):
    """Writes where the changefeed's sink kind puts snapshot chunks (``SinkKind.chunk_sink``:
    a database sink loads each as one file, a file sink writes it beside its change files,
    others write through the sink), durable per chunk.

    PySpark reuses its Python workers, so the chunk sink (and its connections) is
    opened once per worker and changefeed and reused by the following chunks,
    until the worker has run none for ``IDLE_CLOSE`` seconds; a sink that
    failed is dropped and opened afresh by the next chunk.
    ``clear_ranges``: a database sink empties each chunk's key range before its
    rows go in (``cdc.sink.mysql.chunkrange``: a chunk read twice leaves exactly
    its second read); off for a table whose deletes the event filter may drop,
    whose downstream may keep rows the source no longer has. ``keep_ranges``:
    the tables that keep their ranges when the others are cleared, for a job
    whose chunks come from several tables (``processor/snapshot_scheduler.py``).
    ``tokens``: per table, the etcd revision at which the capture proved it holds the
    table's chunks of this job; each write of a chunk carries it, and a database sink
    refuses it once another capture has taken the chunk over (``chunkfence``).
    """

    sink_uri_text: str
    changefeed_id: str
    clear_ranges: bool = True
    keep_ranges: frozenset[TableName] = frozenset()
    tokens: Mapping[TableName, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"SinkWriter({mask_secret(self.sink_uri_text)!r}, {self.changefeed_id!r})"

    def clears(self, table: TableName) -> bool:
        """Whether a chunk of ``table`` empties its key range before its rows go in."""
        return self.clear_ranges and table not in self.keep_ranges

    def token(self, table: TableName) -> int | None:
        """The fence token of this task's writes of ``table``'s chunks (``TOKEN_ATTEMPTS``)."""
        revision = self.tokens.get(table)
        if revision is None:
            return None
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = 0 if context is None else context.attemptNumber()
        return revision * TOKEN_ATTEMPTS + min(attempt, TOKEN_ATTEMPTS - 1)

    def write(self, schema: TableSchema, chunk: SnapshotChunk, result: ChunkResult) -> None:
        with _idle_lock:  # not closed as idle while it writes
            opened = self._sink()
            try:
                opened.write(
                    schema,
                    result,
                    clear_range=self.clears(schema.name),
                    token=self.token(chunk.table),
                )
            except BaseException:
                self._drop(opened)
                raise

    def write_lines(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        read: Callable[[LineTarget], StreamedChunk],
    ) -> StreamedChunk | None:
        with _idle_lock:
            opened = self._sink()
            try:
                target = opened.lines(
                    schema,
                    chunk,
                    clear_range=self.clears(schema.name),
                    token=self.token(chunk.table),
                )
                if target is None:
                    return None
                return read(target)
            except LinesRefused:
                raise
            except BaseException:
                self._drop(opened)
                raise

    def _sink(self) -> ChunkSink:
        key = (self.sink_uri_text, self.changefeed_id)
        opened = _open_sinks.get(key)
        if opened is None:
            opened = _open_sinks[key] = _open(self.sink_uri_text, self.changefeed_id)
        return opened

    def _drop(self, opened: ChunkSink) -> None:
        del _open_sinks[(self.sink_uri_text, self.changefeed_id)]
        opened.close()


@dataclass(frozen=True, repr=False)
class RepairWriter:
    """Writes the chunks of a re-snapshot of a table whose binlog stream keeps running
    (``cdcctl changefeed snapshot``): the sink kind's ``range_repair`` runs each chunk's
    source window inside the downstream transaction that locks its range
    (``cdc.sink.mysql.rangerepair``: why that orders it against the stream's writes).

    ``predicates``: per table (``str(TableName)``), the rendered ``--where`` condition,
    None for every row of the range. Opened once per worker, closed when it goes idle,
    as ``SinkWriter``'s sinks are.
    """

    sink_uri_text: str
    changefeed_id: str
    predicates: Mapping[str, str | None]

    def __repr__(self) -> str:
        return f"RepairWriter({mask_secret(self.sink_uri_text)!r}, {self.changefeed_id!r})"

    def repair(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        read: Callable[[], Any],
        held: Callable[[Sequence[tuple[Any, ...]]], Sequence[bool]],
    ) -> RepairOutcome:
        with _idle_lock:
            key = (self.sink_uri_text, self.changefeed_id)
            opened = _open_repairs.get(key)
            if opened is None:
                uri = parse_sink_uri(self.sink_uri_text)
                opened = _open_repairs[key] = kind_of(uri).range_repair(uri, self.changefeed_id)
            try:
                predicate = self.predicates.get(str(schema.name))
                return opened.repair(schema, chunk, predicate, read, held)
            except BaseException:
                del _open_repairs[key]
                opened.close()
                raise


@dataclass(frozen=True)
class ChunkOutcome:
    """What one chunk's task reported: its watermarks and row count, or its error.

    ``error_type`` is the exception's class name, for deciding what to do:
    ``ChunkSchemaChanged`` (reload the schema, read again), ``SourceError`` or
    ``SinkError`` (retry later), ``SnapshotError`` (see the message).
    """

    chunk_id: str
    row_count: int = 0
    high_watermark: Position | None = None
    low_watermark: Position | None = None
    error: str | None = None
    error_type: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, repr=False)
class _Task:
    """Everything a task needs, shipped in the closure (never in descriptions or confs)."""

    source_uri_text: str
    schemas: Mapping[str, Mapping[str, Any]]
    writer: ChunkWriter | RepairWriter
    fetch_size: int
    events: EventFilter | None = None
    columns: ColumnRules | None = None

    def __repr__(self) -> str:
        return f"_Task(source={mask_secret(self.source_uri_text)!r}, writer={self.writer!r})"


def _masked(text: str, password: str) -> str:
    text = mask_secret(text)
    return text.replace(password, MASK) if len(password) >= 4 else text


def _password_of(source: MySQLURI) -> str:
    try:
        return source.resolve_password()
    except Exception:  # only used to mask; connecting reports the problem
        return ""


class _SourceReader:
    """A source connection and what it said about its server, kept open in a Python
    worker for the chunks it runs (a connection costs a TLS context and round trips)."""

    def __init__(self, source: MySQLURI) -> None:
        self.conn = connect(source, "source", **snapshot_connect_kwargs())
        try:
            self.server = detect(self.conn)
        except BaseException:
            self.conn.close()
            raise


_source_readers: dict[str, _SourceReader] = {}


def _reader(task: _Task, source: MySQLURI) -> _SourceReader:
    """The worker's open source connection (opened, or opened again when it went away)."""
    reader = _source_readers.get(task.source_uri_text)
    if reader is not None:
        try:
            reader.conn.ping(reconnect=False)
        except pymysql.err.Error:
            # idle past the server's wait_timeout, or the source restarted
            del _source_readers[task.source_uri_text]
            reader = None
    if reader is None:
        reader = _source_readers[task.source_uri_text] = _SourceReader(source)
    return reader


def _read(task: _Task, source: MySQLURI, schema: TableSchema, chunk: SnapshotChunk) -> ChunkResult:
    reader = _reader(task, source)
    try:
        return read_chunk(
            source, reader.server, schema, chunk, fetch_size=task.fetch_size, conn=reader.conn
        )
    except BaseException:
        _forget(task, reader)
        raise


def _forget(task: _Task, reader: _SourceReader) -> None:
    if _source_readers.get(task.source_uri_text) is reader:
        del _source_readers[task.source_uri_text]
    reader.conn.close()


def _read_lines(
    task: _Task, writer: ChunkWriter, source: MySQLURI, schema: TableSchema, chunk: SnapshotChunk
) -> StreamedChunk | None:
    """The chunk read straight into the sink as lines; None when it takes the rows path
    (a sink that takes rows only, a downstream refusing local files, a row too long)."""
    if task.events or _plan(task, schema) is not None or not_lean(schema, chunk) is not None:
        return None
    reader = _reader(task, source)

    def read(target: LineTarget) -> StreamedChunk:
        return read_chunk_lines(source, reader.server, schema, chunk, target, conn=reader.conn)

    try:
        return writer.write_lines(schema, chunk, read)
    except (LinesRefused, LineOverflow) as exc:
        log.info("chunk %s goes as rows: %s", chunk.chunk_id, exc)
        reader.conn.rollback()
        return None
    except BaseException:
        _forget(task, reader)
        raise


def _run_one(task: _Task, index: int, item: Mapping[str, Any]) -> tuple[Any, ...]:
    """One chunk: ``(index, error type, error, high, low, rows)``; watermarks as dicts."""
    password = ""
    try:
        chunk = SnapshotChunk.from_dict(item)
        schema = TableSchema.from_dict(task.schemas[str(chunk.table)])
        source = parse_source_uri(task.source_uri_text)
        password = _password_of(source)
        writer = task.writer
        if isinstance(writer, RepairWriter):
            repaired = _repair(task, writer, source, schema, chunk)
            read = repaired.read
            return (index, None, None, read.high.to_dict(), read.low.to_dict(), repaired.upserted)
        done: ChunkResult | StreamedChunk | None = _read_lines(task, writer, source, schema, chunk)
        if done is None:
            result = _read(task, source, schema, chunk)
            if task.events:
                result = _kept_by(task.events, result)
            plan = _plan(task, schema)
            if plan is not None:
                result = _projected(plan, result)
            writer.write(result.schema, chunk, result)
            done = result
        return (
            index,
            None,
            None,
            done.high_watermark.to_dict(),
            done.low_watermark.to_dict(),
            done.row_count,
        )
    except Exception as exc:  # reported per chunk to the driver, masked
        error = _masked(f"{type(exc).__name__}: {exc}", password)
        return (index, type(exc).__name__, error, None, None, 0)


def _repair(
    task: _Task, writer: RepairWriter, source: MySQLURI, schema: TableSchema, chunk: SnapshotChunk
) -> RepairOutcome:
    """A re-snapshot chunk: its source window read inside the downstream's transaction."""
    reader = _reader(task, source)
    predicate = writer.predicates.get(str(schema.name))

    def read() -> Any:
        return read_repair(
            source, reader.server, schema, chunk, predicate, reader.conn, task.fetch_size
        )

    def held(keys: Sequence[tuple[Any, ...]]) -> list[bool]:
        return keys_held(reader.conn, schema, keys)

    try:
        return writer.repair(schema, chunk, read, held)
    except BaseException:
        _forget(task, reader)
        raise


def _kept_by(events: EventFilter, result: ChunkResult) -> ChunkResult:
    """The chunk with only the rows the changefeed's event filter keeps, for every sink and
    for the row count: a snapshot read is judged as the insert that created its row."""
    kept = [change.row_after for change in events.keep_reads(result.row_changes())]
    return replace(result, rows=kept, row_count=len(kept))


def _plan(task: _Task, schema: TableSchema) -> ColumnPlan | None:
    """The changefeed's column rules for the chunk's table (None: every column as read).
    Such a chunk takes the values path, where rows are projected and masked in Python as
    the binlog's are (``cdc.filter.column_plan``)."""
    rules = task.columns.for_table(schema.name) if task.columns else None
    return None if rules is None else plan_columns(rules, schema)


def _projected(plan: ColumnPlan, result: ChunkResult) -> ChunkResult:
    """The chunk as the sink gets it: excluded columns gone, masked ones masked."""
    rows: list[Mapping[str, Any]] = [plan.image(row) or {} for row in result.rows]
    return replace(result, rows=rows, schema=plan.out)


def _run_partition(
    task: _Task, groups: Iterable[Sequence[tuple[int, Mapping[str, Any]]]]
) -> Iterator[tuple[Any, ...]]:
    _busy()
    try:
        for group in groups:
            for index, item in group:
                yield _run_one(task, index, item)
    finally:
        _idle()


def _outcome(chunk_id: str, report: tuple[Any, ...]) -> ChunkOutcome:
    _, error_type, error, high, low, rows = report
    return ChunkOutcome(
        chunk_id=chunk_id,
        row_count=rows,
        high_watermark=None if high is None else Position.from_dict(high),
        low_watermark=None if low is None else Position.from_dict(low),
        error=error,
        error_type=error_type,
    )


def run_chunks(
    spark: SparkSession,
    source_uri_text: str,
    schemas: Mapping[TableName, TableSchema],
    chunks: Sequence[SnapshotChunk],
    writer: ChunkWriter | RepairWriter,
    *,
    fetch_size: int = 1000,
    events: EventFilter | None = None,
    columns: ColumnRules | None = None,
) -> list[ChunkOutcome]:
    """Reads the chunks in a Spark task per core (see the module doc) and writes their
    rows with ``writer``.

    Returns one outcome per chunk, in the order of ``chunks``; record a chunk
    as done only when its outcome is ``ok``. ``schemas`` holds the schema of
    every chunk's table; ``source_uri_text`` is the source URI as configured
    (its password, inline or by reference, is resolved inside the tasks).
    ``events``, the changefeed's event filter, drops rows from each chunk before it
    is written or counted, as it drops the inserts the binlog delivers (pickled into
    the tasks as its rules). ``columns``, the changefeed's column selectors and masks,
    apply to each chunk's rows as to the binlog's.
    """
    if not chunks:
        return []
    ids = [chunk.chunk_id for chunk in chunks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"chunk ids must be unique, got {sorted(ids)}")
    missing = sorted({str(c.table) for c in chunks if c.table not in schemas})
    if missing:
        raise ValueError(f"no schema given for table(s) {', '.join(missing)}")
    if not isinstance(writer, ChunkWriter | RepairWriter):
        raise TypeError(
            f"writer must be a ChunkWriter or RepairWriter, not {type(writer).__name__}"
        )
    parse_source_uri(source_uri_text)
    task = _Task(
        source_uri_text=source_uri_text,
        schemas={str(name): schema.to_dict() for name, schema in schemas.items()},
        writer=writer,
        fetch_size=fetch_size,
        events=events,
        columns=columns or None,
    )
    tables = sorted({str(c.table) for c in chunks})
    description = f"snapshot {len(chunks)} chunk(s) of {len(tables)} table(s)"
    sc = spark.sparkContext
    previous = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(description)
    try:
        items = [(i, chunk.to_dict()) for i, chunk in enumerate(chunks)]
        cores = max(1, min(len(items), int(sc.defaultParallelism)))
        groups = [items[start::cores] for start in range(cores)]
        rdd = sc.parallelize(groups, numSlices=cores)
        reports = rdd.mapPartitions(functools.partial(_run_partition, task)).collect()
    finally:
        # pyspark annotates value as str, but its docstring says None unsets the property
        sc.setLocalProperty("spark.job.description", previous)  # type: ignore[arg-type]
    by_index = {report[0]: report for report in reports}
    outcomes = [
        _outcome(chunk_id, by_index[i])
        if i in by_index
        else ChunkOutcome(chunk_id, error="the task returned no report", error_type="SparkError")
        for i, chunk_id in enumerate(ids)
    ]
    failed = [o for o in outcomes if not o.ok]
    log.info(
        "%s: %d done, %d failed, %d rows (tables %s)",
        description,
        len(outcomes) - len(failed),
        len(failed),
        sum(o.row_count for o in outcomes),
        ", ".join(tables),
    )
    for outcome in failed:
        log.warning("chunk %s failed: %s", outcome.chunk_id, outcome.error)
    return outcomes


def _is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def _on_loopback(master: str) -> bool:
    return master.startswith(("spark://127.", "spark://localhost:"))


def worker_python(master: str, conf: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """The interpreter executors run: this one in local mode (its version must match the
    driver's); on a cluster ``spark.pyspark.python``, else ``PYSPARK_PYTHON``, else this one."""
    if _is_local(master):
        return sys.executable
    return conf.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON") or sys.executable


def session_conf(master: str, app: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark settings :func:`spark_session` uses; ``conf`` entries win."""
    settings = {
        "spark.master": master,
        "spark.app.name": app,
        "spark.ui.showConsoleProgress": "false",
        "spark.redaction.regex": REDACTION_REGEX,
        "spark.redaction.string.regex": REDACTION_STRING_REGEX,
        # The driver JVM lives in the capture and only schedules chunk tasks (rows move
        # in the Python workers): C1 alone and the serial collector start it in half the
        # time when several start at once on 2 cores (3 sessions: 38 s -> 19 s each)
        "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
        # workers forked with the chunk code already imported (sparkjobs/daemon.py)
        "spark.python.daemon.module": "sparkjobs.daemon",
    }
    if _is_local(master) or _on_loopback(master):
        # a cluster on loopback (the tests' and benchmarks') reaches the driver there too
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings.update(conf or {})
    return settings


def spark_session(
    master: str = "local[*]",
    app: str = "mysql-cdc-snapshot",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession for snapshot work on ``master`` (see the module doc for what
    cluster masters need); returns the running session if there is one."""
    from pyspark.sql import SparkSession

    settings = session_conf(master, app, conf)
    os.environ["PYSPARK_PYTHON"] = worker_python(master, settings, os.environ)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    log.info("spark session %s on %s", app, master)
    return session
