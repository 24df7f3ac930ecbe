"""The interpreter's cyclic garbage collector, set for a process that moves rows.

A capture allocates a few container objects per row change (the change, its
images, its key) and keeps thousands of them alive at once (a transaction,
a sink batch, a lane queue). With CPython's default thresholds (a collection
every 700 net allocations, a full one every 100 of those) the collector
keeps walking those live objects: measured on the replication benchmark
(1M rows, one table, one capture), the defaults cost the capture a third of
its time into the blackhole sink and a third into MariaDB
(docs/benchmarks.md). Row changes hold no reference cycles, so collecting
them is the reference counter's job; the cyclic collector only has to find
the rare cycles of long-lived objects, which it still does, less often.

``gc.freeze()`` moves everything alive after start-up (modules, the gRPC
server, the etcd client) to a generation that is never scanned again.
"""

from __future__ import annotations

import gc

#: Net container allocations between young collections (CPython's default: 700).
YOUNG_THRESHOLD = 100_000
#: Young collections per middle one, middle ones per full one (defaults: 10, 10).
OLDER_THRESHOLDS = (50, 100)


def tune_after_startup() -> None:
    """Freezes what start-up allocated and spaces collections for row traffic."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
