"""Finding binaries and planning their installation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdc.playground.errors import ServiceError
from cdc.playground.packages import (
    ensure_packages,
    find_binary,
    install_commands,
    missing_packages,
    require_binary,
)


def make_executable(directory: Path, name: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory that is the whole PATH."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", str(directory))
    return directory


def test_find_binary_searches_path(bin_dir: Path) -> None:
    tool = make_executable(bin_dir, "cdc-test-tool")
    assert find_binary("cdc-test-tool") == str(tool)


def test_find_binary_ignores_files_that_are_not_executable(bin_dir: Path) -> None:
    (bin_dir / "cdc-test-tool").write_text("")
    assert find_binary("cdc-test-tool") is None


def test_find_binary_searches_sbin_even_when_path_lacks_it(bin_dir: Path) -> None:
    sbin_tool = next(p for p in sorted(Path("/usr/sbin").iterdir()) if os.access(p, os.X_OK))
    assert find_binary(sbin_tool.name) == str(sbin_tool)


def test_missing_packages_are_unique_and_sorted(bin_dir: Path) -> None:
    make_executable(bin_dir, "present")
    required = {"absent-b": "pkg-b", "absent-a": "pkg-a", "absent-a2": "pkg-a", "present": "p"}
    assert missing_packages(required) == ["pkg-a", "pkg-b"]


def test_ensure_packages_does_nothing_when_everything_is_there(bin_dir: Path) -> None:
    make_executable(bin_dir, "present")
    ensure_packages({"present": "some-package-that-does-not-exist"})


def test_ensure_packages_without_apt_names_the_command_to_run(bin_dir: Path) -> None:
    with pytest.raises(ServiceError) as failure:
        ensure_packages({"cdc-no-such-binary": "cdc-no-such-package"})
    message = str(failure.value)
    assert message.startswith("cdc-no-such-binary not found and apt-get is not available")
    assert "apt-get install -y --no-install-recommends cdc-no-such-package" in message


def test_require_binary_names_the_package(bin_dir: Path) -> None:
    with pytest.raises(ServiceError, match="cdc-no-such-binary is not installed") as failure:
        require_binary("cdc-no-such-binary", "cdc-no-such-package")
    assert "install -y --no-install-recommends cdc-no-such-package" in str(failure.value)


def test_install_commands_as_root() -> None:
    assert install_commands(["a", "b"], is_root=True, sudo="/usr/bin/sudo") == [
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "a", "b"],
    ]


def test_install_commands_through_sudo_keep_the_frontend() -> None:
    update, install = install_commands(["a"], is_root=False, sudo="/usr/bin/sudo")
    assert update == ["/usr/bin/sudo", "DEBIAN_FRONTEND=noninteractive", "apt-get", "update"]
    assert install[:3] == ["/usr/bin/sudo", "DEBIAN_FRONTEND=noninteractive", "apt-get"]


def test_install_commands_without_sudo_run_apt_directly() -> None:
    update, _ = install_commands(["a"], is_root=False, sudo=None)
    assert update == ["apt-get", "update"]
