"""The private MariaDB and etcd servers, and the playground that combines them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent
from testkit import execute

from cdc.playground.errors import PortInUseError, ServiceError
from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.local import LocalServices, PlaygroundPorts
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.ports import free_port, port_is_free

pytestmark = pytest.mark.integration


def variables(server: MariaDBServer) -> dict[str, str]:
    return {name: value for name, value in execute(server, "SHOW GLOBAL VARIABLES")}


def query_one(server: MariaDBServer, sql: str) -> object:
    return execute(server, sql)[0][0]


def processes_using(path: Path) -> list[int]:
    """Pids of live processes whose command line mentions ``path``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(path) in argv and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def listening_socket() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock
    sock.close()


def test_source_has_every_cdc_setting(source_db: MariaDBServer) -> None:
    found = variables(source_db)
    expected = {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "binlog_checksum": "CRC32",
        "gtid_strict_mode": "ON",
        "log_slave_updates": "ON",
        "server_id": "1",
        "max_allowed_packet": str(64 * 1024 * 1024),
        "innodb_flush_log_at_trx_commit": "2",
        "sync_binlog": "0",
        "general_log": "OFF",
        "character_set_server": "utf8mb4",
        "time_zone": "SYSTEM",
        "bind_address": "127.0.0.1",
        "skip_name_resolve": "ON",
        "port": str(source_db.port),
        "socket": str(source_db.socket_path),
    }
    assert {name: found.get(name) for name in expected} == expected
    assert Path(found["datadir"]).resolve() == source_db.data_dir.resolve()


def test_source_gtid_advances_after_a_write(source_db: MariaDBServer, source_database: str) -> None:
    before = query_one(source_db, "SELECT @@gtid_binlog_pos")
    conn = source_db.connect(database=source_database)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO t VALUES (1, 'a')")
    conn.close()
    after = query_one(source_db, "SELECT @@gtid_binlog_pos")
    assert after != before
    domain, server_id, seq = after.split("-")
    assert (domain, server_id) == ("0", "1")
    before_seq = int(before.split("-")[2]) if before else 0
    assert int(seq) == before_seq + 2


def test_cdc_user_can_read_the_binlog_with_column_names(
    source_db: MariaDBServer, source_database: str
) -> None:
    conn = source_db.connect(database=source_database)
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        log_file, log_pos = cur.fetchone()[:2]
        cur.execute("CREATE TABLE person (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("INSERT INTO person VALUES (7, 'ada')")
    conn.close()
    reader = BinLogStreamReader(
        connection_settings={
            "host": source_db.host,
            "port": source_db.port,
            "user": source_db.user,
            "password": source_db.password,
        },
        server_id=4242,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent],
        only_schemas=[source_database],
    )
    try:
        rows = [row["values"] for event in reader for row in event.rows]
    finally:
        reader.close()
    assert rows == [{"id": 7, "name": "ada"}]


def test_general_log_can_be_switched_on_at_runtime(source_db: MariaDBServer) -> None:
    marker = "general_log_marker_4711"
    conn = source_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL general_log = ON")
            cur.execute(f"SELECT '{marker}'")
            cur.execute("SET GLOBAL general_log = OFF")
    finally:
        conn.close()
    assert marker in source_db.general_log_path.read_text()


def test_sink_has_no_binlog(sink_db: MariaDBServer) -> None:
    found = variables(sink_db)
    assert found["log_bin"] == "OFF"
    assert found["server_id"] == "2"
    assert found["character_set_server"] == "utf8mb4"
    assert found["bind_address"] == "127.0.0.1"


def test_etcd_put_get_under_a_prefix(etcd_server: EtcdServer, etcd_prefix: str) -> None:
    assert etcd_server.healthy()
    with etcd_server.store(etcd_prefix) as store:
        store.put(f"{etcd_prefix}key", "value")
        found = store.get(f"{etcd_prefix}key")
    assert found is not None and found.value == b"value"


