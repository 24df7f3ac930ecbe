"""Where a pipeline starts: a binlog position or a GTID set, and its stored form.

A changefeed configured with ``start-gtid`` starts its pipelines from a GTID
set, every other start is a ``Position``; once a pipeline has run, its
checkpoints are positions. Stored as ``{"position": Position.to_dict()}`` or
``{"gtid": "0-1-100", "flavor": "mariadb"}``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position

__all__ = ["StartPoint", "point_from_dict", "point_to_dict", "position_from", "position_to"]

StartPoint = Position | GtidSet


def point_to_dict(point: StartPoint) -> dict[str, Any]:
    if isinstance(point, Position):
        return {"position": point.to_dict()}
    if isinstance(point, GtidSet):
        flavor = point.flavor.value if point.flavor is not None else None
        return {"gtid": str(point), "flavor": flavor}
    raise TypeError(f"a start point is a Position or a GtidSet, not {type(point).__name__}")


def point_from_dict(data: Mapping[str, Any]) -> StartPoint:
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored start point must be a JSON object, not {data!r}")
    if "position" in data:
        return Position.from_dict(data["position"])
    if "gtid" in data:
        flavor = data.get("flavor")
        return GtidSet.parse(data["gtid"], Flavor(flavor) if flavor else None)
    raise ValueError(f"a stored start point has 'position' or 'gtid', got {dict(data)!r}")


def position_to(position: Position | None) -> dict[str, Any] | None:
    """``Position.to_dict()``, or None."""
    return None if position is None else position.to_dict()


def position_from(data: Mapping[str, Any] | None) -> Position | None:
    """``Position.from_dict(data)``, or None for None.

    Remembers the last few thousand it read: the owner reads every table's record
    again and again, and at a moment most of them hold the same few positions,
    whose GTID sets cost more to parse than the rest of the record.
    """
    if data is None:
        return None
    try:
        key = (
            data["v"],
            data["file"],
            data["offset"],
            data.get("gtid"),
            data.get("gtid_flavor"),
            data.get("gen", 0),
        )
        hash(key)
    except (KeyError, TypeError):
        return Position.from_dict(data)
    return _position(*key)


@functools.lru_cache(maxsize=4096)
def _position(v: Any, file: Any, offset: Any, gtid: Any, flavor: Any, gen: Any) -> Position:
    data = {"v": v, "file": file, "offset": offset, "gtid": gtid, "gtid_flavor": flavor}
    return Position.from_dict({**data, "gen": gen} if gen else data)
