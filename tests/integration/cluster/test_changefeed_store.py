"""The changefeed lifecycle on the real etcd: create-only, CAS state changes, fenced owner
writes, update (table rules while running, anything while stopped, nothing in error),
removal of every key and nothing more."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cdc.changefeed import (
    ChangefeedExists,
    ChangefeedNotFound,
    ChangefeedState,
    ChangefeedStatus,
    ChangefeedStore,
    ErrorInfo,
    InvalidTransition,
    NotStopped,
)
from cdc.config import load_changefeed_config
from cdc.config.changefeed import ChangefeedConfig
from cdc.errors import ConfigError
from cdc.store import Election, EtcdStore, Fence, FencedError, Put

Elect = Callable[[str], tuple[Election, Fence]]

SOURCE = "mysql://repl@db1:3306/?password-env=SRC_PW"


def config(cf: str = "orders", **overrides: object) -> ChangefeedConfig:
    return load_changefeed_config(
        None,
        {"changefeed_id": cf, "source_uri": SOURCE, "sink_uri": "blackhole://", **overrides},
    )


def test_create_stores_masked_info_and_normal_status(store: EtcdStore) -> None:
    feeds = ChangefeedStore(store)
    created = feeds.create(config())
    assert created.status.state is ChangefeedState.NORMAL
    assert created.config == config()
    stored = store.get(store.keys.changefeed_info("orders"))
    assert stored is not None and b"password-env=SRC_PW" in stored.value
    assert [c.changefeed_id for c in feeds.list()] == ["orders"]


def test_create_is_create_only(store: EtcdStore) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    with pytest.raises(ChangefeedExists, match="orders exists already"):
        feeds.create(config(rules=["other.*"]))
    assert feeds.get("orders").config.rules == ("*.*",)


def test_create_refuses_a_password_it_would_not_store(store: EtcdStore) -> None:
    inline = config(source_uri="mysql://repl:secret@db1:3306/")
    with pytest.raises(ConfigError, match="inline password"):
        ChangefeedStore(store).create(inline)
    assert ChangefeedStore(store).list() == []


def test_pause_resume_and_the_refused_moves(store: EtcdStore) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    assert feeds.pause("orders").state is ChangefeedState.STOPPED
    assert feeds.pause("orders").state is ChangefeedState.STOPPED
    assert feeds.resume("orders").state is ChangefeedState.NORMAL
    with pytest.raises(ChangefeedNotFound, match="nope does not exist"):
        feeds.pause("nope")


def test_resume_clears_the_error_and_backoff(store: EtcdStore, elect: Elect) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    fence = elect("owner-1")[1]
    feeds.update_status(
        "orders",
        lambda s: s.changed(
            state=ChangefeedState.FAILED,
            error=ErrorInfo("boom", 1.0, permanent=True),
            error_history=(1.0,),
        ),
        fence=fence,
    )
    status = feeds.resume("orders")
    assert (status.state, status.error, status.error_history) == (ChangefeedState.NORMAL, None, ())


def test_update_while_running_takes_table_rules_only(store: EtcdStore) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    with pytest.raises(NotStopped, match="also changes snapshot: pause it first"):
        feeds.update(config(chunk_size=100))
    with pytest.raises(NotStopped, match="changes no \\[filter\\] rules: pause it first"):
        feeds.update(config())
    with pytest.raises(ConfigError, match="no-backfill: applies to the tables an update"):
        feeds.update(config(), no_backfill=True)
    updated = feeds.update(config(rules=["shop.*"]), no_backfill=True)
    pending = updated.status.tables_update
    assert pending is not None and pending.no_backfill and pending.old_rules == ("*.*",)
    assert updated.config.rules == ("shop.*",)
    with pytest.raises(NotStopped, match="has not applied the previous update"):
        feeds.update(config(rules=["shop.orders"]))


def test_update_while_stopped_takes_any_setting(store: EtcdStore) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    feeds.pause("orders")
    updated = feeds.update(config(chunk_size=100))
    assert updated.status.state is ChangefeedState.STOPPED
    assert updated.config == config(chunk_size=100)
    assert updated.status.tables_update is None


def test_update_in_error_is_refused(store: EtcdStore, elect: Elect) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    fence = elect("owner-1")[1]
    feeds.update_status(
        "orders",
        lambda s: s.changed(state=ChangefeedState.ERROR, error=ErrorInfo("boom", 1.0)),
        fence=fence,
    )
    with pytest.raises(NotStopped, match="is in state error; pause it"):
        feeds.update(config(rules=["shop.*"]))


def test_owner_writes_are_fenced(store: EtcdStore, elect: Elect) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    election, fence = elect("owner-1")
    election.resign()
    elect("owner-2")
    with pytest.raises(FencedError):
        feeds.update_status("orders", lambda s: s.changed(schema_version=9), fence=fence)
    assert feeds.get("orders").status.schema_version == 0


def test_owner_status_write_from_its_view_reads_nothing(
    store: EtcdStore, elect: Elect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's cycle writes its progress from the status it watched: a cycle that moves
    nothing sends etcd nothing, one that moves it sends one compare-and-swap, and a status
    that moved on since it was read is read again (its change kept, not overwritten)."""
    feeds = ChangefeedStore(store)
    feeds.create(config())
    fence = elect("owner-1")[1]
    sent = _count_requests(store, monkeypatch)

    def bump(status: ChangefeedStatus) -> ChangefeedStatus:
        return status.changed(schema_version=status.schema_version + 1)

    read = feeds.get("orders")
    sent.clear()
    assert feeds.update_status_from(read, lambda s: s, fence=fence) is read.status
    assert sent == []
    written = feeds.update_status_from(read, bump, fence=fence)
    assert written is not None and written.schema_version == 1
    assert sent == ["txn"]
    assert feeds.get("orders").status.schema_version == 1
    sent.clear()
    written = feeds.update_status_from(read, bump, fence=fence)  # read before the bump
    assert written is not None and written.schema_version == 2
    assert sent == ["txn", "get", "txn"]


