"""Where the file sink puts things, and the one way it writes a file: atomically.

The tree under the sink's root (after TiCDC's storage sink)::

    <root>/
      metadata                                  JSON: format version, changefeed id,
                                                protocol, each table's checkpoint; rewritten
                                                on every flush, after the data it covers
      .lock                                     held (flock) by the sink writing here
      ddl/<binlog-file>-<offset>.json           one DDL event per file, named by its
                                                position (offset zero-padded to 20 digits),
                                                written once every table reached it
      <schema>/<table>/<version>/schema.json    the table schema of that version and the
                                                DDL that produced it (null when unknown)
      <schema>/<table>/<version>/CDC00000001.json   row changes (canal-json), or .csv;
                                                numbered from 1 per version folder
      snapshot/<schema>/<table>/<version>/      the snapshot: schema.json and one file per
                                                chunk, chunk-<chunk id>.json (its rows as
                                                READ changes at the chunk's high watermark),
                                                written by the Spark tasks, not by the sink
      .../.<name>.tmp                           a file being written: never read, removed
                                                when a sink opens the root

Schema and table names are percent-encoded into folder names (``/`` and
``%`` and a leading ``.`` are escaped), and the schema names ``ddl`` and
``metadata`` get their first letter escaped (``%64dl``) so no table folder can
collide with the sink's own entries. Readers take the names from
``schema.json``; the folder names are only for people and shells.

Every file is written to ``.<name>.tmp`` in its final folder, fsynced,
renamed over the final name and the folder fsynced: a reader (or a crash)
sees either the whole old file, the whole new one, or nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

from cdc.model.position import Position
from cdc.model.schema import TableName

__all__ = [
    "DATA_FILE",
    "DDL_DIR",
    "LOCK_FILE",
    "METADATA_FILE",
    "SCHEMA_FILE",
    "SNAPSHOT_DIR",
    "data_file_name",
    "data_files",
    "ddl_file_name",
    "decode_name",
    "encode_name",
    "fsync_dir",
    "is_temp",
    "make_dirs",
    "snapshot_chunk",
    "snapshot_file_name",
    "snapshot_files",
    "table_dir",
    "table_dirs",
    "table_of_dir",
    "temp_path",
    "version_dir",
    "version_dirs",
    "write_atomic",
]

METADATA_FILE = "metadata"
DDL_DIR = "ddl"
LOCK_FILE = ".lock"
SCHEMA_FILE = "schema.json"
SNAPSHOT_DIR = "snapshot"
DATA_FILE = re.compile(r"CDC(\d{8,})\.(json|csv)")
#: ``chunk-<chunk id>[.t<fence token>].<ext>``; the id ends with ``%3A<n>`` (its ``:n``
#: encoded), so it never ends like a token.
SNAPSHOT_FILE = re.compile(r"chunk-(.+?)(?:\.t(\d+))?\.(json|csv)")
_RESERVED = frozenset({METADATA_FILE, DDL_DIR, SNAPSHOT_DIR})
_TEMP_SUFFIX = ".tmp"


def encode_name(name: str, *, top_level: bool = False) -> str:
    """A schema or table name as a folder name (reversible with :func:`decode_name`)."""
    encoded = quote(name, safe="")
    if encoded.startswith(".") or (top_level and encoded in _RESERVED):
        encoded = f"%{ord(encoded[0]):02X}{encoded[1:]}"
    return encoded


def decode_name(folder: str) -> str:
    """The schema or table name a folder stands for."""
    return unquote(folder)


def table_dir(root: Path, table: TableName) -> Path:
    """``<root>/<schema>/<table>``."""
    return root / encode_name(table.schema, top_level=True) / encode_name(table.table)


def version_dir(root: Path, table: TableName, version: int) -> Path:
    """``<root>/<schema>/<table>/<version>``."""
    return table_dir(root, table) / str(version)


def data_file_name(seq: int, extension: str) -> str:
    """``CDC00000001.json``: eight digits at least, numbered per version folder."""
    return f"CDC{seq:08d}.{extension}"


def snapshot_file_name(chunk_id: str, extension: str, token: int | None = None) -> str:
    """``chunk-<chunk id>.t<token>.json``: one file per snapshot chunk and fence token
    (``cdc.sink.mysql.chunkfence``: from the etcd revision at which the writer proved
    it holds the chunk; none: ``chunk-<chunk id>.json``), rewritten if it runs again."""
    fenced = "" if token is None else f".t{token}"
    return f"chunk-{encode_name(chunk_id)}{fenced}.{extension}"


def snapshot_chunk(name: str) -> tuple[str, int] | None:
    """The encoded chunk id and fence token (0: none) a chunk file's name holds."""
    match = SNAPSHOT_FILE.fullmatch(name)
    return None if match is None else (match.group(1), int(match.group(2) or 0))


