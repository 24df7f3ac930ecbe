"""A private single-member etcd on 127.0.0.1, for the playground and the tests.

Everything lives under ``spec.base_dir``: ``data/`` (the member's data),
``etcd.pid`` (the pid we started; ``stop`` signals only that one) and
``etcd.log``. ETCD_* variables of the caller's environment are not passed
on, so a developer's own etcd settings cannot leak into the private member.
The member is ready when GET /health on the client port answers
``{"health": "true"}``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cdc.playground import procs
from cdc.playground.errors import ServiceError
from cdc.playground.files import make_private_dir
from cdc.playground.packages import require_binary
from cdc.playground.ports import LOOPBACK, ensure_port_free, wait_for_port
from cdc.store import EtcdConfig, EtcdStore

log = logging.getLogger(__name__)

_POLL_INTERVAL = 0.05


@dataclass(frozen=True)
class EtcdSpec:
    """One private etcd member: its name, where it lives, its client and peer ports.

    ``base_dir`` is made absolute.
    """

    name: str
    base_dir: Path
    client_port: int
    peer_port: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_dir", Path(self.base_dir).absolute())
        if not self.name or "=" in self.name or "," in self.name:
            raise ValueError(
                f"EtcdSpec.name {self.name!r} must be non-empty without '=' or ','"
                " (it goes into --initial-cluster)"
            )
        for label, port in (("client_port", self.client_port), ("peer_port", self.peer_port)):
            if not 0 < port < 65536:
                raise ValueError(f"etcd {self.name}: {label} {port} is not a TCP port (1-65535)")
        if self.client_port == self.peer_port:
            raise ValueError(
                f"etcd {self.name}: client_port and peer_port are both {self.client_port}; "
                "they must differ"
            )


def etcd_options(spec: EtcdSpec) -> list[str]:
    """The etcd 3.4 command-line options for ``spec`` (without the binary)."""
    client = f"http://{LOOPBACK}:{spec.client_port}"
    peer = f"http://{LOOPBACK}:{spec.peer_port}"
    return [
        f"--name={spec.name}",
        f"--data-dir={spec.base_dir / 'data'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster={spec.name}={peer}",
        "--initial-cluster-state=new",
        "--logger=zap",
        "--log-outputs=stderr",
    ]


class EtcdServer:
    """One private etcd process, started and stopped by us.

    ``start`` and ``stop`` are idempotent and work across processes through
    the pid file. With ``die_with_parent`` etcd gets SIGTERM when the
    starting thread exits (used by the tests).
    """

    def __init__(self, spec: EtcdSpec, *, die_with_parent: bool = False) -> None:
        self.spec = spec
        self._die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        self.data_dir = spec.base_dir / "data"
        self.pid_file = spec.base_dir / "etcd.pid"
        self.log_path = spec.base_dir / "etcd.log"

    def __repr__(self) -> str:
        return f"EtcdServer({self.spec.name!r}, {self.endpoint}, {self.spec.base_dir})"

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def port(self) -> int:
        """The client port."""
        return self.spec.client_port

    @property
    def peer_port(self) -> int:
        return self.spec.peer_port

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:<client port>``, the form the cdc configuration takes."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid of the running member, None when it is not running."""
        return procs.owned_pid(self.pid_file, f"--data-dir={self.data_dir}")

    def is_running(self) -> bool:
        return self.pid is not None

    def store(self, prefix: str = "/cdc/default") -> EtcdStore:
        """An `EtcdStore` on this member confined to `prefix`; close it when done."""
        return EtcdStore(EtcdConfig((self.endpoint,), prefix=prefix))

    def start(self, timeout: float = 30.0) -> None:
        """Start the member and wait until it is healthy; no-op when it runs already.

        Raises ``ServiceError`` (with the etcd log tail) when it cannot
        start, and ``PortInUseError`` when a port is taken.
        """
        what = f"etcd {self.spec.name}"
        pid = self.pid
        if pid is not None:
            self._check_running_port(pid)
            log.debug("%s already running as pid %d", what, pid)
            return
        ensure_port_free(self.port, f"{what} client")
        ensure_port_free(self.peer_port, f"{what} peer")
        etcd = require_binary("etcd", "etcd-server")
        make_private_dir(self.spec.base_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        began = time.monotonic()
        self._proc = procs.spawn(
            [etcd, *etcd_options(self.spec)],
            self.log_path,
            env=env,
            cwd=self.spec.base_dir,
            die_with_parent=self._die_with_parent,
        )
        procs.write_pid(self.pid_file, self._proc.pid)
        try:
            wait_for_port(self.host, self.port, timeout, self._proc, (self.log_path,))
            self._wait_healthy(began + timeout)
        except BaseException:
            procs.terminate(self._proc.pid, 10.0, self._proc)
            self.pid_file.unlink(missing_ok=True)
            raise
        log.info(
            "%s started as pid %d on %s in %.2fs",
            what,
            self._proc.pid,
            self.endpoint,
            time.monotonic() - began,
        )

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the member (SIGTERM, SIGKILL after ``timeout`` s); no-op when not running."""
        procs.stop_recorded(self.pid, self.pid_file, timeout, self._proc, f"etcd {self.spec.name}")
        self._proc = None

    def healthy(self) -> bool:
        """True when GET /health answers ``{"health": "true"}``."""
        url = f"http://{self.endpoint}/health"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                return json.loads(response.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def _check_running_port(self, pid: int) -> None:
        running = procs.option_value(pid, "--listen-client-urls")
        expected = f"http://{self.endpoint}"
        if running != expected:
            raise ServiceError(
                f"etcd {self.spec.name} in {self.spec.base_dir} is already running "
                f"(pid {pid}) listening on {running}, not {expected}; stop it first "
                f"or use its port"
            )

    def _wait_healthy(self, deadline: float) -> None:
        while not self.healthy():
            code = procs.exited(self._proc)
            if code is not None:
                raise ServiceError(
                    f"etcd {self.spec.name} exited with code {code} during startup\n"
                    f"{procs.log_tails([self.log_path])}"
                )
            if time.monotonic() >= deadline:
                raise ServiceError(
                    f"etcd {self.spec.name} is not healthy on {self.endpoint}\n"
                    f"{procs.log_tails([self.log_path])}"
                )
            time.sleep(_POLL_INTERVAL)
