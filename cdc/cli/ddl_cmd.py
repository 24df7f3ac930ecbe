"""`cdcctl changefeed ddl skip|replace`: go on past the DDL a changefeed is stopped at.

    cdcctl changefeed ddl skip    -c ID --position P
    cdcctl changefeed ddl replace -c ID --position P --sql "ALTER TABLE ..."

``P`` is the refused DDL's position as ``cdcctl changefeed query`` shows it
(``failed_ddl.position``, also in the error). The server checks that the
changefeed is stopped at exactly that DDL and records the decision with who
made it in the changefeed's history; the changefeed then resumes and the
owner skips the DDL or runs the SQL downstream in its place. A --sql that is
not exactly one DDL statement (empty, DML, several statements) is refused here,
before any request, and by the server (exit 2): a replacement may run twice
after an owner failover (``cdc.changefeed.ddl_ops``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import grpc

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
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

_POSITION_HELP = (
    "the refused DDL's position, as `cdcctl changefeed query` shows it (failed_ddl.position)"
)


def register(changefeed_commands: argparse._SubParsersAction) -> None:
    """Adds `ddl skip|replace` to `cdcctl changefeed`."""
    ddl = changefeed_commands.add_parser(
        "ddl", help="skip or replace the DDL a changefeed is stopped at (the downstream refused it)"
    )
    actions = ddl.add_subparsers(dest="ddl_command", metavar="ACTION", required=True)
    skip = actions.add_parser("skip", help="do not apply the DDL downstream; go on after it")
    _add_common(skip)
    skip.set_defaults(run=_runner("SkipDdl"))
    replace = actions.add_parser(
        "replace", help="run other SQL downstream in the DDL's place; go on after it"
    )
    _add_common(replace)
    replace.add_argument(
        "--sql",
        required=True,
        help="the one DDL statement run downstream instead, in the DDL's default database "
        "(no DML: it may run twice after an owner failover)",
    )
    replace.set_defaults(run=_runner("ReplaceDdl"))


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--changefeed-id", dest="changefeed_id", required=True)
    parser.add_argument("--position", required=True, help=_POSITION_HELP)
    add_server_flag(parser)


def _runner(method: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        sql = getattr(args, "sql", None) or ""
        if method == "ReplaceDdl":
            # the changefeed package and the SQL parser, for this command alone
            from cdc.changefeed.ddl_ops import check_replacement

            check_replacement(sql, "--sql")
        if not args.position.strip():
            raise ConfigError("--position", _POSITION_HELP + " is needed, not an empty text")
        request = admin_pb2.DdlDecisionRequest(
            changefeed_id=args.changefeed_id, position=args.position, sql=sql
        )
        server = server_of(args)
        with open_api(server) as api:
            try:
                reply = _send(api, method, request)
            except grpc.RpcError as exc:
                error(describe_error(exc, server))
                return exit_code(exc)
        data = changefeed_dict(reply, simple=True)
        full = changefeed_dict(reply)
        data["ddl_decision"] = full["ddl_decision"]
        emit(data, args.output)
        return exitcodes.OK

    return run


def _send(
    api: admin_pb2_grpc.ChangefeedServiceStub, method: str, request: admin_pb2.DdlDecisionRequest
) -> admin_pb2.Changefeed:
    if method == "SkipDdl":
        return api.SkipDdl(request, timeout=30)
    return api.ReplaceDdl(request, timeout=30)
