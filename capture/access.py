"""Who may do what: the two bearer tokens, the role each operation needs, and the one check.

    token                          role   may
    --auth-token-file (admin)      ADMIN  everything: create, update, pause, resume, remove
                                          (and any later DDL operation), and all a reader may
    --read-token-file (read-only)  READ   query, list changefeeds, captures and pull
                                          subscriptions, this capture's info,
                                          reflection, /metrics
    (none)                         -      the gRPC health service (probes) and the
                                          console's page and files (no data in them)

Without an admin token nothing is checked (a trusted network, as before);
with one, every operation needs a token, and the read-only token may
only read. ``REQUIRED`` maps each operation to the role it needs, by its gRPC
method name (``/package.Service/Method``); an operation it does not name needs
ADMIN (fail closed: a new RPC is not readable by accident). An HTTP front
(``/metrics``, the HTTP API of ``capture.http``) names the gRPC method each route
does, or an entry of its own, and calls :func:`authorize` with its
``Authorization`` header: the same table, the same answers.

A refusal is ``UNAUTHENTICATED`` (no token, or not one of ours: HTTP 401) or
``PERMISSION_DENIED`` (the read-only token asking to change something: 403).
Tokens are compared in constant time with each configured one and never
appear in a message.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cdc.errors import ConfigError

__all__ = [
    "CONSOLE",
    "METRICS",
    "NO_TOKEN",
    "REQUIRED",
    "TOKEN_REJECTED",
    "AccessTokens",
    "Refusal",
    "Role",
    "authorize",
    "required_role",
]

NO_TOKEN = "no bearer token: pass --token-file or set CDC_TOKEN_FILE"
TOKEN_REJECTED = "bearer token rejected"
_SCHEME = "bearer "


class Role(enum.IntEnum):
    """What a token may do; a higher role may do all a lower one may."""

    READ = 1
    ADMIN = 2


#: The entry of the Prometheus endpoint (not a gRPC method: a name of its own).
METRICS = "/metrics"

#: The console's page and files (capture.http.assets): open, as they hold no data;
#: what the console shows comes from the HTTP API, whose routes name gRPC methods.
CONSOLE = "/console"

_CHANGEFEEDS = "/cdc.v1.ChangefeedService/"
_SUBSCRIPTIONS = "/cdc.v1.SubscriptionService/"

#: The role each operation needs, by gRPC method name; None: open to anyone.
REQUIRED: Mapping[str, Role | None] = MappingProxyType(
    {
        f"{_CHANGEFEEDS}CreateChangefeed": Role.ADMIN,
        f"{_CHANGEFEEDS}UpdateChangefeed": Role.ADMIN,
        f"{_CHANGEFEEDS}PauseChangefeed": Role.ADMIN,
        f"{_CHANGEFEEDS}ResumeChangefeed": Role.ADMIN,
        f"{_CHANGEFEEDS}RemoveChangefeed": Role.ADMIN,
        f"{_CHANGEFEEDS}SkipDdl": Role.ADMIN,
        f"{_CHANGEFEEDS}ReplaceDdl": Role.ADMIN,
        f"{_CHANGEFEEDS}SnapshotTable": Role.ADMIN,
        f"{_CHANGEFEEDS}GetChangefeed": Role.READ,
        f"{_CHANGEFEEDS}ListChangefeeds": Role.READ,
        f"{_CHANGEFEEDS}ListCaptures": Role.READ,
        "/cdc.v1.CaptureService/GetCapture": Role.READ,
        # A pull client moves acked positions and holds the changefeed back: the admin token.
        f"{_SUBSCRIPTIONS}Subscribe": Role.ADMIN,
        f"{_SUBSCRIPTIONS}Get": Role.ADMIN,
        f"{_SUBSCRIPTIONS}Ack": Role.ADMIN,
        f"{_SUBSCRIPTIONS}Rollback": Role.ADMIN,
        f"{_SUBSCRIPTIONS}Unsubscribe": Role.ADMIN,
        f"{_SUBSCRIPTIONS}ListSubscriptions": Role.READ,
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": Role.READ,
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": Role.READ,
        "/grpc.health.v1.Health/Check": None,
        "/grpc.health.v1.Health/Watch": None,
        METRICS: Role.READ,
        CONSOLE: None,
    }
)


def required_role(operation: str) -> Role | None:
    """The role ``operation`` needs (None: open); ADMIN for one the table does not name."""
    return REQUIRED.get(operation, Role.ADMIN)


@dataclass(frozen=True)
class AccessTokens:
    """The tokens a server accepts; without ``admin`` every call is allowed."""

    admin: str | None = field(default=None, repr=False)
    read: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.read is not None and self.admin is None:
            raise ConfigError(
                "--read-token-file",
                "a read-only token needs an admin token too: give --auth-token-file, or "
                "nothing could ever change the cluster",
            )
        if self.read is not None and hmac.compare_digest(
            self.read.encode(), str(self.admin).encode()
        ):
            raise ConfigError(
                "--read-token-file",
                "holds the same token as --auth-token-file; give readers a token of their own",
            )

    @property
    def enabled(self) -> bool:
        return self.admin is not None

    def role_of(self, token: str) -> Role | None:
        """The role ``token`` carries, None when it is not one of ours (constant time)."""
        if self.admin is None:
            return None
        given = token.encode()
        admin = hmac.compare_digest(given, self.admin.encode())
        read = self.read is not None and hmac.compare_digest(given, self.read.encode())
        if admin:
            return Role.ADMIN
        return Role.READ if read else None


@dataclass(frozen=True)
class Refusal:
    """Why a call was refused: ``permission`` False is UNAUTHENTICATED/401, True is
    PERMISSION_DENIED/403. ``message`` never holds a token."""

    message: str
    permission: bool = False


def authorize(tokens: AccessTokens, operation: str, authorization: str | None) -> Refusal | None:
    """None when ``authorization`` (the header's value, ``Bearer <token>``) may do
    ``operation``; else why not."""
    needed = required_role(operation)
    if needed is None or not tokens.enabled:
        return None
    if authorization is None or not authorization.lower().startswith(_SCHEME):
        return Refusal(NO_TOKEN)
    role = tokens.role_of(authorization[len(_SCHEME) :].strip())
    if role is None:
        return Refusal(TOKEN_REJECTED)
    if role < needed:
        name = operation.rsplit("/", 1)[-1]
        return Refusal(
            f"the read-only token may not call {name}: it changes the cluster; "
            "use the admin token (cdc-server --auth-token-file)",
            permission=True,
        )
    return None
