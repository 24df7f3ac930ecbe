"""GTID sets of both server flavours, kept behind one immutable type.

MariaDB and MySQL number transactions differently, and a position has to carry
either kind:

* MariaDB: ``domain-server-seq`` per replication domain, e.g. ``0-1-100,1-2-5``.
  Sequence numbers grow within a domain, so "everything up to here" is one
  GTID per domain; ``@@gtid_binlog_state`` may list several server ids for one
  domain, and they collapse to the entry with the highest sequence number.
* MySQL: ``uuid:interval[:interval...]`` per source server, e.g.
  ``3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9``; the set of executed
  transaction numbers may have holes, so it is a set of intervals. MySQL 8.3+
  tags (``uuid:tag:1-3``) are kept apart from the untagged numbers of a uuid.

One class with a ``flavor`` field (rather than two classes) keeps callers free
of ``isinstance`` checks; operations that would mix the flavours raise
``ValueError``. An empty set parsed without a flavour combines with both.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Flavor", "GtidSet", "MariadbGtid"]

EXPECTED_FORMS = (
    "expected MariaDB 'domain-server-seq[,domain-server-seq...]' (e.g. '0-1-100,1-2-5') "
    "or MySQL 'uuid:interval[:interval...][,uuid:...]' "
    "(e.g. '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9')"
)

_U32 = 2**32 - 1
_U64 = 2**64 - 1
_GNO_MAX = 2**63 - 1

_MARIADB_GTID = re.compile(r"(\d+)-(\d+)-(\d+)")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?")
_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


class Flavor(enum.Enum):
    """Which server family wrote a GTID; decides the text form and the set semantics."""

    MARIADB = "mariadb"
    MYSQL = "mysql"


@dataclass(frozen=True, order=True)
class MariadbGtid:
    """One MariaDB GTID: the last transaction applied in ``domain``."""

    domain: int
    server_id: int
    seq: int

    def __str__(self) -> str:
        return f"{self.domain}-{self.server_id}-{self.seq}"


# A MySQL source: (lower-case uuid, lower-case tag or "" when untagged).
_MysqlKey = tuple[str, str]
_Intervals = tuple[tuple[int, int], ...]


class GtidSet:
    """An immutable, hashable set of GTIDs of one flavour.

    Build it with :meth:`parse` (or :meth:`empty`); every operation returns a new
    set. ``str()`` gives the canonical text: one entry per domain sorted by
    domain (MariaDB), or sources sorted by uuid with sorted, merged intervals
    (MySQL). Two sets are equal when they hold the same GTIDs; all empty sets
    are equal whatever their flavour.
    """

    __slots__ = ("_flavor", "_mariadb", "_mysql")

    _flavor: Flavor | None
    _mariadb: tuple[MariadbGtid, ...]
    _mysql: tuple[tuple[_MysqlKey, _Intervals], ...]

    def __init__(self) -> None:
        raise TypeError("build a GtidSet with GtidSet.parse(text) or GtidSet.empty()")

    @classmethod
    def _make(
        cls,
        flavor: Flavor | None,
        mariadb: Iterable[MariadbGtid] = (),
        mysql: dict[_MysqlKey, list[tuple[int, int]]] | None = None,
    ) -> GtidSet:
        self = object.__new__(cls)
        by_domain: dict[int, MariadbGtid] = {}
        for gtid in mariadb:
            held = by_domain.get(gtid.domain)
            if held is None or (gtid.seq, gtid.server_id) > (held.seq, held.server_id):
                by_domain[gtid.domain] = gtid
        merged = {key: _merge(spans) for key, spans in (mysql or {}).items() if spans}
        object.__setattr__(self, "_flavor", flavor)
        object.__setattr__(self, "_mariadb", tuple(by_domain[d] for d in sorted(by_domain)))
        object.__setattr__(self, "_mysql", tuple(sorted(merged.items())))
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"GtidSet is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"GtidSet is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return (GtidSet.parse, (str(self), self._flavor))

    @classmethod
    def empty(cls, flavor: Flavor | None = None) -> GtidSet:
        """The set with no GTIDs, optionally tagged with the flavour it belongs to."""
        return cls._make(flavor)

    @classmethod
    def parse(cls, text: str, flavor: Flavor | None = None) -> GtidSet:
        """Parse ``@@gtid_binlog_pos`` / ``@@gtid_executed`` style text.

        The flavour is detected from the text when ``flavor`` is None (a ``:``
        or a bare uuid means MySQL). Whitespace and newlines around entries are ignored, as
        MySQL prints long sets over several lines, and so are empty entries
        (``a,,b``), as MySQL itself accepts them. The empty string is the
        empty set.
        """
        if not isinstance(text, str):
            raise TypeError(f"GTID set text must be a str, not {type(text).__name__}")
        if flavor is not None and not isinstance(flavor, Flavor):
            raise TypeError(f"flavor must be a Flavor or None, not {flavor!r}")
        entries = [part.strip() for part in text.split(",")]
        entries = [entry for entry in entries if entry]
        if not entries:
            return cls._make(flavor)
        first_of: dict[Flavor, str] = {}
        for entry in entries:
            first_of.setdefault(_detect(entry), entry)
        if len(first_of) > 1:
            raise ValueError(
                f"GTID set {text!r} mixes MariaDB entry {first_of[Flavor.MARIADB]!r} with "
                f"MySQL entry {first_of[Flavor.MYSQL]!r}; one set holds one flavour"
            )
        (found,) = first_of
        if flavor is not None and found is not flavor:
            raise ValueError(
                f"GTID set {text!r} looks like {_label(found)}, but {_label(flavor)} "
                f"was expected; {EXPECTED_FORMS}"
            )
        if found is Flavor.MARIADB:
            return cls._make(found, mariadb=[_parse_mariadb(entry, text) for entry in entries])
        mysql: dict[_MysqlKey, list[tuple[int, int]]] = {}
        for entry in entries:
            for key, spans in _parse_mysql(entry, text).items():
                mysql.setdefault(key, []).extend(spans)
        return cls._make(found, mysql=mysql)

    @property
    def flavor(self) -> Flavor | None:
        """The flavour of the set; None only for an empty set parsed without one."""
        return self._flavor

    @property
    def mariadb_gtids(self) -> tuple[MariadbGtid, ...]:
        """The MariaDB entries, one per domain, sorted by domain (empty for MySQL sets)."""
        return self._mariadb

    def __bool__(self) -> bool:
        return bool(self._mariadb or self._mysql)

    def __str__(self) -> str:
        if self._flavor is Flavor.MARIADB:
            return ",".join(str(gtid) for gtid in self._mariadb)
        parts: list[str] = []
        for (uuid, tag), spans in self._mysql:
            text = ":".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in spans)
            if tag:
                text = f"{tag}:{text}"
            if parts and parts[-1].split(":", 1)[0] == uuid:
                parts[-1] = f"{parts[-1]}:{text}"
            else:
                parts.append(f"{uuid}:{text}")
        return ",".join(parts)

    def __repr__(self) -> str:
        flavor = self._flavor.name if self._flavor else None
        return f"GtidSet({str(self)!r}, flavor={flavor})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GtidSet):
            return NotImplemented
        if not self and not other:
            return True
        return (self._flavor, self._mariadb, self._mysql) == (
            other._flavor,
            other._mariadb,
            other._mysql,
        )

    def __hash__(self) -> int:
        if not self:
            return hash(())
        return hash((self._flavor, self._mariadb, self._mysql))

    def contains(self, other: GtidSet) -> bool:
        """True when every transaction of ``other`` is also in this set (superset test).

        MariaDB: every domain of ``other`` is here with a sequence number at
        least as high (the server id is not compared: a domain's sequence is
        one history whoever wrote it). MySQL: every interval of ``other`` lies
        inside this set's intervals of the same source.
        """
        flavor = self._common_flavor(other, "compare")
        if flavor is Flavor.MARIADB:
            mine = {gtid.domain: gtid.seq for gtid in self._mariadb}
            return all(mine.get(g.domain, -1) >= g.seq for g in other._mariadb)
        mine_mysql = dict(self._mysql)
        for key, spans in other._mysql:
            held = mine_mysql.get(key, ())
            if not all(_covered(span, held) for span in spans):
                return False
        return True

    def missing_from(self, have: GtidSet) -> list[str]:
        """The transactions of this set that ``have`` lacks, described for a person (empty
        when ``have`` contains this set): MariaDB ``domain 0: 0-1-101 .. 0-1-105`` (the
        sequence numbers after ``have``'s, up to this set's last GTID), MySQL
        ``uuid:101-105``."""
        flavor = self._common_flavor(have, "compare")
        if flavor is Flavor.MARIADB:
            held = {gtid.domain: gtid.seq for gtid in have._mariadb}
            out = []
            for gtid in self._mariadb:
                seq = held.get(gtid.domain, 0)
                if seq >= gtid.seq:
                    continue
                first = seq + 1
                span = str(gtid) if first == gtid.seq else f"seq {first} .. {gtid}"
                out.append(f"domain {gtid.domain}: {span}")
            return out
        held_mysql = dict(have._mysql)
        missing: list[str] = []
        for (uuid, tag), spans in self._mysql:
            gaps = _subtract(spans, held_mysql.get((uuid, tag), ()))
            if gaps:
                label = f"{uuid}:{tag}" if tag else uuid
                text = ":".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in gaps)
                missing.append(f"{label}:{text}")
        return missing

    def union(self, other: GtidSet) -> GtidSet:
        """The set of transactions in either set (MariaDB: per domain the highest seq)."""
        flavor = self._common_flavor(other, "combine")
        if flavor is Flavor.MARIADB:
            return GtidSet._make(flavor, mariadb=self._mariadb + other._mariadb)
        mysql: dict[_MysqlKey, list[tuple[int, int]]] = {}
        for key, spans in self._mysql + other._mysql:
            mysql.setdefault(key, []).extend(spans)
        return GtidSet._make(flavor, mysql=mysql)

    def add(self, gtid: str) -> GtidSet:
        """This set plus one GTID such as ``0-1-101`` or ``uuid:7`` (``uuid:tag:7``)."""
        if not isinstance(gtid, str):
            raise TypeError(f"a GTID must be a str, not {type(gtid).__name__}")
        text = gtid.strip()
        if not text or "," in text:
            raise ValueError(
                f"{gtid!r} is not a single GTID: expected MariaDB 'domain-server-seq' "
                "(e.g. '0-1-101') or MySQL 'uuid:number' "
                "(e.g. '3e11fa47-71ca-11e1-9e33-c80aa9429562:7')"
            )
        one = GtidSet.parse(text)
        if one._flavor is Flavor.MYSQL:
            (_key, spans), *more = one._mysql
            if more or len(spans) != 1 or spans[0][0] != spans[0][1]:
                raise ValueError(
                    f"{gtid!r} is not a single GTID: a MySQL GTID is 'uuid:number' "
                    "(e.g. '3e11fa47-71ca-11e1-9e33-c80aa9429562:7'), not intervals"
                )
        return self.union(one)

    def _common_flavor(self, other: GtidSet, verb: str) -> Flavor | None:
        if not isinstance(other, GtidSet):
            raise TypeError(f"expected a GtidSet, not {type(other).__name__}")
        mine, theirs = self._flavor, other._flavor
        if mine is not None and theirs is not None and mine is not theirs:
            raise ValueError(
                f"cannot {verb} {_label(mine)} GTID set {str(self)!r} with "
                f"{_label(theirs)} GTID set {str(other)!r}"
            )
        return mine or theirs


def _label(flavor: Flavor) -> str:
    return "MariaDB" if flavor is Flavor.MARIADB else "MySQL"


def _detect(entry: str) -> Flavor:
    """A ':' or a bare uuid means MySQL; anything else is judged as MariaDB."""
    return Flavor.MYSQL if ":" in entry or _UUID.fullmatch(entry) else Flavor.MARIADB


def _bad(part: str, text: str, why: str) -> ValueError:
    where = "" if part == text else f" in GTID set {text!r}"
    return ValueError(f"bad GTID {part!r}{where}: {why}; {EXPECTED_FORMS}")


def _parse_mariadb(entry: str, text: str) -> MariadbGtid:
    match = _MARIADB_GTID.fullmatch(entry)
    if match is None:
        raise _bad(entry, text, "not of the form domain-server-seq")
    domain, server_id, seq = (int(group) for group in match.groups())
    if domain > _U32 or server_id > _U32:
        raise _bad(entry, text, f"domain and server id must be at most {_U32}")
    if seq > _U64:
        raise _bad(entry, text, f"sequence number must be at most {_U64}")
    return MariadbGtid(domain, server_id, seq)


def _parse_mysql(entry: str, text: str) -> dict[_MysqlKey, list[tuple[int, int]]]:
    uuid, *rest = (part.strip() for part in entry.split(":"))
    if _UUID.fullmatch(uuid) is None:
        raise _bad(entry, text, f"{uuid!r} is not a uuid like 3e11fa47-71ca-11e1-9e33-c80aa9429562")
    uuid = uuid.lower()
    found: dict[_MysqlKey, list[tuple[int, int]]] = {}
    tag = ""
    for part in rest:
        if _TAG.fullmatch(part):
            if tag and not found.get((uuid, tag)):
                raise _bad(entry, text, f"tag {tag!r} has no intervals")
            tag = part.lower()
            continue
        match = _INTERVAL.fullmatch(part)
        if match is None:
            raise _bad(entry, text, f"{part!r} is not an interval like 5 or 1-5")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if lo < 1 or hi > _GNO_MAX:
            raise _bad(entry, text, f"transaction numbers must be between 1 and {_GNO_MAX}")
        if hi < lo:
            raise _bad(entry, text, f"interval {part!r} ends before it starts")
        found.setdefault((uuid, tag), []).append((lo, hi))
    if not found or (tag and not found.get((uuid, tag))):
        raise _bad(entry, text, "a uuid needs at least one interval after ':'")
    return found


def _merge(spans: Iterable[tuple[int, int]]) -> _Intervals:
    """Sort intervals and join the ones that overlap or touch (1-5 and 6-9 make 1-9)."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def _subtract(spans: _Intervals, held: _Intervals) -> list[tuple[int, int]]:
    """The parts of ``spans`` outside ``held`` (both sorted and merged)."""
    out: list[tuple[int, int]] = []
    for lo, hi in spans:
        start = lo
        for h_lo, h_hi in held:
            if h_hi < start or h_lo > hi:
                continue
            if h_lo > start:
                out.append((start, h_lo - 1))
            start = max(start, h_hi + 1)
            if start > hi:
                break
        if start <= hi:
            out.append((start, hi))
    return out


def _covered(span: tuple[int, int], held: _Intervals) -> bool:
    lo, hi = span
    return any(h_lo <= lo and hi <= h_hi for h_lo, h_hi in held)