def snapshot_files(folder: Path, extension: str) -> list[Path]:
    """The finished chunk files of one snapshot version folder, by name: of a chunk's
    files, the one of the largest fence token only. A capture that lost the chunk may
    write its file after the chunk's next holder wrote its own: that file is older."""
    if not folder.is_dir():
        return []
    newest: dict[str, tuple[int, Path]] = {}
    for entry in folder.iterdir():
        match = SNAPSHOT_FILE.fullmatch(entry.name)
        if match is None or match.group(3) != extension:
            continue
        token = int(match.group(2) or 0)
        held = newest.get(match.group(1))
        if held is None or token > held[0]:
            newest[match.group(1)] = (token, entry)
    return sorted(path for _, path in newest.values())


def ddl_file_name(position: Position) -> str:
    """``mysql-bin.000003-00000000000000001234.json``: sorts by position within one binlog.

    After the changefeed followed its source to another server (``Position.gen``), the
    name starts with the generation (``g1-replica-bin.000001-...``): a file:offset of the
    new server may name a DDL file of the old one."""
    name = f"{position.file}-{position.offset:020d}.json"
    return f"g{position.gen}-{name}" if position.gen else name


def temp_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place."""
    return path.with_name(f".{path.name}{_TEMP_SUFFIX}")


def is_temp(name: str) -> bool:
    """Whether a file name is a sink's unfinished temporary file."""
    return name.startswith(".") and name.endswith(_TEMP_SUFFIX)


def fsync_dir(path: Path) -> None:
    """Makes a rename or an unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, shared: bool = False) -> None:
    """Writes ``data`` to ``path`` so that no reader or crash ever sees part of it.

    ``shared``: other processes may write the same file at the same time (snapshot
    tasks); the temporary file then gets a name of its own (``.<name>.<random>.part``),
    which a sink opening the root does not take for one of its unfinished files.
    """
    if shared:
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        os.close(handle)
        tmp = Path(name)
    else:
        tmp = temp_path(path)
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def make_dirs(folder: Path) -> None:
    """Creates ``folder`` and its missing parents, each made durable in its parent."""
    missing = []
    parent = folder
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        fsync_dir(path.parent)


def table_dirs(root: Path) -> Iterator[Path]:
    """Every ``<root>/<schema>/<table>`` folder, in name order."""
    if not root.is_dir():
        return
    for schema_dir in sorted(root.iterdir()):
        if schema_dir.name in _RESERVED or schema_dir.name.startswith("."):
            continue
        if not schema_dir.is_dir():
            continue
        for table_dir in sorted(schema_dir.iterdir()):
            if table_dir.is_dir() and not table_dir.name.startswith("."):
                yield table_dir


def table_of_dir(table_dir: Path) -> TableName:
    """The table a ``<root>/<schema>/<table>`` folder stands for."""
    return TableName(decode_name(table_dir.parent.name), decode_name(table_dir.name))


def version_dirs(table_dir: Path) -> list[tuple[int, Path]]:
    """The ``<version>`` folders of one table, by version number."""
    found = [
        (int(entry.name), entry)
        for entry in table_dir.iterdir()
        if entry.is_dir() and entry.name.isascii() and entry.name.isdigit()
    ]
    return sorted(found)


def data_files(folder: Path, extension: str | None = None) -> list[tuple[int, Path]]:
    """The finished data files of one version folder, by number (temporary files ignored)."""
    found = []
    for entry in folder.iterdir():
        match = DATA_FILE.fullmatch(entry.name)
        if match is not None and (extension is None or match.group(2) == extension):
            found.append((int(match.group(1)), entry))
    return sorted(found)
