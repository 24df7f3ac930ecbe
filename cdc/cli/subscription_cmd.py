"""`cdcctl subscription list|query|remove`: the pull clients of pull changefeeds.

    cdcctl subscription list [-c CF]               every client: rules, acked position, the
                                                   capture serving it, its ring (live)
    cdcctl subscription query -c CF --client ID    one client
    cdcctl subscription remove -c CF --client ID   end it for good: a client gone away holds
                                                   its changefeed back until removed

Through any capture (``--server``, ``CDC_SERVER``): it answers from etcd and
names the capture serving each changefeed, which cdcctl then asks for the
rings' state (events not acked, batches handed out); or from etcd directly
(``--etcd``), without the rings. ``remove`` goes to the serving capture
(Unsubscribe, redirects followed). Exit codes as everywhere: 2 for an unknown
changefeed or client, 3 when no server answers.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import grpc

from cdc.api.channel import open_channel
from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.cli import exitcodes
from cdc.cli.api_client import (
    TIMEOUT,
    ServerTarget,
    add_server_flag,
    describe_error,
    exit_code,
    exit_code_of,
    server_of,
)
from cdc.cli.etcd_flags import add_etcd_flags, etcd_config_of
from cdc.cli.output import emit, error
from cdc.store import StoreError

if TYPE_CHECKING:
    from cdc.subscription.sink import PullSink

# ``cdc.subscription`` (its client, routing, the changefeed store) and the etcd client are
# imported by the functions that use them: every other cdcctl command starts without them.

__all__ = ["register", "subscription_dict"]

_COLUMNS = ("changefeed", "client", "acked", "serving_capture", "unacked", "handed_out")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("subscription", help="pull clients of pull:// changefeeds")
    sub = parser.add_subparsers(dest="subscription_command", metavar="COMMAND", required=True)

    listing = sub.add_parser("list", help="every pull client, its acked position and ring")
    listing.add_argument("--changefeed-id", "-c", help="only this changefeed's clients")
    add_server_flag(listing)
    add_etcd_flags(listing)
    listing.set_defaults(run=_list)

    query = sub.add_parser("query", help="one pull client")
    _add_ids(query)
    add_server_flag(query)
    add_etcd_flags(query)
    query.set_defaults(run=_query)

    remove = sub.add_parser(
        "remove", help="end a pull client's subscription (it no longer holds the changefeed)"
    )
    _add_ids(remove)
    add_server_flag(remove)
    remove.set_defaults(run=_remove)


def _add_ids(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--changefeed-id", "-c", required=True, help="the changefeed id")
    parser.add_argument("--client", required=True, help="the client id")


def subscription_dict(info: pb.SubscriptionInfo) -> dict[str, Any]:
    """What `subscription list/query` print for one client."""
    from cdc.subscription.codec import position_from_proto

    acked = position_from_proto(info.acked_position) if info.HasField("acked_position") else None
    data: dict[str, Any] = {
        "changefeed": info.changefeed_id,
        "client": info.client_id,
        "rules": list(info.filter_rules),
        "acked": str(acked) if acked is not None else None,
        "updated_at": _iso(info.updated_at),
        "serving_capture": info.serving_capture or None,
        "serving_address": info.serving_address or None,
        "live": info.live,
    }
    if info.live:
        data.update(
            unacked=info.unacked,
            handed_out=info.handed_out,
            outstanding_batches=list(info.outstanding_batches),
            capacity=info.capacity,
        )
    else:
        data.update(unacked=None, handed_out=None, outstanding_batches=None, capacity=None)
    return data


def _iso(epoch: float) -> str | None:
    if not epoch:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds")


# --- reading -------------------------------------------------------------------------------------


class _NoSinks:
    def find(self, changefeed_id: str) -> PullSink | None:
        return None


def _ask(target: ServerTarget, changefeed_id: str | None) -> list[pb.SubscriptionInfo]:
    with open_channel(target.address, target.security) as channel:
        stub = pb_grpc.SubscriptionServiceStub(channel)
        request = pb.ListSubscriptionsRequest(changefeed_id=changefeed_id or "")
        return list(stub.ListSubscriptions(request, timeout=TIMEOUT).subscriptions)


def _live(target: ServerTarget, infos: list[pb.SubscriptionInfo]) -> list[pb.SubscriptionInfo]:
    """Each changefeed's entries as its serving capture tells them (with the rings), where
    the first answer was not that capture's; the first answer where it cannot be asked."""
    done: dict[str, list[pb.SubscriptionInfo]] = {}
    for info in infos:
        cf = info.changefeed_id
        if cf in done or info.live or not info.serving_address:
            continue
        serving = ServerTarget(info.serving_address, target.security)
        try:
            done[cf] = _ask(serving, cf)
        except grpc.RpcError:
            done[cf] = []
    out: list[pb.SubscriptionInfo] = []
    seen: set[str] = set()
    for info in infos:
        cf = info.changefeed_id
        if done.get(cf):
            if cf not in seen:
                out.extend(done[cf])
                seen.add(cf)
            continue
        out.append(info)
    return out


