"""Child-process helpers shared by the MariaDB and etcd launchers.

The servers are plain processes whose pid we record in a file under the
service's own base directory. Because a pid file can outlive its process
(reboot, kill -9) and pids get reused, a recorded pid only counts as "ours"
when the process is alive, not a zombie, and its command line still mentions
the service's data directory. ``stop`` never signals anything else.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cdc.playground.errors import ServiceError

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_POLL_INTERVAL = 0.05


def tail(path: Path, lines: int = 25) -> str:
    """Last ``lines`` lines of a log file, or an empty string if there is none."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def log_tails(paths: Sequence[Path], lines: int = 25) -> str:
    """Tails of every non-empty log in ``paths``, each under a header, for error messages."""
    parts = []
    for path in paths:
        text = tail(path, lines)
        if text.strip():
            parts.append(f"--- last lines of {path} ---\n{text}")
    return "\n".join(parts) if parts else "(the logs are empty)"


def read_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file``, or None when the file is missing or garbled."""
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def write_pid(pid_file: Path, pid: int) -> None:
    pid_file.write_text(f"{pid}\n")


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (a zombie has already exited)."""
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    """The argv of ``pid``, or [] when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [arg.decode("utf-8", errors="replace") for arg in raw.split(b"\0") if arg]


def owned_pid(pid_file: Path, marker: str) -> int | None:
    """The pid from ``pid_file`` if that process is alive and has ``marker`` as an argument.

    The marker is a whole argument such as ``--datadir=/abs/dir``, compared
    exactly so that /x/data does not claim the server of /x/data2.
    """
    pid = read_pid(pid_file)
    if pid is None or not pid_alive(pid):
        return None
    if marker not in cmdline(pid):
        return None
    return pid


def option_value(pid: int, option: str) -> str | None:
    """The value of ``--option=value`` in the argv of ``pid``, if present."""
    prefix = f"{option}="
    for arg in cmdline(pid):
        if arg.startswith(prefix):
            return arg[len(prefix) :]
    return None


def _parent_death_hook() -> Callable[[], None]:
    """A preexec hook asking the kernel to SIGTERM the child when the parent thread dies.

    libc is resolved here, in the parent, so that the forked child only makes
    one plain system call before exec.
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return functools.partial(prctl, _PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn(
    argv: Sequence[str],
    output: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    die_with_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` detached from the terminal, stdout and stderr appended to ``output``.

    The child gets its own session so that Ctrl-C in the shell that ran
    ``cdcctl playground up`` does not kill it. With ``die_with_parent`` it
    receives SIGTERM when the spawning thread exits, which the test fixtures
    use so that a killed pytest leaves no servers behind.
    """
    with output.open("ab") as out:
        try:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_parent_death_hook() if die_with_parent else None,
            )
        except OSError as exc:
            raise ServiceError(f"cannot run {argv[0]}: {exc}") from exc


def exited(proc: subprocess.Popen[bytes] | None) -> int | None:
    """The exit code of ``proc`` if it has exited, else None (also for no process)."""
    return None if proc is None else proc.poll()


def terminate(pid: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """SIGTERM ``pid`` and wait up to ``timeout`` s; SIGKILL if it is still alive.

    Returns True when the process shut down on SIGTERM, False when it had to
    be killed. ``proc`` is the Popen of the same pid when we are its parent,
    so it gets reaped instead of lingering as a zombie.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout, proc):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 10.0, proc)
    return False


def _wait_gone(pid: int, timeout: float, proc: subprocess.Popen[bytes] | None) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            return True
        if not pid_alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL)


def stop_recorded(
    pid: int | None,
    pid_file: Path,
    timeout: float,
    proc: subprocess.Popen[bytes] | None,
    what: str,
) -> None:
    """Stops a server started by us (SIGTERM, SIGKILL after `timeout`) and clears its pid file.

    `pid` is what `owned_pid` found (None: not running, only the stale file
    goes); `proc` is our Popen of it when this process started it.
    """
    if pid is not None:
        same = proc if proc is not None and proc.pid == pid else None
        if not terminate(pid, timeout, same):
            log.warning("%s (pid %d) did not stop within %.0fs and was killed", what, pid, timeout)
        log.info("%s stopped", what)
    pid_file.unlink(missing_ok=True)
