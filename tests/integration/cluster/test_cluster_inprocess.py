"""Owner and processors in this process, on the real etcd and MariaDB source and sink.

Snapshot under writes, streaming, a capture joining (tables move at a safe
point), a capture dying (its tables are reassigned and resume from their
checkpoints): the downstream ends equal to the source every time.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

from cluster_helpers import Node, changefeed_config, checksums, running_on, status
from testkit import position_now, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.playground.mariadb import MariaDBServer
from cdc.store import EtcdStore
from owner.owner import OwnerOptions
from owner.retry import RetryPolicy

TABLES = [f"t{i}" for i in range(4)]
ROWS = 300
FAST = OwnerOptions(cycle_interval=0.2, retry=RetryPolicy(initial=0.5), barrier_interval=0.1)


class Writer(threading.Thread):
    def __init__(self, server: MariaDBServer, db: str) -> None:
        super().__init__(daemon=True)
        self.server, self.db = server, db
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.statements = 0

    def run(self) -> None:
        rnd = random.Random(7)
        conn = self.server.connect()
        try:
            with conn.cursor() as cur:
                while not self.halt.is_set():
                    table = f"`{self.db}`.{rnd.choice(TABLES)}"
                    key = rnd.randint(1, ROWS * 2)
                    roll = rnd.random()
                    if roll < 0.5:
                        cur.execute(
                            f"REPLACE INTO {table} VALUES ({key}, {rnd.randint(0, 999)}, 'w')"
                        )
                    elif roll < 0.8:
                        cur.execute(f"UPDATE {table} SET v = v + 1 WHERE id = {key}")
                    else:
                        cur.execute(f"DELETE FROM {table} WHERE id = {key}")
                    self.statements += 1
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()


def fill(server: MariaDBServer, db: str) -> None:
    conn = server.connect()
    with conn.cursor() as cur:
        for table in TABLES:
            cur.execute(
                f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY, v INT, note VARCHAR(20))"
            )
            values = ",".join(f"({i},{i},'r')" for i in range(1, ROWS + 1))
            cur.execute(f"INSERT INTO `{db}`.{table} VALUES {values}")
    conn.close()


def caught_up(store: EtcdStore, source_db: MariaDBServer) -> None:
    target = position_now(source_db)

    def reached() -> bool:
        checkpoint = status(store).checkpoint
        return checkpoint is not None and checkpoint.key() >= target.key()

    wait_for(reached, 60, f"the changefeed checkpoint to reach {target}")


def test_snapshot_stream_join_and_death_keep_the_downstream_equal(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    nodes: Callable[..., Node],
    spark: Any,
) -> None:
    db = source_database
    fill(source_db, db)
    sink_uri = sink_db.uri.rstrip("/") + "/?worker-count=2"
    config = changefeed_config(source_db.uri, sink_uri, [f"{db}.*"], chunk_size=100)
    ChangefeedStore(store).create(config)
    first, second = nodes("c1", spark), nodes("c2", spark)
    first.lead(store)
    writer = Writer(source_db, db)
    writer.start()
    try:
        wait_for(lambda: len(running_on(store, "cf1")) == 4, 20, "every table to run")
        caught_up(store, source_db)
        third = nodes("c3", spark)
        wait_for(lambda: "c3" in running_on(store, "cf1").values(), 30, "a table to move to c3")
        caught_up(store, source_db)
        second.kill()
        wait_for(
            lambda: (
                len(running_on(store, "cf1")) == 4 and "c2" not in running_on(store, "cf1").values()
            ),
            30,
            "c2's tables to be reassigned",
        )
        assert third.processor.tables()
    finally:
        writer.halt.set()
        writer.join()
    assert writer.error is None, writer.error
    assert writer.statements > 50
    caught_up(store, source_db)
    assert status(store).state is ChangefeedState.NORMAL
    try:
        assert checksums(sink_db, db, TABLES) == checksums(source_db, db, TABLES)
    finally:
        conn = sink_db.connect()
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()
