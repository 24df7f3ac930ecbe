"""The failover guard: which server a changefeed reads, and following it to a new primary.

    a binlog reader connects ── detect(conn): server_id, server_uuid / gtid_domain_id
        │
        ├─ the status names no server yet ......... record it (generation 0)
        ├─ the status names this server ........... read it, stamping positions with the
        │                                           recorded generation
        └─ another server (the source URI moved) ── owner only (its DDL puller):
              the new server has GTIDs, has every transaction of the checkpoint and of
              the barrier (what may already be downstream), the sink keeps no position
              of the old server, no target position ── record it as generation n+1
              else ──► FailoverRefused, naming what is missing (the changefeed fails)
           a processor waits a little for the owner to record it, then fails over to the
           changefeed's retry (``SourceSwitched``)

After the switch every reader resumes from its checkpoint's GTID set on the
new server (``cdc.binlog.puller``: a start of an older generation is read by
GTID), never by file:offset (that of another server means nothing) and never
by time. Positions read there carry the new generation, so they order after
every earlier one; a transaction read again is recognised by its GTID
(``Position.within``). Why only the owner records a new server: it is the one
writer of the barrier the processors stall on, and the one reader that always
runs; a processor that raced ahead of it would read the new server while the
barrier still follows the old one.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from cdc.changefeed.barrier import Barrier
from cdc.changefeed.source_record import SourceRecord
from cdc.changefeed.status import ChangefeedStatus
from cdc.changefeed.store import ChangefeedStore
from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import get_logger
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.sink.registry import kind_of
from cdc.source.checks import ChangesUnavailable, SourceSwitched
from cdc.source.flavor import ServerInfo, detect, executed_gtids, gtid_enabled
from cdc.store import EtcdStore, Fence

__all__ = ["FailoverRefused", "SourceSwitched", "follow_source", "refusal"]

log = get_logger(__name__)

#: Seconds a processor waits for the owner to record a new server before it gives up
#: (its table then fails and the changefeed retries).
PROCESSOR_WAIT = 10.0


class FailoverRefused(ChangesUnavailable):
    """The source URI reaches another server, and following it could lose or invent rows:
    permanent, the message says what is missing and what to do."""


def follow_source(
    store: EtcdStore,
    changefeed_id: str,
    conn: Any,
    *,
    fence: Fence | None = None,
    wait: float = PROCESSOR_WAIT,
) -> ServerInfo:
    """The server ``conn`` reaches, stamped with its generation for the changefeed.

    With ``fence`` (the owner): records the server when the status names none,
    follows a failover (or raises ``FailoverRefused``), and refreshes the record's
    GTID state. Without (a processor): records only a first server; waits up to
    ``wait`` seconds for the owner to record another one, then ``SourceSwitched``.
    """
    info = detect(conn)
    feeds = ChangefeedStore(store)
    deadline = time.monotonic() + wait
    while True:
        cf = feeds.get(changefeed_id)
        record = cf.status.source
        if record is not None and record.names(info):
            if fence is not None:
                _write(store, changefeed_id, record, record.seen(_gtids(conn, info), time.time()))
            return replace(info, generation=record.generation)
        if record is None:
            first = SourceRecord.first(info, _gtids(conn, info), time.time())
            if _write(store, changefeed_id, None, first, fence=fence):
                log.info("changefeed %s reads %s", changefeed_id, first.describe())
                return replace(info, generation=0)
            continue
        if fence is not None:
            return _follow(store, cf.config, cf.status, record, conn, info, fence)
        if time.monotonic() >= deadline:
            raise SourceSwitched(
                f"the source URI of changefeed {changefeed_id} now reaches another server "
                f"({info.describe()}) than the one it reads ({record.describe()}); the owner "
                "checks that the new server has every transaction the changefeed needs and "
                "then resumes it there by GTID (or fails it, saying what is missing)"
            )
        time.sleep(0.5)


def _follow(
    store: EtcdStore,
    config: ChangefeedConfig,
    status: ChangefeedStatus,
    record: SourceRecord,
    conn: Any,
    info: ServerInfo,
    fence: Fence,
) -> ServerInfo:
    barrier_item = store.get(store.keys.barrier(config.changefeed_id))
    limit = Barrier.from_dict(barrier_item.json()).limit if barrier_item is not None else None
    executed = _gtids(conn, info)
    problem = refusal(config, status, record, info, executed, limit)
    if problem:
        raise FailoverRefused(problem)
    new = record.followed_by(info, executed, time.time())
    if not _write(store, config.changefeed_id, record, new, fence=fence):
        raise SourceSwitched(
            f"changefeed {config.changefeed_id}: its source record changed while the owner "
            "followed the failover; it checks again at the next retry"
        )
    log.warning(
        "changefeed %s: the source URI now reaches %s (was %s); resuming there by GTID from "
        "the checkpoint %s, generation %d",
        config.changefeed_id,
        new.describe(),
        record.describe(),
        status.checkpoint,
        new.generation,
    )
    return replace(info, generation=new.generation)


def refusal(
    config: ChangefeedConfig,
    status: ChangefeedStatus,
    record: SourceRecord,
    info: ServerInfo,
    executed: GtidSet | None,
    limit: Position | None,
) -> str:
    """Why the changefeed cannot follow its source to ``info`` (a pure function); "" when
    it can. ``executed``: the new server's GTID set (None: it has no GTIDs); ``limit``:
    the barrier's, the most the changefeed may have delivered downstream."""
    moved = (
        f"the source URI of changefeed {config.changefeed_id} now reaches another server "
        f"({info.describe()}) than the one it read ({record.describe()})"
    )
    again = (
        "Create the changefeed again (snapshot mode 'initial') to copy the tables from the "
        "new server, or point the source URI back at the old one"
    )
    if info.flavor is not record.flavor:
        return f"{moved}, of another flavour ({info.flavor.value}, was {record.flavor.value}). "
    if executed is None:
        return (
            f"{moved}, which has no GTIDs (gtid_mode is not ON): a binlog file:offset of "
            f"another server means nothing, and only a GTID set says where to resume. {again}."
        )
    why_not = kind_of(config.sink_uri).no_failover
    if why_not:
        return f"{moved}; {config.sink_uri.scheme}:// sinks cannot follow a failover ({why_not}). "
    if config.target_position:
        return (
            f"{moved}; its target-position {config.target_position} names a place in the old "
            f"server's binlog, which means nothing on the new one. {again}."
        )
    resume = status.checkpoint or _position(status.start)
    if resume is not None and resume.gtid is None:
        return (
            f"{moved}; its checkpoint {resume} carries no GTID set (the changefeed started at "
            "a binlog file:offset on a server without GTIDs, or before GTIDs were read), and "
            f"a file:offset of another server means nothing. {again}."
        )
    if resume is not None and resume.gtid is not None:
        missing = resume.gtid.missing_from(executed)
        if missing:
            return (
                f"{moved}, which lacks transactions the changefeed's checkpoint covers: "
                f"{'; '.join(missing)} (it has {executed or 'no transaction'}). Resuming there "
                "would lose them: they were replicated to the old server only. " + again + "."
            )
    if limit is not None and limit.gtid is not None:
        missing = limit.gtid.missing_from(executed)
        if missing:
            return (
                f"{moved}, which lacks transactions the changefeed read before the switch "
                f"(up to {limit}) and may already have delivered downstream: "
                f"{'; '.join(missing)} (it has {executed or 'no transaction'}). Following it "
                "would leave rows downstream that the new source does not have. " + again + "."
            )
    return ""


def _position(start: object) -> Position | None:
    return start if isinstance(start, Position) else None


def _gtids(conn: Any, info: ServerInfo) -> GtidSet | None:
    return executed_gtids(conn, info) if gtid_enabled(conn, info) else None


def _write(
    store: EtcdStore,
    changefeed_id: str,
    old: SourceRecord | None,
    new: SourceRecord,
    *,
    fence: Fence | None = None,
) -> bool:
    """Writes ``new`` as the status's source record if it still holds ``old`` (by server
    and generation); whether it does now."""

    def apply(data: dict[str, Any] | None) -> dict[str, Any] | None:
        if data is None:
            return None
        status = ChangefeedStatus.from_dict(data)
        held = status.source
        if (held is None) != (old is None) or (
            held is not None
            and old is not None
            and (held.generation, held.server()) != (old.generation, old.server())
        ):
            return data
        return replace(status, source=new).to_dict()

    key = store.keys.changefeed_status(changefeed_id)
    written = store.update(key, apply, fence=fence)
    if written is None:
        return False
    stored = ChangefeedStatus.from_dict(written).source
    return stored is not None and stored.generation == new.generation and stored.names(new.server())
