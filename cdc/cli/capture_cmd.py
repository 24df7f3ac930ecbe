"""`cdcctl capture list`: the live captures and which one is owner.

Through the admin API of any capture (``--server`` / ``CDC_SERVER``), or read
from etcd directly (``--etcd`` / ``CDC_ETCD``, with the TLS and user flags of
``cdc.cli.etcd_flags``) when no server answers.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import grpc

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.cli import exitcodes
from cdc.cli.api_client import add_server_flag, describe_error, exit_code, open_api, server_of
from cdc.cli.etcd_flags import add_etcd_flags, etcd_config_of
from cdc.cli.output import emit, error
from cdc.store import StoreError

if TYPE_CHECKING:
    from cdc.store import EtcdStore


def register(commands: argparse._SubParsersAction) -> None:
    capture = commands.add_parser("capture", help="cdc-server processes of a cluster")
    sub = capture.add_subparsers(dest="capture_command", metavar="COMMAND", required=True)
    listing = sub.add_parser("list", help="live captures, with the owner marked")
    add_etcd_flags(listing)
    add_server_flag(listing)
    listing.set_defaults(run=_list)


def list_captures(store: EtcdStore) -> list[dict[str, Any]]:
    from cdc.store.keys import CaptureKey

    owner = store.get(store.keys.owner())
    owner_id = owner.json().get("capture_id") if owner else None
    rows = []
    for item in store.get_prefix(store.keys.prefix_of(CaptureKey)):
        info = item.json()
        rows.append(
            {
                "id": info.get("id"),
                "address": info.get("address"),
                "is_owner": info.get("id") == owner_id,
                "version": info.get("version"),
                "started_at": _iso(info.get("started_at")),
            }
        )
    return sorted(rows, key=lambda r: (not r["is_owner"], str(r["id"])))


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds")


_COLUMNS = ("id", "address", "is_owner", "version", "started_at")


def _list_from_server(args: argparse.Namespace) -> int:
    server = server_of(args)
    with open_api(server) as api:
        try:
            reply = api.ListCaptures(admin_pb2.ListCapturesRequest(), timeout=30)
        except grpc.RpcError as exc:
            error(describe_error(exc, server))
            return exit_code(exc)
    rows = [
        {
            "id": c.id,
            "address": c.address,
            "is_owner": c.is_owner,
            "version": c.version,
            "started_at": _iso(c.started_at or None),
        }
        for c in reply.captures
    ]
    emit(rows, args.output, columns=_COLUMNS)
    return exitcodes.OK


def _list(args: argparse.Namespace) -> int:
    if args.server:
        return _list_from_server(args)
    if not args.etcd:
        error(
            "no server: pass --server HOST:PORT (or set CDC_SERVER), "
            "or read etcd with --etcd host:2379 (or CDC_ETCD)"
        )
        return exitcodes.BAD_INPUT
    from cdc.store import EtcdStore  # the etcd client, for this path alone

    config = etcd_config_of(args)
    try:
        with EtcdStore(config) as store:
            rows = list_captures(store)
    except StoreError as exc:
        error(str(exc))
        return exitcodes.UNAVAILABLE
    emit(rows, args.output, columns=_COLUMNS)
    return exitcodes.OK
