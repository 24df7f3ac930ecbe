"""GtidSet.missing_from: what a failover guard names when a server lacks transactions."""

from __future__ import annotations

from cdc.model.gtid import GtidSet

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_nothing_missing_from_a_superset() -> None:
    assert GtidSet.parse("0-1-5").missing_from(GtidSet.parse("0-2-9")) == []
    assert GtidSet.parse(f"{UUID}:1-5").missing_from(GtidSet.parse(f"{UUID}:1-9")) == []


def test_mariadb_names_the_sequence_numbers_per_domain() -> None:
    needed = GtidSet.parse("0-1-105,1-3-7")
    have = GtidSet.parse("0-1-100,1-3-7")
    assert needed.missing_from(have) == ["domain 0: seq 101 .. 0-1-105"]
    assert GtidSet.parse("0-1-101").missing_from(have) == ["domain 0: 0-1-101"]
    assert GtidSet.parse("2-1-3").missing_from(have) == ["domain 2: seq 1 .. 2-1-3"]


def test_mysql_names_the_intervals() -> None:
    needed = GtidSet.parse(f"{UUID}:1-20")
    have = GtidSet.parse(f"{UUID}:1-5:8-10")
    assert needed.missing_from(have) == [f"{UUID}:6-7:11-20"]
    assert needed.missing_from(GtidSet.empty()) == [f"{UUID}:1-20"]
