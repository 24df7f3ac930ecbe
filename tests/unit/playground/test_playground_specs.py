"""Server specs, their command lines, and the pure helpers around them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from cdc.playground import isolation, procs
from cdc.playground.errors import ServiceError
from cdc.playground.etcd import EtcdSpec, etcd_options
from cdc.playground.local import LocalServices, PlaygroundPorts
from cdc.playground.mariadb import (
    SOURCE_OPTIONS,
    Credentials,
    MariaDBServer,
    MariaDBSpec,
    init_sql,
    server_options,
)
from cdc.playground.ports import free_port


def spec(tmp_path: Path, **overrides: object) -> MariaDBSpec:
    values = {"name": "source", "base_dir": tmp_path, "port": 3316, "server_id": 1, "binlog": True}
    values.update(overrides)
    return MariaDBSpec(**values)


def test_mariadb_spec_makes_base_dir_absolute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert spec(tmp_path, base_dir=Path("rel")).base_dir == tmp_path / "rel"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": ""}, "name must not be empty"),
        ({"port": 0}, "port 0 is not a TCP port"),
        ({"port": 70000}, "port 70000 is not a TCP port"),
        ({"server_id": 0}, "server_id 0 must be in 1..4294967295"),
        ({"server_id": 2**32}, "server_id 4294967296 must be in"),
        ({"base_dir": Path("/tmp") / ("x" * 100)}, "longer than 107 bytes"),
    ],
)
def test_mariadb_spec_rejects_bad_values(tmp_path: Path, overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        spec(tmp_path, **overrides)


def test_source_options_configure_the_binlog(tmp_path: Path) -> None:
    options = server_options(spec(tmp_path), as_root=False)
    assert options[0] == "--no-defaults"
    for option in SOURCE_OPTIONS:
        assert option in options
    assert f"--socket={tmp_path / 'mariadbd.sock'}" in options
    assert f"--tmpdir={tmp_path / 'tmp'}" in options
    assert "--bind-address=127.0.0.1" in options
    assert "--server-id=1" in options
    assert "--user=root" not in options
    assert not any(o.startswith("--default-time-zone") for o in options)


def test_downstream_options_have_no_binlog(tmp_path: Path) -> None:
    options = server_options(spec(tmp_path, binlog=False, server_id=2), as_root=True)
    assert not any(o.startswith(("--log-bin", "--binlog", "--gtid")) for o in options)
    assert "--server-id=2" in options
    assert "--user=root" in options


def test_init_sql_is_not_binlogged_and_covers_both_hosts() -> None:
    sql = init_sql(Credentials(user="cdc", password="pw-1"))
    lines = sql.splitlines()
    assert lines[0] == "SET sql_log_bin = 0;"
    for host in ("%", "127.0.0.1"):
        assert f"ALTER USER 'cdc'@'{host}' IDENTIFIED BY 'pw-1';" in lines
        assert f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'{host}';" in lines


def test_credentials_are_created_once_and_private(tmp_path: Path) -> None:
    first = MariaDBServer(spec(tmp_path / "db"))
    password = first.password
    assert re.fullmatch(r"[A-Za-z0-9_-]{24}", password)
    assert first.uri == f"mysql://cdc:{password}@127.0.0.1:3316/"
    assert (tmp_path / "db" / "credentials.json").stat().st_mode & 0o777 == 0o600
    assert MariaDBServer(spec(tmp_path / "db")).password == password
    assert MariaDBServer(spec(tmp_path / "other")).password != password


def test_a_garbled_credentials_file_says_to_remove_it(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text("{not json")
    with pytest.raises(ServiceError, match="remove it and try again"):
        _ = MariaDBServer(spec(tmp_path)).password


def test_an_unfinished_data_dir_is_not_reused(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    server = MariaDBServer(spec(tmp_path, port=free_port()))
    with pytest.raises(ServiceError, match="initialisation never finished; remove that directory"):
        server.start()


def test_etcd_options_form_a_single_member_cluster(tmp_path: Path) -> None:
    options = etcd_options(EtcdSpec("m1", tmp_path, 2389, 2390))
    assert f"--data-dir={tmp_path / 'data'}" in options
    assert "--listen-client-urls=http://127.0.0.1:2389" in options
    assert "--advertise-client-urls=http://127.0.0.1:2389" in options
    assert "--listen-peer-urls=http://127.0.0.1:2390" in options
    assert "--initial-cluster=m1=http://127.0.0.1:2390" in options


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", 1, 2), "must be non-empty"),
        (("a=b", 1, 2), "without '=' or ','"),
        (("m", 0, 2), "client_port 0 is not a TCP port"),
        (("m", 1, 65536), "peer_port 65536 is not a TCP port"),
        (("m", 2389, 2389), "client_port and peer_port are both 2389"),
    ],
)
def test_etcd_spec_rejects_bad_values(tmp_path: Path, args: tuple, message: str) -> None:
    name, client, peer = args
    with pytest.raises(ValueError, match=re.escape(message)):
        EtcdSpec(name, tmp_path, client, peer)


def test_playground_ports_must_differ() -> None:
    with pytest.raises(
        ServiceError, match="must all differ: --source-port 3316, --downstream-port 3316"
    ):
        PlaygroundPorts(source=3316, downstream=3316)


def test_playground_ports_must_be_tcp_ports() -> None:
    with pytest.raises(ServiceError, match="--etcd-peer-port 0 is not a TCP port"):
        PlaygroundPorts(etcd_peer=0)


def test_local_services_reuse_the_ports_recorded_by_up(tmp_path: Path) -> None:
    ports = PlaygroundPorts(source=4001, downstream=4002, etcd_client=4003, etcd_peer=4004)
    state = {
        "version": 1,
        "ports": {"source": 4001, "downstream": 4002, "etcd_client": 4003, "etcd_peer": 4004},
    }
    (tmp_path / "state.json").write_text(json.dumps(state))
    services = LocalServices(tmp_path)
    assert services.ports == ports
    assert services.source.port == 4001
    assert services.etcd.endpoint == "127.0.0.1:4003"
    assert LocalServices(tmp_path / "fresh").ports == PlaygroundPorts()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"version": 99}', "not a version 1 state file"),
        ('{"version": 1}', "has no valid ports"),
        ('{"version": 1, "ports": {"sauce": 1}}', "has no valid ports"),
        ('{"version": 1, "ports": {"source": "x"}}', "has no valid ports"),
        ("[", "remove it and try again"),
    ],
)
def test_local_services_reject_a_bad_state_file(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "state.json").write_text(content)
    with pytest.raises(ServiceError, match=re.escape(message)):
        LocalServices(tmp_path)


def test_status_of_a_stopped_playground_writes_nothing(tmp_path: Path) -> None:
    status = LocalServices(tmp_path / "pg").status()
    assert not any(s["running"] for s in status["services"].values())
    assert status["services"]["source"]["uri"] == "mysql://cdc:***@127.0.0.1:3316/"
    assert not (tmp_path / "pg").exists()


@pytest.mark.parametrize(
    ("test_name", "expected"),
    [
        ("test_simple", "test_simple_abcd1234"),
        ("test_x[utf8-1]", "test_x_utf8_1_abcd1234"),
        ("Test Mixed.Case", "test_mixed_case_abcd1234"),
        ("[1-2]", "t_1_2_abcd1234"),
        ("[]", "test_abcd1234"),
        ("test_" + "a" * 80, "test_" + "a" * 50 + "_abcd1234"),
    ],
)
def test_database_name(test_name: str, expected: str) -> None:
    assert isolation.database_name(test_name, "abcd1234") == expected
    assert len(expected) <= 64


def test_database_names_are_unique() -> None:
    assert isolation.database_name("t") != isolation.database_name("t")


def test_etcd_prefix_is_fresh() -> None:
    first = isolation.etcd_prefix()
    assert re.fullmatch(r"/cdc-test-[0-9a-f]{8}/", first)
    assert first != isolation.etcd_prefix()


def test_owned_pid_requires_the_marker_argument(tmp_path: Path) -> None:
    pid_file = tmp_path / "x.pid"
    procs.write_pid(pid_file, os.getpid())
    argv = procs.cmdline(os.getpid())
    assert procs.owned_pid(pid_file, argv[0]) == os.getpid()
    assert procs.owned_pid(pid_file, argv[0] + "x") is None
    assert procs.owned_pid(pid_file, argv[0][:-1]) is None


def test_owned_pid_ignores_dead_and_garbled_pid_files(tmp_path: Path) -> None:
    pid_file = tmp_path / "x.pid"
    assert procs.owned_pid(pid_file, "anything") is None
    pid_file.write_text("not a pid")
    assert procs.owned_pid(pid_file, "anything") is None
    procs.write_pid(pid_file, 2**22 + 1)
    assert procs.owned_pid(pid_file, "anything") is None


def test_tail_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert procs.tail(log, 3) == "line 97\nline 98\nline 99"
    assert procs.tail(tmp_path / "missing") == ""
    assert procs.log_tails([tmp_path / "missing"]) == "(the logs are empty)"
