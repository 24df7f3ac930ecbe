"""`cdcctl config check`: validate a changefeed's config without a server.

The same validation runs again inside `changefeed create`; this command lets
an operator fix a config file offline first.
"""

from __future__ import annotations

import argparse

from cdc.cli import exitcodes
from cdc.cli.changefeed_flags import add_changefeed_flags, config_from_args
from cdc.cli.output import emit


def register(commands: argparse._SubParsersAction) -> None:
    config = commands.add_parser("config", help="changefeed configuration files")
    sub = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    check = sub.add_parser(
        "check",
        help="validate a changefeed config (file and/or flags) and print it with secrets masked",
    )
    add_changefeed_flags(check)
    check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    emit(config.describe(), args.output)
    return exitcodes.OK
