"""Owner election and fencing against a real etcd, with 2-second leases."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from cdc.store import (
    CampaignCancelled,
    CampaignTimeout,
    Election,
    EtcdStore,
    Fence,
    FencedError,
)

pytestmark = pytest.mark.integration

TTL = 2


class Campaigner:
    """Runs ``election.campaign()`` on a thread and records when it won."""

    def __init__(self, election: Election) -> None:
        self.election = election
        self.fence: Fence | None = None
        self.won_at: float | None = None
        self.error: BaseException | None = None
        self.won = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.fence = self.election.campaign(timeout=30)
            self.won_at = time.monotonic()
        except BaseException as exc:
            self.error = exc
        self.won.set()


def test_one_owner_among_two_campaigners(open_store: Callable[..., EtcdStore]) -> None:
    a = Election(open_store(), "capture-a", ttl=TTL)
    b = Election(open_store(), "capture-b", ttl=TTL)
    fence_a = a.campaign(timeout=5)
    assert a.fence == fence_a
    assert a.current_owner() == ("capture-a", fence_a.create_revision)
    with pytest.raises(CampaignTimeout, match="capture-a still holds"):
        b.campaign(timeout=1)
    assert b.fence is None
    assert a.is_owner() and b.is_owner(fence_a) and not b.is_owner()
    assert a.campaign(timeout=1) == fence_a  # campaigning again changes nothing
    a.resign()
    b.resign()


def test_a_capture_says_once_whom_it_waits_for(
    open_store: Callable[..., EtcdStore], caplog: pytest.LogCaptureFixture
) -> None:
    """cdc-server campaigns again every second: it logged that it waits at each retry."""
    a = Election(open_store(), "capture-a", ttl=TTL)
    b = Election(open_store(), "capture-b", ttl=TTL)
    a.campaign(timeout=5)
    with caplog.at_level(logging.INFO, logger="cdc.store.election"):
        for _ in range(3):
            with pytest.raises(CampaignTimeout):
                b.campaign(timeout=0.3)
        a.resign()
        a.campaign(timeout=5)
        with pytest.raises(CampaignTimeout):
            b.campaign(timeout=0.3)
    waits = [r.getMessage() for r in caplog.records if "waits:" in r.getMessage()]
    assert len(waits) == 2, waits  # once per term of capture-a
    a.resign()
    b.resign()


def test_resign_hands_over_at_once(open_store: Callable[..., EtcdStore]) -> None:
    a = Election(open_store(), "capture-a", ttl=TTL)
    b = Election(open_store(), "capture-b", ttl=TTL)
    fence_a = a.campaign(timeout=5)
    waiting = Campaigner(b)
    time.sleep(0.3)
    assert not waiting.won.is_set()
    resigned_at = time.monotonic()
    a.resign()
    assert waiting.won.wait(5)
    assert waiting.error is None
    assert waiting.won_at - resigned_at < 1.0
    assert waiting.fence.create_revision > fence_a.create_revision
    assert b.current_owner() == ("capture-b", waiting.fence.create_revision)
    assert not a.is_owner(fence_a)
    a.resign()  # resigning twice is harmless
    b.resign()
    assert b.current_owner() is None


def test_expired_owner_is_replaced_and_fenced_out(open_store: Callable[..., EtcdStore]) -> None:
    """The owner stalls (its lease is no longer refreshed); the other capture takes over."""
    store_a, store_b = open_store(), open_store()
    stalled_lease = store_a.grant_lease(TTL)  # nobody keeps this one alive
    a = Election(store_a, "capture-a", lease=stalled_lease)
    b = Election(store_b, "capture-b", ttl=TTL)
    fence_a = a.campaign(timeout=5)
    status = store_a.keys.changefeed_status("cf")
    assert store_a.fenced_put(status, {"checkpoint": 1}, fence_a)
    granted_at = time.monotonic()
    waiting = Campaigner(b)
    assert waiting.won.wait(TTL * 4)
    assert waiting.error is None
    assert waiting.won_at - granted_at <= 2 * TTL + 0.5
    fence_b = waiting.fence

    with pytest.raises(FencedError, match="no longer the owner") as info:
        store_a.fenced_put(status, {"checkpoint": 0}, fence_a)
    assert info.value.fence_revision == fence_a.create_revision
    assert info.value.current_revision == fence_b.create_revision
    with pytest.raises(FencedError):
        store_a.fenced_delete(status, fence_a)
    with pytest.raises(FencedError):
        store_a.update(status, lambda old: {"checkpoint": 0}, fence=fence_a)
    assert store_b.get(status).json()["checkpoint"] == 1

    assert store_b.fenced_put(status, {"checkpoint": 2}, fence_b)
    current = store_b.get(status)
    assert not store_b.fenced_put(status, {"checkpoint": 3}, fence_b, mod_revision=1)
    assert store_b.fenced_put(status, {"checkpoint": 3}, fence_b, mod_revision=current.mod_revision)
    assert store_b.update(status, lambda old: {**old, "checkpoint": 4}, fence=fence_b)
    assert store_b.get(status).json()["checkpoint"] == 4
    b.resign()


def test_revoked_lease_deposes_the_owner(open_store: Callable[..., EtcdStore]) -> None:
    store_a, store_b = open_store(), open_store()
    deposed = threading.Event()
    a = Election(store_a, "capture-a", ttl=TTL, on_lost=deposed.set)
    b = Election(store_b, "capture-b", ttl=TTL)
    fence_a = a.campaign(timeout=5)
    waiting = Campaigner(b)
    holder = store_b.get(fence_a.key)
    store_b.revoke_lease(holder.lease)  # e.g. an operator removes the stuck owner
    assert waiting.won.wait(TTL * 2)
    assert waiting.error is None
    assert deposed.wait(TTL * 2)
    assert a.fence is None
    with pytest.raises(FencedError):
        store_a.fenced_put(store_a.keys.barrier("cf"), {"at": 1}, fence_a)
    b.resign()


def test_a_new_term_of_the_same_capture_fences_the_old_one(
    open_store: Callable[..., EtcdStore],
) -> None:
    store = open_store()
    first = Election(store, "capture-a", ttl=TTL)
    old_fence = first.campaign(timeout=5)
    first.resign()
    restarted = Election(store, "capture-a", ttl=TTL)
    new_fence = restarted.campaign(timeout=5)
    assert new_fence != old_fence
    key = store.keys.barrier("cf")
    with pytest.raises(FencedError):
        store.fenced_put(key, {"at": 1}, old_fence)
    assert store.fenced_put(key, {"at": 2}, new_fence)
    restarted.resign()


def test_ownership_passes_through_three_captures_one_at_a_time(
    open_store: Callable[..., EtcdStore],
) -> None:
    """Each capture, once owner, records itself with a fenced update, then resigns."""
    log_key = open_store().keys.barrier("owners")
    elections = [Election(open_store(), f"capture-{i}", ttl=TTL) for i in range(3)]
    overlap: list[str] = []
    holding = threading.Lock()

    def serve(election: Election) -> None:
        fence = election.campaign(timeout=30)
        if not holding.acquire(blocking=False):
            overlap.append(election.capture_id)
            return
        try:
            election.store.update(
                log_key,
                lambda old: {"owners": [*(old or {}).get("owners", []), election.capture_id]},
                fence=fence,
            )
            time.sleep(0.1)
        finally:
            holding.release()
            election.resign()

    threads = [threading.Thread(target=serve, args=(e,)) for e in elections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not overlap
    owners = open_store().get(log_key).json()["owners"]
    assert sorted(owners) == ["capture-0", "capture-1", "capture-2"]


def test_resign_cancels_a_waiting_campaign(open_store: Callable[..., EtcdStore]) -> None:
    a = Election(open_store(), "capture-a", ttl=TTL)
    b = Election(open_store(), "capture-b", ttl=TTL)
    a.campaign(timeout=5)
    waiting = Campaigner(b)
    time.sleep(0.3)
    started = time.monotonic()
    b.resign()  # e.g. capture-b shuts down
    assert waiting.won.wait(2)
    assert time.monotonic() - started < 1.0
    assert isinstance(waiting.error, CampaignCancelled)
    assert a.current_owner()[0] == "capture-a"
    a.resign()
    assert b.campaign(timeout=5)  # a later campaign starts afresh
    assert b.current_owner()[0] == "capture-b"
    b.resign()
