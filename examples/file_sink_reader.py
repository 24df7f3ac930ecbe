"""Read a file sink's folder: list its changes, or rebuild its tables in MySQL/MariaDB.

    python examples/file_sink_reader.py /var/lib/cdc/out
    python examples/file_sink_reader.py /var/lib/cdc/out --target mysql://root@127.0.0.1:3306/ \\
        --map shop=shop_copy

Without ``--target`` every change up to the checkpoint is printed, one line each.
With it the tables are created (from each version's schema.json) and the
changes applied (see ``cdc.sink.file.reader``); the target tables must not
exist yet. The password goes inline (percent-encoded) or by
``?password-env=VAR`` / ``?password-file=/path``; it is never printed.

Exit codes: 0 done, 1 the files or the target refused, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys

import pymysql

from cdc.errors import ConfigError
from cdc.model import DdlEvent, Position
from cdc.sink.file import FileFormatError, FileSinkReader, ReplayError, replay_into
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.typeconv import sink_connect_kwargs
from cdc.uri.mysql import MySQLURI


def _mapping(items: list[str]) -> dict[str, str]:
    mapping = {}
    for item in items:
        source, sep, target = item.partition("=")
        if not sep or not source or not target:
            raise ConfigError("--map", f"{item!r} is not SOURCE=TARGET, e.g. --map shop=shop_copy")
        mapping[source] = target
    return mapping


def _target(text: str) -> MySQLURI:
    uri = parse_sink_uri(text, field="--target")
    database = kind_of(uri).database(uri)
    if database is None:
        raise ConfigError("--target", "must be a mysql:// or mariadb:// URI")
    return database


def _print_changes(reader: FileSinkReader, through: Position | None) -> None:
    meta = reader.metadata
    print(f"changefeed {meta.changefeed}, protocol {meta.protocol.value}")
    print(f"checkpoint {meta.checkpoint}, tables: {', '.join(map(str, reader.tables)) or 'none'}")
    count = 0
    for change in reader.changes(through):
        count += 1
        if isinstance(change, DdlEvent):
            print(f"{change.position}  DDL {change.kind.value}: {change.statement}")
        else:
            print(f"{change.position}  {change.op.name} {change.table} key={change.key!r}")
    print(f"{count} changes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the file sink's folder (the path of file:///path)")
    parser.add_argument("--target", help="mysql://user[:password]@host:port/ to rebuild into")
    parser.add_argument(
        "--map", action="append", default=[], help="SOURCE=TARGET schema renaming (repeatable)"
    )
    parser.add_argument("--through", help="stop at FILE:OFFSET instead of the checkpoint")
    args = parser.parse_args(argv)
    try:
        mapping = _mapping(args.map)
        target = _target(args.target) if args.target else None
        through = Position.parse(args.through) if args.through else None
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        reader = FileSinkReader(args.root)
        if target is None:
            _print_changes(reader, through)
            return 0
        conn = pymysql.connect(**target.connection_kwargs(), **sink_connect_kwargs())
        try:
            stats = replay_into(args.root, conn, schema_map=mapping, through=through)
        finally:
            conn.close()
    except (FileFormatError, ReplayError, ConfigError, pymysql.MySQLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"replayed into {target} through {stats.through}: {stats.rows} row changes, "
        f"{stats.ddl_applied} DDL applied ({stats.ddl_skipped} skipped); tables created: "
        f"{', '.join(stats.tables_created) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
