"""What a capture's stream does under the load of thousands of tables
(processor/shared_stream.py), without a server: a lapse in the lease's proof makes
writes wait instead of failing the reader; tables starting together share one check
of the source."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from stream_parts import Store, stream

from cdc.model.gtid import Flavor
from cdc.source.flavor import ServerInfo
from processor import shared_stream
from processor.shared_stream import StreamOptions
from processor.table_records import TableLost


def test_a_write_waits_while_the_lease_is_not_proven_and_fails_only_past_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under load the lease clock's answer can come late: the proof lapses for a moment
    while the lease lives on. The stream then waits to write (failing its reader would
    start every table it holds again, more load where there was too much); only a proof
    missing for ``LEASE_WAIT`` seconds ends it, and nothing is written meanwhile."""
    monkeypatch.setattr(shared_stream, "LEASE_WAIT", 2.0)
    proven = threading.Event()
    shared = stream(Store(), None, StreamOptions(0.2), alive=proven.is_set)
    calls: list[Any] = []
    try:
        shared._open_sink()
        monkeypatch.setattr(shared._sink, "write_rows", calls.append)
        writer = threading.Thread(target=shared.write, args=([],))
        writer.start()
        time.sleep(0.5)
        assert writer.is_alive() and calls == []  # waiting, nothing written
        proven.set()
        writer.join(5)
        assert not writer.is_alive() and calls == [[]]
        proven.clear()
        begun = time.monotonic()
        with pytest.raises(TableLost, match="not known to be alive"):
            shared.flush()
        assert time.monotonic() - begun >= 2.0 and calls == [[]]
    finally:
        shared.close()


def test_tables_starting_together_share_one_check_of_the_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the source sees from tables starting must not follow their number: a check
    of its settings and identity answers for the tables starting within
    ``SOURCE_CHECK_FRESH`` seconds of it, and is made again after."""
    monkeypatch.setattr(shared_stream, "SOURCE_CHECK_FRESH", 0.5)
    shared = stream(Store(), None, StreamOptions(0.2))
    checks: list[ServerInfo] = []

    def check() -> ServerInfo:
        checks.append(ServerInfo(Flavor.MARIADB, "10.11", server_id=len(checks) + 1))
        return checks[-1]

    first = shared.checked_source(check)
    assert [shared.checked_source(check) for _ in range(100)] == [first] * 100
    time.sleep(0.6)
    assert shared.checked_source(check) is checks[1] and len(checks) == 2
