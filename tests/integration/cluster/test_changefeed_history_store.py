"""The audit history on the real etcd: appended in order, bounded, kept after a remove."""

from __future__ import annotations

from cdc.changefeed import ChangefeedStore
from cdc.changefeed.history import HISTORY_KEPT, Actor, history_of, record
from cdc.config import load_changefeed_config
from cdc.store import EtcdStore

ALICE = Actor("admin", "alice", "ipv4:127.0.0.1:5000")


def test_record_appends_and_a_remove_keeps_the_history(store: EtcdStore) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(
        load_changefeed_config(
            None,
            {"changefeed_id": "cf1", "source_uri": "mysql://u@h:3306/", "sink_uri": "blackhole://"},
        )
    )
    assert history_of(store, "cf1") == ()
    record(store, "cf1", "create", ALICE)
    record(store, "cf1", "pause", ALICE, {"state": "stopped"})
    feeds.remove("cf1")
    record(store, "cf1", "remove", ALICE)
    entries = history_of(store, "cf1")
    assert [e.op for e in entries] == ["create", "pause", "remove"]
    assert entries[1].detail == {"state": "stopped"} and entries[1].who == ALICE
    assert history_of(store, "cf10") == ()


def test_the_history_is_bounded(store: EtcdStore) -> None:
    for n in range(HISTORY_KEPT + 3):
        record(store, "busy", "pause", ALICE, {"n": str(n)})
    entries = history_of(store, "busy")
    assert len(entries) == HISTORY_KEPT
    assert entries[0].detail["n"] == "3"
