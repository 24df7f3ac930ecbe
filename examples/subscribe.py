"""Pull a changefeed's changes and print them as JSON lines, acking every batch once printed.

    python examples/subscribe.py 127.0.0.1:8300 orders-feed billing --rule 'shop.*'
    python examples/subscribe.py 127.0.0.1:8300 orders-feed billing      # resume, same rules
    python examples/subscribe.py cdc-0:8300,cdc-1:8300,cdc-2:8300 orders-feed billing

One line per change on stdout::

    {"position": "binlog.000003:1234", "table": "shop.orders", "op": "u",
     "key": [7], "before": {...}, "after": {...}, "txn_id": "0-1-42"}
    {"position": "binlog.000003:1500", "ddl": "add column", "schema": "shop",
     "tables": ["shop.orders"], "statement": "ALTER TABLE orders ADD note TEXT"}

Values: integers as JSON numbers, DECIMAL as strings (scale kept), bytes in
base64, dates, times and SETs in the text forms of
``proto/cdc/v1/subscription.proto``. A batch is acked only after it has been
printed, so stopping at any point (Ctrl-C, a crash) loses nothing: the next
run with the same client id prints the unacked changes again. When the
server goes away, the client waits and subscribes again: at the next address
given, which sends it to the capture serving the changefeed (docs/pull.md).

Exit codes: 0 done (``--limit`` reached or interrupted), 1 the server refused
(the message says why), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
import time
from collections.abc import Mapping
from typing import Any

import grpc

from cdc.model import DdlEvent, RowChange
from cdc.subscription import SubscriptionClient, SubscriptionRpcError
from cdc.subscription.codec import value_to_proto

#: Errors after which subscribing again may help: the server restarts or moves.
RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.NOT_FOUND,
}
_TEXT_KINDS = {"date", "datetime", "timestamp", "time", "raw_date", "raw_datetime"}


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    message = value_to_proto(value)
    kind = message.WhichOneof("kind")
    if kind == "set":
        return list(message.set.members)
    if kind in _TEXT_KINDS or kind == "decimal":
        return getattr(message, kind)
    return str(value)


def json_image(image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if image is None else {name: json_value(v) for name, v in image.items()}


def json_event(event: RowChange | DdlEvent) -> dict[str, Any]:
    if isinstance(event, DdlEvent):
        return {
            "position": str(event.position),
            "ddl": event.kind.value,
            "schema": event.schema,
            "tables": [str(t) for t in event.tables],
            "statement": event.statement,
        }
    return {
        "position": str(event.position),
        "table": str(event.table),
        "op": event.op.value,
        "key": [json_value(v) for v in event.key],
        "before": json_image(event.before),
        "after": json_image(event.after),
        "txn_id": event.txn_id,
    }


def run(client: SubscriptionClient, args: argparse.Namespace) -> int:
    printed = 0
    subscribed = False
    while args.limit is None or printed < args.limit:
        try:
            if not subscribed:
                acked = client.subscribe()
                subscribed = True
                print(
                    f"subscribed to {args.changefeed} as {args.client} with rules "
                    f"{list(client.rules)}; acked up to {acked or 'nothing yet'}",
                    file=sys.stderr,
                )
            batch = client.get(args.batch, args.wait)
            for event in batch.events:
                print(json.dumps(json_event(event), ensure_ascii=False), flush=True)
            if batch:
                client.ack(batch.batch_id)
                printed += len(batch)
        except SubscriptionRpcError as exc:
            if exc.code not in RETRYABLE or (exc.code is grpc.StatusCode.NOT_FOUND and args.once):
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"{exc}; subscribing again in {args.retry:g}s", file=sys.stderr)
            subscribed = False
            time.sleep(args.retry)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "server", help="a cdc-server's address, HOST:PORT, or several: HOST:PORT,HOST:PORT"
    )
    parser.add_argument("changefeed", help="the changefeed id")
    parser.add_argument("client", help="this consumer's client id (reuse it to resume)")
    parser.add_argument(
        "--rule",
        action="append",
        default=[],
        help="table filter rule, e.g. 'shop.*' (repeatable; required the first time)",
    )
    parser.add_argument("--batch", type=int, default=500, help="events per batch (default 500)")
    parser.add_argument(
        "--wait", type=float, default=1.0, help="seconds a get waits for changes (default 1)"
    )
    parser.add_argument("--limit", type=int, help="stop after about this many changes")
    parser.add_argument(
        "--retry", type=float, default=1.0, help="seconds between reconnect attempts"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="exit instead of waiting when the changefeed is not found",
    )
    args = parser.parse_args(argv)
    if args.batch < 1 or args.wait < 0 or (args.limit is not None and args.limit < 1):
        print("error: --batch and --limit must be >= 1, --wait >= 0", file=sys.stderr)
        return 2
    servers = [a.strip() for a in args.server.split(",") if a.strip()]
    if not servers:
        print("error: give at least one server address HOST:PORT", file=sys.stderr)
        return 2
    client = SubscriptionClient(servers, args.changefeed, args.client, args.rule)
    try:
        return run(client, args)
    except KeyboardInterrupt:
        return 0
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
