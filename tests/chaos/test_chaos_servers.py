"""Faults of the servers around the cluster, under a paced write load (issue #9).

Three captures (lease TTL 3 s) stream four sysbench tables into the
downstream MariaDB while the writer keeps writing (and retries its own
statements while the source is away):

* etcd is stopped for 30 s and started again on the same data directory and
  port. No supervisor: the `cdc-server` processes must survive the outage on
  their own (a process that exits fails the test), lose their leases, and
  register and run their tables again once etcd is back;
* the downstream MariaDB is stopped and started again (same data, same port):
  while it is down the changefeed checkpoint must not pass what was written
  after the stop (nothing is acknowledged that is not downstream);
* the source MariaDB is stopped and started again (same data, same port):
  the binlog readers reconnect and go on in the new binlog file;
* the source's binlog is rotated (FLUSH BINARY LOGS) 20 times while streaming.

No capture is restarted by these tests. Each ends in ``settle_and_verify``:
writer stopped, checkpoint past the source's last position, state normal
(admin API and etcd), every table running on a live capture, and the
consistency checker (cdc.diff) reporting zero differences.
"""

from __future__ import annotations

import time

import pytest
from chaos_harness import (
    CAPTURES,
    Scene,
    position_now,
    settle_and_verify,
    start_again,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

ETCD_OUTAGE = 30.0


def test_etcd_stopped_for_30s_and_restarted(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    scene.etcd.stop()
    stopped = time.monotonic()
    while time.monotonic() - stopped < ETCD_OUTAGE:
        dead = [n for n, s in cluster.servers.items() if not s.alive]
        assert not dead, f"{dead} exited while etcd was down; see their logs in {cluster.log_dir}"
        time.sleep(0.5)
    start_again(scene.etcd)
    cluster.wait(lambda: cluster.captures() == set(CAPTURES), 30, "every capture to register")
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)
    assert all(s.alive for s in cluster.servers.values())


def test_downstream_restarted(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    scene.sink.stop()
    try:
        writer.wait_transactions(30)
        written = position_now(scene.source)
        time.sleep(3)
        checkpoint = cluster.status().checkpoint
        assert checkpoint is not None and checkpoint.key() < written.key(), (
            f"the checkpoint {checkpoint} passed {written}, written while the downstream was down"
        )
    finally:
        start_again(scene.sink)
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)


def test_source_restarted(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    before = position_now(scene.source)
    retries = writer.retries
    scene.source.stop()
    try:
        wait_for(lambda: writer.retries > retries, 10, "the writer to notice the source is down")
        time.sleep(2)
    finally:
        start_again(scene.source)
    writer.wait_transactions(20)
    after = position_now(scene.source)
    assert after.file != before.file, "the restarted source should write a new binlog file"
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)


def test_binlog_rotated_20_times_while_streaming(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    before = position_now(scene.source)
    conn = scene.source.connect()
    try:
        with conn.cursor() as cur:
            for _ in range(20):
                cur.execute("FLUSH BINARY LOGS")
                time.sleep(0.25)
    finally:
        conn.close()
    after = position_now(scene.source)
    assert after.file_seq - before.file_seq >= 20, (before, after)
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)
