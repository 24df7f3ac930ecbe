"""Merging partitions by watermark: what may be applied, in which order (TiCDC's kafka-consumer).

    add(partition, offset, event)      per partition: rows buffered in partition order,
                                       the highest watermark kept, DDL kept once by position
    step()                             W = the lowest watermark over all partitions
      for each DDL at D <= W, by position:
        rows before D, partition by partition in partition order   ─┐
        the DDL                                                     │ a Step
      rows at or before W, the same way                            ─┘
    done(step)                         applied = W; those rows leave the buffers

Why this is enough. The sink writes a row's changes to one partition, in
binlog order (an UPDATE that moves its key becomes a DELETE and an INSERT,
each in its key's partition), so applying each partition in its own order
keeps every row's history. The owner writes a watermark W only once every
table's checkpoint passed W, that is once every row at or before W was
acknowledged, so when every partition has shown a watermark of at least W,
every row at or before W has been read: applying them all, in one database
transaction, moves the target from one consistent state to the next. A DDL is
written to every partition concerned after every row before it, and before
any row after it (the DDL barrier), and a watermark past it is written only
after the DDL.

Rows at or before the applied watermark are dropped on arrival: they were
applied, and what comes again is a replay (at-least-once delivery after a
capture failed, or a frozen capture's late messages), which must not move a
row back to an older value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.sink.kafka.consumer.events import ConsumedEvent, RowMessage, Watermark

__all__ = ["Merger", "Partition", "Step"]

Partition = tuple[str, int]
"""(topic, partition number)."""


@dataclass
class _Buffer:
    rows: list[tuple[int, RowMessage]] = field(default_factory=list)
    watermark: Position | None = None
    next_offset: int | None = None


@dataclass(frozen=True)
class Step:
    """What to apply, in order, to reach ``watermark``: rows and DDL events."""

    actions: tuple[RowMessage | DdlEvent, ...]
    watermark: Position

    @property
    def rows(self) -> int:
        return sum(1 for action in self.actions if isinstance(action, RowMessage))


def _at_or_before(position: Position, bound: Position | None) -> bool:
    return bound is not None and position.key() <= bound.key()


def _take(
    remaining: dict[Partition, list[RowMessage]], bound: tuple[int, int], *, inclusive: bool
) -> list[RowMessage]:
    """The rows before ``bound`` (or at it), partition by partition in partition order; they
    leave ``remaining``."""
    taken: list[RowMessage] = []
    for partition, rows in remaining.items():
        kept = []
        for row in rows:
            key = row.position.key()
            if key < bound or (inclusive and key == bound):
                taken.append(row)
            else:
                kept.append(row)
        remaining[partition] = kept
    return taken


class Merger:
    """The partitions of the consumed topics, merged by watermark (module docstring)."""

    def __init__(self, partitions: Iterable[Partition], applied: Position | None) -> None:
        self._buffers = {partition: _Buffer() for partition in partitions}
        self._ddls: dict[tuple[int, int], DdlEvent] = {}
        #: Everything at or before it is in the target.
        self.applied = applied
        self.skipped = 0

    @property
    def partitions(self) -> list[Partition]:
        return list(self._buffers)

    @property
    def buffered(self) -> int:
        return sum(len(b.rows) for b in self._buffers.values())

    def watermarks(self) -> dict[Partition, Position | None]:
        return {partition: b.watermark for partition, b in self._buffers.items()}

    def add(self, partition: Partition, offset: int, event: ConsumedEvent) -> None:
        """Takes one whole message of ``partition`` (in offset order)."""
        buffer = self._buffers[partition]
        buffer.next_offset = offset + 1
        if isinstance(event, Watermark):
            if buffer.watermark is None or event.position.key() > buffer.watermark.key():
                buffer.watermark = event.position
        elif _at_or_before(event.position, self.applied):
            self.skipped += 1
        elif isinstance(event, DdlEvent):
            self._ddls.setdefault(event.position.key(), event)
        else:
            buffer.rows.append((offset, event))

    def seen(self, partition: Partition, offset: int) -> None:
        """A message of ``partition`` was read but is not whole yet (a fragment)."""
        self._buffers[partition].next_offset = offset + 1

    def step(self) -> Step | None:
        """What every partition's watermark now allows beyond the applied one, if anything."""
        marks = [b.watermark for b in self._buffers.values()]
        if not marks or any(mark is None for mark in marks):
            return None
        low = min((m for m in marks if m is not None), key=Position.key)
        if _at_or_before(low, self.applied):
            return None
        actions: list[RowMessage | DdlEvent] = []
        remaining = {p: [row for _, row in b.rows] for p, b in self._buffers.items()}
        for key in sorted(k for k in self._ddls if k <= low.key()):
            actions += _take(remaining, key, inclusive=False)
            actions.append(self._ddls[key])
        actions += _take(remaining, low.key(), inclusive=True)
        return Step(tuple(actions), low)

    def done(self, step: Step) -> None:
        """``step`` is in the target: its rows leave the buffers, its DDL are forgotten."""
        bound = step.watermark.key()
        for buffer in self._buffers.values():
            buffer.rows = [(o, r) for o, r in buffer.rows if r.position.key() > bound]
        for key in [k for k in self._ddls if k <= bound]:
            del self._ddls[key]
        self.applied = step.watermark

    def commit_offsets(self, pending: dict[Partition, int | None]) -> dict[Partition, int]:
        """Per partition, the offset a restarted consumer must read from: the first row
        not applied, the first fragment of a message not whole yet (``pending``), else
        the next message."""
        offsets = {}
        for partition, buffer in self._buffers.items():
            candidates = [o for o, _ in buffer.rows[:1]]
            first_fragment = pending.get(partition)
            if first_fragment is not None:
                candidates.append(first_fragment)
            if buffer.next_offset is not None:
                candidates.append(buffer.next_offset)
            if candidates:
                offsets[partition] = min(candidates)
        return offsets
