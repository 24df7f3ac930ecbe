"""A change of a changefeed's table rules, from the user's request to the owner's answer.

    cdcctl changefeed update (new [filter] rules)
        │  admin API: info = new config, status.tables_update = TablesUpdate (pending)
        ▼  one transaction, both keys compared
    owner cycle (owner/table_update.py)
        │  lists the tables of the new rules, picks the update's position P where its
        │  DDL puller stands
        ▼  one transaction: status.tables_update.planned = the result to record (P,
        │  added, removed), and the tasks of the tables added without backfill (start P)
        │  then the tasks of the tables added with backfill (snapshot) are created and
        │  those of the tables no longer matched stopped and then deleted (owner/removals.py);
        │  DDL followed by the new rules
        ▼
    status.tables_update = None, status.last_tables_update = TablesUpdateResult
        (P, the tables added and how, the tables removed), or its refusal

The pending request keeps the rules the changefeed had (``old_rules``): until the
owner has added the new tables, its DDL puller follows the old ones, so no DDL of
a table it does not capture yet is applied downstream. Once ``planned`` is stored
the update is decided: an owner taking over after that computes nothing again; its
DDL puller follows the old rules up to P exactly and the new ones from P on, it
creates what is missing of the plan and records ``planned`` (owner/table_update.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cdc.changefeed.points import position_from, position_to
from cdc.config.changefeed import ChangefeedConfig
from cdc.model.position import Position

__all__ = [
    "BACKFILL",
    "NO_BACKFILL",
    "READD_HOLD_SECONDS",
    "TablesUpdate",
    "TablesUpdateResult",
    "held_back",
    "too_soon_to_add",
]

#: A table removed while a share of its snapshot, stopped on a live capture, may still
#: have had a Spark job running there is not added back sooner than this after its
#: removal (``owner/removals.py``): that job's rows can land late, up to the MySQL
#: sink's ``retry_timeout`` (300 s) later. Every other removal waits for the table's
#: pipeline to answer its stop instead, and the table can be added back at once.
READD_HOLD_SECONDS = 300.0

#: How an added table starts: its rows copied by a snapshot first.
BACKFILL = "backfill"
#: How an added table starts: its changes from the update's position on, nothing before.
NO_BACKFILL = "no-backfill"


@dataclass(frozen=True)
class TablesUpdate:
    """A pending change of the table rules (see the module docstring).

    ``no_backfill``: every added table streams from the update's position
    (``--no-backfill``); otherwise only those the config's ``no-backfill`` rules
    match (or all, in snapshot mode never)."""

    old_rules: tuple[str, ...]
    no_backfill: bool = False
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    at: float = field(default_factory=time.time)
    #: The owner's decision, stored before it writes any task: the result it records
    #: once every task is written (the update's position, the tables added and removed).
    planned: TablesUpdateResult | None = None

    def tracked(self, config: ChangefeedConfig) -> ChangefeedConfig:
        """``config`` with the rules the DDL puller follows until the update is applied."""
        return replace(config, rules=self.old_rules)

    def with_plan(self, planned: TablesUpdateResult) -> TablesUpdate:
        """This update with the owner's decision ``planned`` (see ``planned``)."""
        return replace(self, planned=planned)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "id": self.id,
            "old_rules": list(self.old_rules),
            "no_backfill": self.no_backfill,
            "at": self.at,
            **({} if self.planned is None else {"planned": self.planned.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TablesUpdate:
        if data.get("v") != 1:
            raise ValueError(f"unsupported tables update format version {data.get('v')!r}")
        planned = data.get("planned")
        return cls(
            tuple(str(r) for r in data["old_rules"]),
            bool(data.get("no_backfill", False)),
            str(data["id"]),
            float(data["at"]),
            None if planned is None else TablesUpdateResult.from_dict(planned),
        )


@dataclass(frozen=True)
class TablesUpdateResult:
    """What the owner did with the update ``id``: the tables added (table -> ``BACKFILL``
    or ``NO_BACKFILL``) and removed, and ``position``, where the tables added without
    backfill start. ``error``: why nothing was done (the rules stay as requested, the
    tables as they were, until another update)."""

    id: str
    position: Position | None
    added: Mapping[str, str] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    error: str | None = None
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "id": self.id,
            "position": position_to(self.position),
            "added": dict(self.added),
            "removed": list(self.removed),
            "error": self.error,
            "at": self.at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TablesUpdateResult:
        if data.get("v") != 1:
            raise ValueError(f"unsupported tables update result version {data.get('v')!r}")
        return cls(
            str(data["id"]),
            position_from(data.get("position")),
            {str(t): str(how) for t, how in dict(data.get("added") or {}).items()},
            tuple(str(t) for t in data.get("removed") or ()),
            data.get("error"),
            float(data.get("at", 0.0)),
        )

    def summary(self) -> str:
        """One line for the log and the CLI."""
        if self.error is not None:
            return f"tables update refused: {self.error}"
        added = ", ".join(f"{t} ({how})" for t, how in self.added.items()) or "none"
        removed = ", ".join(self.removed) or "none"
        return f"tables added: {added}; removed: {removed}; update position {self.position}"


def held_back(
    removed_at: Mapping[str, float], tables: Iterable[str], now: float
) -> dict[str, float]:
    """The removal times to keep at ``now``: those still inside ``READD_HOLD_SECONDS``,
    and ``tables`` removed now."""
    kept = {t: at for t, at in removed_at.items() if now - at < READD_HOLD_SECONDS}
    kept.update({t: now for t in tables})
    return kept


def too_soon_to_add(
    added: Mapping[str, str], removed_at: Mapping[str, float], now: float
) -> str | None:
    """Why the update may not add these tables yet (``READD_HOLD_SECONDS``), or None."""
    early = sorted(
        (t, at) for t, at in removed_at.items() if t in added and now - at < READD_HOLD_SECONDS
    )
    if not early:
        return None
    table, at = early[0]
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at + READD_HOLD_SECONDS))
    more = f" (and {len(early) - 1} more)" if len(early) > 1 else ""
    return (
        f"{table}{more} was removed by an update {now - at:.0f} s ago while a share of its "
        f"snapshot was stopped on a live capture, whose rows could still land after the "
        f"ones written once it is added back, so it can be added again from {until} "
        f"({READD_HOLD_SECONDS:.0f} s after its removal): run the update again then"
    )
