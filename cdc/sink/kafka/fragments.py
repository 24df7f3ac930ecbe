"""Messages larger than ``max-message-bytes``: split into fragments, never dropped.

Two ways exist (TiCDC's large-message handling): keep the value aside (in
object storage) and send a pointer, or split it. The sink has no storage of
its own to point into, and a consumer that must fetch elsewhere gains a
second system to fail, so a large value is split: fragment ``i`` of ``n``
carries the header ``cdc-fragment: <id>:<i>:<n>`` and the ``i``-th slice of
the value; every fragment has the message's key, topic and partition, and the
same producer sends them in order (an idempotent producer keeps them in
order), so they are consecutive among that producer's messages in the
partition. Another producer's messages may come between them (the owner's
watermarks, another capture's rows): a reader joins fragments by id, and the
whole message takes the place of its last fragment.

A message whose value fits is sent as it is, without the header.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "FRAGMENT_HEADER",
    "KIND_HEADER",
    "FragmentError",
    "Joiner",
    "fragment_budget",
    "split",
]

#: The header naming a message's kind: ``row``, ``ddl`` or ``watermark``.
KIND_HEADER = "cdc-kind"
FRAGMENT_HEADER = "cdc-fragment"
#: Room left in a message for the record's framing and headers.
_OVERHEAD = 512

Header = tuple[str, bytes]


class FragmentError(ValueError):
    """Fragments that cannot be joined: the message says which and why."""


def fragment_budget(max_message_bytes: int, key: bytes | None) -> int:
    """How many value bytes one message may carry beside ``key`` and the headers."""
    return max(1, max_message_bytes - _OVERHEAD - (len(key) if key else 0))


def split(value: bytes, budget: int, message_id: str) -> Iterator[tuple[bytes, Header | None]]:
    """``value`` as (slice, fragment header) pairs; the value alone when it fits."""
    if len(value) <= budget:
        yield value, None
        return
    count = (len(value) + budget - 1) // budget
    view = memoryview(value)
    for index in range(count):
        header = f"{message_id}:{index}:{count}".encode("ascii")
        yield bytes(view[index * budget : (index + 1) * budget]), (FRAGMENT_HEADER, header)


@dataclass
class _Partial:
    count: int
    offset: int
    pieces: list[bytes]


class Joiner:
    """Joins the fragments of one partition back into whole values."""

    def __init__(self) -> None:
        self._open: dict[str, _Partial] = {}

    @property
    def first_offset(self) -> int | None:
        """The offset of the first fragment of a message not whole yet: a consumer that
        restarts must read from there (None: no message is open)."""
        return min((p.offset for p in self._open.values()), default=None)

    def add(self, headers: Sequence[Header], value: bytes, offset: int, where: str) -> bytes | None:
        """The whole value once ``value`` (at ``offset``) completes one; None while
        fragments are missing.

        A value without the fragment header is whole already. A first fragment
        seen again starts its message over. A message whose producer died
        between its fragments never completes; it holds back ``first_offset``
        (what a restarted consumer reads again), never a change.
        """
        header = next((v for k, v in headers if k == FRAGMENT_HEADER), None)
        if header is None:
            return value
        try:
            message_id, index_text, count_text = header.decode("ascii").rsplit(":", 2)
            index, count = int(index_text), int(count_text)
        except (UnicodeDecodeError, ValueError):
            raise FragmentError(f"{where}: bad {FRAGMENT_HEADER} header {header!r:.80}") from None
        if not 0 <= index < count:
            raise FragmentError(f"{where}: fragment {index} of {count} of {message_id}")
        partial = self._open.get(message_id)
        if index == 0 or partial is None:
            if index != 0:
                raise FragmentError(
                    f"{where}: fragment {index} of {count} of {message_id} without its first"
                )
            partial = self._open[message_id] = _Partial(count, offset, [])
        if len(partial.pieces) != index or partial.count != count:
            raise FragmentError(
                f"{where}: fragment {index} of {count} of {message_id} out of order "
                f"(expected {len(partial.pieces)} of {partial.count})"
            )
        partial.pieces.append(value)
        if len(partial.pieces) < count:
            return None
        del self._open[message_id]
        return b"".join(partial.pieces)
