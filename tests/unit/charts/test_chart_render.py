"""charts/cdc lints, renders and yields valid Kubernetes objects, default and production-like.

Schema validation uses kubernetes-validate's strict schemas (unknown fields are
errors) for KUBE_VERSION; the ServiceMonitor is a CRD, checked for shape only.
"""

from __future__ import annotations

import copy
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
from chart_helpers import (
    CHART,
    KUBE_VERSION,
    MONITORING_GROUP,
    NAMESPACE,
    kinds,
    manifests,
    one,
    production_values,
    render,
    server_container,
)

MISSING_DEPENDENCY = "chart directory is missing these dependencies: etcd"
SEVERITY_WARNING = 2

CASES = {
    "default": None,
    "production": production_values(),
}


@pytest.fixture(params=sorted(CASES), scope="module")
def case(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, manifests(render(CASES[request.param]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_chart_lints_clean(name: str) -> None:
    report = helm.lint(CHART, CASES[name], strict=False, kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    problems = [
        m["error"]
        for m in report["messages"]
        if m["severity"] >= SEVERITY_WARNING and m["error"] != MISSING_DEPENDENCY
    ]
    assert problems == []


def test_the_only_lint_warning_is_the_unvendored_optional_etcd() -> None:
    """The etcd dependency is optional (etcd.enabled) and not vendored in the repository."""
    report = helm.lint(CHART, None, kube_version=f"v{KUBE_VERSION}")
    warnings = [m["error"] for m in report["messages"] if m["severity"] >= SEVERITY_WARNING]
    assert warnings == [MISSING_DEPENDENCY]


def test_every_manifest_validates_against_the_kubernetes_schemas(
    case: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = case
    checked = 0
    for doc in docs:
        assert doc["metadata"]["namespace"] == NAMESPACE
        if doc["apiVersion"].startswith(MONITORING_GROUP):
            continue
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 6


def test_the_validation_catches_a_broken_statefulset() -> None:
    """The schema check is not vacuous: a wrong type and an unknown field both fail."""
    statefulset = one(manifests(render()), "StatefulSet")
    wrong_type = copy.deepcopy(statefulset)
    wrong_type["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBE_VERSION, strict=True)
    unknown_field = copy.deepcopy(statefulset)
    unknown_field["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown_field, KUBE_VERSION, strict=True)


def test_rendered_objects() -> None:
    assert kinds(manifests(render())) == [
        "ConfigMap",
        "ConfigMap",  # the Grafana dashboard (test_chart_dashboard.py)
        "PodDisruptionBudget",
        "Service",
        "Service",
        "ServiceAccount",
        "StatefulSet",
    ]
    assert kinds(manifests(render(production_values()))) == [
        "ConfigMap",
        "ConfigMap",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
        "StatefulSet",
    ]


def test_service_monitor_is_well_formed_and_scrapes_the_metrics_port() -> None:
    docs = manifests(render(production_values()))
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    tls = {"name": "cdc-admin-tls"}
    assert monitor["spec"]["endpoints"] == [
        {
            "port": "metrics",
            "path": "/metrics",
            "interval": "30s",
            "scrapeTimeout": "10s",
            # HTTPS with the admin API's certificate (named for the Service), mutual TLS
            "scheme": "https",
            "tlsConfig": {
                "serverName": "cdc.data.svc",
                "ca": {"secret": {**tls, "key": "ca.crt"}},
                "cert": {"secret": {**tls, "key": "tls.crt"}},
                "keySecret": {**tls, "key": "tls.key"},
            },
            # and the read-only token
            "authorization": {
                "type": "Bearer",
                "credentials": {"name": "cdc-admin-token", "key": "read-token"},
            },
        }
    ]
    service = one(docs, "Service", "cdc")
    assert {p["name"] for p in service["spec"]["ports"]} == {"admin", "metrics"}
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_statefulset_gives_captures_stable_names_spread_over_nodes() -> None:
    docs = manifests(render())
    statefulset = one(docs, "StatefulSet")
    headless = one(docs, "Service", "cdc-headless")
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["serviceName"] == "cdc-headless"
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    pod = statefulset["spec"]["template"]["spec"]
    soft = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert soft[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    hard_pod = one(manifests(render(production_values())), "StatefulSet")["spec"]["template"]
    hard = hard_pod["spec"]["affinity"]["podAntiAffinity"]
    assert hard["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"] == {
        "matchLabels": statefulset["spec"]["selector"]["matchLabels"]
    }
    assert (
        "affinity"
        not in one(manifests(render({"podAntiAffinity": "none"})), "StatefulSet")["spec"][
            "template"
        ]["spec"]
    )


def test_ports_services_and_probes_agree() -> None:
    docs = manifests(render({"ports": {"admin": 9400, "metrics": 9401}}))
    container = server_container(docs)
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "admin": 9400,
        "metrics": 9401,
    }
    service = one(docs, "Service", "cdc")
    assert {(p["name"], p["port"], p["appProtocol"]) for p in service["spec"]["ports"]} == {
        ("admin", 9400, "grpc"),
        ("metrics", 9401, "http"),
    }
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"] == {"port": 9400}


def test_probes_use_the_tls_health_client_when_the_admin_api_serves_tls() -> None:
    container = server_container(manifests(render(production_values())))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert "grpc" not in container[probe]
        command = container[probe]["exec"]["command"]
        assert command[:4] == ["python", "-m", "cdc.api.health", "127.0.0.1:8300"]
        assert "--tls-ca" in command and "--tls-cert" in command


def test_security_context_is_locked_down_with_writable_scratch() -> None:
    for values in (None, production_values()):
        docs = manifests(render(values))
        pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
        container = server_container(docs)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]
        assert "emptyDir" in volumes[mounts["/var/lib/cdc/spark"]]
        assert pod["enableServiceLinks"] is False


def test_credentials_from_values_become_a_secret_mounted_as_files() -> None:
    docs = manifests(
        render({"credentials": {"files": {"source-password": "s3cret", "sink-password": "x"}}})
    )
    secret = one(docs, "Secret", "cdc-credentials")
    assert sorted(secret["data"]) == ["sink-password", "source-password"]
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "credentials")
    assert volume["secret"]["secretName"] == "cdc-credentials"
    mount = next(m for m in server_container(docs)["volumeMounts"] if m["name"] == "credentials")
    assert mount == {"name": "credentials", "mountPath": "/etc/cdc/secrets", "readOnly": True}


def test_an_existing_credentials_secret_is_mounted_not_created() -> None:
    docs = manifests(render(production_values()))
    assert "Secret" not in kinds(docs)
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {
        "credentials": "cdc-credentials",
        "tls": "cdc-admin-tls",
        "auth": "cdc-admin-token",
        "etcd-tls": "cdc-etcd-client-tls",
    }


def test_inline_token_becomes_a_secret() -> None:
    docs = manifests(render({"auth": {"enabled": True, "token": "t" * 32}}))
    assert sorted(one(docs, "Secret", "cdc-auth")["data"]) == ["token"]
    args = server_container(docs)["args"]
    assert "--auth-token-file=/etc/cdc/auth/token" in args
    assert not any(arg.startswith("--read-token-file") for arg in args)


def test_inline_read_token_becomes_a_secret_and_the_scrape_token() -> None:
    values = {
        "auth": {"enabled": True, "token": "t" * 32, "readToken": "r" * 32},
        "metrics": {"serviceMonitor": {"enabled": True}},
    }
    docs = manifests(render(values))
    assert sorted(one(docs, "Secret", "cdc-auth")["data"]) == ["read-token", "token"]
    assert "--read-token-file=/etc/cdc/auth/read-token" in server_container(docs)["args"]
    endpoint = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["authorization"]["credentials"] == {"name": "cdc-auth", "key": "read-token"}
    assert "scheme" not in endpoint and "tlsConfig" not in endpoint  # no TLS: plain HTTP


def test_without_a_read_token_prometheus_scrapes_with_the_admin_token() -> None:
    values = production_values()
    del values["auth"]["existingSecretReadKey"]
    values["tls"]["clientAuth"] = False
    docs = manifests(render(values))
    endpoint = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["authorization"]["credentials"] == {"name": "cdc-admin-token", "key": "token"}
    assert set(endpoint["tlsConfig"]) == {"serverName", "ca"}
    assert not any(a.startswith("--read-token-file") for a in server_container(docs)["args"])


def test_pod_disruption_budget_keeps_all_but_one_capture() -> None:
    docs = manifests(render())
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == one(docs, "StatefulSet")["spec"]["selector"]
    off = manifests(render({"podDisruptionBudget": {"enabled": False}}))
    assert "PodDisruptionBudget" not in kinds(off)


def test_local_spark_needs_no_kubernetes_api_access() -> None:
    docs = manifests(render())
    assert "Role" not in kinds(docs)
    assert one(docs, "ServiceAccount")["automountServiceAccountToken"] is False
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    conf = one(docs, "ConfigMap", "cdc")["data"]["spark-defaults.conf"]
    assert "spark.kubernetes" not in conf


def test_k8s_spark_driver_may_manage_its_executor_pods() -> None:
    docs = manifests(render(production_values()))
    role = one(docs, "Role")
    granted = {
        (resource, verb)
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for resource in ("pods", "services", "configmaps"):
        for verb in ("create", "get", "list", "watch", "delete"):
            assert (resource, verb) in granted
    binding = one(docs, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}
    ]
    assert pod["automountServiceAccountToken"] is True
    conf = one(docs, "ConfigMap", "cdc")["data"]["spark-defaults.conf"].splitlines()
    assert f"spark.kubernetes.namespace {NAMESPACE}" in conf
    assert "spark.kubernetes.container.image registry.example.com/data/mysql-cdc:0.1.0" in conf
    assert "spark.kubernetes.executor.secrets.cdc-credentials /etc/cdc/secrets" in conf
    assert "spark.executor.instances 4" in conf
    env = {e["name"]: e.get("value") for e in server_container(docs)["env"]}
    assert "spark.driver.host=$(POD_IP)" in env["PYSPARK_SUBMIT_ARGS"]
    assert env["PYSPARK_SUBMIT_ARGS"].endswith("pyspark-shell")


def test_config_change_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any] | None) -> str:
        template = one(manifests(render(values)), "StatefulSet")["spec"]["template"]
        return str(template["metadata"]["annotations"]["checksum/config"])

    assert checksum(None) == checksum(None)
    assert checksum(None) != checksum({"spark": {"conf": {"spark.executor.memory": "2g"}}})


def test_etcd_enabled_without_the_vendored_dependency_says_what_to_run() -> None:
    with pytest.raises(helm.HelmRenderError, match="helm dependency build charts/cdc"):
        render({"etcd": {"enabled": True}})


def test_same_admin_and_metrics_port_is_refused() -> None:
    with pytest.raises(helm.HelmRenderError, match="ports.admin and ports.metrics are both 8300"):
        render({"ports": {"admin": 8300, "metrics": 8300}})


def test_long_release_names_keep_valid_object_names() -> None:
    release = "a-very-long-release-name-for-the-change-data-capture"
    docs = manifests(render(None, release=release))
    for doc in docs:
        assert len(doc["metadata"]["name"]) <= 63
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


VARIANTS: dict[str, dict[str, Any]] = {
    "inline-token": {"auth": {"enabled": True, "token": "t" * 32}},
    "inline-credentials": {"credentials": {"files": {"source-password": "a", "n": 5}}},
    "own-service-account": {
        "serviceAccount": {"create": False, "name": "cdc-runner"},
        "spark": {"master": "k8s://https://kubernetes.default.svc:443"},
    },
    "custom-affinity": {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}
                    ]
                }
            }
        }
    },
    "etcd-tls-no-client-cert": {
        "etcd": {"client": {"tls": {"enabled": True, "existingSecret": "etcd-ca"}}},
    },
    "tls-server-only": {"tls": {"enabled": True, "existingSecret": "admin-tls"}},
    "extras": {
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
        "extraVolumes": [{"name": "out", "persistentVolumeClaim": {"claimName": "cdc-out"}}],
        "extraVolumeMounts": [{"name": "out", "mountPath": "/var/lib/cdc/out"}],
        "service": {"type": "LoadBalancer", "annotations": {"a": "b"}},
        "podAnnotations": {"c": "d"},
        "podLabels": {"team": "data"},
        "nodeSelector": {"pool": "cdc"},
        "tolerations": [{"key": "cdc", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "high",
    },
    "no-metrics": {"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_value_variants_render_valid_objects(name: str) -> None:
    docs = manifests(render(VARIANTS[name]))
    for doc in docs:
        assert not doc["apiVersion"].startswith(MONITORING_GROUP)
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_own_service_account_is_bound_not_created() -> None:
    docs = manifests(render(VARIANTS["own-service-account"]))
    assert "ServiceAccount" not in kinds(docs)
    assert one(docs, "RoleBinding")["subjects"][0]["name"] == "cdc-runner"
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "cdc-runner"


def test_metrics_off_drops_the_port_and_the_service_monitor() -> None:
    docs = manifests(render(VARIANTS["no-metrics"]))
    assert "ServiceMonitor" not in kinds(docs)
    assert [p["name"] for p in one(docs, "Service", "cdc")["spec"]["ports"]] == ["admin"]
    assert [p["name"] for p in server_container(docs)["ports"]] == ["admin"]
