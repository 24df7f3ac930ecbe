"""docs/operations.md stays true: its alert rules are well-formed and use only metrics
cdc-server exports, and its example values pass the chart's schema."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from chart_helpers import REPO, manifests, render
from prometheus_client import REGISTRY

import cdc.metrics  # noqa: F401  (defines the metrics on the default registry)

DOC = REPO / "docs" / "operations.md"
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def yaml_blocks() -> list[Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def exported_metrics() -> set[str]:
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("cdc_"):
            names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def alert_rules() -> list[dict[str, Any]]:
    rule_docs = [
        b for b in yaml_blocks() if isinstance(b, dict) and b.get("kind") == "PrometheusRule"
    ]
    assert len(rule_docs) == 1
    (doc,) = rule_docs
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def test_alert_rules_are_well_formed() -> None:
    rules = alert_rules()
    assert len(rules) >= 8
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}
        assert rule["alert"].startswith("Cdc") and rule["expr"].strip()
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert "summary" in rule["annotations"]
        assert rule["expr"].count("(") == rule["expr"].count(")")


@pytest.mark.parametrize(
    "metric",
    [
        "cdc_checkpoint_lag_seconds",
        "cdc_resolved_lag_seconds",
        "cdc_rows_total",
        "cdc_sink_flush_seconds_bucket",
        "cdc_snapshot_chunks_total",
        "cdc_owner_changes_total",
        "cdc_errors_total",
    ],
)
def test_the_issue_metrics_are_exported_and_documented(metric: str) -> None:
    assert metric in exported_metrics()
    assert metric.removesuffix("_bucket") in DOC.read_text()


def test_alerts_and_recording_rules_use_only_exported_metrics() -> None:
    exported = exported_metrics()
    recording = next(b for b in yaml_blocks() if isinstance(b, list))
    expressions = [rule["expr"] for rule in alert_rules()] + [r["expr"] for r in recording]
    used = {name for expr in expressions for name in re.findall(r"\bcdc_[a-z_]+\b", expr)}
    assert {"cdc_checkpoint_lag_seconds", "cdc_errors_total"} <= used
    assert used <= exported, f"not exported by cdc-server: {used - exported}"


def test_example_values_in_the_doc_pass_the_chart_schema() -> None:
    values = next(b for b in yaml_blocks() if isinstance(b, dict) and "clusterId" in b)
    docs = manifests(render(values))
    statefulset = next(d for d in docs if d["kind"] == "StatefulSet")
    args = statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--cluster-id=prod" in args
    assert "--auth-token-file=/etc/cdc/auth/token" in args
