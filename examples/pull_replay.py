"""Replay a pull changefeed into a MySQL/MariaDB database: Get, apply, Ack, forever.

    python examples/pull_replay.py --server cdc-0:8300 --server cdc-1:8300 \\
        --changefeed orders-feed --client dw --rule 'shop.*' \\
        --target-uri 'mysql://cdc@127.0.0.1:3317/?password-env=TARGET_PW'

Give every capture's address (or one Service in front of them): the capture
serving the changefeed may die, and the client then asks the others, which
send it to the capture the tables moved to. Each batch is applied in the
target (rows by key, DDL once: ``cdc.subscription.replay``) and acked only
then, so stopping at any point loses nothing; what comes again is applied
again harmlessly. The target's tables must exist first (create them from the
source's definitions); tables created later arrive as DDL. TLS and the
bearer token: the flags and variables of cdcctl (--tls-ca, --token-file...).

Prints one JSON line of progress every ``--report`` seconds. Exit codes: 0
interrupted, 1 the server or the target refused (the message says which and
why), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from cdc.api.channel import ClientSecurity, read_token_file
from cdc.errors import ConfigError
from cdc.logs import setup_logging
from cdc.source.flavor import SourceError
from cdc.subscription import SubscriptionClient, SubscriptionRpcError
from cdc.subscription.replay import ApplyError, Replayer, TargetApplier
from cdc.uri.mysql import parse_source_uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server", action="append", required=True, help="a capture's HOST:PORT (repeatable)"
    )
    parser.add_argument("--changefeed", required=True, help="the pull changefeed's id")
    parser.add_argument("--client", required=True, help="this consumer's client id")
    parser.add_argument(
        "--rule", action="append", default=[], help="table filter rule (the first time)"
    )
    parser.add_argument("--target-uri", required=True, help="mysql://user@host:port/ to apply to")
    parser.add_argument("--batch", type=int, default=500, help="events per Get (default 500)")
    parser.add_argument("--report", type=float, default=5.0, help="seconds between progress lines")
    parser.add_argument("--tls-ca", help="CA of the servers' certificates: talk TLS")
    parser.add_argument("--tls-cert", help="client certificate (mutual TLS)")
    parser.add_argument("--tls-key", help="key of --tls-cert")
    parser.add_argument("--token-file", help="file whose first line is the bearer token")
    args = parser.parse_args(argv)
    setup_logging("WARNING")
    if args.batch < 1 or args.report <= 0:
        print("error: --batch must be >= 1 and --report > 0", file=sys.stderr)
        return 2
    try:
        target = parse_source_uri(args.target_uri, field="--target-uri")
        token = read_token_file(args.token_file, "--token-file") if args.token_file else None
        security = ClientSecurity(args.tls_ca, args.tls_cert, args.tls_key, token)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = SubscriptionClient(
        args.server, args.changefeed, args.client, args.rule, security=security
    )
    try:
        applier = TargetApplier(target, f"{args.changefeed}/{args.client}")
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        client.close()
        return 1
    replayer = Replayer(client, applier)
    stop = threading.Event()
    thread = threading.Thread(target=_report, args=(replayer, stop, args.report), daemon=True)
    thread.start()
    try:
        while True:
            replayer.step(args.batch)
    except KeyboardInterrupt:
        return 0
    except (SubscriptionRpcError, ApplyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        stop.set()
        applier.close()
        client.close()


def _report(replayer: Replayer, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        stats = replayer.stats
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "server": replayer.client.target,
            "batches": stats.batches,
            "rows": stats.rows,
            "ddl": stats.ddls,
            "applied": str(stats.applied) if stats.applied else None,
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
