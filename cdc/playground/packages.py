"""Make sure the server binaries the playground needs are installed.

The playground runs Debian's own MariaDB, etcd and Java. When a binary is
missing we install its package with apt-get (through sudo when we are not
root) rather than failing, and when that is impossible we say exactly which
command to run. Installing mariadb-server or etcd-server may try to start the
system services through invoke-rc.d; we neither need nor use those.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from cdc.playground.errors import ServiceError

log = logging.getLogger(__name__)

MARIADB_PACKAGES = {"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server"}
ETCD_PACKAGES = {"etcd": "etcd-server"}
JAVA_PACKAGES = {"java": "openjdk-17-jre-headless"}
PLAYGROUND_PACKAGES = {**MARIADB_PACKAGES, **ETCD_PACKAGES, **JAVA_PACKAGES}

# Daemons live in sbin on Debian, which is often missing from a user's PATH.
_EXTRA_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_OUTPUT_TAIL_LINES = 30


def find_binary(name: str) -> str | None:
    """Absolute path of executable ``name`` on PATH or in the sbin directories."""
    path = os.environ.get("PATH", os.defpath)
    dirs = [d for d in path.split(os.pathsep) if d] + list(_EXTRA_DIRS)
    return shutil.which(name, path=os.pathsep.join(dirs))


def require_binary(name: str, package: str) -> str:
    """Path of ``name``; a ``ServiceError`` naming ``package`` when it is not installed."""
    found = find_binary(name)
    if found is None:
        raise ServiceError(
            f"{name} is not installed; install it with: {manual_install_command([package])}"
        )
    return found


def missing_packages(required: Mapping[str, str]) -> list[str]:
    """The Debian packages, sorted and unique, whose binaries are not found."""
    return sorted({pkg for binary, pkg in required.items() if find_binary(binary) is None})


def install_commands(
    packages: Sequence[str], *, is_root: bool, sudo: str | None
) -> list[list[str]]:
    """The apt-get update and install commands for ``packages``.

    Not root: prefixed with ``sudo`` when it exists (and run as is
    otherwise, which then fails with apt's own permission message). sudo
    resets the environment, so DEBIAN_FRONTEND goes on its command line.
    """
    prefix = [] if is_root or sudo is None else [sudo, "DEBIAN_FRONTEND=noninteractive"]
    update = [*prefix, "apt-get", "update"]
    install = [*prefix, "apt-get", "install", "-y", "--no-install-recommends", *packages]
    return [update, install]


def manual_install_command(packages: Sequence[str]) -> str:
    """The shell command a user should run to install ``packages`` by hand."""
    commands = install_commands(packages, is_root=os.geteuid() == 0, sudo="sudo")
    return " && ".join(_shell(cmd) for cmd in commands)


def ensure_packages(required: Mapping[str, str]) -> None:
    """Install the packages of the binaries in ``required`` (binary -> package) that are missing.

    Runs ``apt-get update`` once, then one ``apt-get install``. Raises
    ``ServiceError`` with the tail of apt's output and the command to run by
    hand when installing is impossible or fails.
    """
    packages = missing_packages(required)
    if not packages:
        return
    is_root = os.geteuid() == 0
    commands = install_commands(packages, is_root=is_root, sudo=shutil.which("sudo"))
    manual = manual_install_command(packages)
    missing = ", ".join(sorted(b for b, p in required.items() if p in packages))
    if find_binary("apt-get") is None:
        raise ServiceError(
            f"{missing} not found and apt-get is not available; "
            f"install the packages {' '.join(packages)} with your package manager "
            f"(on Debian/Ubuntu: {manual})"
        )
    log.info("installing %s for %s", " ".join(packages), missing)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in commands:
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = "\n".join((result.stdout + result.stderr).splitlines()[-_OUTPUT_TAIL_LINES:])
            raise ServiceError(
                f"{_shell(cmd)} failed with code {result.returncode}:\n{output}\n"
                f"install the packages by hand with: {manual}"
            )
    still = missing_packages(required)
    if still:
        raise ServiceError(
            f"apt-get installed {' '.join(packages)} but the binaries of "
            f"{' '.join(still)} are still not found on PATH, /usr/sbin or /usr/local/sbin"
        )


def _shell(cmd: Sequence[str]) -> str:
    prefix = "DEBIAN_FRONTEND=noninteractive " if cmd[0] == "apt-get" else ""
    return prefix + " ".join(cmd)
