"""Which reader a joining table goes to, and when a catch-up reader merges
(processor/shared_stream.py), without a server.

Found by review: a catch-up reader that merged while a joiner still waited for its
reading thread to stop at a boundary ended with the joiner in its list, nobody ever
taking or ending it; tables starting at a GTID set could join no running reader."""

from __future__ import annotations

import pytest
from stream_parts import SERVER, Store, pos, stream, table

from cdc.model.gtid import Flavor, GtidSet
from cdc.model.schema import TableName
from processor.shared_stream import StreamOptions, _Reader


class NotDrained:
    """A read-ahead whose reading thread has not stopped at the consumer's boundary yet."""

    held = False

    def hold(self) -> None:
        self.held = True

    def drained(self) -> bool:
        return False


def test_a_catch_up_reader_with_a_joiner_waiting_does_not_merge_yet() -> None:
    store = Store()
    shared = stream(store, None, StreamOptions(60.0))
    main = _Reader(shared, "main", pos(1000), SERVER)
    catch = _Reader(shared, "catch-up", pos(100), SERVER)
    shared.main, shared.catchup = main, catch
    main.boundary = main.paused_at = pos(1000)  # paused for the merge
    catch.boundary = pos(1000)  # and the catch-up reader reached it
    held = table(store, "held", pos(100))
    catch.held.add(held)
    shared.where[held] = catch
    joiner = table(store, "joiner", pos(1000))
    with shared.cond:
        assert catch.can_take(pos(1000))
        catch.joining.append(joiner)
        shared.where[joiner] = catch
    ahead = NotDrained()
    catch.puller._ahead = ahead  # type: ignore[assignment]
    assert not catch._at_boundary()  # no merge while the joiner waits
    assert ahead.held  # the reading thread is asked to stop at its next boundary
    assert shared.catchup is catch and catch.held.get(TableName("db", "held")) is held
    assert joiner in catch.joining and shared.where[joiner] is catch


def test_tables_starting_at_one_gtid_set_all_join_the_reader_starting_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by review: a GTID set has no place to compare with, so every table of a
    changefeed started at one (start-gtid) but the first two waited for merges, each
    reading the backlog again; and a wait that a barrier could make endless."""
    monkeypatch.setattr(_Reader, "start", lambda self: None)  # no thread: nothing read
    store = Store()
    shared = stream(store, None, StreamOptions())
    monkeypatch.setattr(shared, "_open_sink", lambda: None)
    start = GtidSet.parse("0-1-100", Flavor.MARIADB)
    states = [table(store, f"t{n}", None) for n in range(5)]
    for state in states:
        shared.join(state, start, SERVER)
    assert shared.main is not None and shared.main.joining == states
    assert shared.catchup is None and not shared.waiting
    shared.main.reading = True  # once it reads, a table starting at the set goes elsewhere
    late = table(store, "late", None)
    shared.join(late, start, SERVER)
    assert shared.catchup is not None and shared.catchup.joining == [late]
