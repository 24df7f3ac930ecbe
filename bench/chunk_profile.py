"""Where a snapshot chunk's time goes: read and load in one process, no Spark, no etcd.

    .venv/bin/python bench/chunk_profile.py [--rows 200000] [--chunk-size 8096] [--path all]
    .venv/bin/py-spy record -f raw --gil -o /tmp/chunks.txt -- \\
        .venv/bin/python bench/chunk_profile.py --rows 200000 --path objects

Fills the sysbench-shaped table on a private source (buffer pool larger than the
data), then copies it chunk by chunk into a private downstream the way one Spark
task does (``sparkjobs.snapshot._run_one`` minus Spark): read the chunk lock-free
(``cdc.snapshot.reader.read_chunk``), write it through the MySQL sink kind's chunk
sink. Prints seconds per phase for each copy path (``--path``):

* ``objects``: rows as canonical Python values (``ChunkResult.rows``), rendered
  into the LOAD DATA file (``loadfile.load_statement``): every path before issue #16;
* ``lean``: the server's text straight into the LOAD DATA file
  (``cdc.snapshot.streamed``), the path chunks take where nothing needs converting:
  each chunk's lines as one GROUP_CONCAT value (``textlines.read_chunk_text``), bare
  lines (no escapes: the sysbench table has no nullable or binary column);
* ``lean-escaped``: the same as escaped lines (as a table with a nullable column, or
  a value holding a bare line's mark, comes);
* ``lean-rows``: escaped lines read row by row (as a chunk too large for one value is);
* ``lean-escape-all``: ``lean-escaped`` with every text value escaped by three REPLACEs,
  as before session 17, where ``lean-escaped`` escapes only a value a REGEXP finds a tab,
  newline or backslash in (``textlines._ESCAPE_IF_NEEDED``): what that saves the source.

The phases are timed around the calls, with this process's CPU time (the Python side:
what a Spark worker would spend) and each server's (from /proc); py-spy (above) shows
what is inside them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu import tree_cpu
from bench.servers import mariadb
from bench.sysbench import fill
from cdc.model.schema import TableName
from cdc.schema.loader import load_table_schema
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.snapshot import textlines
from cdc.snapshot.reader import ChunkResult, read_chunk
from cdc.snapshot.splitter import split_table
from cdc.snapshot.streamed import StreamedChunk, read_chunk_lines
from cdc.source.connect import connect
from cdc.source.flavor import detect
from cdc.typeconv import snapshot_connect_kwargs
from cdc.uri.mysql import parse_source_uri

TABLE = TableName("sbtest", "sbtest1")
BUFFER_POOL = "--innodb-buffer-pool-size=1G"
#: The lean path's escape of a text value as it was before session 17: always.
_ESCAPE_ALL = textlines._ESCAPE.replace("{}", "{0}")
PATHS = ("objects", "lean-rows", "lean", "lean-escaped", "lean-escape-all")


def copy(source_uri: str, sink_uri: str, chunk_size: int, path: str) -> dict[str, float]:
    """Every chunk of the table read and written once; seconds by phase."""
    source = parse_source_uri(source_uri)
    conn = connect(source, "source", **snapshot_connect_kwargs())
    server = detect(conn)
    schema = load_table_schema(conn, TABLE)
    chunks = split_table(conn, schema, chunk_size)
    uri = parse_sink_uri(sink_uri)
    kind = kind_of(uri)
    kind.prepare_table(uri, conn, schema, replace=True)
    sink = kind.chunk_sink(uri, "profile")
    times: dict[str, float] = defaultdict(float)
    lean = textlines._ESCAPE_IF_NEEDED
    if path == "lean-escape-all":
        textlines._ESCAPE_IF_NEEDED = _ESCAPE_ALL
    rows = 0
    result: ChunkResult | StreamedChunk
    try:
        for chunk in chunks:
            t0 = time.perf_counter()
            if path.startswith("lean"):
                if path == "lean-rows":
                    textlines._UNGROUPED.add(str(TABLE))  # as after a chunk that did not fit
                if path in ("lean-escaped", "lean-escape-all"):
                    textlines._NOT_BARE.add(str(TABLE))  # as after a value holding a mark
                target = sink.lines(schema, chunk, clear_range=True)
                assert target is not None, "the MySQL sink takes lines"
                result = read_chunk_lines(source, server, schema, chunk, target, conn=conn)
                times["read + load as lines (streamed)"] += time.perf_counter() - t0
            else:
                result = read_chunk(source, server, schema, chunk, conn=conn)
                t1 = time.perf_counter()
                sink.write(schema, result, clear_range=True)
                times["read (rows as Python values)"] += t1 - t0
                times["render + load"] += time.perf_counter() - t1
            rows += result.row_count
    finally:
        sink.close()
        conn.close()
        textlines._UNGROUPED.discard(str(TABLE))
        textlines._NOT_BARE.discard(str(TABLE))
        textlines._ESCAPE_IF_NEEDED = lean
    times["rows"] = rows
    return dict(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--path", choices=(*PATHS, "all"), default="all")
    args = parser.parse_args()
    options = (BUFFER_POOL,)
    with (
        mariadb("profile-source", 1, True, options) as source,
        mariadb("profile-target", 2, False, options) as target,
    ):
        conn = source.connect()
        fill(conn, args.rows)
        conn.close()
        conn = target.connect()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE sbtest")
        conn.close()
        paths = PATHS if args.path == "all" else (args.path,)
        for path in paths:
            cpu = time.process_time()
            servers = (tree_cpu(source.pid or 0), tree_cpu(target.pid or 0))
            took = copy(source.uri, target.uri, args.chunk_size, path)
            cpu = time.process_time() - cpu
            src_cpu, dst_cpu = (
                tree_cpu(p or 0) - c for p, c in zip((source.pid, target.pid), servers, strict=True)
            )
            total = sum(v for k, v in took.items() if k != "rows")
            chunks = -(-int(took["rows"]) // args.chunk_size)
            print(
                f"path {path}: {int(took['rows']):,} rows in {total:.2f} s, "
                f"{cpu:.2f} s of this process's CPU; the source server's "
                f"{src_cpu:.2f} s ({src_cpu * 1000 / chunks:.1f} ms a chunk), the downstream's "
                f"{dst_cpu:.2f} s"
            )
            for phase, seconds in took.items():
                if phase != "rows":
                    print(f"  {phase}: {seconds:.2f} s ({seconds / total:.0%})")


if __name__ == "__main__":
    main()
