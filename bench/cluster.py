"""A private cluster for benchmarks: etcd, `cdc-server` processes, changefeeds, checkpoints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from cdc.api.health import is_serving
from cdc.changefeed import ChangefeedStore
from cdc.config import load_changefeed_config
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port
from cdc.source.flavor import current_position, detect
from cdc.store import EtcdConfig, EtcdStore
from cdc.store.keys import cluster_prefix


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def position_now(server: MariaDBServer) -> Position:
    conn = server.connect()
    try:
        return current_position(conn, detect(conn))
    finally:
        conn.close()


class Cluster:
    """`cdc-server` processes of one cluster id on one etcd, logs under ``log_dir``."""

    def __init__(self, etcd: EtcdServer, log_dir: Path) -> None:
        self.cluster_id = f"bench-{uuid.uuid4().hex[:8]}"
        self.etcd = etcd
        self.log_dir = log_dir
        self.store = EtcdStore(EtcdConfig((etcd.endpoint,), prefix=cluster_prefix(self.cluster_id)))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.addresses: list[str] = []
        self.metrics_addresses: list[str | None] = []

    def start_captures(
        self, count: int, extra: tuple[str, ...] = (), *, metrics: bool = False
    ) -> None:
        """``count`` more captures, ``extra`` added to their command line; ``metrics``:
        each serves /metrics on a port of its own (``metrics_addresses``)."""
        for n in range(len(self.procs), len(self.procs) + count):
            port = free_port()
            served = f"127.0.0.1:{free_port()}" if metrics else None
            self.metrics_addresses.append(served)
            with (self.log_dir / f"capture-{n}.log").open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "capture.main",
                            f"--etcd={self.etcd.endpoint}",
                            f"--addr=127.0.0.1:{port}",
                            f"--capture-id=capture-{n}",
                            f"--cluster-id={self.cluster_id}",
                            "--lease-ttl=5",
                            "--log-level=WARNING",
                            *([f"--metrics-addr={served}"] if served else []),
                            *extra,
                        ],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
                    )
                )
            wait_for(lambda p=port: is_serving(f"127.0.0.1:{p}", timeout=0.5), 60, "a capture")
            self.addresses.append(f"127.0.0.1:{port}")

    def create_changefeed(
        self, cf_id: str, source: MariaDBServer, sink_uri: str, **more: Any
    ) -> None:
        config = load_changefeed_config(
            None,
            {"changefeed_id": cf_id, "source_uri": source.uri, "sink_uri": sink_uri, **more},
        )
        ChangefeedStore(self.store).create(replace(config, store_credentials=True))

    def checkpoint(self, cf_id: str) -> Position | None:
        return ChangefeedStore(self.store).get(cf_id).status.checkpoint

    def wait_checkpoint(self, cf_id: str, target: Position, timeout: float = 1800) -> float:
        """Monotonic time at which the changefeed's checkpoint was seen at or past ``target``."""

        def reached() -> bool:
            checkpoint = self.checkpoint(cf_id)
            return checkpoint is not None and checkpoint.key() >= target.key()

        wait_for(reached, timeout, f"{cf_id} to reach {target}", every=0.05)
        return time.monotonic()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.store.close()


@contextmanager
def private_etcd() -> Iterator[EtcdServer]:
    with tempfile.TemporaryDirectory(prefix="cdc-bench-etcd-") as tmp:
        etcd = EtcdServer(EtcdSpec("bench", Path(tmp), free_port(), free_port()))
        etcd.start()
        try:
            yield etcd
        finally:
            etcd.stop()


@contextmanager
def cluster(etcd: EtcdServer, captures: int, extra: tuple[str, ...] = ()) -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="cdc-bench-logs-") as logs:
        running = Cluster(etcd, Path(logs))
        try:
            running.start_captures(captures, extra)
            yield running
        finally:
            running.close()
