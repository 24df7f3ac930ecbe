"""Faults of the `cdc-server` processes themselves, under a paced write load (issue #9).

Three captures (lease TTL 3 s) run a changefeed of four sysbench tables into
the downstream MariaDB while the writer keeps writing:

* the owner is SIGKILLed while the tables stream, and while one of its own
  tables is in its snapshot (tests/e2e/test_cluster_processes.py kills it
  during the snapshot too, under 8 tables);
* a processor (a capture, not the owner, running tables) is SIGKILLed while
  one of its tables is in its snapshot, and while its tables stream;
* a processor is frozen (SIGSTOP) until its lease expires, then thawed (SIGCONT).

Before a killed capture is started again (as a supervisor would) the cluster
must have recovered without it: its tables run elsewhere and the changefeed
checkpoint passes a position written after the fault. A thawed capture is not
restarted: it must notice that its lease is gone, write nothing more for the
tables it lost, and register again by itself. Then the writer stops and every
test ends in ``settle_and_verify``: checkpoint past the source's last position,
state normal (admin API and etcd), every table running on a live capture, and
the consistency checker (cdc.diff) reporting zero differences; after a
snapshot fault every table's chunks must also all be done.
"""

from __future__ import annotations

import signal

import pytest
from chaos_harness import (
    TABLES,
    TTL,
    Cluster,
    Scene,
    position_now,
    settle_and_verify,
)

from cdc.changefeed import TaskState

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def busy_processor(cluster: Cluster) -> str:
    """A capture other than the owner that runs at least one table."""
    owner = cluster.owner()
    running = sorted(
        {t.capture_id for t in cluster.tasks().values() if t.state is TaskState.RUN} - {owner}
    )
    assert running, f"no processor besides the owner runs a table\n{cluster.describe()}"
    return running[0]


def recovered_without(scene: Scene, gone: str, timeout: float = 60) -> None:
    """Every table runs on another capture and the checkpoint passes a position written
    after ``gone`` was lost (within ``timeout`` s: a snapshot may have to finish first)."""
    cluster = scene.cluster
    cluster.wait(
        lambda: (
            len(tasks := cluster.tasks()) == len(TABLES)
            and all(t.state is TaskState.RUN and t.capture_id != gone for t in tasks.values())
        ),
        3 * TTL + 20,
        f"{gone}'s tables to move to the other captures",
    )
    assert scene.writer is not None
    scene.writer.wait_transactions(20)
    target = position_now(scene.source)
    cluster.wait(
        lambda: (c := cluster.status().checkpoint) is not None and c.key() >= target.key(),
        timeout,
        f"the checkpoint to pass {target} without {gone}",
    )


def test_owner_killed_while_streaming(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    owner = cluster.owner()
    assert owner is not None
    cluster.kill(owner)
    cluster.wait(
        lambda: (o := cluster.owner()) is not None and o != owner, 3 * TTL + 10, "a new owner"
    )
    recovered_without(scene, owner)
    cluster.restart(owner)
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)


@pytest.mark.parametrize("role", ["processor", "owner"])
def test_capture_killed_during_snapshot(scene: Scene, role: str) -> None:
    writer = scene.snapshotting()
    cluster = scene.cluster

    def snapshotting_victim() -> str | None:
        """A capture of ``role`` running a table whose chunk plan exists but is not done."""
        owner = cluster.owner()
        for table in cluster.api_changefeed().tables:
            progress = table.snapshot
            if (
                table.capture_id
                and (table.capture_id == owner) == (role == "owner")
                and progress.chunks_total > 0
                and progress.chunks_done < progress.chunks_total
            ):
                return table.capture_id
        return None

    victim = cluster.wait(snapshotting_victim, 60, f"the {role} in the middle of a snapshot")
    cluster.kill(victim)
    recovered_without(scene, victim, timeout=180)
    cluster.restart(victim)
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)
    for table in cluster.api_changefeed().tables:
        progress = table.snapshot
        assert 0 < progress.chunks_done == progress.chunks_total, table


def test_processor_killed_while_streaming(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    victim = busy_processor(cluster)
    cluster.kill(victim)
    recovered_without(scene, victim)
    cluster.restart(victim)
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)


def test_processor_frozen_past_its_lease_and_thawed(scene: Scene) -> None:
    writer = scene.streaming()
    cluster = scene.cluster
    victim = busy_processor(cluster)
    frozen = cluster.servers[victim]
    registration = cluster.store.get(cluster.store.keys.capture(victim))
    assert registration is not None
    frozen.signal(signal.SIGSTOP)
    try:
        cluster.wait_gone(victim)
        recovered_without(scene, victim)
    finally:
        frozen.signal(signal.SIGCONT)
    cluster.wait(lambda: victim in cluster.captures(), 30, f"the thawed {victim} to register again")
    assert frozen.alive, f"{victim} died after SIGCONT; see {frozen.log}"
    again = cluster.store.get(cluster.store.keys.capture(victim))
    assert again is not None and again.lease != registration.lease, "not a new registration"
    writer.wait_transactions(20)
    settle_and_verify(cluster, writer, scene.source, scene.sink, scene.db)
    assert frozen.alive
