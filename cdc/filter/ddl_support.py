"""Which DDL kinds a database sink applies, and the warning for the ones it skips.

The design rule: DDL outside the supported list is skipped with a warning,
never half-applied. The owner asks :func:`is_supported` at the barrier; when
it says no, it logs :func:`ddl_skip_reason` and moves the barrier on.

The default list is defined here and the changefeed config's ``supported-ddl``
default (:data:`cdc.config.changefeed.DEFAULT_SUPPORTED_DDL`) is derived from
it, so the two cannot drift: everything a MySQL-family downstream can replay
from the statement, except views and partition maintenance (they depend on
objects a changefeed does not replicate) and :attr:`DdlKind.OTHER`, statements
the decoder could not classify, whose replay is exactly the half-applied risk
the design forbids.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from cdc.filter.event_filter import EventFilter
from cdc.masking import mask_secret
from cdc.model.events import DdlEvent, DdlKind

__all__ = ["DEFAULT_SUPPORTED_DDL", "ddl_skip_reason", "is_supported"]

#: DDL kinds a MySQL / MariaDB sink applies unless ``supported-ddl`` says otherwise.
DEFAULT_SUPPORTED_DDL: frozenset[DdlKind] = frozenset(DdlKind) - {
    DdlKind.CREATE_VIEW,
    DdlKind.DROP_VIEW,
    DdlKind.ADD_TABLE_PARTITION,
    DdlKind.DROP_TABLE_PARTITION,
    DdlKind.TRUNCATE_TABLE_PARTITION,
    DdlKind.OTHER,
}

#: How much of a statement a warning quotes.
STATEMENT_PREVIEW = 200

_QUOTED_SECRET = re.compile(
    r"((?:IDENTIFIED\s+(?:WITH\s+\S+\s+)?(?:BY|AS)|PASSWORD\s*(?:\(\s*)?)\s*)('(?:''|\\.|[^'])*')",
    re.IGNORECASE,
)


def is_supported(
    kind: DdlKind, supported: Collection[DdlKind | str] = DEFAULT_SUPPORTED_DDL
) -> bool:
    """Whether a sink configured with ``supported`` applies DDL of ``kind``.

    ``supported`` may hold kinds or their names, so the config's
    ``supported_ddl`` (canonical names) can be passed as it is.
    """
    return kind in supported or kind.value in supported


def _preview(statement: str) -> str:
    text = " ".join(mask_secret(statement).split())
    text = _QUOTED_SECRET.sub(lambda m: m.group(1) + "'******'", text)
    if len(text) <= STATEMENT_PREVIEW:
        return text
    return f"{text[:STATEMENT_PREVIEW]}... ({len(text)} chars)"


def ddl_skip_reason(event: DdlEvent) -> str:
    """The warning logged when ``event`` is skipped because its kind is not supported.

    It quotes the statement (whitespace collapsed, secrets masked, cut at
    :data:`STATEMENT_PREVIEW` characters) and says how to get it applied.
    """
    tables = ", ".join(str(t) for t in event.tables) or event.schema or "(no schema)"
    if event.kind is DdlKind.OTHER:
        remedy = (
            "the statement could not be classified, so it is never replayed: "
            "apply it to the downstream by hand if it is needed there"
        )
    else:
        remedy = (
            f"to replicate DDL of this kind, add {event.kind.value!r} to the changefeed's "
            "supported-ddl list, or apply the statement to the downstream by hand"
        )
    return (
        f"skipping DDL at {event.position} on {tables}: kind {event.kind.value!r} is not "
        f"supported by the sink; statement: {_preview(event.statement)}; {remedy}"
    )


IGNORED_BY_EVENT_FILTER = "ignored by an event filter"


def skip_reason(
    event: DdlEvent, events: EventFilter | None, supported: Collection[DdlKind | str]
) -> str | None:
    """Why ``event`` is not applied downstream, or None when it is.

    The owner asks before it applies a DDL downstream: an event filter that
    ignores it, else an unsupported kind
    (:func:`ddl_skip_reason`, meant for a warning).
    """
    if events and events.should_ignore_ddl(event):
        return IGNORED_BY_EVENT_FILTER
    if not is_supported(event.kind, supported):
        return ddl_skip_reason(event)
    return None
