"""Binlog positions: the totally ordered coordinate every change is stamped with.

A position plays the role of TiCDC's timestamp: watermarks, resolved positions,
checkpoints and barriers are all positions, so they must compare. Within one
server's binlog the order is (file sequence number, offset): ``mysql-bin.000009``
rolls over to ``mysql-bin.000010``, which a string comparison would get wrong.

Equality versus order (a deliberate split):

* ``==`` and ``hash`` are the dataclass ones and compare ``file``, ``offset``
  *and* ``gtid``, so a position read with its GTID set is not silently equal
  to one read without it (persisted checkpoints round-trip exactly).
* ``<``, ``<=``, ``>``, ``>=`` (and so ``min``, ``max``, ``sorted``) use only
  :meth:`Position.key`, ``(file sequence, offset)``. Two positions at the same
  coordinate with different GTID sets are therefore neither ``<`` nor ``>``
  each other, while ``<=`` and ``>=`` both hold. Use ``a.key() == b.key()`` to
  ask "same place in the binlog".

Positions of binlogs with different base names (``mysql-bin`` vs ``mariadb-bin``)
belong to different servers or a reconfigured one; comparing them raises
``ValueError`` instead of guessing.

Generations (a failover of the source, docs/operations.md "Source failover"). A
file:offset means something only on the server that wrote it. Every position
carries the *generation* of the source it was read on: 0 for the server a
changefeed started on, n+1 after the changefeed followed the source to another
server (``cdc.changefeed.failover``). Positions order by generation first
(``key()`` shifts the file sequence by it), so everything read on the new
server comes after everything read on the old one, and every comparison the
owner and the processors make (checkpoints, barriers, watermarks) stays a
time order. Where a transaction read again on the new server meets a position
of the old one, the GTID sets decide (:meth:`Position.within`): the same
transaction has the same GTID on every server of a replication topology.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc.model.gtid import Flavor, GtidSet

__all__ = ["Position"]

FORMAT_VERSION = 1
_FILE = re.compile(r"(.+)\.(\d+)")
_GTID_SEP = " gtid="
_GEN_SEP = " gen="
#: ``key()``'s first element is ``generation << _GEN_SHIFT | file sequence``: binlog file
#: sequence numbers stay far below 2**40 (MySQL and MariaDB use six or seven digits).
_GEN_SHIFT = 40
_FORM = "expected FILE:OFFSET, e.g. 'mysql-bin.000003:1234'"


@dataclass(frozen=True)
class Position:
    """A binlog coordinate: file name (``mysql-bin.000012``), byte offset, optional GTID set."""

    file: str
    offset: int
    gtid: GtidSet | None = None
    gen: int = 0
    """The source generation the position was read on (see the module docstring)."""
    # (generation-shifted file sequence, offset), computed once: positions are compared
    # per row on hot paths
    _key: tuple[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.file, str) or _FILE.fullmatch(self.file) is None:
            raise ValueError(
                f"binlog file name {self.file!r} must end in '.<number>', e.g. 'mysql-bin.000003'"
            )
        if "/" in self.file or ":" in self.file:
            raise ValueError(
                f"binlog file name {self.file!r} must be a bare name like 'mysql-bin.000003', "
                "without a directory or ':'"
            )
        if isinstance(self.offset, bool) or not isinstance(self.offset, int):
            raise ValueError(f"binlog offset must be an int, not {self.offset!r}")
        if self.offset < 0:
            raise ValueError(f"binlog offset must be >= 0, not {self.offset}")
        if self.gtid is not None and not isinstance(self.gtid, GtidSet):
            raise ValueError(
                f"gtid must be a GtidSet or None, not {type(self.gtid).__name__}; "
                "use GtidSet.parse(text)"
            )
        if isinstance(self.gen, bool) or not isinstance(self.gen, int) or self.gen < 0:
            raise ValueError(f"position generation must be an int >= 0, not {self.gen!r}")
        object.__setattr__(self, "_key", ((self.gen << _GEN_SHIFT) | self.file_seq, self.offset))

    @property
    def file_base(self) -> str:
        """The file name without its sequence suffix: ``mysql-bin`` for ``mysql-bin.000012``."""
        return self.file.rsplit(".", 1)[0]

    @property
    def file_seq(self) -> int:
        """The file's sequence number: 12 for ``mysql-bin.000012``."""
        return int(self.file.rsplit(".", 1)[1])

    def key(self) -> tuple[int, int]:
        """The sort key ``(file sequence, offset)``, the file sequence shifted by the
        generation (later generations sort after earlier ones); within one generation
        only meaningful for one ``file_base``."""
        return self._key

    def within(self, other: Position) -> bool:
        """Whether every transaction up to this position is also up to ``other``.

        On one server (same generation) that is ``self <= other``. Across a failover
        the file:offset of the other server means nothing, and the GTID sets decide:
        ``other``'s set holds every transaction of this one's. False when either
        lacks a GTID set (nothing can be proven then).
        """
        if self.gen == other.gen:
            return self._key <= other._key
        if self.gtid is None or other.gtid is None:
            return False
        return other.gtid.contains(self.gtid)

    def with_gen(self, gen: int) -> Position:
        """This position stamped with generation ``gen``."""
        return self if gen == self.gen else Position(self.file, self.offset, self.gtid, gen)

    def _key_against(self, other: Position) -> tuple[tuple[int, int], tuple[int, int]]:
        if self.gen == other.gen and self.file_base != other.file_base:
            raise ValueError(
                f"cannot order positions of different binlogs: {self.file!r} and {other.file!r} "
                f"(base names {self.file_base!r} and {other.file_base!r})"
            )
        return self.key(), other.key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        mine, theirs = self._key_against(other)
        return mine < theirs

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        mine, theirs = self._key_against(other)
        return mine <= theirs

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        mine, theirs = self._key_against(other)
        return mine > theirs

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        mine, theirs = self._key_against(other)
        return mine >= theirs

    def __str__(self) -> str:
        text = f"{self.file}:{self.offset}"
        if self.gtid is not None:
            text = f"{text}{_GTID_SEP}{self.gtid}"
        return text if not self.gen else f"{text}{_GEN_SEP}{self.gen}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """Parse ``FILE:OFFSET`` (``mysql-bin.000003:1234``), as typed by a user.

        The ``FILE:OFFSET gtid=SET gen=N`` form that ``str()`` prints is accepted too,
        with the GTID flavour detected from the set.
        """
        if not isinstance(text, str):
            raise TypeError(f"position text must be a str, not {type(text).__name__}")
        text, gen_sep, gen_text = text.strip().partition(_GEN_SEP)
        gen = 0
        if gen_sep:
            if not (gen_text.strip().isascii() and gen_text.strip().isdigit()):
                raise ValueError(f"position {text!r} has a non-numeric generation {gen_text!r}")
            gen = int(gen_text)
        coordinate, sep, gtid_text = text.strip().partition(_GTID_SEP)
        coordinate = coordinate.strip()
        file, colon, offset_text = coordinate.rpartition(":")
        if not colon:
            raise ValueError(f"position {text!r} has no ':' between file and offset; {_FORM}")
        if not file:
            raise ValueError(f"position {text!r} has no binlog file name before ':'; {_FORM}")
        offset_text = offset_text.strip()
        if offset_text.startswith("-") and offset_text[1:].isdigit():
            raise ValueError(f"position {text!r} has a negative offset; offsets are >= 0")
        if not (offset_text.isascii() and offset_text.isdigit()):
            raise ValueError(f"position {text!r} has a non-numeric offset {offset_text!r}; {_FORM}")
        gtid = GtidSet.parse(gtid_text) if sep else None
        return cls(file.strip(), int(offset_text), gtid, gen)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict carrying ``"v": 1``; the GTID set is its canonical text; the
        generation only when it is not 0 (so positions of a changefeed that never failed
        over read as before, by any reader)."""
        data: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "file": self.file,
            "offset": self.offset,
            "gtid": None if self.gtid is None else str(self.gtid),
            "gtid_flavor": None
            if self.gtid is None or self.gtid.flavor is None
            else self.gtid.flavor.value,
        }
        if self.gen:
            data["gen"] = self.gen
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Position:
        """Read what :meth:`to_dict` wrote, switching on the format version ``"v"``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored position must be a JSON object, not {data!r}")
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"unsupported position format version {version!r} "
                f"(this build reads version {FORMAT_VERSION}): {dict(data)!r}"
            )
        missing = [name for name in ("file", "offset") if name not in data]
        if missing:
            raise ValueError(f"stored position lacks {', '.join(missing)}: {dict(data)!r}")
        gtid_text = data.get("gtid")
        gtid = None
        if gtid_text is not None:
            flavor_name = data.get("gtid_flavor")
            try:
                flavor = None if flavor_name is None else Flavor(flavor_name)
            except ValueError:
                raise ValueError(
                    f"stored position has unknown gtid_flavor {flavor_name!r}; "
                    f"expected one of {[f.value for f in Flavor]} or null"
                ) from None
            if not isinstance(gtid_text, str):
                raise ValueError(f"stored position gtid must be a string, not {gtid_text!r}")
            gtid = GtidSet.parse(gtid_text, flavor)
        return cls(data["file"], data["offset"], gtid, data.get("gen", 0))

    def to_json(self) -> str:
        """Compact JSON of :meth:`to_dict`, with sorted keys so equal positions give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Position:
        """Read what :meth:`to_json` wrote (bytes as read from etcd are accepted)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"stored position is not valid JSON ({exc}): {text!r}") from None
        return cls.from_dict(data)
