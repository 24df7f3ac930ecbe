"""Bringing a root back to its checkpoint when a sink opens it (after a crash or a stop).

Finished files may hold changes past the checkpoint in ``metadata``: files
rolled by size between two flushes, or renamed by a flush that died before
it rewrote ``metadata``. The changefeed restarts from the checkpoint and sends
those changes again, so they are removed first, and every change ends up in
the files exactly once::

    1. delete the temporary files (.<name>.tmp) left by the crash
    2. delete DDL files whose position is past the checkpoint
    3. per version folder, newest file first: a file wholly past the checkpoint
       is deleted; one that crosses it is rewritten (atomically) with the
       records up to it; the first file wholly before it ends the walk, since
       records are in position order within a folder
    4. version folders left without data files are removed with their schema.json

A checkpoint of None (no flush ever finished) empties the root of data.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cdc.model.position import Position
from cdc.sink.file.canal_json import decode_ddl
from cdc.sink.file.codec import RowCodec
from cdc.sink.file.layout import (
    DDL_DIR,
    SCHEMA_FILE,
    data_files,
    fsync_dir,
    is_temp,
    table_dirs,
    version_dirs,
    write_atomic,
)

__all__ = ["RepairReport", "remove_temp_files", "truncate_to_checkpoint"]

log = logging.getLogger(__name__)


@dataclass
class RepairReport:
    """What opening the root removed: counts for the log line."""

    temp_files: int = 0
    ddl_files: int = 0
    data_files: int = 0
    cut_files: int = 0
    records: int = 0

    def __bool__(self) -> bool:
        return any((self.temp_files, self.ddl_files, self.data_files, self.cut_files))


def remove_temp_files(root: Path, report: RepairReport) -> None:
    """Step 1: unfinished files are never part of the data."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if is_temp(name):
                os.unlink(os.path.join(folder, name))
                report.temp_files += 1


def _past(position: Position, checkpoint: Position | None) -> bool:
    return checkpoint is None or position > checkpoint


def _truncate_ddl(root: Path, checkpoint: Position | None, report: RepairReport) -> None:
    folder = root / DDL_DIR
    if not folder.is_dir():
        return
    removed = False
    for path in sorted(folder.iterdir()):
        if is_temp(path.name) or path.suffix != ".json":
            continue
        ddl = decode_ddl(path.read_bytes(), str(path))
        if _past(ddl.position, checkpoint):
            path.unlink()
            report.ddl_files += 1
            removed = True
    if removed:
        fsync_dir(folder)


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
    root: Path, codec: RowCodec, checkpoint: Position | None, report: RepairReport
) -> None:
    """Steps 2-4: removes every DDL and row change past ``checkpoint`` from the root."""
    _truncate_ddl(root, checkpoint, report)
    for table_dir in list(table_dirs(root)):
        for _version, folder in version_dirs(table_dir):
            _truncate_folder(folder, codec, checkpoint, report)
        for empty in (table_dir, table_dir.parent):
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()
                fsync_dir(empty.parent)