def test_mariadb_start_is_idempotent_and_stop_leaves_nothing(tmp_path: Path) -> None:
    spec = MariaDBSpec("lifecycle", tmp_path / "db", free_port(), 11, True)
    server = MariaDBServer(spec, die_with_parent=True)
    try:
        server.start()
        pid = server.pid
        assert pid is not None
        # The user set-up of the init file must not reach the binlog.
        assert query_one(server, "SELECT @@gtid_binlog_pos") == ""
        server.start()
        assert server.pid == pid

        again = MariaDBServer(spec)
        assert again.is_running()
        assert again.password == server.password
        again.start()
        assert again.pid == pid
        execute(server, "CREATE DATABASE kept")
        assert oct((tmp_path / "db" / "credentials.json").stat().st_mode & 0o777) == "0o600"

        again.stop()
        assert not server.is_running()
        assert not again.is_running()
        assert port_is_free(spec.port)
        assert processes_using(server.data_dir) == []
        assert not server.pid_file.exists()
        again.stop()

        restarted = MariaDBServer(spec, die_with_parent=True)
        restarted.start()
        assert query_one(restarted, "SHOW DATABASES LIKE 'kept'") == "kept"
    finally:
        server.stop()
    assert processes_using(server.data_dir) == []


def test_mariadb_servers_started_at_once_each_initialise(tmp_path: Path) -> None:
    """Parallel test workers start their servers at the same moment: bootstraps
    sharing /tmp failed one in three with "Unknown table 'mysql.tmp_user_sys'"."""
    servers = [
        MariaDBServer(
            MariaDBSpec(f"at-once-{i}", tmp_path / f"db{i}", free_port(), 20 + i, False),
            die_with_parent=True,
        )
        for i in range(4)
    ]

    def start_and_ask(server: MariaDBServer) -> object:
        # in the starting thread: die_with_parent ends a server with the thread that started it
        server.start()
        return query_one(server, "SELECT @@tmpdir")

    try:
        with ThreadPoolExecutor(len(servers)) as pool:
            tmpdirs = list(pool.map(start_and_ask, servers))
        assert tmpdirs == [str(server.spec.base_dir / "tmp") for server in servers]
    finally:
        for server in servers:
            server.stop()


def test_mariadb_refuses_a_second_port_for_a_running_server(tmp_path: Path) -> None:
    spec = MariaDBSpec("ports", tmp_path / "db", free_port(), 12, False)
    server = MariaDBServer(spec, die_with_parent=True)
    try:
        server.start()
        other = MariaDBServer(
            MariaDBSpec("ports", tmp_path / "db", free_port(), 12, False), die_with_parent=True
        )
        with pytest.raises(ServiceError, match=f"already running .* on port {spec.port}, not"):
            other.start()
    finally:
        server.stop()


def test_mariadb_startup_failure_reports_the_log(tmp_path: Path) -> None:
    spec = MariaDBSpec("broken", tmp_path / "db", free_port(), 13, False)
    server = MariaDBServer(spec, die_with_parent=True)
    server.start()
    server.stop()
    shutil.rmtree(server.data_dir / "mysql")
    with pytest.raises(ServiceError) as failure:
        server.start()
    message = str(failure.value)
    assert message.startswith("MariaDB broken exited with code 1 during startup; ")
    assert f"remove {server.data_dir} to start over" in message
    assert f"last lines of {server.log_path}" in message
    assert "mysql.db" in message or "privilege tables" in message
    assert not server.is_running()
    assert processes_using(server.data_dir) == []

    shutil.rmtree(server.data_dir)
    try:
        server.start()
        assert query_one(server, "SELECT CURRENT_USER()") == "cdc@127.0.0.1"
    finally:
        server.stop()


def test_mariadb_port_in_use_names_the_holder(
    tmp_path: Path, listening_socket: socket.socket
) -> None:
    port = listening_socket.getsockname()[1]
    server = MariaDBServer(MariaDBSpec("taken", tmp_path / "db", port, 14, True))
    with pytest.raises(PortInUseError) as failure:
        server.start()
    assert str(failure.value).startswith(
        f"MariaDB taken: port {port} on 127.0.0.1 is already in use (by pid {os.getpid()} "
    )
    assert not server.is_running()
    assert not (tmp_path / "db" / "data").exists()


