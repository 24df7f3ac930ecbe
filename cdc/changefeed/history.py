"""A changefeed's audit history: who did what to it, and when, newest last.

    admin API call succeeds ──► record(store, cf, op, who, detail)
                                   changefeed/history/<cf>: {"v": 1, "entries": [...]}
                                   (compare-and-swap, the newest HISTORY_KEPT kept)
    cdcctl changefeed query ──► history_of(store, cf)

Every operation a user makes on a changefeed (create, update, pause, resume,
remove, a DDL skipped or replaced, and whatever later operations record
themselves) appends one entry after it succeeded; a refused call records
nothing. ``who`` is what the admin API knows of the caller (``Actor``): the
role of its bearer token, the identity its client certificate proves, the
address it called from, and the OS user cdcctl says it runs as (claimed, not
proven). Never a token or a password: ``detail`` values are masked too.

The key is not part of ``KeySpace.changefeed_scope``: a remove leaves it, so
the remove itself and everything before it stay readable, and a changefeed
created again under the same id continues it. Value::

    {"v": 1, "entries": [{"op": "pause", "at": 1795305612.5,
                          "who": {"role": "admin", "user": "alice", "peer": "ipv4:10.0.0.9:51234",
                                  "cert": null},
                          "detail": {"state": "stopped"}}, ...]}
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc.logs import get_logger
from cdc.masking import mask_secret
from cdc.store import EtcdStore, Versioned
from cdc.store.keys import check_name

__all__ = [
    "HISTORY_KEPT",
    "Actor",
    "HistoryEntry",
    "appended",
    "history_of",
    "read_history",
    "record",
]

#: How many entries a changefeed's history keeps (the newest).
HISTORY_KEPT = 100

#: The longest text kept of one ``who`` field or ``detail`` value (longer ones are cut).
_TEXT_MAX = 300
_OP = re.compile(r"[a-z][a-z0-9 _-]{0,31}")


def _cut(text: str) -> str:
    text = mask_secret(text)
    return text if len(text) <= _TEXT_MAX else text[: _TEXT_MAX - 3] + "..."


def _optional(value: Any) -> str | None:
    return None if value is None else _cut(str(value))


@dataclass(frozen=True)
class Actor:
    """Who made an operation, as far as the server can tell.

    ``role``: ``admin`` or ``read`` (the bearer token's role), ``open`` when the
    server checks no tokens; ``cert``: the client certificate's subject under
    mutual TLS (proven); ``peer``: the caller's address as gRPC or HTTP saw it;
    ``user``: the OS user the client says it runs as (claimed).
    """

    role: str
    user: str | None = None
    peer: str | None = None
    cert: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", _cut(self.role) or "unknown")
        for name in ("user", "peer", "cert"):
            object.__setattr__(self, name, _optional(getattr(self, name)) or None)

    def __str__(self) -> str:
        name = self.cert or self.user or "anonymous"
        text = f"{name} ({self.role})"
        if self.cert and self.user and self.user != self.cert:
            text += f" as {self.user}"
        return f"{text} from {self.peer}" if self.peer else text

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "user": self.user, "peer": self.peer, "cert": self.cert}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Actor:
        return cls(
            str(data.get("role", "unknown")), data.get("user"), data.get("peer"), data.get("cert")
        )


@dataclass(frozen=True)
class HistoryEntry:
    """One operation: ``op`` (``create``, ``pause``, ``ddl skip``...), when, who, and what
    (``detail``: short text values, e.g. the DDL's position and statement)."""

    op: str
    who: Actor
    detail: Mapping[str, str] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if not isinstance(self.op, str) or not _OP.fullmatch(self.op):
            raise ValueError(
                f"history operation {self.op!r} must be a short lowercase name "
                "(letters, digits, blanks, '-' or '_'; at most 32 characters)"
            )
        object.__setattr__(
            self, "detail", {str(k)[:64]: _cut(str(v)) for k, v in self.detail.items()}
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "at": self.at,
            "who": self.who.to_dict(),
            "detail": dict(self.detail),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HistoryEntry:
        return cls(
            str(data["op"]),
            Actor.from_dict(data.get("who") or {}),
            {str(k): str(v) for k, v in (data.get("detail") or {}).items()},
            float(data["at"]),
        )


def read_history(value: Mapping[str, Any] | None) -> tuple[HistoryEntry, ...]:
    """The entries of a stored history value (None: no history yet), oldest first."""
    if value is None:
        return ()
    if value.get("v") != 1:
        raise ValueError(f"unsupported changefeed history format version {value.get('v')!r}")
    return tuple(HistoryEntry.from_dict(e) for e in value.get("entries", ()))


def appended(value: Mapping[str, Any] | None, entry: HistoryEntry) -> dict[str, Any]:
    """The history value ``value`` with ``entry`` added, the newest ``HISTORY_KEPT`` kept.

    Pure, for callers that write the history in a transaction of their own (an
    operation and its record at once)."""
    entries = (*read_history(value), entry)[-HISTORY_KEPT:]
    return {"v": 1, "entries": [e.to_dict() for e in entries]}


def history_of(store: EtcdStore, changefeed_id: str) -> tuple[HistoryEntry, ...]:
    """The changefeed's history, oldest first (empty when nothing was recorded)."""
    check_name("changefeed id", changefeed_id)
    item: Versioned | None = store.get(store.keys.changefeed_history(changefeed_id))
    return read_history(None if item is None else item.json())


def record(
    store: EtcdStore,
    changefeed_id: str,
    op: str,
    who: Actor,
    detail: Mapping[str, str] | None = None,
) -> HistoryEntry:
    """Appends one entry to the changefeed's history (compare-and-swap, retried); call it
    once the operation succeeded. Raises the store's errors: the operation is done, and
    the caller reports that its record is missing rather than hiding it."""
    check_name("changefeed id", changefeed_id)
    entry = HistoryEntry(op, who, detail or {})
    store.update(store.keys.changefeed_history(changefeed_id), lambda old: appended(old, entry))
    get_logger(__name__, changefeed=changefeed_id).info(
        "history: %s by %s%s",
        op,
        who,
        "".join(f" {k}={v}" for k, v in entry.detail.items()),
    )
    return entry
