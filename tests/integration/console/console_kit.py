"""What the console tests share: real cdc-server processes with --http-addr and tokens,
headless Debian Chromium through Playwright, and plain HTTP calls to the JSON API.

    ConsoleCluster   N cdc-server processes on one etcd prefix (lease TTL 3 s), each
                     serving its admin API and --http-addr, admin and read-only tokens
    open_browser     Playwright driving /usr/bin/chromium (no browser download:
                     `playwright install` is never needed), one fresh profile
    http             one request to the JSON API: (status, body text)
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from testkit import wait_for

from cdc.api.health import is_serving
from cdc.playground.ports import free_port
from cdc.playground.procs import spawn
from cdc.store import EtcdConfig, EtcdStore
from cdc.store.keys import cluster_prefix

CHROMIUM = "/usr/bin/chromium"
# what works on this machine as root (issue #19); Playwright adds --headless and a fresh
# --user-data-dir of its own
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
TTL = 3
_DIE_WITH_PYTEST = ("setpriv", "--pdeathsig", "SIGKILL")


@dataclass(frozen=True)
class Tokens:
    admin: str
    read: str
    admin_file: Path
    read_file: Path


def make_tokens(directory: Path) -> Tokens:
    admin, read = f"admin-{secrets.token_hex(12)}", f"read-{secrets.token_hex(12)}"
    admin_file, read_file = directory / "admin-token", directory / "read-token"
    admin_file.write_text(admin + "\n")
    read_file.write_text(read + "\n")
    return Tokens(admin, read, admin_file, read_file)


class ConsoleServer:
    """One cdc-server with --http-addr; ``url`` is its console."""

    def __init__(self, name: str, etcd: str, cluster: str, tokens: Tokens, log_dir: Path):
        self.name = name
        self.port, self.http_port = free_port(), free_port()
        self.log = log_dir / f"{name}.log"
        argv = [
            *_DIE_WITH_PYTEST, sys.executable, "-m", "capture.main",
            f"--etcd={etcd}", f"--addr=127.0.0.1:{self.port}",
            f"--http-addr=127.0.0.1:{self.http_port}", f"--capture-id={name}",
            f"--cluster-id={cluster}", f"--lease-ttl={TTL}",
            f"--auth-token-file={tokens.admin_file}", f"--read-token-file={tokens.read_file}",
            f"--secrets-dir={log_dir}",
        ]  # fmt: skip
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        self.proc = spawn(argv, self.log, env=env)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def wait_serving(self) -> None:
        def serving() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited; see {self.log}")
            return is_serving(self.address, timeout=0.5)

        wait_for(serving, 60, f"{self.name} to serve")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


class ConsoleCluster:
    """The module's cdc-server processes, on a cluster id of their own."""

    def __init__(self, etcd: str, tokens: Tokens, log_dir: Path, names: tuple[str, ...]):
        self.cluster = f"console-{uuid.uuid4().hex[:8]}"
        self.etcd = etcd
        self.tokens = tokens
        self.log_dir = log_dir
        self.store = EtcdStore(EtcdConfig((etcd,), prefix=cluster_prefix(self.cluster)))
        self.servers = {n: ConsoleServer(n, etcd, self.cluster, tokens, log_dir) for n in names}
        for server in self.servers.values():
            server.wait_serving()

    def close(self) -> None:
        for server in self.servers.values():
            if server.proc.poll() is None:
                server.proc.kill()
            server.proc.wait()
        try:
            self.store.delete_prefix(cluster_prefix(self.cluster) + "/")
        finally:
            self.store.close()


def http(
    url: str, method: str = "GET", token: str | None = None, json_body: bool = True
) -> tuple[int, str]:
    """One request; (status, body) whatever the status."""
    request = urllib.request.Request(url, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if method != "GET" and json_body:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextmanager
def open_browser() -> Iterator[object]:
    """A headless Chromium (Debian's) driven by Playwright, closed at the end."""
    if not Path(CHROMIUM).exists() or shutil.which("setpriv") is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/bootstrap.sh (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory(prefix="cdc-chromium-") as downloads,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=list(CHROMIUM_FLAGS),
            downloads_path=downloads,
        )
        try:
            yield browser
        finally:
            browser.close()
