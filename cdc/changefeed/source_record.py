"""Which server a changefeed reads, as its status in etcd records it (the failover guard).

    "source": {"flavor": "mariadb", "server_id": 1, "uuid": null, "domain": 0,
               "generation": 0,            failovers followed so far: the generation
                                           stamped on every position read from it
               "gtid": "0-1-1042",         the server's GTID state when last recorded
               "since": unix time,         when the changefeed began reading it
               "seen_at": unix time,       when the owner last confirmed it
               "previous": [{"server_id": 2, "uuid": null, "domain": 0,
                             "generation": ..., "until": unix time, "gtid": ...}, ...]}

A file:offset means something only on the server that wrote it, so the
changefeed must know which server its positions belong to: a reader that
reaches another server (a DNS name moved to a promoted replica) must not go
on by file:offset. ``cdc.changefeed.failover`` compares this record with the
server a connection reaches and moves the changefeed to a new generation
when, and only when, the new server has every transaction it may already have
delivered. ``previous`` keeps the last ``PREVIOUS_KEPT`` servers, newest last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdc.model.gtid import Flavor, GtidSet
from cdc.source.flavor import ServerInfo

__all__ = ["PREVIOUS_KEPT", "SourceRecord"]

#: How many former sources the record keeps.
PREVIOUS_KEPT = 10


@dataclass(frozen=True)
class SourceRecord:
    """See the module docstring; build it with :meth:`first` and :meth:`followed_by`."""

    flavor: Flavor
    server_id: int
    uuid: str | None
    domain: int | None
    generation: int
    gtid: GtidSet | None
    since: float
    seen_at: float
    previous: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def first(cls, info: ServerInfo, gtid: GtidSet | None, now: float) -> SourceRecord:
        """The server a changefeed starts on: generation 0."""
        return cls(info.flavor, info.server_id, info.uuid, info.domain, 0, gtid, now, now)

    def names(self, info: ServerInfo) -> bool:
        """Whether ``info`` (what a connection reached) is this record's server."""
        return self.server().same_server(info)

    def server(self) -> ServerInfo:
        """The recorded server, as a ``ServerInfo`` stamped with its generation."""
        return ServerInfo(self.flavor, "", self.server_id, self.uuid, self.domain, self.generation)

    def seen(self, gtid: GtidSet | None, now: float) -> SourceRecord:
        """Confirmed again, with its GTID state now."""
        return replace(self, gtid=gtid, seen_at=now)

    def followed_by(self, info: ServerInfo, gtid: GtidSet | None, now: float) -> SourceRecord:
        """The record after a failover to ``info``: the next generation, this one kept."""
        gone = {
            "server_id": self.server_id,
            "uuid": self.uuid,
            "domain": self.domain,
            "generation": self.generation,
            "gtid": None if self.gtid is None else str(self.gtid),
            "until": now,
        }
        return SourceRecord(
            info.flavor,
            info.server_id,
            info.uuid,
            info.domain,
            self.generation + 1,
            gtid,
            now,
            now,
            (*self.previous, gone)[-PREVIOUS_KEPT:],
        )

    def describe(self) -> str:
        """The server as a person reads it (``server_id 1, gtid_domain_id 0``)."""
        return self.server().describe()

    def to_dict(self) -> dict[str, Any]:
        return {
            "flavor": self.flavor.value,
            "server_id": self.server_id,
            "uuid": self.uuid,
            "domain": self.domain,
            "generation": self.generation,
            "gtid": None if self.gtid is None else str(self.gtid),
            "since": self.since,
            "seen_at": self.seen_at,
            "previous": [dict(p) for p in self.previous],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceRecord:
        flavor = Flavor(data["flavor"])
        gtid = data.get("gtid")
        return cls(
            flavor,
            int(data["server_id"]),
            data.get("uuid"),
            None if data.get("domain") is None else int(data["domain"]),
            int(data.get("generation", 0)),
            None if gtid is None else GtidSet.parse(str(gtid), flavor),
            float(data.get("since", 0.0)),
            float(data.get("seen_at", 0.0)),
            tuple(dict(p) for p in data.get("previous", ())),
        )
