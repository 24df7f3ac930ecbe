"""`cdcctl`: the operator's command line.

Commands that exist now:

    cdcctl playground up|down|status   private etcd + source/downstream MariaDB
    cdcctl config check ...            validate a changefeed config, print it masked
    cdcctl capture list --server ...   the registered cdc-server processes and the owner
    cdcctl changefeed create|list|query|pause|resume|update|remove --server HOST:PORT
    cdcctl changefeed ddl skip|replace -c ID --position P [--sql ...]   past a refused DDL
    cdcctl subscription list|query|remove   the pull clients of pull:// changefeeds
    cdcctl diff --source-uri ... --target-uri ...   compare tables row by row (exit 1: differ)

Exit codes are in `cdc.cli.exitcodes` and README.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cdc.cli import (
    capture_cmd,
    changefeed_cmd,
    config_cmd,
    diff_cmd,
    exitcodes,
    playground_cmd,
    subscription_cmd,
)
from cdc.cli.output import FORMATS, error
from cdc.errors import ConfigError
from cdc.logs import setup_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdcctl",
        description="Operate the MySQL/MariaDB change-data-capture service.",
        epilog="Exit codes: 0 ok, 1 operation failed, 2 bad input (also the server's "
        "INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION), "
        "3 unreachable (UNAVAILABLE, also a failed TLS handshake), "
        "4 not authorized (UNAUTHENTICATED, PERMISSION_DENIED).",
    )
    parser.add_argument("--output", "-o", choices=FORMATS, default="json", help="output format")
    parser.add_argument("--log-level", default="WARNING", help="log level on stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    playground_cmd.register(commands)
    config_cmd.register(commands)
    capture_cmd.register(commands)
    changefeed_cmd.register(commands)
    subscription_cmd.register(commands)
    diff_cmd.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        return args.run(args)
    except ConfigError as exc:
        error(str(exc))
        return exitcodes.BAD_INPUT
    except KeyboardInterrupt:
        return exitcodes.FAILED


if __name__ == "__main__":
    sys.exit(main())
