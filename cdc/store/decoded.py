"""Stored values decoded once per change, for readers that read the same keys again and
again (the owner's cycle, the processor's pass): over a mirror, a read costs no request,
and decoding every value anew is then most of what reading 10,000 keys costs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from cdc.store.records import Versioned

__all__ = ["DecodedValues"]

T = TypeVar("T")


class DecodedValues(Generic[T]):
    """Per key, the value decoded at the key's last revision read.

    ``decode(item, previous)`` runs only for a key that is new or changed since the
    last ``read``; ``previous`` is what it gave for the key before (None for a new
    one), so a decoder can keep what did not change. Keys a read no longer meets are
    forgotten.
    """

    def __init__(self, decode: Callable[[Versioned, T | None], T]) -> None:
        self._decode = decode
        self._held: dict[str, tuple[int, T]] = {}

    def read(self, items: Iterable[Versioned]) -> list[T]:
        """The decoded values of ``items``, in their order."""
        held: dict[str, tuple[int, T]] = {}
        out = []
        for item in items:
            cached = self._held.get(item.key)
            if cached is None or cached[0] != item.mod_revision:
                previous = cached[1] if cached is not None else None
                cached = (item.mod_revision, self._decode(item, previous))
            held[item.key] = cached
            out.append(cached[1])
        self._held = held
        return out
