"""Who called, for the audit history: the token's role, never the token."""

from __future__ import annotations

from typing import Any

from capture.access import AccessTokens
from capture.identity import USER_METADATA, actor_of

PAUSE = "/cdc.v1.ChangefeedService/PauseChangefeed"
TOKENS = AccessTokens(admin="admin-secret", read="read-secret")


class Context:
    """The parts of a gRPC servicer context identity reads."""

    def __init__(self, metadata: list[tuple[str, Any]], cert: list[bytes] | None = None) -> None:
        self._metadata = metadata
        self._cert = cert

    def invocation_metadata(self) -> list[tuple[str, Any]]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:10.0.0.9:5123"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_common_name": self._cert} if self._cert else {}


def test_the_role_of_the_token_and_the_user_it_claims() -> None:
    context = Context([("authorization", "Bearer admin-secret"), (USER_METADATA, "alice")])
    actor = actor_of(context, TOKENS, PAUSE)
    assert (actor.role, actor.user, actor.peer, actor.cert) == (
        "admin",
        "alice",
        "ipv4:10.0.0.9:5123",
        None,
    )
    assert "secret" not in str(actor.to_dict())


def test_a_certificate_names_the_caller() -> None:
    context = Context([("authorization", "Bearer read-secret")], cert=[b"ops-team"])
    actor = actor_of(context, TOKENS, PAUSE)
    assert (actor.role, actor.cert, actor.user) == ("read", "ops-team", None)


def test_without_tokens_the_server_is_open_and_a_wrong_token_is_unknown() -> None:
    assert actor_of(Context([]), AccessTokens(), PAUSE).role == "open"
    assert actor_of(Context([("authorization", "Bearer nope")]), TOKENS, PAUSE).role == "unknown"


class HttpContext:
    """The HTTP API's in-process context: no metadata, it authorized the call itself."""

    def peer(self) -> str:
        return "http"


def test_the_http_api_holds_the_role_the_method_needs() -> None:
    actor = actor_of(HttpContext(), TOKENS, PAUSE)
    assert (actor.role, actor.peer, actor.user) == ("admin", "http", None)
