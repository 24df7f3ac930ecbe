"""Re-snapshots of streaming tables held by this capture (``cdcctl changefeed snapshot``).

    snapshot-request/ keys (a mirror: read once, then kept by a watch)
        │ each processor pass: a request that is requested or running, for a table whose
        │ pipeline runs here ──► one thread for it; the table's pipeline is not touched
        ▼
    the thread: is the table streaming with its own snapshot over? (``not_ready``)
                source schema = the record's schema? (else a DDL is on its way: fail)
                both servers' tables fit for it? (``SinkKind.resnapshot_refusal``, as
                when it was asked for; every chunk checks again under its locks)
                --where checked again against the table's columns
                plan (requested) or resume (running) its chunk records (``replan``)
                chunks to the capture's snapshot scheduler as repair chunks
                (``JobKey.repair``: ``RepairWriter``, each chunk ordered against the
                stream's writes by the downstream's row locks, cdc.sink.mysql.rangerepair)
                each chunk recorded done with its high watermark as it comes back
                all done ──► request done | a chunk failed ──► request failed (its error)

A table that leaves this capture (moved, stopped, the changefeed paused) stops its
thread: chunks still queued are withdrawn, those running finish and are recorded, and
the next holder runs the rest. The request stays active until done or failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container
from dataclasses import dataclass, replace
from typing import Any

from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_request import (
    SnapshotRequest,
    SnapshotRequests,
    not_ready,
    refusal,
)
from cdc.changefeed.table_entries import read_tables
from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import ContextLogger, get_logger
from cdc.masking import mask_secret
from cdc.metrics import snapshot_chunks_done
from cdc.model.schema import TableSchema
from cdc.schema.loader import load_table_schema
from cdc.sink.registry import kind_of
from cdc.snapshot.chunk import reading_order
from cdc.snapshot.predicate import parse_predicate
from cdc.snapshot.splitter import split_table
from cdc.source.connect import connect
from cdc.store import EtcdStore, KeyMirror, StoreError
from cdc.store.keys import SnapshotRequestKey
from processor.snapshot_scheduler import JobKey, SnapshotScheduler, TableChunks

__all__ = ["ResnapshotFailed", "ResnapshotRunner"]


class ResnapshotFailed(RuntimeError):
    """The re-snapshot cannot go on; its message is what the request's error says."""


@dataclass
class _Run:
    request_id: str
    stop: threading.Event
    wake: threading.Event
    thread: threading.Thread

    def halt(self) -> None:
        self.stop.set()
        self.wake.set()


