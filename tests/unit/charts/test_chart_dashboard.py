"""The Grafana dashboard the chart ships (issue #19): its ConfigMap, its JSON, its queries.

Rendered with Helm's own engine, as the other chart tests. The dashboard's JSON
is checked for the shape Grafana loads (panels on the 24-column grid, ids
unique, every query through the ``$datasource`` variable), and every metric
its queries name is checked against what a real cdc-server's ``/metrics``
exports (the last test starts one, so it needs the session's etcd).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import manifests, one, render
from prometheus_client.parser import text_string_to_metric_families

from cdc.playground.etcd import EtcdServer
from cdc.playground.ports import free_port

NAME = "cdc-dashboard"
PANEL_TYPES = {"row", "timeseries", "stat"}
#: What the issue asks the dashboard to show, as the metrics that show it.
REQUIRED_METRICS = {
    "cdc_checkpoint_lag_seconds",
    "cdc_resolved_lag_seconds",
    "cdc_rows_total",
    "cdc_sink_flush_seconds_bucket",
    "cdc_snapshot_rows_total",
    "cdc_snapshot_chunks_total",
    "cdc_owner_changes_total",
    "cdc_errors_total",
}
_METRIC = re.compile(r"\b(cdc_[a-z_]+)\b")
#: The sample names each metric type exports besides its family name.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
}


def _configmap(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return one(manifests(render(values)), "ConfigMap", NAME)


def _dashboard() -> dict[str, Any]:
    data = _configmap()["data"]
    assert list(data) == ["mysql-cdc.json"]
    dashboard: dict[str, Any] = json.loads(data["mysql-cdc.json"])
    return dashboard


def _queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_the_configmap_is_labelled_for_grafanas_sidecar() -> None:
    labels = _configmap()["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "1"
    assert labels["app.kubernetes.io/name"] == "cdc"
    more = {
        "grafanaDashboard": {"labels": {"team": "data"}, "annotations": {"grafana_folder": "CDC"}}
    }
    custom = _configmap({"metrics": more})
    assert custom["metadata"]["labels"]["team"] == "data"
    assert custom["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert custom["metadata"]["annotations"] == {"grafana_folder": "CDC"}


def test_no_dashboard_without_metrics_or_when_turned_off() -> None:
    for values in (
        {"metrics": {"enabled": False}},
        {"metrics": {"grafanaDashboard": {"enabled": False}}},
    ):
        docs = manifests(render(values))
        assert [d for d in docs if d["metadata"]["name"] == NAME] == []


def test_the_dashboard_has_the_shape_grafana_loads() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "mysql-cdc" and dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("x", "y", "w", "h")), panel["title"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["description"] and panel["fieldConfig"]["defaults"]["unit"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]


def test_the_dashboard_shows_what_the_issue_asks() -> None:
    named = {m for expr in _queries(_dashboard()) for m in _METRIC.findall(expr)}
    assert named >= REQUIRED_METRICS


def _exported(text: str) -> set[str]:
    """Every sample name the exposition ``text`` declares, with or without samples yet."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + s for s in _SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


@pytest.mark.integration
def test_every_query_names_a_metric_a_real_server_exports(
    etcd_server: EtcdServer, tmp_path: Path
) -> None:
    port, http_port = free_port(), free_port()
    log = tmp_path / "server.log"
    argv = [
        sys.executable, "-m", "capture.main", f"--etcd={etcd_server.endpoint}",
        f"--addr=127.0.0.1:{port}", f"--http-addr=127.0.0.1:{http_port}",
        "--capture-id=dashboard-1", f"--cluster-id=dashboard-{uuid.uuid4().hex[:8]}",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{http_port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as reply:
                    text = reply.read().decode()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"no /metrics: {log.read_text()}"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    exported = _exported(text)
    for expr in _queries(_dashboard()):
        for metric in _METRIC.findall(expr):
            assert metric in exported, f"{metric} (in {expr}) is not in the server's /metrics"
