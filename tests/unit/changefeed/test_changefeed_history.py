"""The audit history's values: bounded, versioned, masked, and who is shown as told."""

from __future__ import annotations

import pytest

from cdc.changefeed.history import HISTORY_KEPT, Actor, HistoryEntry, appended, read_history


def _entry(n: int) -> HistoryEntry:
    return HistoryEntry("pause", Actor("admin", "alice"), {"n": str(n)}, at=float(n))


def test_appended_keeps_the_newest_entries() -> None:
    value = None
    for n in range(HISTORY_KEPT + 7):
        value = appended(value, _entry(n))
    entries = read_history(value)
    assert len(entries) == HISTORY_KEPT
    assert entries[0].detail["n"] == "7"
    assert entries[-1].detail["n"] == str(HISTORY_KEPT + 6)


def test_round_trip_and_version() -> None:
    entry = HistoryEntry(
        "ddl replace",
        Actor("admin", "bob", "ipv4:127.0.0.1:5000", "CN=ops"),
        {"position": "binlog.000001:4", "sql": "ALTER TABLE t ADD c INT"},
        at=12.5,
    )
    assert read_history(appended(None, entry)) == (entry,)
    with pytest.raises(ValueError, match="format version"):
        read_history({"v": 9, "entries": []})
    assert read_history(None) == ()


def test_secrets_and_long_values_do_not_reach_the_history() -> None:
    entry = HistoryEntry(
        "update",
        Actor("admin", "x" * 1000),
        {"sink-uri": "mysql://u:hunter2@h:3306/", "sql": "y" * 1000},
    )
    assert "hunter2" not in str(entry.to_dict())
    assert len(entry.detail["sql"]) <= 300
    assert entry.who.user is not None and len(entry.who.user) <= 300


@pytest.mark.parametrize("op", ["", "Pause", "x" * 40, "drop;table", 3])
def test_an_operation_name_must_be_short_and_plain(op: object) -> None:
    with pytest.raises(ValueError, match="history operation"):
        HistoryEntry(op, Actor("admin"))  # type: ignore[arg-type]


def test_who_reads_as_one_line() -> None:
    assert str(Actor("admin", "alice", "ipv4:10.0.0.9:5123")) == (
        "alice (admin) from ipv4:10.0.0.9:5123"
    )
    assert str(Actor("open")) == "anonymous (open)"
    assert str(Actor("read", "bob", None, "CN=ops")) == "CN=ops (read) as bob"
