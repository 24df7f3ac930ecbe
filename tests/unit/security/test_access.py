"""Who may call what (capture.access): the table every front of the server checks with."""

from __future__ import annotations

import pytest

from capture.access import (
    METRICS,
    NO_TOKEN,
    REQUIRED,
    TOKEN_REJECTED,
    AccessTokens,
    Role,
    authorize,
    required_role,
)
from cdc.api.gen.cdc.v1 import admin_pb2, capture_pb2, subscription_pb2
from cdc.errors import ConfigError

ADMIN, READ = "admin-token-0123", "read-token-4567"
TOKENS = AccessTokens(ADMIN, READ)
CF = "/cdc.v1.ChangefeedService/"


def _methods() -> list[str]:
    out = []
    services = (
        (admin_pb2, "ChangefeedService"),
        (capture_pb2, "CaptureService"),
        (subscription_pb2, "SubscriptionService"),
    )
    for module, service in services:
        descriptor = module.DESCRIPTOR.services_by_name[service]
        out += [f"/{descriptor.full_name}/{m.name}" for m in descriptor.methods]
    return out


def test_every_rpc_of_the_api_is_in_the_table() -> None:
    """A new RPC must be placed: reading it would otherwise need the admin token."""
    assert set(_methods()) <= set(REQUIRED)


@pytest.mark.parametrize(
    ("operation", "role"),
    [
        (f"{CF}CreateChangefeed", Role.ADMIN),
        (f"{CF}UpdateChangefeed", Role.ADMIN),
        (f"{CF}PauseChangefeed", Role.ADMIN),
        (f"{CF}ResumeChangefeed", Role.ADMIN),
        (f"{CF}RemoveChangefeed", Role.ADMIN),
        (f"{CF}GetChangefeed", Role.READ),
        (f"{CF}ListChangefeeds", Role.READ),
        (f"{CF}ListCaptures", Role.READ),
        ("/cdc.v1.CaptureService/GetCapture", Role.READ),
        ("/cdc.v1.SubscriptionService/ListSubscriptions", Role.READ),
        ("/cdc.v1.SubscriptionService/Ack", Role.ADMIN),
        (METRICS, Role.READ),
        ("/grpc.health.v1.Health/Check", None),
        (f"{CF}SomethingNew", Role.ADMIN),
    ],
)
def test_required_roles(operation: str, role: Role | None) -> None:
    assert required_role(operation) is role


@pytest.mark.parametrize(
    ("header", "operation", "refusal"),
    [
        (None, f"{CF}ListChangefeeds", (NO_TOKEN, False)),
        (ADMIN, f"{CF}ListChangefeeds", (NO_TOKEN, False)),  # no "Bearer "
        ("Basic abc", f"{CF}ListChangefeeds", (NO_TOKEN, False)),
        ("Bearer wrong", f"{CF}ListChangefeeds", (TOKEN_REJECTED, False)),
        (f"Bearer {READ}x", METRICS, (TOKEN_REJECTED, False)),
        ("Bearer ", f"{CF}GetChangefeed", (TOKEN_REJECTED, False)),
        (f"Bearer {READ}", f"{CF}PauseChangefeed", ("may not call PauseChangefeed", True)),
        (f"bearer {READ}", f"{CF}CreateChangefeed", ("may not call CreateChangefeed", True)),
        (f"Bearer {READ}", f"{CF}SomethingNew", ("may not call SomethingNew", True)),
        (f"Bearer {READ}", f"{CF}ListChangefeeds", None),
        (f"Bearer {READ}", METRICS, None),
        (f"Bearer  {ADMIN} ", f"{CF}PauseChangefeed", None),
        (f"Bearer {ADMIN}", METRICS, None),
        (None, "/grpc.health.v1.Health/Check", None),
    ],
)
def test_authorize(header: str | None, operation: str, refusal: tuple[str, bool] | None) -> None:
    got = authorize(TOKENS, operation, header)
    if refusal is None:
        assert got is None
        return
    assert got is not None
    message, permission = refusal
    assert message in got.message and got.permission is permission
    assert ADMIN not in got.message and READ not in got.message


def test_no_tokens_no_checks_and_admin_alone_is_todays_token() -> None:
    assert authorize(AccessTokens(), f"{CF}RemoveChangefeed", None) is None
    admin_only = AccessTokens(ADMIN)
    assert authorize(admin_only, f"{CF}ListChangefeeds", f"Bearer {READ}") is not None
    assert authorize(admin_only, f"{CF}ListChangefeeds", "Bearer None") is not None
    assert authorize(admin_only, f"{CF}ListChangefeeds", f"Bearer {ADMIN}") is None


def test_tokens_that_do_not_go_together() -> None:
    with pytest.raises(ConfigError, match="--read-token-file: a read-only token needs an admin"):
        AccessTokens(None, READ)
    with pytest.raises(ConfigError, match="--read-token-file: holds the same token"):
        AccessTokens(ADMIN, ADMIN)
    assert READ not in repr(TOKENS) and ADMIN not in repr(TOKENS)
