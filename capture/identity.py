"""Who calls the admin API, for the changefeed's audit history (``cdc.changefeed.history``).

    role  the bearer token's role (admin, read), "open" when the server checks no tokens
    cert  the client certificate's common name, under mutual TLS (proven by the handshake)
    peer  the caller's address as gRPC saw it ("http" for the HTTP API's in-process calls)
    user  the ``cdc-user`` metadata: the OS user cdcctl runs as (claimed, not proven)

Only the role is derived from the token (compared in constant time, like the
access check); neither the token nor anything else secret is kept. The HTTP
API calls the servicers in-process with a context that carries no metadata:
it has authorized the call with the same table first (``capture.access``), so
its caller holds the role the method needs.
"""

from __future__ import annotations

from typing import Any

from capture.access import AccessTokens, Role, required_role
from cdc.changefeed.history import Actor

__all__ = ["USER_METADATA", "actor_of"]

#: The metadata key cdcctl sends its OS user under (``cdc.api.channel``).
USER_METADATA = "cdc-user"

_SCHEME = "bearer "


def _role_name(role: Role | None) -> str:
    return "unknown" if role is None else role.name.lower()


def _metadata(context: Any) -> dict[str, str] | None:
    reader = getattr(context, "invocation_metadata", None)
    if reader is None:
        return None
    out: dict[str, str] = {}
    for key, value in reader() or ():
        if isinstance(value, str):
            out.setdefault(key, value)
    return out


def _cert(context: Any) -> str | None:
    reader = getattr(context, "auth_context", None)
    if reader is None:
        return None
    names = (reader() or {}).get("x509_common_name") or []
    return b",".join(names).decode("utf-8", "replace") if names else None


def actor_of(context: Any, tokens: AccessTokens, method: str) -> Actor:
    """The caller of ``method`` (``/cdc.v1.ChangefeedService/PauseChangefeed``) as the
    server knows it; ``context`` is the gRPC servicer context (or the HTTP bridge's)."""
    peer_reader = getattr(context, "peer", None)
    peer = peer_reader() if peer_reader is not None else None
    metadata = _metadata(context)
    if not tokens.enabled:
        role = "open"
    elif metadata is None:
        role = _role_name(required_role(method))
    else:
        header = metadata.get("authorization", "")
        token = header[len(_SCHEME) :].strip() if header.lower().startswith(_SCHEME) else ""
        role = _role_name(tokens.role_of(token) if token else None)
    user = None if metadata is None else metadata.get(USER_METADATA)
    return Actor(role, user or None, peer, _cert(context))
