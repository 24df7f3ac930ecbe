"""values.schema.json refuses bad values before anything renders, naming the bad field.

Helm validates the merged values (chart defaults + user values) against the
schema on install, upgrade, template and lint; `render` goes through the same
check, so each case below is what `helm install --set ...` would answer.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
from chart_helpers import production_values, render

from cdc.config import load_changefeed_config

BAD_VALUES: list[tuple[dict[str, Any], str, str]] = [
    ({"replicas": 0}, "/replicas", "minimum"),
    ({"replicas": "3"}, "/replicas", "want integer"),
    ({"ports": {"admin": 70000}}, "/ports/admin", "maximum"),
    ({"ports": {"metrics": 0}}, "/ports/metrics", "minimum"),
    ({"ports": {"admin": "grpc"}}, "/ports/admin", "want integer"),
    ({"spark": {"master": "yarn"}}, "/spark/master", "does not match pattern"),
    ({"spark": {"master": "mesos://m:5050"}}, "/spark/master", "does not match pattern"),
    ({"spark": {"master": "k8s://kubernetes.default.svc"}}, "/spark/master", "pattern"),
    ({"spark": {"master": "local[0]"}}, "/spark/master", "does not match pattern"),
    ({"spark": {"conf": {"executor.memory": "2g"}}}, "/spark/conf", "'executor.memory'"),
    ({"credentials": {"files": {"a/b": "x"}}}, "/credentials/files", "'a/b' not allowed"),
    ({"etcd": {"endpoints": None}}, "/etcd", "missing property 'endpoints'"),
    ({"etcd": {"endpoints": []}}, "/etcd/endpoints", "minItems"),
    ({"etcd": {"endpoints": ["etcd"]}}, "/etcd/endpoints/0", "does not match pattern"),
    ({"etcd": {"endpoints": ["etcd:2379/"]}}, "/etcd/endpoints/0", "does not match pattern"),
    ({"etcd": {"client": {"user": "cdc"}}}, "/etcd/client/passwordSecret/name", "minLength"),
    (
        {"etcd": {"client": {"tls": {"enabled": True}}}},
        "/etcd/client/tls/existingSecret",
        "minLength",
    ),
    ({"logLevel": "TRACE"}, "/logLevel", "value must be one of"),
    ({"logLevel": "info"}, "/logLevel", "value must be one of"),
    ({"leaseTTL": 1}, "/leaseTTL", "minimum"),
    ({"clusterId": "prod/eu"}, "/clusterId", "does not match pattern"),
    ({"clusterId": ""}, "/clusterId", "minLength"),
    ({"tls": {"enabled": True}}, "/tls/existingSecret", "minLength"),
    ({"auth": {"enabled": True}}, "/auth/token", "minLength"),
    ({"auth": {"enabled": True, "token": "short"}}, "/auth/token", "minLength"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy", "value must be one of"),
    ({"podAntiAffinity": "maybe"}, "/podAntiAffinity", "value must be one of"),
    (
        {"podDisruptionBudget": {"maxUnavailable": 0}},
        "/podDisruptionBudget/maxUnavailable",
        "minimum",
    ),
    (
        {"podSecurityContext": {"runAsNonRoot": False}},
        "/podSecurityContext/runAsNonRoot",
        "must be true",
    ),
    ({"resources": {"limits": {"memory": "lots"}}}, "/resources/limits/memory", "pattern"),
    (
        {"metrics": {"serviceMonitor": {"interval": "often"}}},
        "/metrics/serviceMonitor/interval",
        "pattern",
    ),
    ({"credentials": {"existingSecret": "Not_A_Name"}}, "/credentials/existingSecret", "pattern"),
    ({"replica": 3}, "", "additional properties 'replica' not allowed"),
    ({"spark": {"mastr": "local[*]"}}, "/spark", "additional properties 'mastr'"),
]


@pytest.mark.parametrize(
    ("values", "where", "why"), BAD_VALUES, ids=[str(case[0]) for case in BAD_VALUES]
)
def test_bad_value_is_refused_naming_the_field(
    values: dict[str, Any], where: str, why: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as refused:
        render(values)
    message = str(refused.value)
    assert "values don't meet the specifications of the schema" in message
    assert f"at '{where}'" in message
    assert why in message


GOOD_SPARK_MASTERS = [
    "local",
    "local[*]",
    "local[4]",
    "local[4,2]",
    "k8s://https://kubernetes.default.svc:443",
    "k8s://https://10.0.0.1:6443",
    "spark://spark-master:7077",
]


@pytest.mark.parametrize("master", GOOD_SPARK_MASTERS)
def test_spark_masters_the_chart_accepts_are_masters_a_changefeed_accepts(master: str) -> None:
    render({"spark": {"master": master}})
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://cdc@db:3306/?password-file=/etc/cdc/secrets/source-password",
            "sink_uri": "blackhole://",
            "spark_master": master,
        },
    )
    assert config.spark_master == master


@pytest.mark.parametrize(
    "endpoints",
    [
        ["etcd:2379"],
        ["https://etcd-0.etcd.infra.svc:2379", "etcd-1.etcd.infra.svc:2379"],
        ["10.0.0.5:2379"],
        ["[fd00::5]:2379"],
    ],
)
def test_etcd_endpoint_forms_the_server_understands_are_accepted(endpoints: list[str]) -> None:
    render({"etcd": {"endpoints": endpoints}})


def test_percent_disruption_budget_and_production_values_are_accepted() -> None:
    render({"podDisruptionBudget": {"maxUnavailable": "50%"}})
    render(production_values())


def test_endpoints_are_not_needed_once_the_chart_installs_etcd() -> None:
    """etcd.enabled lifts the endpoints requirement (the render then asks for the
    vendored dependency, which is a template error, not a schema error)."""
    with pytest.raises(helm.HelmRenderError, match="etcd dependency is not vendored"):
        render({"etcd": {"enabled": True, "endpoints": None}})