def test_owner_status_write_from_its_view_is_fenced_and_keeps_to_the_diagram(
    store: EtcdStore, elect: Elect
) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    election, fence = elect("owner-1")
    feeds.update_status("orders", lambda s: s.changed(state=ChangefeedState.FINISHED), fence=fence)
    with pytest.raises(InvalidTransition, match="finished and cannot become normal"):
        feeds.update_status_from(
            feeds.get("orders"), lambda s: s.changed(state=ChangefeedState.NORMAL), fence=fence
        )
    election.resign()
    elect("owner-2")
    with pytest.raises(FencedError):
        feeds.update_status_from(
            feeds.get("orders"), lambda s: s.changed(schema_version=9), fence=fence
        )
    assert feeds.get("orders").status.schema_version == 0


def _count_requests(store: EtcdStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the store's reads and writes of one key (``get``, ``txn``) from now on."""
    sent: list[str] = []
    for name in ("get", "txn"):
        real = getattr(store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            sent.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)
    return sent


def test_owner_status_write_keeps_to_the_diagram(store: EtcdStore, elect: Elect) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config())
    fence = elect("owner-1")[1]
    feeds.update_status("orders", lambda s: s.changed(state=ChangefeedState.FINISHED), fence=fence)
    with pytest.raises(InvalidTransition, match="finished and cannot become normal"):
        feeds.update_status(
            "orders", lambda s: s.changed(state=ChangefeedState.NORMAL), fence=fence
        )
    with pytest.raises(InvalidTransition):
        feeds.resume("orders")


def test_remove_deletes_every_key_of_the_changefeed_only(store: EtcdStore, elect: Elect) -> None:
    feeds = ChangefeedStore(store)
    feeds.create(config("cf1"))
    feeds.create(config("cf10"))
    keys = store.keys
    for cf in ("cf1", "cf10"):
        store.txn(
            [],
            [
                Put(keys.task(cf, "db.t"), {"capture_id": "c"}),
                Put(keys.table_checkpoint(cf, "db.t"), {"state": "running"}),
                Put(keys.snapshot_chunk(cf, "db.t", 0), {"state": "done"}),
                Put(keys.barrier(cf), {"kind": "resolved"}),
                Put(keys.subscription(cf, "client"), {"acked": None}),
            ],
        )
    before = len(store.get_prefix(keys.prefix_of()))
    feeds.remove("cf1")
    remaining = [item.key for item in store.get_prefix(keys.prefix_of())]
    assert len(remaining) == before - 7
    assert not [k for k in remaining if "/cf1/" in k or k.endswith("/cf1")]
    assert [c.changefeed_id for c in feeds.list()] == ["cf10"]
    with pytest.raises(ChangefeedNotFound):
        feeds.remove("cf1")
    fence = elect("owner-1")[1]
    assert feeds.update_status("cf1", lambda s: s.changed(schema_version=1), fence=fence) is None
    assert store.get(keys.changefeed_status("cf1")) is None
