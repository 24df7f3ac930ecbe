"""A cluster of real `cdc-server` processes on private servers, shared by the fault-injection
suite (tests/chaos) and the randomized differential test (tests/fuzz, bench/fuzz_soak.py).

    Server  ─ one `cdc-server` process (capture.main) and its log file
    Cluster ─ N servers on one etcd key prefix (lease TTL 3 s), a view of one
              changefeed's state in etcd and through the admin API, and the
              faults done to the processes (SIGKILL, restart)
    checkpoint_reaches / diff ─ the pieces of every verdict: the changefeed
              checkpoint past a source position, cdc.diff.check on one database
    ensure_up ─ starts a server a fault left stopped (same data directory and port)

Importable as ``cluster_harness``: pytest puts tests/ on ``sys.path`` for its
root conftest; bench/fuzz_soak.py inserts it itself.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from testkit import wait_for

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.api.health import is_serving
from cdc.changefeed import (
    ChangefeedState,
    ChangefeedStatus,
    ChangefeedStore,
    TableRecord,
    TableTask,
)
from cdc.cli.api_client import open_api
from cdc.cli.main import main as cdcctl
from cdc.config import load_changefeed_config
from cdc.diff import DiffReport, check
from cdc.filter.table_filter import TableFilter
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port
from cdc.playground.procs import spawn
from cdc.store import EtcdConfig, EtcdStore, StoreError
from cdc.store.keys import CaptureKey, TableCheckpointKey, TaskKey, cluster_prefix
from cdc.uri.mysql import parse_source_uri

TTL = 3
CHANGEFEED = "chaos"
CAPTURES = ("capture-a", "capture-b", "capture-c")


def start_again(server: MariaDBServer | EtcdServer) -> None:
    """Starts a stopped server again on the same data directory and port.

    Through a twin without ``die_with_parent``: that option forks with a
    pre-exec hook, and a fork of this process while its gRPC threads run (etcd
    client, admin API channels) can abort the child before it execs
    (SIGABRT, "epoll_wait error: Bad file descriptor"). The session fixture
    still stops the server at the end through its pid file.
    """
    type(server)(server.spec).start()  # type: ignore[arg-type]


# --- the cluster --------------------------------------------------------------------------------

# A killed pytest takes its cdc-servers along (the kernel's parent-death signal), set by
# setpriv rather than a pre-exec hook, for the reason start_again gives.
_DIE_WITH_PYTEST = ("setpriv", "--pdeathsig", "SIGKILL")


class Server:
    """One `cdc-server` process and its log file; ``wait_serving`` after the constructor.

    ``metrics``: also serve Prometheus metrics (``metrics_url``), for tests that count
    what this one process did.
    """

    def __init__(
        self, name: str, etcd: str, cluster: str, log_dir: Path, *, metrics: bool = False
    ) -> None:
        self.name = name
        self.port = free_port()
        self.metrics_port = free_port() if metrics else None
        self.log = log_dir / f"{name}-{time.monotonic_ns()}.log"
        argv = [
            *_DIE_WITH_PYTEST,
            sys.executable,
            "-m",
            "capture.main",
            f"--etcd={etcd}",
            f"--addr=127.0.0.1:{self.port}",
            f"--capture-id={name}",
            f"--cluster-id={cluster}",
            f"--lease-ttl={TTL}",
            # the password files Cluster writes beside the logs (cdc.uri.secrets)
            f"--secrets-dir={log_dir}",
        ]
        if self.metrics_port is not None:
            argv.append(f"--metrics-addr=127.0.0.1:{self.metrics_port}")
        self.proc = spawn(argv, self.log, env={**os.environ, "PYSPARK_PYTHON": sys.executable})

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        if self.metrics_port is None:
            raise AssertionError(f"{self.name} was started without metrics=True")
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def wait_serving(self, timeout: float = 60) -> None:
        def serving() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited with code {self.proc.returncode}; see {self.log}"
                )
            return is_serving(self.address, timeout=0.5)

        wait_for(serving, timeout, f"{self.name} to serve")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait(timeout=60)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Cluster:
    """The test's `cdc-server` processes and a view of their state in etcd."""

    def __init__(
        self,
        etcd_endpoint: str,
        log_dir: Path,
        *,
        changefeed: str = CHANGEFEED,
        name: str = "chaos",
    ) -> None:
        self.cluster = f"{name}-{uuid.uuid4().hex[:8]}"
        self.changefeed = changefeed
        self.etcd_endpoint = etcd_endpoint
        self.log_dir = log_dir
        self.store = EtcdStore(EtcdConfig((etcd_endpoint,), prefix=cluster_prefix(self.cluster)))
        self.feeds = ChangefeedStore(self.store)
        self.servers: dict[str, Server] = {}

    def start(self, *names: str, metrics: bool = False) -> None:
        """Starts ``names`` side by side and waits until each serves its admin API."""
        started = [
            Server(n, self.etcd_endpoint, self.cluster, self.log_dir, metrics=metrics)
            for n in names
        ]
        for server in started:
            self.servers[server.name] = server
        for server in started:
            server.wait_serving()

    # --- what etcd says ---

    def owner(self) -> str | None:
        item = self.store.get(self.store.keys.owner())
        return None if item is None else item.json()["capture_id"]

    def captures(self) -> set[str]:
        keys = self.store.keys
        return {
            keys.parse(i.key).capture_id  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(CaptureKey))
        }

    def tasks(self) -> dict[str, TableTask]:
        keys = self.store.keys
        return {
            keys.parse(i.key).table: TableTask.from_dict(i.json())  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(TaskKey, self.changefeed))
        }

    def records(self) -> dict[str, TableRecord]:
        keys = self.store.keys
        return {
            keys.parse(i.key).table: TableRecord.from_dict(i.json())  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(TableCheckpointKey, self.changefeed))
        }

    def status(self) -> ChangefeedStatus:
        return self.feeds.get(self.changefeed).status

    def describe(self) -> str:
        """The changefeed's status and tables, for failure messages."""
        try:
            status = self.status()
            tasks, records = self.tasks(), self.records()
            captures = sorted(self.captures())
        except StoreError as exc:
            return f"(etcd unreadable: {exc})"
        lines = [
            f"state={status.state.value} checkpoint={status.checkpoint} "
            f"error={status.error.message if status.error else None} captures={captures} "
            f"owner={self.owner()}"
        ]
        for table in sorted(set(tasks) | set(records)):
            task, record = tasks.get(table), records.get(table)
            lines.append(
                f"  {table}: task={task.state.value if task else '-'}@"
                f"{task.capture_id if task else '-'} record="
                f"{record.state.value if record else '-'}@{record.capture_id if record else '-'}"
                f" checkpoint={record.checkpoint if record else '-'}"
                f" error={record.error if record else '-'}"
            )
        lines.append("logs: " + ", ".join(str(s.log) for s in self.servers.values()))
        return "\n".join(lines)

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        """``wait_for``, with the cluster's state at the time of a timeout in the message."""
        try:
            return wait_for(condition, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from None

    # --- the admin API ---

    def api_address(self) -> str:
        return next(s.address for s in self.servers.values() if s.alive)

    def create_changefeed(
        self,
        source: MariaDBServer,
        sink: MariaDBServer,
        db: str,
        *,
        worker_count: int | None = 2,
        **more: Any,
    ) -> None:
        """Creates the changefeed through the admin API (CreateChangefeed), as cdcctl does;
        the passwords travel by reference (password-file), never stored in etcd.
        ``worker_count``: the sink's lanes (None: its default, one)."""
        lanes = "" if worker_count is None else f"&worker-count={worker_count}"
        config = load_changefeed_config(
            None,
            {
                "changefeed_id": self.changefeed,
                "source_uri": self._uri(source, "source"),
                "sink_uri": self._uri(sink, "sink") + lanes,
                "rules": [f"{db}.*"],
                "spark_master": "local[1]",
                **more,
            },
        )
        request = admin_pb2.CreateChangefeedRequest(
            config=admin_pb2.ChangefeedConfigJson(json=json.dumps(config.to_dict(mask=False)))
        )
        with open_api(self.api_address()) as api:
            created = api.CreateChangefeed(request, timeout=30)
        assert created.changefeed_id == self.changefeed

    def update_rules(self, rules: list[str]) -> admin_pb2.Changefeed:
        """UpdateChangefeed through the admin API with the stored config and new table
        ``rules``, as `cdcctl changefeed update` does (it answers once the owner applied
        them, or after 40 s with the update still pending)."""
        config = replace(self.feeds.get(self.changefeed).config, rules=tuple(rules))
        request = admin_pb2.UpdateChangefeedRequest(
            config=admin_pb2.ChangefeedConfigJson(json=json.dumps(config.to_dict(mask=False)))
        )
        with open_api(self.api_address()) as api:
            return api.UpdateChangefeed(request, timeout=90)

    def pause(self) -> admin_pb2.Changefeed:
        """PauseChangefeed through the admin API, as `cdcctl changefeed pause` does."""
        with open_api(self.api_address()) as api:
            return api.PauseChangefeed(self._ref(), timeout=30)

    def resume(self) -> admin_pb2.Changefeed:
        """ResumeChangefeed through the admin API, as `cdcctl changefeed resume` does."""
        with open_api(self.api_address()) as api:
            return api.ResumeChangefeed(self._ref(), timeout=30)

    def _ref(self) -> admin_pb2.ChangefeedRef:
        return admin_pb2.ChangefeedRef(changefeed_id=self.changefeed)

    def _uri(self, server: MariaDBServer, name: str) -> str:
        return server.uri_by_reference(self.log_dir, name)

    def api_changefeed(self) -> admin_pb2.Changefeed:
        """GetChangefeed through the admin API of a live server."""
        with open_api(self.api_address()) as api:
            return api.GetChangefeed(self._ref(), timeout=30)

    # --- faults ---

    def kill(self, name: str) -> None:
        self.servers[name].signal(signal.SIGKILL)

    def wait_gone(self, name: str) -> None:
        wait_for(lambda: name not in self.captures(), 3 * TTL + 10, f"{name}'s lease to expire")

    def restart(self, name: str, *, metrics: bool = False) -> None:
        """Starts ``name`` again, as a supervisor would after it died."""
        self.start(name, metrics=metrics)

    def close(self) -> None:
        for server in self.servers.values():
            if server.alive:
                server.proc.send_signal(signal.SIGCONT)
                server.proc.kill()
            server.proc.wait()
        try:
            self.store.delete_prefix(cluster_prefix(self.cluster) + "/")
        finally:
            self.store.close()


def checkpoint_reaches(cluster: Cluster, target: Position, timeout: float) -> float:
    """Seconds until the changefeed checkpoint is at or past ``target``."""
    started = time.monotonic()

    def reached() -> bool:
        checkpoint = cluster.status().checkpoint
        return checkpoint is not None and checkpoint.key() >= target.key()

    cluster.wait(reached, timeout, f"the changefeed checkpoint to reach {target}")
    return time.monotonic() - started


def caught_up(cluster: Cluster, target: Position, timeout: float) -> None:
    """Waits until the changefeed is normal with its checkpoint at or past ``target``;
    fails at once, with the cluster's state, if it failed."""

    def reached() -> bool:
        status = cluster.status()
        assert status.state is not ChangefeedState.FAILED, cluster.describe()
        return (
            status.state is ChangefeedState.NORMAL
            and status.checkpoint is not None
            and status.checkpoint.key() >= target.key()
        )

    cluster.wait(reached, timeout, f"the checkpoint to pass {target}")


def diff(source: MariaDBServer, sink: MariaDBServer, db: str) -> DiffReport:
    """The consistency checker's report on ``db`` (source vs. downstream)."""
    return check(
        parse_source_uri(source.uri),
        parse_source_uri(sink.uri),
        TableFilter.parse([f"{db}.*"]),
        chunk_size=500,
        threads=2,
    )


def ensure_up(server: MariaDBServer | EtcdServer) -> None:
    """Starts ``server`` again if a fault (or a failed test) left it stopped."""
    if not server.is_running():
        start_again(server)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """cdcctl in-process: its exit code, the JSON it printed (None when none) and stderr."""
    code = cdcctl(list(args))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip().startswith(("{", "[")) else None), err


def cli_ok(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """cdcctl in-process, which must succeed and print JSON: that JSON."""
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and out is not None, (args, code, out, err)
    return out


__all__ = [
    "CAPTURES",
    "CHANGEFEED",
    "TTL",
    "Cluster",
    "Server",
    "caught_up",
    "checkpoint_reaches",
    "cli_ok",
    "diff",
    "ensure_up",
    "run_cli",
    "start_again",
]
