"""``cdcctl diff``'s sizes, apart from the checker, so that the command line can offer
them without importing the checker and what it reads tables with (the SQL parser)."""

from __future__ import annotations

__all__ = ["DEFAULT_CHUNK_SIZE", "DEFAULT_THREADS", "MAX_THREADS"]

#: Rows per checksum chunk.
DEFAULT_CHUNK_SIZE = 10_000
#: Chunks checked in parallel, one connection pair each.
DEFAULT_THREADS = 4
MAX_THREADS = 64
