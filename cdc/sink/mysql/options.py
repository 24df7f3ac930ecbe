"""Settings of the MySQL sink that are not part of its URI (timeouts, backoff, queue depth)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MySQLSinkOptions"]


@dataclass(frozen=True)
class MySQLSinkOptions:
    """How long and how the sink retries, and how much it buffers.

    ``retry_timeout``: seconds one downstream transaction (or DDL) may keep
    failing with transient errors (connection lost, deadlock, lock wait
    timeout, server shutting down) before the sink gives up with a
    ``SinkError``; the wait between attempts starts at ``backoff_initial``
    and doubles up to ``backoff_max``. ``read_timeout`` bounds one row
    statement (a downstream that stops answering counts as a lost
    connection); DDL statements have no such bound. ``queue_depth`` is the
    number of batches (one per ``write_rows`` call) each lane may hold before
    ``write_rows`` waits; a short queue keeps memory bounded and keeps the
    driving thread from hogging the interpreter lock while the lanes wait for it.
    ``writable`` is a fence asked right before every statement and every commit:
    when it says no (the capture can no longer prove its lease is alive, so the
    table may already run elsewhere), the transaction is rolled back and the
    sink fails instead of writing a stale change after a newer one.
    ``idle_transaction_timeout``: seconds after which a MariaDB downstream ends a
    session of this sink whose transaction stands idle (``idle_transaction_timeout``).
    A capture frozen in the middle of a transaction (SIGSTOP, a paused VM) keeps its
    row locks while it is frozen, and the capture its tables moved to would wait
    for them until it runs again; the server ends such a session instead. A lane
    never waits inside a transaction (its statements follow each other), and a
    session ended anyway is a lost connection: its transaction is written again
    whole. Twice the default lease, so that the tables have moved by then.
    """

    retry_timeout: float = 300.0
    backoff_initial: float = 0.1
    backoff_max: float = 5.0
    read_timeout: float = 300.0
    queue_depth: int = 8
    writable: Callable[[], bool] | None = None
    idle_transaction_timeout: int = 20

    def __post_init__(self) -> None:
        for name in ("retry_timeout", "backoff_initial", "backoff_max", "read_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(
                    f"MySQLSinkOptions.{name} must be a positive number, not {value!r}"
                )
        if self.backoff_max < self.backoff_initial:
            raise ValueError(
                f"MySQLSinkOptions.backoff_max ({self.backoff_max}) must be at least "
                f"backoff_initial ({self.backoff_initial})"
            )
        idle = self.idle_transaction_timeout
        if isinstance(idle, bool) or not isinstance(idle, int) or idle < 1:
            raise ValueError(
                f"MySQLSinkOptions.idle_transaction_timeout must be an int >= 1, not {idle!r}"
            )
        if isinstance(self.queue_depth, bool) or not isinstance(self.queue_depth, int):
            raise ValueError(
                f"MySQLSinkOptions.queue_depth must be an int, not {self.queue_depth!r}"
            )
        if self.queue_depth < 1:
            raise ValueError(f"MySQLSinkOptions.queue_depth must be >= 1, not {self.queue_depth}")
