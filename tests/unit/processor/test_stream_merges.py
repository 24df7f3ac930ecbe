"""Which reader a joining table goes to, and when a catch-up reader merges
(processor/shared_stream.py), without a server.

Found by review: a catch-up reader that merged while a joiner still waited for its
reading thread to stop at a boundary ended with the joiner in its list, nobody ever
taking or ending it; tables starting at a GTID set could join no running reader."""

from __future__ import annotations

import pytest

from cdc.config import load_changefeed_config
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.metrics import TableMetrics
from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.source.flavor import ServerInfo
from cdc.store.keys import KeySpace
from processor.shared_stream import SharedStream, StreamOptions, _Reader
from processor.streamed_table import StreamedTable
from processor.table_records import RecordWriter, TaskGuard

CF = "cf"


class Store:
    keys = KeySpace("/cdc/test")


class NotDrained:
    """A read-ahead whose reading thread has not stopped at the consumer's boundary yet."""

    held = False

    def hold(self) -> None:
        self.held = True

    def drained(self) -> bool:
        return False


def pos(offset: int) -> Position:
    return Position("mysql-bin.000001", offset)


def table(store: Store, name: str, floor: Position | None) -> StreamedTable:
    return StreamedTable(
        TableName("db", name),
        None,
        None,
        floor=floor,
        records=RecordWriter(store, CF, f"db.{name}", "c1", TaskGuard(1)),  # type: ignore[arg-type]
        metrics=TableMetrics(CF, f"db.{name}"),
        events=EventFilter([], True),
        flavor=Flavor.MARIADB,
        case_sensitive=True,
        log=get_logger(__name__, table=name),
    )


def test_a_catch_up_reader_with_a_joiner_waiting_does_not_merge_yet() -> None:
    store = Store()
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": "mysql://u:p@127.0.0.1:1/",
            "sink_uri": "blackhole://",
            "rules": ["db.*"],
        },
    )
    server = ServerInfo(Flavor.MARIADB, "10.11", 1)
    stream = SharedStream(
        store,  # type: ignore[arg-type]
        config,
        None,  # type: ignore[arg-type]
        lambda: True,
        StreamOptions(60.0),
        capture_id="c1",
    )
    main = _Reader(stream, "main", pos(1000), server)
    catch = _Reader(stream, "catch-up", pos(100), server)
    stream.main, stream.catchup = main, catch
    main.boundary = main.paused_at = pos(1000)  # paused for the merge
    catch.boundary = pos(1000)  # and the catch-up reader reached it
    held = table(store, "held", pos(100))
    catch.held.add(held)
    stream.where[held] = catch
    joiner = table(store, "joiner", pos(1000))
    with stream.cond:
        assert catch.can_take(pos(1000))
        catch.joining.append(joiner)
        stream.where[joiner] = catch
    ahead = NotDrained()
    catch.puller._ahead = ahead  # type: ignore[assignment]
    assert not catch._at_boundary()  # no merge while the joiner waits
    assert ahead.held  # the reading thread is asked to stop at its next boundary
    assert stream.catchup is catch and catch.held.get(TableName("db", "held")) is held
    assert joiner in catch.joining and stream.where[joiner] is catch


def test_tables_starting_at_one_gtid_set_all_join_the_reader_starting_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by review: a GTID set has no place to compare with, so every table of a
    changefeed started at one (start-gtid) but the first two waited for merges, each
    reading the backlog again; and a wait that a barrier could make endless."""
    monkeypatch.setattr(_Reader, "start", lambda self: None)  # no thread: nothing read
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": "mysql://u:p@127.0.0.1:1/",
            "sink_uri": "blackhole://",
            "rules": ["db.*"],
        },
    )
    store = Store()
    stream = SharedStream(
        store,  # type: ignore[arg-type]
        config,
        None,  # type: ignore[arg-type]
        lambda: True,
        StreamOptions(),
        capture_id="c1",
    )
    monkeypatch.setattr(stream, "_open_sink", lambda: None)
    server = ServerInfo(Flavor.MARIADB, "10.11", 1)
    start = GtidSet.parse("0-1-100", Flavor.MARIADB)
    states = [table(store, f"t{n}", None) for n in range(5)]
    for state in states:
        stream.join(state, start, server)
    assert stream.main is not None and stream.main.joining == states
    assert stream.catchup is None and not stream.waiting
    stream.main.reading = True  # once it reads, a table starting at the set goes elsewhere
    late = table(store, "late", None)
    stream.join(late, start, server)
    assert stream.catchup is not None and stream.catchup.joining == [late]
