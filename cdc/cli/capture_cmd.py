"""`cdcctl capture list`: the live captures and which one is owner, read from etcd."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from typing import Any

from cdc.cli import exitcodes
from cdc.cli.output import emit, error
from cdc.store import EtcdConfig, EtcdStore, StoreError
from cdc.store.keys import CaptureKey, cluster_prefix


def register(commands: argparse._SubParsersAction) -> None:
    capture = commands.add_parser("capture", help="cdc-server processes of a cluster")
    sub = capture.add_subparsers(dest="capture_command", metavar="COMMAND", required=True)
    listing = sub.add_parser("list", help="live captures, with the owner marked")
    listing.add_argument(
        "--etcd", default=os.environ.get("CDC_ETCD"), help="etcd endpoints (env CDC_ETCD)"
    )
    listing.add_argument("--cluster-id", default="default")
    listing.set_defaults(run=_list)


def list_captures(store: EtcdStore) -> list[dict[str, Any]]:
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


def _list(args: argparse.Namespace) -> int:
    if not args.etcd:
        error("no etcd endpoint: pass --etcd host:2379 or set CDC_ETCD")
        return exitcodes.BAD_INPUT
    config = EtcdConfig(
        EtcdConfig.parse_endpoints(args.etcd), prefix=cluster_prefix(args.cluster_id)
    )
    try:
        with EtcdStore(config) as store:
            rows = list_captures(store)
    except StoreError as exc:
        error(str(exc))
        return exitcodes.UNAVAILABLE
    emit(rows, args.output, columns=("id", "address", "is_owner", "version", "started_at"))
    return exitcodes.OK
