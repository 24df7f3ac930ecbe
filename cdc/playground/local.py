"""The developer playground: private etcd, source and downstream MariaDB on fixed ports.

``cdcctl playground up|down|status`` drive this class. Layout under the base
directory (default ``<repo>/.cdc-playground``, git-ignored)::

    state.json     written by up(): pids, ports, credentials, URIs (0600)
    etcd/          EtcdServer, client port 2389, peer port 2390
    source/        MariaDBServer with binlog (server_id 1), port 3316
    downstream/    MariaDBServer without binlog (server_id 2), port 3317

``up`` checks every port it still needs before starting anything, starts
what is not running yet and reuses what is; if one service fails, the ones
this call started are stopped again. ``down`` stops only the processes in
the pid files under the base directory. Data directories survive ``down``,
so the next ``up`` is quick and keeps the databases.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cdc.playground.errors import ServiceError
from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.files import make_private_dir, read_json, write_json
from cdc.playground.mariadb import USER, MariaDBServer, MariaDBSpec
from cdc.playground.packages import PLAYGROUND_PACKAGES, ensure_packages
from cdc.playground.ports import ensure_port_free

log = logging.getLogger(__name__)

STATE_VERSION = 1
SOURCE_SERVER_ID = 1
DOWNSTREAM_SERVER_ID = 2

# The cdcctl options that choose each port, quoted in port-in-use errors.
PORT_OPTIONS = {
    "source": "--source-port",
    "downstream": "--downstream-port",
    "etcd_client": "--etcd-port",
    "etcd_peer": "--etcd-peer-port",
}


@dataclass(frozen=True)
class PlaygroundPorts:
    """The loopback ports of the playground; the defaults avoid the system's 3306/2379.

    They come from the user's command line, so a bad one is a ``ServiceError``
    naming the option to fix.
    """

    source: int = 3316
    downstream: int = 3317
    etcd_client: int = 2389
    etcd_peer: int = 2390

    def __post_init__(self) -> None:
        ports = asdict(self)
        for field, port in ports.items():
            if not isinstance(port, int) or not 0 < port < 65536:
                raise ServiceError(f"{PORT_OPTIONS[field]} {port!r} is not a TCP port (1-65535)")
        if len(set(ports.values())) != len(ports):
            listing = ", ".join(f"{PORT_OPTIONS[f]} {p}" for f, p in ports.items())
            raise ServiceError(f"the playground ports must all differ: {listing}")


def default_base_dir() -> Path:
    """``<repo>/.cdc-playground`` in a source checkout, else ``./.cdc-playground``."""
    repo = Path(__file__).resolve().parents[2]
    root = repo if (repo / "pyproject.toml").is_file() else Path.cwd()
    return root / ".cdc-playground"


class LocalServices:
    """The playground's three private servers, managed as one.

    ``ports`` defaults to the ports recorded in ``state.json`` by the last
    ``up`` (so ``status`` and ``down`` find a playground started on other
    ports), else to ``PlaygroundPorts()``.
    """

    def __init__(self, base_dir: Path | None = None, ports: PlaygroundPorts | None = None) -> None:
        self.base_dir = Path(base_dir or default_base_dir()).absolute()
        self.state_path = self.base_dir / "state.json"
        self.ports = ports or self._recorded_ports() or PlaygroundPorts()
        self.etcd = EtcdServer(
            EtcdSpec(
                "playground", self.base_dir / "etcd", self.ports.etcd_client, self.ports.etcd_peer
            )
        )
        self.source = MariaDBServer(
            MariaDBSpec(
                "source", self.base_dir / "source", self.ports.source, SOURCE_SERVER_ID, True
            )
        )
        self.downstream = MariaDBServer(
            MariaDBSpec(
                "downstream",
                self.base_dir / "downstream",
                self.ports.downstream,
                DOWNSTREAM_SERVER_ID,
                False,
            )
        )

    def up(self) -> dict[str, Any]:
        """Start whatever is not running and return the state written to ``state.json``.

        The state holds passwords: show it through ``status`` or mask it.
        """
        ensure_packages(PLAYGROUND_PACKAGES)
        self._check_ports()
        make_private_dir(self.base_dir)
        started: list[EtcdServer | MariaDBServer] = []
        try:
            for server in (self.etcd, self.source, self.downstream):
                was_running = server.is_running()
                server.start()
                if not was_running:
                    started.append(server)
        except BaseException:
            for server in reversed(started):
                server.stop()
            raise
        state = self._state()
        write_json(self.state_path, state)
        log.info("playground up in %s", self.base_dir)
        return state

    def down(self) -> list[str]:
        """Stop the playground's servers; returns the names of those that were running."""
        stopped = []
        for name, server in (
            ("downstream", self.downstream),
            ("source", self.source),
            ("etcd", self.etcd),
        ):
            if server.is_running():
                server.stop()
                stopped.append(name)
        self.state_path.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, Any]:
        """Which servers run, with their pids, addresses, masked URIs and log files."""

        def mariadb(server: MariaDBServer) -> dict[str, Any]:
            return {
                "running": server.is_running(),
                "pid": server.pid,
                "port": server.port,
                "uri": f"mysql://{USER}:***@{server.host}:{server.port}/",
                "log": str(server.log_path),
            }

        return {
            "base_dir": str(self.base_dir),
            "services": {
                "etcd": {
                    "running": self.etcd.is_running(),
                    "pid": self.etcd.pid,
                    "endpoint": self.etcd.endpoint,
                    "peer_port": self.etcd.peer_port,
                    "log": str(self.etcd.log_path),
                },
                "source": mariadb(self.source),
                "downstream": mariadb(self.downstream),
            },
        }

    def _check_ports(self) -> None:
        """Fail before starting anything when a port of a stopped service is taken."""
        needed = []
        if not self.etcd.is_running():
            needed += [
                (self.ports.etcd_client, "playground etcd (client)", "etcd_client"),
                (self.ports.etcd_peer, "playground etcd (peer)", "etcd_peer"),
            ]
        if not self.source.is_running():
            needed.append((self.ports.source, "source MariaDB", "source"))
        if not self.downstream.is_running():
            needed.append((self.ports.downstream, "downstream MariaDB", "downstream"))
        for port, what, field in needed:
            ensure_port_free(port, what, PORT_OPTIONS[field])

    def _recorded_ports(self) -> PlaygroundPorts | None:
        state = read_json(self.state_path, STATE_VERSION)
        if state is None:
            return None
        try:
            return PlaygroundPorts(**state["ports"])
        except (KeyError, TypeError, ServiceError) as exc:
            raise ServiceError(
                f"{self.state_path} has no valid ports ({exc}); remove it and try again"
            ) from exc

    def _state(self) -> dict[str, Any]:
        def mariadb(server: MariaDBServer) -> dict[str, Any]:
            return {
                "pid": server.pid,
                "host": server.host,
                "port": server.port,
                "user": server.user,
                "password": server.password,
                "uri": server.uri,
                "server_id": server.spec.server_id,
                "binlog": server.spec.binlog,
                "log": str(server.log_path),
            }

        return {
            "version": STATE_VERSION,
            "base_dir": str(self.base_dir),
            "ports": asdict(self.ports),
            "services": {
                "etcd": {
                    "pid": self.etcd.pid,
                    "host": self.etcd.host,
                    "port": self.etcd.port,
                    "peer_port": self.etcd.peer_port,
                    "endpoint": self.etcd.endpoint,
                    "log": str(self.etcd.log_path),
                },
                "source": mariadb(self.source),
                "downstream": mariadb(self.downstream),
            },
        }
