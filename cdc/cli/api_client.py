"""cdcctl's side of the admin API: the channel to `--server` and gRPC codes to exit codes.

Every command that talks to a server takes the flags of ``add_server_flag``:
``--server`` (CDC_SERVER), ``--tls-ca`` (CDC_TLS_CA: TLS, the server verified
against it), ``--tls-cert``/``--tls-key`` (CDC_TLS_CERT/CDC_TLS_KEY: a client
certificate for mutual TLS), ``--tls-server-name`` (CDC_TLS_SERVER_NAME: the
name the certificate carries, when not the host dialled), ``--token-file``
(CDC_TOKEN_FILE: the bearer token).

INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION, NOT_FOUND   2 bad input
UNAVAILABLE, DEADLINE_EXCEEDED                                    3 unreachable
UNAUTHENTICATED, PERMISSION_DENIED                                4 not authorized
anything else                                                     1 failed
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc

from cdc.api.channel import ClientSecurity, open_channel, read_token_file
from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli import exitcodes
from cdc.errors import ConfigError

__all__ = [
    "ServerTarget",
    "add_server_flag",
    "changefeed_dict",
    "describe_error",
    "history_dict",
    "exit_code",
    "exit_code_of",
    "open_api",
    "server_of",
]

TIMEOUT = 30.0

_BAD_INPUT = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
}
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
_UNAUTHORIZED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}

_SERVER_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--server", "CDC_SERVER", "admin address of any cdc-server, HOST:PORT"),
    ("--tls-ca", "CDC_TLS_CA", "CA file: talk TLS, verifying the server's certificate"),
    ("--tls-cert", "CDC_TLS_CERT", "client certificate file, for servers that require one"),
    ("--tls-key", "CDC_TLS_KEY", "key file of --tls-cert"),
    (
        "--tls-server-name",
        "CDC_TLS_SERVER_NAME",
        "name in the server's certificate, if not the host",
    ),
    ("--token-file", "CDC_TOKEN_FILE", "file whose first line is the server's bearer token"),
)


@dataclass(frozen=True)
class ServerTarget:
    """A server address and how to reach it; ``str()`` is the address."""

    address: str
    security: ClientSecurity = field(default_factory=ClientSecurity)

    def __str__(self) -> str:
        return self.address


def add_server_flag(parser: argparse.ArgumentParser) -> None:
    """The flags of every command that talks to a cdc-server (each with its env variable)."""
    for flag, env, help_text in _SERVER_FLAGS:
        parser.add_argument(flag, default=os.environ.get(env), help=f"{help_text} (env {env})")


def server_of(args: argparse.Namespace) -> ServerTarget:
    """The target of the server flags; ConfigError (exit 2) names a missing or bad one."""
    if not args.server:
        raise ConfigError("--server", "no server given: pass --server HOST:PORT or set CDC_SERVER")
    token = read_token_file(args.token_file, "--token-file") if args.token_file else None
    security = ClientSecurity(
        args.tls_ca,
        args.tls_cert,
        args.tls_key,
        token,
        server_name=args.tls_server_name,
        user=_os_user(),
    )
    return ServerTarget(str(args.server), security)


def _os_user() -> str | None:
    """Who runs cdcctl, sent for the changefeeds' audit history (None when unknown)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def exit_code(error: grpc.RpcError) -> int:
    return exit_code_of(error.code())


def exit_code_of(code: grpc.StatusCode) -> int:
    """The exit code of a call that ended with status ``code`` (module docstring)."""
    if code in _BAD_INPUT:
        return exitcodes.BAD_INPUT
    if code in _UNREACHABLE:
        return exitcodes.UNAVAILABLE
    if code in _UNAUTHORIZED:
        return exitcodes.UNAUTHORIZED
    return exitcodes.FAILED


def describe_error(error: grpc.RpcError, server: ServerTarget | str) -> str:
    code = error.code()
    details = error.details() or ""
    if code in _UNREACHABLE and not details.startswith("etcd"):
        return f"cannot reach the cdc-server at {server} ({code.name}: {details}){_hint(server)}"
    if code in _UNAUTHORIZED:
        return f"the cdc-server at {server} refused the request ({code.name}: {details})"
    return f"{code.name}: {details}"


def _hint(server: ServerTarget | str) -> str:
    if isinstance(server, ServerTarget) and server.security.tls:
        return (
            "; if it answers but the TLS handshake fails, check --tls-ca (the CA that signed "
            "the server's certificate) and, for mutual TLS, --tls-cert and --tls-key"
        )
    return "; if the server uses TLS, pass --tls-ca FILE (or set CDC_TLS_CA)"


@contextmanager
def open_api(server: ServerTarget | str) -> Iterator[admin_pb2_grpc.ChangefeedServiceStub]:
    """The admin API stub over a channel to ``server``, closed when the block ends."""
    target = server if isinstance(server, ServerTarget) else ServerTarget(server)
    with open_channel(target.address, target.security) as channel:
        yield admin_pb2_grpc.ChangefeedServiceStub(channel)


def history_dict(entry: admin_pb2.HistoryEntry) -> dict[str, Any]:
    """One audit history entry as `changefeed query` prints it."""
    return {
        "at": datetime.fromtimestamp(entry.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "op": entry.op,
        "role": entry.role,
        "user": entry.user or None,
        "cert": entry.cert or None,
        "peer": entry.peer or None,
        "detail": dict(sorted(entry.detail.items())),
    }


def _resnapshot(r: admin_pb2.Resnapshot) -> dict[str, Any]:
    """A table's last re-snapshot (`cdcctl changefeed snapshot`) as `query` prints it."""
    return {
        "id": r.id,
        "state": r.state,
        "where": r.where or None,
        "chunks": r.chunks,
        "rows": r.rows,
        "by": r.by or None,
        "error": r.error or None,
    }


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
    data["skipped_ddl"] = [
        {"position": s.position, "kind": s.kind, "statement": s.statement, "reason": s.reason}
        for s in status.skipped_ddl
    ]
    failed = status.failed_ddl if status.HasField("failed_ddl") else None
    data["failed_ddl"] = (
        None
        if failed is None
        else {"position": failed.position, "kind": failed.kind, "statement": failed.statement}
    )
    decision = status.ddl_decision if status.HasField("ddl_decision") else None
    data["ddl_decision"] = (
        None
        if decision is None
        else {"position": decision.position, "action": decision.action, "sql": decision.sql or None}
    )
    data["history"] = [history_dict(h) for h in cf.history]
    # which server the changefeed reads (failover guard): server_id, uuid / domain, GTIDs
    data["source"] = json.loads(status.source_json) if status.source_json else None
    # the last update of the table rules (position, tables added and removed), and one
    # the owner has yet to apply
    data["tables_update"] = (
        json.loads(status.last_tables_update_json) if status.last_tables_update_json else None
    )
    data["pending_tables_update"] = (
        json.loads(status.pending_tables_update_json) if status.pending_tables_update_json else None
    )
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
            "resnapshot": _resnapshot(t.resnapshot) if t.HasField("resnapshot") else None,
        }
        for t in cf.tables
    ]
    return data
