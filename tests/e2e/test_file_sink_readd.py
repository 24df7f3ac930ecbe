"""A table removed from a file-sink changefeed and added back with backfill.

A replay applies every file of a table, then the new snapshot's rows by key; a
row a change file inserted and the source deleted while the table was not captured
is in no later file, so the replayed table would keep it (the MySQL sink empties
each chunk's key range first). Without the refusal, and with the folders left in
place, this test's `cdcctl diff` finds the replayed table unequal.
Here the update adding the table back is refused while the folder holds its files,
naming them and changing nothing; once they are moved out, the same update is
taken, and the folder replayed into an empty downstream equals the source
(`cdcctl diff`), the rows deleted meanwhile included.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cluster_harness import Cluster, caught_up, cli_ok
from testkit import execute, position_now

from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file.reader import replay_into

pytestmark = pytest.mark.integration

CF = "files-readd"
TIMEOUT = 180


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="readd")
    try:
        cluster.start("ra-1")
        yield cluster
    finally:
        cluster.close()


def test_a_table_added_back_into_a_file_sink_waits_for_its_old_files_to_be_moved(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    root = tmp_path / "out"
    keep, back = f"{db}.keep", f"{db}.back"
    rows = ", ".join(f"({i}, {i})" for i in range(1, 61))
    execute(
        source_db,
        f"CREATE DATABASE IF NOT EXISTS `{db}`",
        *(f"CREATE TABLE `{db}`.{t} (id INT PRIMARY KEY, v INT)" for t in ("keep", "back")),
        *(f"INSERT INTO `{db}`.{t} VALUES {rows}" for t in ("keep", "back")),
    )
    try:
        cli_ok(
            capsys,
            *("changefeed", "create", "--server", cluster.api_address(), "--changefeed-id", CF),
            *("--source-uri", source_db.uri_by_reference(tmp_path, "source")),
            *("--sink-uri", f"file://{root}?flush-interval=200ms"),
            *("--filter-rule", keep, "--filter-rule", back),
            *("--chunk-size", "25", "--spark-master", "local[1]"),
        )
        caught_up(cluster, position_now(source_db), TIMEOUT)
        execute(
            source_db,
            f"UPDATE `{db}`.back SET v = v + 100 WHERE id > 50",
            f"INSERT INTO `{db}`.back VALUES (200, 200), (201, 201), (202, 202)",
        )
        caught_up(cluster, position_now(source_db), TIMEOUT)

        cluster.update_rules([keep])
        cluster.wait(lambda: back not in cluster.tasks(), 60, "back's removal")
        # not captured: the replay must not keep these rows
        execute(
            source_db,
            f"DELETE FROM `{db}`.back WHERE id <= 10 OR id IN (200, 201)",
            f"UPDATE `{db}`.back SET v = -v WHERE id BETWEEN 20 AND 30",
            f"INSERT INTO `{db}`.keep VALUES (100, 100)",
        )

        with pytest.raises(grpc.RpcError) as refused:
            cluster.update_rules([keep, back])
        error: Any = refused.value
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION, error
        message = error.details()
        held = [root / db / "back", root / "snapshot" / db / "back"]
        assert f"already holds files of {back} ({held[0]}, {held[1]})" in message, message
        assert "Move those folders" in message, message
        assert cluster.feeds.get(CF).config.rules == (keep,)
        assert back not in cluster.tasks()

        for n, folder in enumerate(held):
            shutil.move(folder, tmp_path / f"moved-{n}")
        cluster.update_rules([keep, back])
        execute(source_db, f"UPDATE `{db}`.back SET v = 7 WHERE id = 60")
        caught_up(cluster, position_now(source_db), TIMEOUT)

        target = sink_db.connect()
        try:
            replay_into(root, target)
        finally:
            target.close()
        report = cli_ok(
            capsys,
            *("diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
            *("--filter", f"{db}.*", "--chunk-size", "20"),
        )
        assert report["equal"] is True, report
        assert len(report["tables"]) == 2
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")
