"""Loopback ports for the private servers.

Every private server listens on 127.0.0.1 only. Before starting one we check
that its port is free, so that the developer sees "port 3316 is taken by pid
1234 mariadbd" instead of a server log full of bind errors. The owner of a
listening socket is found the way ``ss -p`` does it: the socket's inode from
/proc/net/tcp{,6}, then the process whose /proc/<pid>/fd links to it (only
visible for our own processes unless we are root).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cdc.playground.errors import PortInUseError, ServiceError
from cdc.playground.procs import log_tails

LOOPBACK = "127.0.0.1"
_TCP_LISTEN = "0A"
_POLL_INTERVAL = 0.05


@dataclass(frozen=True)
class PortOwner:
    """The process holding a listening socket."""

    pid: int
    name: str


def free_port() -> int:
    """A port that is free on 127.0.0.1 right now (the kernel picks it).

    Another process may grab it before the caller binds it; the servers'
    own port check turns that rare race into a clear error.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    """True when a listener could bind 127.0.0.1:``port`` now.

    SO_REUSEADDR makes connections lingering in TIME_WAIT not count, as they
    do not stop a server from binding either.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def ensure_port_free(port: int, what: str, option: str | None = None) -> None:
    """Raise ``PortInUseError`` naming the holder when 127.0.0.1:``port`` is taken.

    ``what`` names the service that wanted the port ("source MariaDB"),
    ``option`` the command-line option that picks another one.
    """
    if not 0 < port < 65536:
        raise ServiceError(f"{what}: port {port} is not a TCP port (1-65535)")
    try:
        if port_is_free(port):
            return
    except OSError as exc:
        raise ServiceError(
            f"{what}: cannot bind port {port} on {LOOPBACK} ({exc.strerror}); "
            f"choose a port above 1023{' with ' + option if option else ''}"
        ) from exc
    owner = find_listener(port)
    holder = f" (by pid {owner.pid} {owner.name})" if owner else ""
    remedy = f"choose another port with {option}" if option else "choose another port"
    raise PortInUseError(
        f"{what}: port {port} on {LOOPBACK} is already in use{holder}; "
        f"stop that process or {remedy}"
    )


def find_listener(port: int) -> PortOwner | None:
    """The process listening on TCP ``port``, if /proc lets us see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except (PermissionError, FileNotFoundError, ProcessLookupError):
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(fd) in targets:
                    return PortOwner(int(pid_dir.name), _process_name(pid_dir))
    return None


def _process_name(pid_dir: Path) -> str:
    try:
        return (pid_dir / "comm").read_text().strip()
    except OSError:
        return "?"


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        inodes.update(parse_listening_inodes(lines, port))
    return inodes


def parse_listening_inodes(lines: list[str], port: int) -> set[str]:
    """Socket inodes listening on ``port`` in the rows of a /proc/net/tcp table.

    A row reads ``sl local_address rem_address st ... inode``, addresses as
    ``HEXIP:HEXPORT``; state 0A is LISTEN and the inode is the 10th field.
    """
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 10:
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[3] == _TCP_LISTEN:
            found.add(fields[9])
    return found


def _program_name(proc: subprocess.Popen[bytes]) -> str:
    """The file name of the program ``proc`` runs, whether its args are one path or an argv."""
    args = proc.args
    program = args if isinstance(args, str | bytes | os.PathLike) else args[0]
    return Path(os.fsdecode(program)).name


def wait_for_port(
    host: str,
    port: int,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
    logs: tuple[Path, ...] = (),
) -> None:
    """Wait until ``host:port`` accepts TCP connections.

    Fails early, with the tails of ``logs``, when ``proc`` exits before that:
    a server that dies on a bad option should not cost the full timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and (code := proc.poll()) is not None:
            raise ServiceError(
                f"{_program_name(proc)} exited with code {code} before "
                f"listening on {host}:{port}\n{log_tails(logs)}"
            )
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
            return
        if time.monotonic() >= deadline:
            raise ServiceError(
                f"nothing listens on {host}:{port} after {timeout:.0f}s\n{log_tails(logs)}"
            )
        time.sleep(_POLL_INTERVAL)
