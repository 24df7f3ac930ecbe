"""The playground's own `cdc-server` process, started detached and found by pid file.

The server is the product, not a dependency, so it is launched through its
console entry point from the same environment as `cdcctl` and judged ready
when its gRPC health service answers SERVING.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

from cdc.api.health import is_serving
from cdc.playground.errors import ServiceError
from cdc.playground.files import make_private_dir, read_json, write_json
from cdc.playground.ports import ensure_port_free
from cdc.playground.procs import log_tails, owned_pid, spawn, stop_recorded, terminate, write_pid

READY_TIMEOUT = 30.0
DEFAULT_PORT = 8300
STATE_VERSION = 1


def _server_command() -> list[str]:
    exe = Path(sys.executable).with_name("cdc-server")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("cdc-server")
    if found:
        return [found]
    return [sys.executable, "-m", "capture.main"]


class ServerProcess:
    """One `cdc-server` with its pid file, log and recorded ports under `base_dir`.

    `port=None` means the port recorded by the last `start` (for status and
    down), else `DEFAULT_PORT`; `http_port` (its console, /metrics and JSON API,
    --http-addr) likewise, else the admin port + 1.
    """

    def __init__(
        self,
        base_dir: Path,
        etcd_endpoint: str,
        port: int | None = None,
        http_port: int | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.etcd_endpoint = etcd_endpoint
        self.pid_file = base_dir / "cdc-server.pid"
        self.log_path = base_dir / "cdc-server.log"
        self.state_path = base_dir / "state.json"
        recorded = read_json(self.state_path, STATE_VERSION)
        self.port = port or (recorded or {}).get("port") or DEFAULT_PORT
        self.http_port = http_port or (recorded or {}).get("http_port") or self.port + 1
        self.addr_arg = f"--addr=127.0.0.1:{self.port}"
        # beside the server's folder: where scripts/playground.sh writes the demo's passwords
        self.secrets_dir = base_dir.parent / "secrets"

    @property
    def pid(self) -> int | None:
        return owned_pid(self.pid_file, self.addr_arg)

    def start(self) -> None:
        """Starts the server unless it already runs; waits until it reports SERVING."""
        if self.pid is not None:
            return
        ensure_port_free(self.port, "playground cdc-server", "--server-port")
        ensure_port_free(self.http_port, "playground console", "--console-port")
        make_private_dir(self.base_dir)
        argv = [
            *_server_command(),
            f"--etcd={self.etcd_endpoint}",
            self.addr_arg,
            f"--http-addr=127.0.0.1:{self.http_port}",
            "--capture-id=playground-1",
            f"--secrets-dir={self.secrets_dir}",
        ]
        proc = spawn(argv, self.log_path)
        write_pid(self.pid_file, proc.pid)
        state = {"version": STATE_VERSION, "port": self.port, "http_port": self.http_port}
        write_json(self.state_path, state)
        deadline = time.monotonic() + READY_TIMEOUT
        while not self._serving():
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    terminate(proc.pid, 5.0, proc)
                raise ServiceError(
                    f"cdc-server did not become ready on 127.0.0.1:{self.port}\n"
                    + log_tails([self.log_path])
                )
            time.sleep(0.2)

    def stop(self) -> bool:
        """Stops the server started by `start`; False when it was not running."""
        pid = self.pid
        stop_recorded(pid, self.pid_file, 15.0, None, "cdc-server")
        return pid is not None

    def _serving(self) -> bool:
        return is_serving(f"127.0.0.1:{self.port}", timeout=1.0)

    def describe(self) -> dict[str, Any]:
        return {
            "running": self.pid is not None,
            "pid": self.pid,
            "addr": f"127.0.0.1:{self.port}",
            "console": f"http://127.0.0.1:{self.http_port}/",
            "etcd": self.etcd_endpoint,
            "log": str(self.log_path),
        }
