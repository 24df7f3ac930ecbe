"""`cdc-server --metrics-addr`: Prometheus metrics of a real server moving real rows."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from security_helpers import RunningServer, cdc_server, run_server
from testkit import execute

from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

SOURCE_PW_ENV = "CDC_METRICS_TEST_SOURCE_PW"
SINK_PW_ENV = "CDC_METRICS_TEST_SINK_PW"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def metrics_server(
    etcd_server: EtcdServer, source_db: MariaDBServer, sink_db: MariaDBServer, tmp_path: Path
) -> Iterator[tuple[RunningServer, str]]:
    port = free_port()
    env = {SOURCE_PW_ENV: source_db.password, SINK_PW_ENV: sink_db.password}
    args = [f"--metrics-addr=127.0.0.1:{port}"]
    with cdc_server(etcd_server.endpoint, tmp_path / "server.log", args, env=env) as server:
        yield server, f"http://127.0.0.1:{port}/metrics"


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def wait_for(url: str, condition: Callable[[Samples], Any], what: str) -> Samples:
    deadline = time.monotonic() + 30
    while True:
        samples = scrape(url)
        if condition(samples):
            return samples
        cdc = {k: v for k, v in samples.items() if k[0].startswith("cdc_")}
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {cdc}"
        time.sleep(0.2)


def _cli(capsys, *argv: str) -> dict:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_rows_lag_owner_and_errors_are_exported(
    source_database: str,
    metrics_server: tuple[RunningServer, str],
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    capsys,
) -> None:
    server, url = metrics_server
    db = source_database
    table = f"{db}.items"
    execute(source_db, f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, name VARCHAR(20))")
    source = f"mysql://{source_db.user}@127.0.0.1:{source_db.port}/?password-env={SOURCE_PW_ENV}"
    # The downstream has no database of that name: every write fails, permanently.
    broken_sink = f"mysql://{sink_db.user}@127.0.0.1:{sink_db.port}/?password-env={SINK_PW_ENV}"
    common = ["--server", server.address, "--source-uri", source, "--filter-rule", f"{db}.*"]
    common += ["--snapshot-mode", "never"]
    _cli(
        capsys,
        "changefeed",
        "create",
        "--changefeed-id",
        "m1",
        "--sink-uri",
        "blackhole://",
        *common,
    )
    _cli(
        capsys, "changefeed", "create", "--changefeed-id", "m2", "--sink-uri", broken_sink, *common
    )
    wait_for(
        url,
        lambda s: all(
            value(s, "cdc_resolved_lag_seconds", changefeed=cf, table=table) is not None
            for cf in ("m1", "m2")
        ),
        "both pipelines to read the binlog",
    )
    execute(
        source_db,
        f"INSERT INTO `{db}`.items VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        f"UPDATE `{db}`.items SET name = 'bb' WHERE id = 2",
        f"DELETE FROM `{db}`.items WHERE id = 3",
    )

    def rows(samples: Samples, op: str) -> float:
        return value(samples, "cdc_rows_total", changefeed="m1", table=table, op=op) or 0.0

    samples = wait_for(
        url,
        lambda s: (
            (rows(s, "c"), rows(s, "u"), rows(s, "d")) == (3, 1, 1)
            and value(s, "cdc_checkpoint_lag_seconds", changefeed="m1", table=table) is not None
            and value(s, "cdc_errors_total", changefeed="m2", kind="table") == 1
        ),
        "rows, checkpoint lag and the error of m2",
    )
    assert rows(samples, "r") == 0
    assert value(samples, "cdc_bytes_total", changefeed="m1", table=table) > 0
    assert value(samples, "cdc_sink_flush_seconds_count", changefeed="m1") > 0
    lag = value(samples, "cdc_checkpoint_lag_seconds", changefeed="m1", table=table)
    resolved = value(samples, "cdc_resolved_lag_seconds", changefeed="m1", table=table)
    # Both gauges are read at scrape time, one after the other: allow for that.
    assert 0 <= resolved <= lag + 0.1 and lag < 10
    assert value(samples, "cdc_capture_is_owner") == 1
    assert value(samples, "cdc_owner_changes_total") == 1
    assert value(samples, "cdc_errors_total", changefeed="m1", kind="table") is None

    _cli(capsys, "changefeed", "pause", "-c", "m1", "--server", server.address)
    wait_for(
        url,
        lambda s: value(s, "cdc_checkpoint_lag_seconds", changefeed="m1", table=table) is None,
        "the lag of a stopped table to go",
    )
    assert rows(scrape(url), "c") == 3


def test_taken_metrics_port_is_a_clear_error(etcd_server: EtcdServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_server(
            f"--etcd={etcd_server.endpoint}",
            f"--addr=127.0.0.1:{free_port()}",
            f"--metrics-addr=127.0.0.1:{port}",
            "--cluster-id=metrics-port-taken",
        )
    assert result.returncode == 3, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "pass another --metrics-addr" in result.stderr
    assert "Traceback" not in result.stderr
