"""`cdcctl playground` end to end: up (twice), status, the port-in-use error, down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from cdc.playground.ports import free_port
from cdc.playground.procs import pid_alive


def cdcctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ},
    )


def test_up_twice_status_and_down(tmp_path: Path) -> None:
    base = tmp_path / "pg"
    ports = {
        "--source-port": free_port(),
        "--downstream-port": free_port(),
        "--etcd-port": free_port(),
        "--etcd-peer-port": free_port(),
        "--server-port": free_port(),
        "--console-port": free_port(),
    }
    flags = [f"{k}={v}" for k, v in ports.items()]
    first = cdcctl("playground", "--base-dir", str(base), "up", *flags)
    try:
        assert first.returncode == 0, first.stderr
        shown = json.loads(first.stdout)
        state = json.loads((base / "state.json").read_text())
        for name in ("source", "downstream"):
            password = state["services"][name]["password"]
            assert password and password not in first.stdout
            assert shown[name]["uri"] == (
                f"mysql://cdc:******@127.0.0.1:{state['services'][name]['port']}/"
            )
        assert shown["cdc-server"]["running"] is True
        console = f"http://127.0.0.1:{ports['--console-port']}/"
        assert shown["cdc-server"]["console"] == console
        assert f"open the console: {console}" in shown["next"]
        with urllib.request.urlopen(console, timeout=10) as page:
            assert b"<title>cdc console</title>" in page.read()
        server_pid = shown["cdc-server"]["pid"]

        again = cdcctl("playground", "--base-dir", str(base), "up", *flags)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["cdc-server"]["pid"] == server_pid

        listed = cdcctl("capture", "list", "--etcd", f"127.0.0.1:{ports['--etcd-port']}")
        assert listed.returncode == 0, listed.stderr
        assert [(c["id"], c["is_owner"]) for c in json.loads(listed.stdout)] == [
            ("playground-1", True)
        ]

        status = json.loads(cdcctl("playground", "--base-dir", str(base), "status").stdout)
        services = status["services"]
        assert all(services[n]["running"] for n in ("etcd", "source", "downstream", "cdc-server"))
        pids = [services[n]["pid"] for n in ("etcd", "source", "downstream", "cdc-server")]
    finally:
        down = cdcctl("playground", "--base-dir", str(base), "down")
    assert down.returncode == 0, down.stderr
    assert sorted(json.loads(down.stdout)["stopped"]) == [
        "cdc-server",
        "downstream",
        "etcd",
        "source",
    ]
    assert not any(pid_alive(pid) for pid in pids)


def test_port_in_use_names_the_port_and_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cdcctl(
            "playground",
            "--base-dir",
            str(tmp_path / "pg"),
            "up",
            f"--source-port={port}",
            f"--downstream-port={free_port()}",
            f"--etcd-port={free_port()}",
            f"--etcd-peer-port={free_port()}",
            f"--server-port={free_port()}",
        )
    assert result.returncode == 1
    assert f"port {port}" in result.stderr
    assert "--source-port" in result.stderr
    assert not (tmp_path / "pg" / "state.json").exists()
