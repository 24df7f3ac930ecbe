"""The plain values of the store: what a read returns, what a transaction contains.

``Versioned`` is a value with the revisions it was read at; ``Fence`` is an
owner's proof of ownership; ``Absent`` / ``ModRevisionIs`` /
``CreateRevisionIs`` are transaction conditions and ``Put`` / ``Delete`` /
``DeletePrefix`` transaction operations (``EtcdStore.txn``); ``WatchEvent`` is
one change seen by a watch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from cdc.store.codec import decode
from cdc.store.keys import Key
from cdc.store.lease import Lease

__all__ = [
    "Absent",
    "Condition",
    "CreateRevisionIs",
    "Delete",
    "DeletePrefix",
    "EventKind",
    "Fence",
    "KeyLike",
    "ModRevisionIs",
    "Op",
    "Put",
    "Value",
    "Versioned",
    "WatchEvent",
]

#: A key given as text or as a typed key of ``cdc.store.keys``.
KeyLike = str | Key
#: A value to write: raw bytes, text (UTF-8) or a JSON object (``codec.encode``).
Value = bytes | str | dict[str, Any]


@dataclass(frozen=True)
class Versioned:
    """A key's value with the revisions it was read at.

    ``mod_revision`` is what a compare-and-swap compares; ``create_revision``
    identifies this incarnation of the key (it changes when the key is
    deleted and created again); ``lease`` is the lease id the key lives under.
    """

    key: str
    value: bytes
    mod_revision: int
    create_revision: int
    lease: int | None = None

    def json(self) -> dict[str, Any]:
        """The versioned JSON object stored here (see ``cdc.store.codec.decode``)."""
        return decode(self.value, self.key)


@dataclass(frozen=True)
class Fence:
    """Proof of ownership: the owner key and the ``create_revision`` it was won at."""

    key: str
    create_revision: int


@dataclass(frozen=True)
class Absent:
    """Transaction condition: ``key`` does not exist."""

    key: KeyLike


@dataclass(frozen=True)
class ModRevisionIs:
    """Transaction condition: ``key`` was last modified at ``revision`` (0: absent)."""

    key: KeyLike
    revision: int


@dataclass(frozen=True)
class CreateRevisionIs:
    """Transaction condition: ``key`` was created at ``revision`` (0: absent)."""

    key: KeyLike
    revision: int


@dataclass(frozen=True)
class Put:
    """Transaction operation: write ``value`` (bytes, text or a JSON object)."""

    key: KeyLike
    value: Value
    lease: Lease | int | None = None


@dataclass(frozen=True)
class Delete:
    """Transaction operation: delete ``key``."""

    key: KeyLike


@dataclass(frozen=True)
class DeletePrefix:
    """Transaction operation: delete every key under ``prefix`` (inside the cluster prefix)."""

    prefix: str


Condition = Absent | ModRevisionIs | CreateRevisionIs
Op = Put | Delete | DeletePrefix

#: Told every write a store applied: its operations (keys as text, values as bytes,
#: leases as ids) and the revision they were applied at.
WriteListener = Callable[[Sequence[Op], int], None]


class EventKind(Enum):
    PUT = "put"
    DELETE = "delete"


@dataclass(frozen=True)
class WatchEvent:
    """One change seen by a watch. For a delete, ``kv.value`` is empty and
    ``kv.mod_revision`` is the revision of the deletion."""

    kind: EventKind
    kv: Versioned
