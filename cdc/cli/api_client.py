"""cdcctl's side of the admin API: the channel to `--server` and gRPC codes to exit codes.

INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION, NOT_FOUND   2 bad input
UNAVAILABLE, DEADLINE_EXCEEDED                                    3 unreachable
anything else                                                     1 failed
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli import exitcodes
from cdc.config import ConfigError

__all__ = ["add_server_flag", "changefeed_dict", "exit_code", "open_api", "server_of"]

TIMEOUT = 30.0

_BAD_INPUT = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
}
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


def add_server_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        default=os.environ.get("CDC_SERVER"),
        help="admin address of any cdc-server, HOST:PORT (env CDC_SERVER)",
    )


def server_of(args: argparse.Namespace) -> str:
    if not args.server:
        raise ConfigError("--server", "no server given: pass --server HOST:PORT or set CDC_SERVER")
    return str(args.server)


def exit_code(error: grpc.RpcError) -> int:
    code = error.code()  # type: ignore[attr-defined]
    if code in _BAD_INPUT:
        return exitcodes.BAD_INPUT
    if code in _UNREACHABLE:
        return exitcodes.UNAVAILABLE
    return exitcodes.FAILED


def describe_error(error: grpc.RpcError, server: str) -> str:
    code = error.code()  # type: ignore[attr-defined]
    details = error.details() or ""  # type: ignore[attr-defined]
    if code in _UNREACHABLE and not details.startswith("etcd"):
        return f"cannot reach the cdc-server at {server} ({code.name}: {details})"
    return f"{code.name}: {details}"


@contextmanager
def open_api(server: str) -> Iterator[admin_pb2_grpc.ChangefeedServiceStub]:
    with grpc.insecure_channel(server) as channel:
        yield admin_pb2_grpc.ChangefeedServiceStub(channel)


def changefeed_dict(cf: admin_pb2.Changefeed, *, simple: bool = False) -> dict[str, Any]:
    """What `changefeed list/query` print (the config is masked by the server)."""
    status = cf.status
    data: dict[str, Any] = {
        "id": cf.changefeed_id,
        "state": status.state,
        "checkpoint": status.checkpoint or None,
        "resolved": status.resolved or None,
        "error": status.error or None,
    }
    if simple:
        return data
    data["updated_at"] = status.updated_at
    data["config"] = json.loads(cf.config.json) if cf.config.json else None
    data["tables"] = [
        {
            "table": t.table,
            "capture": t.capture_id or None,
            "state": t.state or None,
            "checkpoint": t.checkpoint or None,
            "error": t.error or None,
            "updated_at": t.updated_at or None,
            "snapshot": {
                "chunks_done": t.snapshot.chunks_done,
                "chunks_total": t.snapshot.chunks_total,
                "rows": t.snapshot.rows,
                "rows_per_second": round(t.snapshot.rows_per_second, 1),
            },
        }
        for t in cf.tables
    ]
    return data
