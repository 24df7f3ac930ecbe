"""How many table pipelines of a capture hold a source connection to start, at once.

A capture is given many tables at once: at its own start, when a dead capture's
tables are reassigned to it, when it joins and tables move to it. Each table's
pipeline opened its own source connection to start (the binlog settings, the
server it reaches, the hand-off gate) at the same moment: 1,000 tables on three
captures met the source's ``max_connections`` (151 by default: "Too many
connections", 1040), the tables failed and were retried, and under that load
the captures lost their leases (``bench/control_plane_real_bench.py``). What a
source sees from us must not follow the number of tables.

So a starting pipeline that reads no snapshot chunk takes one of
``START_CONNECTIONS`` slots of its capture before it connects, and gives it
back before it joins the binlog stream. One that reads chunks holds one of the
snapshot scheduler's slots instead, which bounds those already. The waiters
sleep until a slot is theirs (``processor/fair_slots.py``).
"""

from __future__ import annotations

from processor.fair_slots import FairSlots

__all__ = ["START_CONNECTIONS", "StartSlots"]

#: Source connections a capture's starting table pipelines hold at once.
START_CONNECTIONS = 8


class StartSlots(FairSlots):
    """One per capture, shared by every changefeed's pipelines on it."""

    def __init__(self, size: int = START_CONNECTIONS) -> None:
        super().__init__(size)
