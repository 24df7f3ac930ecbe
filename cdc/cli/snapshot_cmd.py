"""`cdcctl changefeed snapshot`: re-snapshot a streaming table while its binlog goes on.

    cdcctl changefeed snapshot -c ID --table db.t [--where "id < 1000"]

The rows the predicate selects (every row without one) are copied again through the
lock-free chunk path; downstream rows of those ranges that the source no longer has
are removed. The server checks the request (docs/bad-input.md) and answers at once;
`cdcctl changefeed query [--watch]` shows the progress (the table's chunk bars and its
``resnapshot`` state: requested, running, done or failed with the reason).
"""

from __future__ import annotations

import argparse

import grpc

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.cli import exitcodes
from cdc.cli.api_client import (
    add_server_flag,
    changefeed_dict,
    describe_error,
    exit_code,
    open_api,
    server_of,
)
from cdc.cli.output import emit, error
from cdc.errors import ConfigError

__all__ = ["register"]


def register(changefeed_commands: argparse._SubParsersAction) -> None:
    """Adds `snapshot` to `cdcctl changefeed`."""
    command = changefeed_commands.add_parser(
        "snapshot",
        help="copy a table (or the rows --where selects) again while its binlog goes on; "
        "downstream rows of the range the source no longer has are removed",
    )
    command.add_argument("-c", "--changefeed-id", dest="changefeed_id", required=True)
    command.add_argument("--table", required=True, help="schema.table of the changefeed")
    command.add_argument(
        "--where",
        default="",
        help='a condition over the table\'s columns (e.g. "id < 1000"): only these rows',
    )
    add_server_flag(command)
    command.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if not args.table.strip():
        raise ConfigError("--table", "is empty; give the table as schema.table")
    if args.where and not args.where.strip():
        raise ConfigError("--where", "is blank; leave it out to copy every row")
    request = admin_pb2.SnapshotTableRequest(
        changefeed_id=args.changefeed_id, table=args.table, where=args.where
    )
    server = server_of(args)
    with open_api(server) as api:
        try:
            reply = api.SnapshotTable(request, timeout=30)
        except grpc.RpcError as exc:
            error(describe_error(exc, server))
            return exit_code(exc)
    data = changefeed_dict(reply, simple=True)
    data["tables"] = [t for t in changefeed_dict(reply)["tables"] if t["table"] == args.table]
    emit(data, args.output)
    return exitcodes.OK
