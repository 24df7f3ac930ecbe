"""The sink fails mid-stream while rows are in its lanes; the restarted table loses nothing.

Three ways a MySQL sink fails under a running table pipeline, each while a
writer commits large transactions to the source:

* refused: the downstream refuses one row (a trigger signals an error on it),
  the changefeed goes to error (retrying, then failed), and is resumed once
  the trigger is gone;
* lease: the capture cannot prove its lease for a moment, so the sink's
  fence refuses to write and the pipeline stops or fails;
* killed: the downstream kills the sink's connections, a transient error.

Every report of a checkpoint must name a position the sink said durable:
before that rule the error path reported the last resolved position, whose
rows were still in the lanes, and the restarted table began after rows that
were never written (issue 13: 3 rows in 2 tables lost, state normal).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from cluster_helpers import FAST_OWNER, Capture, changefeed_config, status
from testkit import execute, position_now, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.diff import check
from cdc.filter.table_filter import TableFilter
from cdc.playground.mariadb import MariaDBServer
from cdc.store import Election, EtcdStore
from cdc.uri.mysql import parse_source_uri
from owner.owner import Owner
from processor.pipeline import PipelineOptions
from processor.processor import Processor

TXN_ROWS = 300


class _Writer(threading.Thread):
    """Commits transactions of ``TXN_ROWS`` inserts and updates until stopped."""

    def __init__(self, source: MariaDBServer, db: str) -> None:
        super().__init__(daemon=True)
        self.source, self.db = source, db
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.poison = threading.Event()

    def run(self) -> None:
        conn = self.source.connect()
        n = 0
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    values = ", ".join(
                        f"({n * TXN_ROWS + i}, {i}, 'v{n}')" for i in range(TXN_ROWS)
                    )
                    cur.execute(f"INSERT INTO `{self.db}`.t VALUES {values}")
                    cur.execute(f"UPDATE `{self.db}`.t SET c = 'w{n}' WHERE id % 7 = {n % 7}")
                    if self.poison.is_set():
                        self.poison.clear()
                        cur.execute(f"INSERT INTO `{self.db}`.t VALUES (-1, -1, 'poison')")
                    conn.commit()
                    n += 1
                    time.sleep(0.02)
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            conn.close()


@pytest.fixture
def cluster(store: EtcdStore) -> Iterator[Callable[[Callable[[], bool]], Processor]]:
    """One capture (owner and processor) whose lease liveness the test decides."""
    started: list[tuple[Processor, Owner, Election, Capture]] = []

    def make(alive: Callable[[], bool]) -> Processor:
        capture = Capture(store, "c1")
        processor = Processor(
            store,
            "c1",
            lambda _config: None,
            options=PipelineOptions(checkpoint_interval=0.2),
            interval=0.2,
            alive=alive,
        )
        processor.start()
        election = Election(store, "c1", ttl=5)
        owner = Owner(store, "c1", election.campaign(timeout=10), FAST_OWNER)
        owner.start()
        started.append((processor, owner, election, capture))
        return processor

    yield make
    for processor, owner, election, capture in started:
        processor.suspend()
        processor.stop()
        owner.stop()
        capture.kill()
        election.resign()


@pytest.mark.parametrize("failure", ["refused", "lease", "killed"])
def test_a_failing_sink_loses_nothing_when_the_table_restarts(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    cluster: Callable[[Callable[[], bool]], Processor],
    failure: str,
) -> None:
    db = source_database
    execute(source_db, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, k INT, c VARCHAR(20))")
    execute(sink_db, f"CREATE DATABASE IF NOT EXISTS `{db}`")
    execute(sink_db, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, k INT, c VARCHAR(20))")
    if failure == "refused":
        execute(
            sink_db,
            f"CREATE TRIGGER `{db}`.refuse BEFORE INSERT ON `{db}`.t FOR EACH ROW"
            " IF NEW.k = -1 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused row';"
            " END IF",
        )
    lease = threading.Event()
    lease.set()
    config = changefeed_config(
        source_db.uri,
        sink_db.uri.rstrip("/") + "/?worker-count=4",
        [f"`{db}`.*"],
        snapshot_mode="never",
    )
    ChangefeedStore(store).create(config)
    cluster(lease.is_set)
    wait_for(lambda: status(store).checkpoint is not None, 30, "the changefeed to start")
    writer = _Writer(source_db, db)
    writer.start()
    try:
        time.sleep(1.5)
        if failure == "refused":
            writer.poison.set()
            wait_for(lambda: status(store).error is not None, 30, "the refused row's error")
            execute(sink_db, f"DROP TRIGGER `{db}`.refuse")
            ChangefeedStore(store).resume("cf1")
        elif failure == "lease":
            for _ in range(3):
                lease.clear()
                time.sleep(0.7)
                lease.set()
                time.sleep(1.0)
        else:
            for _ in range(3):
                for (conn_id,) in execute(
                    sink_db,
                    "SELECT ID FROM information_schema.PROCESSLIST"
                    f" WHERE DB = '{db}' AND ID <> CONNECTION_ID()",
                ):
                    execute(sink_db, f"KILL {conn_id}")
                time.sleep(0.7)
        time.sleep(1.0)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, writer.error
    end = position_now(source_db)

    def caught_up() -> bool:
        current = status(store)
        return (
            current.state is ChangefeedState.NORMAL
            and current.checkpoint is not None
            and current.checkpoint.key() >= end.key()
        )

    wait_for(caught_up, 120, "the checkpoint to pass the source's end")
    report = check(
        parse_source_uri(source_db.uri),
        parse_source_uri(sink_db.uri),
        TableFilter.parse([f"`{db}`.*"], case_sensitive=False),
    )
    execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")
    assert report.equal, report.to_dict()
