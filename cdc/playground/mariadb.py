"""A private MariaDB server on 127.0.0.1, for the playground and the tests.

Lifecycle of one instance, everything under ``spec.base_dir``::

    credentials.json   created once: user cdc + random password (0600)
    data/              mariadb-install-db --no-defaults, once (marker: data.initialised);
                       removing data/ gives an empty server at the next start
    init.sql           rewritten at every start: (re)creates user cdc, not binlogged
    mariadbd.pid       pid of the server we started; stop() signals only that pid
    mariadbd.sock      unix socket, so the system's /run/mysqld is never used
    tmp/               the server's temporary files (never the machine's /tmp)
    mariadbd.err       error log; mariadbd.out catches what is printed before it opens
    general.log        target of SET GLOBAL general_log = ON (off at start)

The server never reads /etc/mysql (``--no-defaults``), listens on loopback
only and, when ``binlog`` is on, is configured as a CDC source: row-based
binlog with full images and full metadata, GTID strict mode, CRC32
checksums. Durability is relaxed (no fsync per commit) since this is for
development. The time zone is left to the system; tests set it per session.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pymysql

from cdc.playground import procs
from cdc.playground.errors import ServiceError
from cdc.playground.files import make_private_dir, read_json, write_json, write_private
from cdc.playground.packages import require_binary
from cdc.playground.ports import LOOPBACK, ensure_port_free

log = logging.getLogger(__name__)

USER = "cdc"
_CREDENTIALS_VERSION = 1
_SOCKET_NAME = "mariadbd.sock"
# sockaddr_un.sun_path is 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH = 107
_MAX_SERVER_ID = 2**32 - 1
_INSTALL_TIMEOUT = 120.0
_POLL_INTERVAL = 0.05

SOURCE_OPTIONS = (
    "--log-bin=binlog",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
    "--binlog-checksum=CRC32",
    "--gtid-strict-mode=ON",
    "--log-slave-updates=ON",
    "--sync-binlog=0",
)


@dataclass(frozen=True)
class MariaDBSpec:
    """What makes one private MariaDB instance: where it lives and how it is configured.

    ``binlog`` turns the server into a CDC source; ``server_id`` must differ
    from every other server and binlog reader of the same replication
    topology. ``extra_options`` are appended to the mariadbd command line
    (e.g. ``("--ssl-cert=/p/server.pem", ...)``). ``base_dir`` is made absolute.
    """

    name: str
    base_dir: Path
    port: int
    server_id: int
    binlog: bool
    extra_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_dir", Path(self.base_dir).absolute())
        if not self.name:
            raise ValueError("MariaDBSpec.name must not be empty")
        if not 0 < self.port < 65536:
            raise ValueError(f"MariaDB {self.name}: port {self.port} is not a TCP port (1-65535)")
        if not 0 < self.server_id <= _MAX_SERVER_ID:
            raise ValueError(
                f"MariaDB {self.name}: server_id {self.server_id} must be in 1..{_MAX_SERVER_ID}"
            )
        socket_path = str(self.base_dir / _SOCKET_NAME)
        if len(socket_path.encode()) > _MAX_SOCKET_PATH:
            raise ValueError(
                f"MariaDB {self.name}: the socket path {socket_path} is longer than "
                f"{_MAX_SOCKET_PATH} bytes, the limit of unix sockets; choose a shorter base_dir"
            )


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str


def tmp_dir(spec: MariaDBSpec) -> Path:
    """The instance's own temporary directory.

    Bootstraps sharing /tmp collide on their temporary tables' names (one of
    two concurrent mariadb-install-db runs failed with "Unknown table
    'mysql.tmp_user_sys'"), so no instance uses the machine's.
    """
    return spec.base_dir / "tmp"


def server_options(spec: MariaDBSpec, *, as_root: bool) -> list[str]:
    """The mariadbd command-line options for ``spec`` (without the binary)."""
    base = spec.base_dir
    options = [
        "--no-defaults",
        f"--datadir={base / 'data'}",
        f"--socket={base / _SOCKET_NAME}",
        f"--tmpdir={tmp_dir(spec)}",
        f"--pid-file={base / 'mariadbd.pid'}",
        f"--log-error={base / 'mariadbd.err'}",
        f"--port={spec.port}",
        f"--bind-address={LOOPBACK}",
        "--skip-name-resolve",
        f"--server-id={spec.server_id}",
        "--character-set-server=utf8mb4",
        "--max-allowed-packet=64M",
        "--innodb-flush-log-at-trx-commit=2",
        "--general-log=OFF",
        f"--general-log-file={base / 'general.log'}",
        f"--init-file={base / 'init.sql'}",
    ]
    if as_root:
        options.append("--user=root")
    if spec.binlog:
        options.extend(SOURCE_OPTIONS)
    options.extend(spec.extra_options)
    return options


def init_sql(credentials: Credentials) -> str:
    """SQL run by mariadbd at every start: make sure our user exists with our password.

    ``sql_log_bin = 0`` keeps these statements out of the binlog, so a CDC
    reader of a fresh source sees an empty binlog.
    """
    user, password = credentials.user, credentials.password
    lines = ["SET sql_log_bin = 0;"]
    for host in ("%", LOOPBACK):
        account = f"'{user}'@'{host}'"
        lines += [
            f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '{password}';",
            f"ALTER USER {account} IDENTIFIED BY '{password}';",
            f"GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION;",
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {account};",
        ]
    return "\n".join(lines) + "\n"


class MariaDBServer:
    """One private mariadbd process, started and stopped by us.

    ``start`` and ``stop`` are idempotent and safe across processes: the
    playground's ``up`` and ``down`` run in different ``cdcctl`` invocations
    and find the server through its pid file. With ``die_with_parent`` the
    server gets SIGTERM when the starting thread exits (used by the tests).
    """

    def __init__(self, spec: MariaDBSpec, *, die_with_parent: bool = False) -> None:
        self.spec = spec
        self._die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        base = spec.base_dir
        self.data_dir = base / "data"
        self.socket_path = base / _SOCKET_NAME
        self.pid_file = base / "mariadbd.pid"
        self.log_path = base / "mariadbd.err"
        self.output_path = base / "mariadbd.out"
        self.general_log_path = base / "general.log"
        self._install_log = base / "install-db.log"
        self._initialised_marker = base / "data.initialised"
        self._credentials_file = base / "credentials.json"
        self._init_file = base / "init.sql"
        self._credentials: Credentials | None = None

    def __repr__(self) -> str:
        return f"MariaDBServer({self.spec.name!r}, {self.host}:{self.port}, {self.spec.base_dir})"

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def user(self) -> str:
        return self._load_credentials().user

    @property
    def password(self) -> str:
        return self._load_credentials().password

    @property
    def uri(self) -> str:
        """``mysql://user:password@127.0.0.1:port/``; mask it before logging."""
        creds = self._load_credentials()
        user, password = quote(creds.user, safe=""), quote(creds.password, safe="")
        return f"mysql://{user}:{password}@{self.host}:{self.port}/"

    def uri_by_reference(self, secrets: Path, name: str) -> str:
        """A URI whose password is read from ``secrets/<name>.password`` (written here,
        0600), as operators give them: never in etcd, never on a command line."""
        secret = secrets / f"{name}.password"
        secret.write_text(self.password)
        secret.chmod(0o600)
        user = quote(self.user, safe="")
        return f"mysql://{user}@{self.host}:{self.port}/?password-file={secret}"

    @property
    def pid(self) -> int | None:
        """The pid of the running server, None when it is not running."""
        return procs.owned_pid(self.pid_file, f"--datadir={self.data_dir}")

    def is_running(self) -> bool:
        return self.pid is not None

    def connect(self, **kwargs: Any) -> pymysql.connections.Connection:
        """A PyMySQL connection as user cdc: utf8mb4, autocommit on unless overridden."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "charset": "utf8mb4",
            "autocommit": True,
        }
        params.update(kwargs)
        return pymysql.connect(**params)

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and wait until user cdc can log in; no-op when it runs already.

        Raises ``ServiceError`` (with the server log tail) when the server
        cannot start, and ``PortInUseError`` when the port is taken.
        """
        what = f"MariaDB {self.spec.name}"
        pid = self.pid
        if pid is not None:
            self._check_running_port(pid)
            log.debug("%s already running as pid %d", what, pid)
            return
        ensure_port_free(self.port, what)
        mariadbd = require_binary("mariadbd", "mariadb-server")
        make_private_dir(self.spec.base_dir)
        make_private_dir(tmp_dir(self.spec))
        creds = self._load_credentials()
        self._initialise()
        write_private(self._init_file, init_sql(creds))
        self.socket_path.unlink(missing_ok=True)
        argv = [mariadbd, *server_options(self.spec, as_root=os.geteuid() == 0)]
        began = time.monotonic()
        self._proc = procs.spawn(
            argv, self.output_path, cwd=self.spec.base_dir, die_with_parent=self._die_with_parent
        )
        procs.write_pid(self.pid_file, self._proc.pid)
        try:
            self._wait_for_login(began + timeout)
        except BaseException:
            procs.terminate(self._proc.pid, 10.0, self._proc)
            self.pid_file.unlink(missing_ok=True)
            raise
        log.info(
            "%s started as pid %d on %s:%d in %.2fs",
            what,
            self._proc.pid,
            self.host,
            self.port,
            time.monotonic() - began,
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down (SIGTERM, SIGKILL after ``timeout`` s); no-op when not running.

        Only the pid from our pid file is signalled, and only if that process
        is still a mariadbd of this data directory.
        """
        procs.stop_recorded(
            self.pid, self.pid_file, timeout, self._proc, f"MariaDB {self.spec.name}"
        )
        self._proc = None

    def _logs(self) -> tuple[Path, ...]:
        return (self.log_path, self.output_path)

    def _check_running_port(self, pid: int) -> None:
        running = procs.option_value(pid, "--port")
        if running != str(self.port):
            raise ServiceError(
                f"MariaDB {self.spec.name} in {self.spec.base_dir} is already running "
                f"(pid {pid}) on port {running}, not {self.port}; stop it first or use "
                f"port {running}"
            )

    def _load_credentials(self) -> Credentials:
        if self._credentials is None:
            data = read_json(self._credentials_file, _CREDENTIALS_VERSION)
            if data is None:
                make_private_dir(self.spec.base_dir)
                data = {
                    "version": _CREDENTIALS_VERSION,
                    "user": USER,
                    "password": secrets.token_urlsafe(18),
                }
                write_json(self._credentials_file, data)
            self._credentials = Credentials(user=data["user"], password=data["password"])
        return self._credentials

    def _initialise(self) -> None:
        """Create the data directory with mariadb-install-db unless that was done before."""
        if self._initialised_marker.exists():
            if self.data_dir.exists():
                return
            self._initialised_marker.unlink()
        if self.data_dir.exists():
            raise ServiceError(
                f"MariaDB {self.spec.name}: {self.data_dir} exists but its initialisation "
                f"never finished; remove that directory and start again"
            )
        install_db = require_binary("mariadb-install-db", "mariadb-server")
        argv = [
            install_db,
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--tmpdir={tmp_dir(self.spec)}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ]
        began = time.monotonic()
        with self._install_log.open("wb") as out:
            try:
                result = subprocess.run(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.spec.base_dir,
                    timeout=_INSTALL_TIMEOUT,
                    check=False,
                )
                failure = f"exited with code {result.returncode}" if result.returncode else None
            except subprocess.TimeoutExpired:
                failure = f"did not finish within {_INSTALL_TIMEOUT:.0f}s"
        if failure is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise ServiceError(
                f"MariaDB {self.spec.name}: mariadb-install-db {failure}\n"
                f"{procs.log_tails([self._install_log])}"
            )
        self._initialised_marker.touch()
        log.info(
            "MariaDB %s: data directory initialised in %.2fs",
            self.spec.name,
            time.monotonic() - began,
        )

    def _wait_for_login(self, deadline: float) -> None:
        """Wait until user cdc can log in; fail early when the server exits.

        A login rather than a TCP probe: the port opens before the init file
        has run, and a server that fails on its privilege tables exits only
        after opening it.
        """
        while True:
            try:
                conn = self.connect(connect_timeout=2)
            except pymysql.err.OperationalError as exc:
                last_error = exc
            else:
                conn.close()
                return
            code = procs.exited(self._proc)
            if code is not None:
                raise ServiceError(
                    f"MariaDB {self.spec.name} exited with code {code} during startup; "
                    f"if its data directory is damaged, remove {self.data_dir} to start "
                    f"over with an empty server\n{procs.log_tails(self._logs())}"
                )
            if time.monotonic() >= deadline:
                raise ServiceError(
                    f"MariaDB {self.spec.name}: user {self.user} cannot log in on "
                    f"{self.host}:{self.port} ({last_error})\n{procs.log_tails(self._logs())}"
                )
            time.sleep(_POLL_INTERVAL)