class ResnapshotRunner:
    """The re-snapshot threads of one capture; ``tick`` is called by each processor pass.

    ``spark(config)`` gives the Spark session; ``batch_chunks``: at most this many
    chunks of one table per Spark job, as for a table's own snapshot.
    """

    def __init__(
        self,
        store: EtcdStore,
        capture_id: str,
        scheduler: SnapshotScheduler,
        spark: Callable[[ChangefeedConfig], Any],
        *,
        batch_chunks: int = 8,
    ) -> None:
        self.store = store
        self.capture_id = capture_id
        self.scheduler = scheduler
        self.spark = spark
        self.batch_chunks = batch_chunks
        self.log = get_logger(__name__, capture=capture_id, role="processor")
        self._runs: dict[tuple[str, str], _Run] = {}
        self._mirror: KeyMirror | None = None

    def start(self, on_change: Callable[[str], None]) -> None:
        """Mirrors the request keys; ``on_change`` wakes the processor's pass."""
        prefix = self.store.keys.prefix_of(SnapshotRequestKey)
        self._mirror = KeyMirror(self.store, prefix, on_change).start()

    def close(self) -> None:
        """Stops every thread (their running chunks finish) and the mirror."""
        self.stop_all()
        for run in self._runs.values():
            run.thread.join(timeout=30)
        self._runs.clear()
        if self._mirror is not None:
            self._mirror.close()

    def stop_all(self) -> None:
        for run in self._runs.values():
            run.halt()

    def tick(self, held: Container[tuple[str, str]]) -> None:
        """Starts a thread for each active request of a table in ``held`` (the tables
        whose pipelines run here, by (changefeed, table)) and stops the others."""
        if self._mirror is None:
            return
        wanted: dict[tuple[str, str], SnapshotRequest] = {}
        for item in self._mirror.get_prefix(self.store.keys.prefix_of(SnapshotRequestKey)):
            key = self.store.keys.parse(item.key, SnapshotRequestKey)
            request = SnapshotRequest.from_dict(item.json())
            if request.active and (key.changefeed_id, key.table) in held:
                wanted[(key.changefeed_id, key.table)] = request
        for where, run in list(self._runs.items()):
            asked = wanted.get(where)
            if asked is None or asked.request_id != run.request_id:
                run.halt()
            if not run.thread.is_alive():
                del self._runs[where]
        for where, request in wanted.items():
            if where in self._runs:
                continue
            stop, wake = threading.Event(), threading.Event()
            thread = threading.Thread(
                target=self._run,
                args=(where[0], request, stop, wake),
                name=f"resnapshot-{where[1]}",
                daemon=True,
            )
            self._runs[where] = _Run(request.request_id, stop, wake, thread)
            thread.start()

    def _run(
        self,
        changefeed_id: str,
        request: SnapshotRequest,
        stop: threading.Event,
        wake: threading.Event,
    ) -> None:
        log = get_logger(
            __name__,
            changefeed=changefeed_id,
            table=str(request.table),
            capture=self.capture_id,
        )
        requests = SnapshotRequests(self.store, changefeed_id)
        try:
            rows = self._snapshot(changefeed_id, request, stop, wake, log)
            if rows is None:
                log.info("re-snapshot %s: stopped here; its holder goes on", request.request_id)
                return
            requests.finished(request.table, request.request_id, rows)
            log.info("re-snapshot %s done: %d rows written", request.request_id, rows)
        except StoreError as exc:  # the request stays; the next pass or holder goes on
            log.error("re-snapshot %s: etcd error, trying again: %s", request.request_id, exc)
        except Exception as exc:  # recorded on the request, for `changefeed query`
            message = str(exc)
            if not isinstance(exc, ResnapshotFailed):
                message = f"{type(exc).__name__}: {message}"
            message = mask_secret(message)
            log.error("re-snapshot %s failed: %s", request.request_id, message)
            try:
                requests.finished(request.table, request.request_id, 0, error=message)
            except StoreError as again:
                log.error("re-snapshot %s: failure not recorded: %s", request.request_id, again)

    def _snapshot(
        self,
        changefeed_id: str,
        request: SnapshotRequest,
        stop: threading.Event,
        wake: threading.Event,
        log: ContextLogger,
    ) -> int | None:
        """The request's chunks run and recorded; rows written, None when stopped first."""
        info = self.store.get(self.store.keys.changefeed_info(changefeed_id))
        if info is None:
            return None
        config = ChangefeedConfig.from_dict(info.json())
        table = request.table
        refused = refusal(config, table)
        if refused is not None:
            raise ResnapshotFailed(refused)
        progress = SnapshotProgress(self.store, changefeed_id)
        records = progress.load(table)
        mine = bool(records) and all(r.request == request.request_id for r in records)
        entry = read_tables(self.store, changefeed_id).get(str(table))
        if not mine:
            reason = not_ready(table, entry, records)
            if reason is not None:
                raise ResnapshotFailed(reason)
        record = entry.record if entry is not None else None
        if record is None:
            raise ResnapshotFailed(
                f"table {table} has no record any more (dropped or removed from the "
                "changefeed meanwhile); nothing to re-snapshot"
            )
        source = connect(config.source_uri, "source")
        try:
            schema = load_table_schema(source, table)
            known = record.schema
            if known is not None and _shape(known) != _shape(schema):
                raise ResnapshotFailed(
                    f"table {table} on the source is not in the shape the changefeed has "
                    "reached yet (a DDL of it is on its way downstream); ask again once "
                    "it is applied"
                )
            chunk_key = config.chunk_key_columns.get(str(table))
            unfit = kind_of(config.sink_uri).resnapshot_refusal(
                config.sink_uri, source, schema, chunk_key
            )
            if unfit is not None:
                raise ResnapshotFailed(unfit)
            predicate = (
                None
                if request.where is None
                else parse_predicate(request.where, schema.column_names).sql
            )
            if not mine:
                chunks = split_table(source, schema, config.chunk_size, chunk_key)
                records = progress.replan(table, chunks, request.request_id)
        finally:
            source.close()
        SnapshotRequests(self.store, changefeed_id).running(table, request.request_id, len(records))
        pending = reading_order([r.chunk for r in records if not r.done])
        log.info(
            "re-snapshot %s%s: %d chunks, %d to run (the table's stream goes on)",
            request.request_id,
            f" where {request.where}" if request.where else "",
            len(records),
            len(pending),
        )
        if pending:
            ticket = self.scheduler.submit(
                TableChunks(
                    replace(JobKey.of(config), repair=True),
                    schema,
                    tuple(pending),
                    lambda: self.spark(config),
                    per_job=self.batch_chunks,
                    predicate=predicate,
                ),
                stop,
                wake,
            )
            for batch in ticket.batches():
                done, rows = 0, 0
                for chunk, outcome in batch:
                    if not outcome.ok:
                        raise ResnapshotFailed(
                            f"chunk {outcome.chunk_id}: {outcome.error or 'unknown error'}"
                            + (
                                "; a DDL of the table ran during the re-snapshot: ask again"
                                if outcome.error_type == "ChunkSchemaChanged"
                                else ""
                            )
                        )
                    assert outcome.high_watermark is not None
                    progress.mark_done(chunk, outcome.high_watermark, outcome.row_count)
                    done += 1
                    rows += outcome.row_count
                snapshot_chunks_done(changefeed_id, str(table), done, rows)
            if ticket.stopped:
                return None
        records = progress.load(table)
        if not all(r.done and r.request == request.request_id for r in records):
            return None
        return sum(r.rows for r in records)


def _shape(schema: TableSchema) -> list[tuple[str, str]]:
    """What a chunk's rows depend on: the columns in order and their full types."""
    return [(c.name.lower(), c.column_type.lower()) for c in schema.columns]
