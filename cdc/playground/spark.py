"""A private standalone Spark cluster on 127.0.0.1: one master and its workers.

What a changefeed's ``snapshot.spark-master = "spark://127.0.0.1:<port>"`` runs its
chunks on, for the tests, the benchmarks and the playground (issue #16). Nothing is
downloaded: the master and the workers are pyspark's own jars, started the way
Spark's ``sbin`` scripts start them (``bin/spark-class
org.apache.spark.deploy.master.Master`` and ``...worker.Worker``), each a JVM of its
own with its log under ``spec.base_dir``. Executors started by the workers run this
interpreter for their Python workers (``PYSPARK_PYTHON = sys.executable``).

The cluster is ready when the master's JSON status (its web UI, ``/json/``) lists
every worker alive.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from cdc.playground import procs
from cdc.playground.errors import ServiceError
from cdc.playground.files import make_private_dir
from cdc.playground.packages import JAVA_PACKAGES, ensure_packages
from cdc.playground.ports import LOOPBACK, free_port, wait_for_port

__all__ = ["SparkCluster", "SparkClusterSpec", "spark_home"]

log = logging.getLogger(__name__)

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"
#: JVM options of the master and workers, which only coordinate: C1 alone and the serial
#: collector start them in about half the time on a small machine.
_DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_POLL_INTERVAL = 0.2


def spark_home() -> Path:
    """Where pyspark keeps Spark (its ``bin/spark-class`` and jars)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass(frozen=True)
class SparkClusterSpec:
    """A master on ``port`` with ``workers`` workers of ``cores`` cores and ``memory`` each.

    Ports left at 0 are chosen free at start. ``app_cores``: the cores an application
    (one capture's Spark session) gets unless it asks (``spark.deploy.defaultCores``):
    a standalone master gives the first application every core otherwise, and the
    other captures' sessions would wait for executors for ever.
    """

    name: str
    base_dir: Path
    port: int = 0
    webui_port: int = 0
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    app_cores: int | None = None
    options: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_dir", Path(self.base_dir).absolute())
        if self.workers < 1 or self.cores < 1:
            raise ValueError(f"spark cluster {self.name}: at least one worker of one core")


class SparkCluster:
    """The master and workers of one spec, started and stopped by this object."""

    def __init__(self, spec: SparkClusterSpec, *, die_with_parent: bool = False) -> None:
        self.spec = spec
        self.port = spec.port
        self.webui_port = spec.webui_port
        self._die_with_parent = die_with_parent
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``: a changefeed's ``snapshot.spark-master``."""
        return f"spark://{LOOPBACK}:{self.port}"

    def __repr__(self) -> str:
        return f"SparkCluster({self.spec.name!r}, {self.master_url}, {self.spec.workers} workers)"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP=LOOPBACK,
            SPARK_LOG_DIR=str(self.spec.base_dir / "logs"),
            SPARK_NO_DAEMONIZE="1",
            PYSPARK_PYTHON=sys.executable,
            SPARK_DAEMON_JAVA_OPTS=_DAEMON_JAVA_OPTIONS,
        )
        if self.spec.app_cores is not None:
            env["SPARK_MASTER_OPTS"] = f"-Dspark.deploy.defaultCores={self.spec.app_cores}"
        return env

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        command = [str(spark_home() / "bin" / "spark-class"), *argv]
        proc = procs.spawn(
            command,
            self.spec.base_dir / f"{name}.log",
            env=self._env(),
            cwd=self.spec.base_dir,
            die_with_parent=self._die_with_parent,
        )
        self._procs.append(proc)
        return proc

    def start(self, timeout: float = 90.0) -> None:
        """Starts the master, then the workers; returns when every worker is registered."""
        ensure_packages(JAVA_PACKAGES)
        make_private_dir(self.spec.base_dir)
        (self.spec.base_dir / "logs").mkdir(exist_ok=True)
        self.port = self.port or free_port()
        self.webui_port = self.webui_port or free_port()
        began = time.monotonic()
        try:
            master = self._spawn(
                "master",
                [_MASTER, "--host", LOOPBACK, "--port", str(self.port),
                 "--webui-port", str(self.webui_port)],
            )  # fmt: skip
            logs = (self.spec.base_dir / "master.log",)
            wait_for_port(LOOPBACK, self.port, timeout, master, logs)
            for n in range(self.spec.workers):
                work = self.spec.base_dir / f"worker-{n}"
                work.mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{n}",
                    [_WORKER, self.master_url, "--host", LOOPBACK,
                     "--cores", str(self.spec.cores), "--memory", self.spec.memory,
                     "--work-dir", str(work), "--webui-port", str(free_port()),
                     *self.spec.options],
                )  # fmt: skip
            self._wait_workers(began + timeout)
        except BaseException:
            self.stop()
            raise
        log.info(
            "spark cluster %s on %s: %d workers in %.1fs",
            self.spec.name,
            self.master_url,
            self.spec.workers,
            time.monotonic() - began,
        )

    def alive_workers(self) -> int:
        """Workers the master lists alive (0 while it does not answer)."""
        url = f"http://{LOOPBACK}:{self.webui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                status = json.loads(response.read())
        except (OSError, ValueError):
            return 0
        return int(status.get("aliveworkers", 0))

    def _wait_workers(self, deadline: float) -> None:
        while self.alive_workers() < self.spec.workers:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead or time.monotonic() >= deadline:
                logs = sorted(self.spec.base_dir.glob("*.log"))
                what = "a Spark process exited" if dead else "the workers did not register"
                raise ServiceError(
                    f"spark cluster {self.spec.name}: {what}\n{procs.log_tails(logs)}"
                )
            time.sleep(_POLL_INTERVAL)

    def stop(self, timeout: float = 15.0) -> None:
        """Stops the workers, then the master (SIGTERM, SIGKILL after ``timeout``)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                procs.terminate(proc.pid, timeout, proc)
        self._procs.clear()
