"""The persisted half of a subscription: its rules and acked position, one etcd key each.

    <prefix>/subscription/<changefeed-id>/<client-id>
        {"v": 1, "client": "c1", "rules": ["shop.*"],
         "acked": {Position.to_dict()} | null, "updated_at": 1718000000.5}

Written when a client subscribes, changes its rules or acks past the stored
position, deleted when it unsubscribes. A pull sink reads all of its
changefeed's records when it opens, so subscriptions outlive the server.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.model.position import Position
from cdc.store import EtcdStore, ValueFormatError
from cdc.store.keys import SubscriptionKey

__all__ = ["FORMAT_VERSION", "SubscriptionRecord", "SubscriptionRecords"]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class SubscriptionRecord:
    """A client's rules and the position every event at or before which it has acked."""

    client_id: str
    rules: tuple[str, ...]
    acked: Position | None
    updated_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "client": self.client_id,
            "rules": list(self.rules),
            "acked": None if self.acked is None else self.acked.to_dict(),
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], key: str = "") -> SubscriptionRecord:
        """Read what :meth:`to_dict` wrote, switching on ``"v"``."""
        where = f" at {key}" if key else ""
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ValueFormatError(
                f"subscription record{where} has format version {version!r}; "
                f"this build reads version {FORMAT_VERSION}"
            )
        client, rules, acked = data.get("client"), data.get("rules"), data.get("acked")
        if not isinstance(client, str) or not client:
            raise ValueFormatError(f"subscription record{where} has no client id: {dict(data)}")
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise ValueFormatError(
                f"subscription record{where}: rules must be a list of strings, not {rules!r}"
            )
        try:
            position = None if acked is None else Position.from_dict(acked)
        except ValueError as exc:
            raise ValueFormatError(f"subscription record{where}: acked: {exc}") from None
        updated = data.get("updated_at", 0.0)
        return cls(client, tuple(rules), position, float(updated or 0.0))


class SubscriptionRecords:
    """The records of one changefeed's subscriptions in etcd."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.changefeed_id = changefeed_id
        self._prefix = store.keys.prefix_of(SubscriptionKey, changefeed_id)

    def load(self) -> list[SubscriptionRecord]:
        """Every stored record, by client id."""
        return [
            SubscriptionRecord.from_dict(item.json(), item.key)
            for item in self.store.get_prefix(self._prefix)
        ]

    def save(self, client_id: str, rules: tuple[str, ...], acked: Position | None) -> None:
        record = SubscriptionRecord(client_id, rules, acked, time.time())
        key = self.store.keys.subscription(self.changefeed_id, client_id)
        self.store.put(key, record.to_dict())

    def delete(self, client_id: str) -> bool:
        return self.store.delete(self.store.keys.subscription(self.changefeed_id, client_id))