def _read(args: argparse.Namespace) -> tuple[list[dict[str, Any]] | None, int]:
    """The rows to print, or None and the exit code after printing the error."""
    cf = args.changefeed_id or None
    if args.server:
        target = server_of(args)
        try:
            infos = _live(target, _ask(target, cf))
        except grpc.RpcError as exc:
            error(describe_error(exc, target))
            return None, exit_code(exc)
        return [subscription_dict(i) for i in infos], exitcodes.OK
    if not args.etcd:
        error(
            "no server: pass --server HOST:PORT (or set CDC_SERVER), "
            "or read etcd with --etcd host:2379 (or CDC_ETCD)"
        )
        return None, exitcodes.BAD_INPUT
    from cdc.store import EtcdStore
    from cdc.subscription.errors import NotPullableError
    from cdc.subscription.listing import list_subscriptions
    from cdc.subscription.routing import Router

    try:
        with EtcdStore(etcd_config_of(args)) as store:
            infos = list_subscriptions(Router(store, ""), _NoSinks(), cf)
    except NotPullableError as exc:
        error(str(exc))
        return None, exitcodes.BAD_INPUT
    except StoreError as exc:
        error(str(exc))
        return None, exitcodes.UNAVAILABLE
    return [subscription_dict(i) for i in infos], exitcodes.OK


def _list(args: argparse.Namespace) -> int:
    rows, code = _read(args)
    if rows is None:
        return code
    emit(rows, args.output, columns=_COLUMNS)
    return exitcodes.OK


def _query(args: argparse.Namespace) -> int:
    rows, code = _read(args)
    if rows is None:
        return code
    found = [r for r in rows if r["client"] == args.client]
    if not found:
        error(
            f"client {args.client!r} has no subscription to changefeed {args.changefeed_id!r}; "
            "`cdcctl subscription list -c` shows the clients it has"
        )
        return exitcodes.BAD_INPUT
    emit(found[0], args.output)
    return exitcodes.OK


# --- removing ------------------------------------------------------------------------------------


def _remove(args: argparse.Namespace) -> int:
    from cdc.subscription import SubscriptionClient, SubscriptionRpcError

    target = server_of(args)
    client = SubscriptionClient(
        target.address, args.changefeed_id, args.client, security=target.security
    )
    try:
        removed = client.unsubscribe()
    except SubscriptionRpcError as exc:
        error(f"{exc.code.name}: {exc.details}")
        return exit_code_of(exc.code)
    finally:
        client.close()
    if not removed:
        error(f"client {args.client!r} has no subscription to changefeed {args.changefeed_id!r}")
        return exitcodes.BAD_INPUT
    emit({"changefeed": args.changefeed_id, "client": args.client, "removed": True}, args.output)
    return exitcodes.OK
