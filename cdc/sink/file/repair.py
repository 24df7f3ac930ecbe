"""Bringing a root back to its checkpoints when a sink opens it (after a crash or a stop).

Finished files may hold changes past their table's checkpoint in
``metadata``: files rolled by size between two flushes, or renamed by a flush
that died before it rewrote ``metadata``. The changefeed restarts each table
from a checkpoint at or before that one and sends those changes again, so
they are removed first, and every change ends up in the files exactly once::

    1. delete the temporary files (.<name>.tmp) left by the crash
    2. per table, per version folder, newest file first: a file wholly past
       the table's checkpoint is deleted; one that crosses it is rewritten
       (atomically) with the records up to it; the first file wholly before
       it ends the walk, since records are in position order within a folder
    3. version folders left without data files are removed with their schema.json

A table without a checkpoint (none of its rows flushed) loses all its data
files. DDL files are left alone: each is written once every table reached
it (by the owner, or by a sink after a flush), its name is its position, and
a DDL sent again rewrites the same file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.sink.file.codec import RowCodec
from cdc.sink.file.layout import (
    SCHEMA_FILE,
    data_files,
    fsync_dir,
    is_temp,
    table_dirs,
    table_of_dir,
    version_dirs,
    write_atomic,
)

__all__ = ["RepairReport", "remove_temp_files", "truncate_to_checkpoint"]

log = logging.getLogger(__name__)


@dataclass
class RepairReport:
    """What opening the root removed: counts for the log line."""

    temp_files: int = 0
    data_files: int = 0
    cut_files: int = 0
    records: int = 0

    def __bool__(self) -> bool:
        return any((self.temp_files, self.data_files, self.cut_files))


def remove_temp_files(root: Path, report: RepairReport) -> None:
    """Step 1: unfinished files are never part of the data."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if is_temp(name):
                os.unlink(os.path.join(folder, name))
                report.temp_files += 1


def _past(position: Position, checkpoint: Position | None) -> bool:
    return checkpoint is None or position > checkpoint


def _truncate_folder(
    folder: Path, codec: RowCodec, checkpoint: Position | None, report: RepairReport
) -> None:
    changed = False
    for _seq, path in reversed(data_files(folder, codec.extension)):
        with open(path, "rb") as handle:
            records = list(codec.records(handle, str(path)))
        keep = [r for r in records if not _past(r.position, checkpoint)]
        if len(keep) == len(records):
            break
        report.records += len(records) - len(keep)
        if keep:
            write_atomic(path, b"".join(r.raw for r in keep))
            report.cut_files += 1
            break
        path.unlink()
        report.data_files += 1
        changed = True
    if changed:
        fsync_dir(folder)
    if not data_files(folder, codec.extension):
        schema = folder / SCHEMA_FILE
        if schema.exists():
            schema.unlink()
        if not any(folder.iterdir()):
            folder.rmdir()
            fsync_dir(folder.parent)


def truncate_to_checkpoint(
    root: Path,
    codec: RowCodec,
    checkpoint_of: Callable[[TableName], Position | None],
    report: RepairReport,
) -> list[TableName]:
    """Steps 2-3: removes every row change past its table's checkpoint from the root;
    the tables that still have data files."""
    kept = []
    for table_dir in list(table_dirs(root)):
        table = table_of_dir(table_dir)
        checkpoint = checkpoint_of(table)
        for _version, folder in version_dirs(table_dir):
            _truncate_folder(folder, codec, checkpoint, report)
        if any(data_files(folder) for _version, folder in version_dirs(table_dir)):
            kept.append(table)
        for empty in (table_dir, table_dir.parent):
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()
                fsync_dir(empty.parent)
    return kept
