"""The owner's share assignment (owner.chunk_shares.assign), decided on views built here."""

from __future__ import annotations

from cdc.changefeed.snapshot_shares import HeldShare, Share, ShareState
from cdc.model.schema import TableName
from owner.chunk_shares import assign

T = TableName("db", "t")


def held(n: int, capture: str | None = None, state: ShareState = ShareState.OPEN, cf: str = "cf"):
    share = Share(n, n * 16, n * 16 + 16, capture, state)
    return HeldShare(f"/k/{cf}/{n}", cf, T, share, 100 + n)


def given(assignments) -> list[tuple[int, str]]:
    return [(a.held.share.n, a.capture_id) for a in assignments]


def test_open_shares_go_to_the_least_loaded_live_captures_a_few_each() -> None:
    shares = [held(n) for n in range(10)]
    out = assign(shares, ["b", "a", "c"], {"cf"}, per_capture=2)
    assert given(out) == [(0, "a"), (1, "b"), (2, "c"), (3, "a"), (4, "b"), (5, "c")]


def test_shares_running_count_against_their_capture_and_finished_ones_do_not() -> None:
    shares = [
        held(0, "a"),
        held(1, "a"),
        held(2, "b", ShareState.DONE),
        held(3, "b", ShareState.FAILED),
        held(4),
        held(5),
    ]
    assert given(assign(shares, ["a", "b"], {"cf"}, per_capture=2)) == [(4, "b"), (5, "b")]


def test_a_lost_captures_open_shares_go_to_live_ones() -> None:
    shares = [held(0, "gone"), held(1, "gone", ShareState.DONE), held(2, "a")]
    assert given(assign(shares, ["a", "b"], {"cf"}, per_capture=2)) == [(0, "b")]


def test_nothing_is_given_for_a_changefeed_not_running_or_without_captures() -> None:
    shares = [held(0), held(1, cf="other")]
    assert given(assign(shares, ["a"], {"other"})) == [(1, "a")]
    assert assign(shares, [], {"cf", "other"}) == []
