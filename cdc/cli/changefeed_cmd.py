"""`cdcctl changefeed create|list|query|pause|resume|update|remove`, through the admin API.

(`cdcctl changefeed ddl skip|replace` is in ``ddl_cmd``; `query` shows the audit history.)

create and update take the flags of `cdcctl config check` (a TiCDC-layout
--config file plus flag overrides); update replaces the whole configuration
of a paused changefeed. The config is checked here first (bad input exits 2
before any request), then sent as ``to_dict(mask=False)``: passwords only by
reference unless store-credentials is set.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import grpc

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli import ddl_cmd, exitcodes, snapshot_cmd, watch_view
from cdc.cli.api_client import (
    add_server_flag,
    changefeed_dict,
    describe_error,
    exit_code,
    open_api,
    server_of,
)
from cdc.cli.changefeed_flags import add_changefeed_flags, config_from_args
from cdc.cli.output import emit, error
from cdc.errors import ConfigError

_LIST_COLUMNS = ("id", "state", "checkpoint", "resolved", "error")
_TABLES_COLUMNS = ("table", "change", "from")
_HISTORY_COLUMNS = ("at", "op", "role", "user", "cert", "peer", "detail")

Call = Callable[[admin_pb2_grpc.ChangefeedServiceStub, argparse.Namespace], Any]


def register(commands: argparse._SubParsersAction) -> None:
    changefeed = commands.add_parser("changefeed", help="create, watch and manage changefeeds")
    sub = changefeed.add_subparsers(dest="changefeed_command", metavar="COMMAND", required=True)

    create = sub.add_parser("create", help="validate and create a changefeed")
    add_changefeed_flags(create)
    add_server_flag(create)
    create.set_defaults(run=_runner(_create))

    update = sub.add_parser(
        "update",
        help="replace the configuration of a paused changefeed, or its table rules while it "
        "runs (tables added are snapshotted first unless --no-backfill)",
    )
    add_changefeed_flags(update)
    update.add_argument(
        "--no-backfill",
        action="store_true",
        help="tables the new [filter] rules add stream from the update's position, without "
        "a snapshot of their rows",
    )
    add_server_flag(update)
    update.set_defaults(run=_runner(_update))

    listing = sub.add_parser("list", help="every changefeed with its state and checkpoint")
    add_server_flag(listing)
    listing.set_defaults(run=_runner(_list))

    query = sub.add_parser("query", help="one changefeed: config, status and tables")
    _add_id(query)
    query.add_argument("--simple", action="store_true", help="state and checkpoints only")
    query.add_argument(
        "--watch", action="store_true", help="live progress, refreshed every second (Ctrl-C)"
    )
    query.add_argument(
        "--count", type=int, help="with --watch: print this many refreshes, then exit"
    )
    query.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes")
    query.set_defaults(run=_runner(_query))

    for name, call, help_text in (
        ("pause", _pause, "stop the changefeed's pipelines, keeping their checkpoints"),
        ("resume", _resume, "run a paused (or failed) changefeed again"),
        ("remove", _remove, "delete the changefeed and all its state"),
    ):
        command = sub.add_parser(name, help=help_text)
        _add_id(command)
        command.set_defaults(run=_runner(call))

    ddl_cmd.register(sub)
    snapshot_cmd.register(sub)


def _add_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--changefeed-id", dest="changefeed_id", required=True)
    add_server_flag(parser)


def _runner(call: Call) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        server = server_of(args)
        with open_api(server) as api:
            try:
                result = call(api, args)
            except grpc.RpcError as exc:
                error(describe_error(exc, server))
                return exit_code(exc)
        return exitcodes.OK if result is None else int(result)

    return run


def _config_message(args: argparse.Namespace) -> admin_pb2.ChangefeedConfigJson:
    config = config_from_args(args)
    config.check_storable()
    return admin_pb2.ChangefeedConfigJson(json=json.dumps(config.to_dict(mask=False)))


def _create(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> None:
    message = _config_message(args)
    request = admin_pb2.CreateChangefeedRequest(config=message)
    cf = api.CreateChangefeed(request, timeout=120)
    emit(changefeed_dict(cf), args.output, columns=_LIST_COLUMNS)


def _update(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> None:
    message = _config_message(args)
    request = admin_pb2.UpdateChangefeedRequest(config=message, no_backfill=args.no_backfill)
    # new table rules: the server answers once the owner has added the tables (up to 40 s)
    cf = api.UpdateChangefeed(request, timeout=90)
    data = changefeed_dict(cf)
    emit(data, args.output, columns=_LIST_COLUMNS)
    if args.output == "table" and data["pending_tables_update"]:
        print("table rules stored; the owner has not applied them yet (see changefeed query)")
    elif args.output == "table" and data["tables_update"]:
        emit(_tables_rows(data["tables_update"]), args.output, columns=_TABLES_COLUMNS)


def _tables_rows(update: dict[str, Any]) -> list[dict[str, Any]]:
    """The last table rules update, one row per table added or removed."""
    position = update.get("position")
    at = f"{position['file']}:{position['offset']}" if position else None
    rows = [
        {"table": table, "change": f"added ({how})", "from": at if how == "no-backfill" else None}
        for table, how in update.get("added", {}).items()
    ]
    rows += [{"table": table, "change": "removed", "from": None} for table in update["removed"]]
    return rows or [{"table": None, "change": "no table added or removed", "from": at}]


def _list(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> None:
    reply = api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), timeout=30)
    rows = [changefeed_dict(cf, simple=True) for cf in reply.changefeeds]
    emit(rows, args.output, columns=_LIST_COLUMNS)


def _query(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> int:
    if args.count is not None and (not args.watch or args.count < 1):
        raise ConfigError("--count", "needs --watch and a number of refreshes of at least 1")
    if args.interval <= 0:
        raise ConfigError("--interval", "must be a positive number of seconds, e.g. 1")
    ref = admin_pb2.ChangefeedRef(changefeed_id=args.changefeed_id)
    if args.watch:
        return watch_view.watch(
            lambda: api.GetChangefeed(ref, timeout=30), args.interval, args.count
        )
    cf = api.GetChangefeed(ref, timeout=30)
    data = changefeed_dict(cf, simple=args.simple)
    if args.output == "table" and not args.simple:
        emit(data["tables"] or [data], args.output)
        if data["history"]:
            emit(data["history"], args.output, columns=_HISTORY_COLUMNS)
    else:
        emit(data, args.output, columns=_LIST_COLUMNS)
    return exitcodes.OK


def _pause(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> None:
    ref = admin_pb2.ChangefeedRef(changefeed_id=args.changefeed_id)
    emit(changefeed_dict(api.PauseChangefeed(ref, timeout=30), simple=True), args.output)


def _resume(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> None:
    ref = admin_pb2.ChangefeedRef(changefeed_id=args.changefeed_id)
    emit(changefeed_dict(api.ResumeChangefeed(ref, timeout=30), simple=True), args.output)


def _remove(api: admin_pb2_grpc.ChangefeedServiceStub, args: argparse.Namespace) -> None:
    ref = admin_pb2.ChangefeedRef(changefeed_id=args.changefeed_id)
    reply = api.RemoveChangefeed(ref, timeout=30)
    emit({"id": reply.changefeed_id, "removed": True}, args.output)