def test_etcd_start_is_idempotent_and_keeps_data(tmp_path: Path) -> None:
    spec = EtcdSpec("lifecycle", tmp_path / "etcd", free_port(), free_port())
    server = EtcdServer(spec, die_with_parent=True)
    try:
        server.start()
        pid = server.pid
        server.start()
        assert server.pid == pid
        with server.store("/kept") as store:
            store.put("/kept/key", "yes")

        EtcdServer(spec).stop()
        assert not server.is_running()
        assert port_is_free(spec.client_port)
        assert port_is_free(spec.peer_port)
        assert processes_using(server.data_dir) == []

        server.start()
        with server.store("/kept") as store:
            found = store.get("/kept/key")
        assert found is not None and found.value == b"yes"
    finally:
        server.stop()
    assert processes_using(server.data_dir) == []


def playground_ports() -> PlaygroundPorts:
    return PlaygroundPorts(
        source=free_port(), downstream=free_port(), etcd_client=free_port(), etcd_peer=free_port()
    )


def test_local_services_up_twice_then_down(tmp_path: Path) -> None:
    ports = playground_ports()
    services = LocalServices(tmp_path / "pg", ports)
    try:
        state = services.up()
        assert json.loads(services.state_path.read_text()) == state
        assert oct(services.state_path.stat().st_mode & 0o777) == "0o600"
        source, downstream = state["services"]["source"], state["services"]["downstream"]
        assert source["uri"] == (f"mysql://cdc:{source['password']}@127.0.0.1:{ports.source}/")
        conn = pymysql.connect(
            host=source["host"],
            port=source["port"],
            user=source["user"],
            password=source["password"],
        )
        with conn.cursor() as cur:
            cur.execute("SELECT @@log_bin, @@server_id")
            assert cur.fetchone() == (1, 1)
        conn.close()
        assert query_one(services.downstream, "SELECT @@log_bin") == 0
        assert state["services"]["etcd"]["endpoint"] == f"127.0.0.1:{ports.etcd_client}"

        second = services.up()
        assert second == state

        status = LocalServices(tmp_path / "pg").status()
        assert {name: s["running"] for name, s in status["services"].items()} == {
            "etcd": True,
            "source": True,
            "downstream": True,
        }
        assert status["services"]["source"]["pid"] == source["pid"]
        assert status["services"]["downstream"]["pid"] == downstream["pid"]
        assert source["password"] not in json.dumps(status)
        assert status["services"]["source"]["uri"] == f"mysql://cdc:***@127.0.0.1:{ports.source}/"
    finally:
        stopped = LocalServices(tmp_path / "pg").down()
    assert stopped == ["downstream", "source", "etcd"]
    assert not services.state_path.exists()
    status = services.status()
    assert not any(s["running"] for s in status["services"].values())
    assert processes_using(tmp_path / "pg") == []
    assert services.down() == []


def test_local_services_checks_every_port_before_starting(
    tmp_path: Path, listening_socket: socket.socket
) -> None:
    taken = listening_socket.getsockname()[1]
    ports = playground_ports()
    ports = PlaygroundPorts(
        source=ports.source,
        downstream=taken,
        etcd_client=ports.etcd_client,
        etcd_peer=ports.etcd_peer,
    )
    services = LocalServices(tmp_path / "pg", ports)
    with pytest.raises(PortInUseError) as failure:
        services.up()
    assert str(failure.value) == (
        f"downstream MariaDB: port {taken} on 127.0.0.1 is already in use "
        f"(by pid {os.getpid()} {Path(f'/proc/{os.getpid()}/comm').read_text().strip()}); "
        "stop that process or choose another port with --downstream-port"
    )
    assert not any(s["running"] for s in services.status()["services"].values())
    assert processes_using(tmp_path / "pg") == []


def test_servers_started_with_die_with_parent_stop_when_the_starter_is_killed(
    tmp_path: Path,
) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from cdc.playground.etcd import EtcdServer, EtcdSpec\n"
        "from cdc.playground.ports import free_port\n"
        "spec = EtcdSpec('orphan', Path(sys.argv[1]), free_port(), free_port())\n"
        "server = EtcdServer(spec, die_with_parent=True)\n"
        "server.start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    starter = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "etcd")], stdout=subprocess.PIPE, text=True
    )
    try:
        etcd_pid = int(starter.stdout.readline())
        assert etcd_pid in processes_using(tmp_path / "etcd")
    finally:
        starter.kill()
        starter.wait()
        starter.stdout.close()
    deadline = time.monotonic() + 15
    while processes_using(tmp_path / "etcd") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_using(tmp_path / "etcd") == []
