"""The audit history and the DDL decision of a changefeed as admin API messages.

Kept apart from the servicer so that each message is built in one place; every
text is masked again here (what etcd holds was masked when written, but a
message must never depend on that).
"""

from __future__ import annotations

from collections.abc import Iterable

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.changefeed import ChangefeedStatus
from cdc.changefeed.history import HistoryEntry
from cdc.masking import mask_secret

__all__ = ["ddl_decision", "failed_ddl", "history_messages"]


def history_messages(entries: Iterable[HistoryEntry]) -> list[admin_pb2.HistoryEntry]:
    """``entries`` (oldest first) as messages."""
    return [
        admin_pb2.HistoryEntry(
            op=e.op,
            at=e.at,
            role=e.who.role,
            cert=e.who.cert or "",
            peer=e.who.peer or "",
            user=e.who.user or "",
            detail={k: mask_secret(v) for k, v in e.detail.items()},
        )
        for e in entries
    ]


def failed_ddl(status: ChangefeedStatus) -> admin_pb2.FailedDdl | None:
    """The DDL the downstream refused, when that is the status's error."""
    error = status.error
    if error is None or error.ddl is None:
        return None
    return admin_pb2.FailedDdl(
        position=str(error.ddl.position),
        kind=error.ddl.kind,
        statement=mask_secret(error.ddl.statement)[:300],
    )


def ddl_decision(status: ChangefeedStatus) -> admin_pb2.DdlDecision | None:
    """The operator's decision the owner has not carried out yet."""
    decision = status.ddl_decision
    if decision is None:
        return None
    return admin_pb2.DdlDecision(
        position=str(decision.position),
        action=decision.action.value,
        sql=mask_secret(decision.sql or ""),
    )
