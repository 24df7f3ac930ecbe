"""Which capture may still write a snapshot chunk downstream: a fence token per chunk.

A capture that lost its lease (frozen, cut off from etcd) may still have chunk tasks
in its Spark executors, running or about to run: each reads the source and writes its
chunk's key range downstream whenever it gets there. By then the chunk may belong to
another capture (its share given to another, its table moved), which read it later and
wrote it, and the table's stream may be applying the changes after that read. The late
write would put older rows back, and its range DELETE remove newer ones, with nothing
to notice it. Cancelling the capture's Spark jobs when it notices the lost lease
(``capture/server.py``) stops neither a task it does not notice in time nor executors
that were not frozen with it.

So every writer of a chunk carries a token: the etcd revision at which it last proved
it holds the chunk (its share still at the revision it took, or its table's task still
naming it), times 1,000, plus its Spark task's attempt (``sparkjobs.snapshot.
TOKEN_ATTEMPTS``: a task Spark runs again, its executor lost but perhaps only cut off,
holds the chunk over the attempt it replaced). A capture that takes the chunk over
proves it later, so its token is larger. Each downstream transaction of a chunk (the
range DELETE, each LOAD, each batch of statements) begins with :func:`fence_statements`::

    INSERT INTO _cdc_snapshot.chunk_fence VALUES (<changefeed>, <chunk>, <token>)
        ON DUPLICATE KEY UPDATE token = GREATEST(token, <token>)
    SELECT token FROM _cdc_snapshot.chunk_fence WHERE <changefeed, chunk>
        a larger token than ours: another capture has written the chunk, or is
        writing it, since we proved we hold it: ``ChunkFenced``, rolled back

The INSERT holds the row's lock until the commit, so an older writer's transaction
either committed first (and the newer writer's range DELETE, fenced the same way,
removes what it wrote) or comes after and reads the larger token. Retries of one
task carry the same token and pass.

Rows stay after the snapshot, so that a late writer still finds the larger token:
one small row per chunk a changefeed read (a 10M-row table at the default chunk size:
about 1,200). The sink's user needs to be allowed to create and write
``_cdc_snapshot``; the first chunk says so when it is not. An etcd restored from a
backup, or replaced by a new one, counts revisions from lower again, so the rows it
finds look newer than its own writes: its chunks fail closed, and the restore
procedure empties the table while every capture is stopped (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdc.model.schema import TableName
from cdc.sink.base import SinkError
from cdc.sink.mysql.statements import Statement, literal

__all__ = ["FENCE_TABLE", "ChunkFenced", "fence_setup", "fence_statements"]

FENCE_TABLE = TableName("_cdc_snapshot", "chunk_fence")


class ChunkFenced(SinkError):
    """Another capture took the chunk over since this writer proved it holds it."""


def fence_setup() -> tuple[Statement, ...]:
    """The fence's table, made when missing (each on its own: DDL commits anyway)."""
    return (
        Statement(
            f"CREATE DATABASE IF NOT EXISTS `{FENCE_TABLE.schema}`",
            f"CREATE DATABASE {FENCE_TABLE.schema} (the snapshot's chunk fence)",
        ),
        Statement(
            f"CREATE TABLE IF NOT EXISTS {FENCE_TABLE.quoted()} ("
            "changefeed VARCHAR(128) CHARACTER SET ascii NOT NULL, "
            "chunk VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, "
            "token BIGINT UNSIGNED NOT NULL, "
            "PRIMARY KEY (changefeed, chunk)) ENGINE=InnoDB",
            f"CREATE TABLE {FENCE_TABLE} (the snapshot's chunk fence)",
        ),
    )


def fence_statements(changefeed_id: str, chunk_id: str, token: int) -> tuple[Statement, ...]:
    """What a transaction writing ``chunk_id`` for ``token``'s holder begins with."""
    if isinstance(token, bool) or not isinstance(token, int) or token < 1:
        raise ValueError(f"a chunk fence token is a positive int, not {token!r}")
    where = f"changefeed = {literal(changefeed_id)} AND chunk = {literal(chunk_id)}"

    def check(rows: Sequence[tuple[Any, ...]]) -> None:
        held = int(rows[0][0]) if rows else None
        if held != token:
            raise ChunkFenced(
                f"snapshot chunk {chunk_id} was taken over: another writer holds it with fence "
                f"token {held}, larger than this one's {token} (the etcd revision at which "
                "each proved it holds the chunk, times 1000, plus its Spark task's attempt); "
                "nothing of this write was committed (if the cluster's etcd was restored "
                "from a backup or replaced by a new one since, its revisions count from "
                f"lower again: stop the captures and empty {FENCE_TABLE}, docs/operations.md)",
                f"the chunk fence of {chunk_id}",
            )

    return (
        Statement(
            f"INSERT INTO {FENCE_TABLE.quoted()} (changefeed, chunk, token) VALUES "
            f"({literal(changefeed_id)}, {literal(chunk_id)}, {token}) "
            f"ON DUPLICATE KEY UPDATE token = GREATEST(token, {token})",
            f"raising the chunk fence of {chunk_id}",
        ),
        Statement(
            f"SELECT token FROM {FENCE_TABLE.quoted()} WHERE {where}",
            f"reading the chunk fence of {chunk_id}",
            check=check,
        ),
    )
