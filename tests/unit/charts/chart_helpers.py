"""Rendering charts/cdc offline with Helm's own engine, and reading what it renders.

helm-python-sdk binds Helm's Go SDK (no helm binary, no cluster): `render` is
`helm template`, `lint` is `helm lint`, and both check values.schema.json.
`Pod` then plays the kubelet's part for the cdc-server container: it expands
`$(VAR)` references the way Kubernetes does and mounts the pod's volumes
(Secrets, the ConfigMap, emptyDirs) into a temporary folder, so the container's
command line can be run through the real cdc-server parser. Certificates for
the TLS Secrets are made with openssl; `HealthServer` is the standard gRPC
health service, for running the probes and the image's HEALTHCHECK for real.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import helm_python as helm
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "cdc"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
KUBE_VERSION = "1.34.0"
RELEASE = "cdc"
NAMESPACE = "data"
MONITORING_GROUP = "monitoring.coreos.com/"
ETCD_PASSWORD = "etcd-pass-from-secret"
ADMIN_TOKEN = "0123456789abcdef0123456789abcdef"
READ_TOKEN = "fedcba9876543210fedcba9876543210"


def production_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(PRODUCTION_VALUES.read_text())
    return values


def render(values: Mapping[str, Any] | None = None, release: str = RELEASE) -> dict[str, str]:
    """Template path -> rendered text (NOTES.txt included), as `helm template` renders it."""
    return dict(_render(json.dumps(values, sort_keys=True), release))


@functools.lru_cache(maxsize=64)
def _render(values_json: str, release: str) -> tuple[tuple[str, str], ...]:
    values = json.loads(values_json)
    with helm.Chart.load(CHART) as chart:
        return tuple(chart.render(values, name=release, namespace=NAMESPACE).items())


def manifests(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every Kubernetes object of a rendering (YAML documents of the templates, not NOTES)."""
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".yaml"):
            docs.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return docs


def notes(rendered: Mapping[str, str]) -> str:
    return next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def server_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "cdc-server")


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: defined names are replaced, `$$` is a `$`,
    undefined references stay as written."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(substitute, text)


@dataclass
class Pod:
    """One pod of the rendered StatefulSet, as the kubelet would start it.

    `secrets` holds what the cluster's Secrets contain (name -> key -> bytes) for
    the Secrets the chart does not create itself (existingSecret values).
    """

    docs: list[dict[str, Any]]
    root: Path
    name: str = "cdc-1"
    ip: str = "10.20.30.40"
    secrets: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.statefulset = one(self.docs, "StatefulSet")
        self.spec = self.statefulset["spec"]["template"]["spec"]
        self.container = server_container(self.docs)
        self.env = self._environment()
        self.mounts = self._mount_volumes()

    def _field(self, path: str) -> str:
        fields = {
            "metadata.name": self.name,
            "metadata.namespace": NAMESPACE,
            "status.podIP": self.ip,
        }
        return fields[path]

    def _secret(self, name: str) -> dict[str, bytes]:
        if name in self.secrets:
            return self.secrets[name]
        made = one(self.docs, "Secret", name)
        return {k: base64.b64decode(v) for k, v in made.get("data", {}).items()}

    def _environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for item in self.container.get("env", []):
            if "value" in item:
                env[item["name"]] = expand(item["value"], env)
                continue
            source = item["valueFrom"]
            if "fieldRef" in source:
                env[item["name"]] = self._field(source["fieldRef"]["fieldPath"])
            else:
                ref = source["secretKeyRef"]
                env[item["name"]] = self._secret(ref["name"])[ref["key"]].decode()
        return env

    def _mount_volumes(self) -> dict[str, Path]:
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        mounts: dict[str, Path] = {}
        for mount in self.container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            target = self.root / mount["mountPath"].lstrip("/")
            target.mkdir(parents=True)
            for name, data in self._volume_files(volume).items():
                (target / name).write_bytes(data)
            mounts[mount["mountPath"]] = target
        return mounts

    def _volume_files(self, volume: dict[str, Any]) -> dict[str, bytes]:
        if "emptyDir" in volume:
            return {}
        if "configMap" in volume:
            made = one(self.docs, "ConfigMap", volume["configMap"]["name"])
            return {k: v.encode() for k, v in made["data"].items()}
        source = volume["secret"]
        data = self._secret(source["secretName"])
        items = source.get("items")
        if items is None:
            return dict(data)
        return {item["path"]: data[item["key"]] for item in items}

    def localize(self, text: str) -> str:
        """`text` (a path, or `--flag=path`) with a path inside a mounted volume moved to
        where the test mounted that volume."""
        for mount_path in sorted(self.mounts, key=len, reverse=True):
            pattern = re.compile(rf"(^|=){re.escape(mount_path)}(?=/|$)")
            if pattern.search(text):
                local = str(self.mounts[mount_path])
                return pattern.sub(lambda m, local=local: m.group(1) + local, text, count=1)
        return text

    def argv(self) -> list[str]:
        """The container's command line after `$(VAR)` expansion, paths localized."""
        return [self.localize(expand(arg, self.env)) for arg in self.container["args"]]

    def local_env(self) -> dict[str, str]:
        """The container's environment with paths localized."""
        return {name: self.localize(value) for name, value in self.env.items()}

    def mounted_from(self, path: str) -> str:
        """Name of the Secret or ConfigMap whose volume holds the container path `path`."""
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        for mount in self.container["volumeMounts"]:
            if path.startswith(mount["mountPath"] + "/"):
                volume = volumes[mount["name"]]
                if "secret" in volume:
                    return str(volume["secret"]["secretName"])
                return str(volume["configMap"]["name"])
        raise AssertionError(f"{path} is in no mounted volume")


def make_tls_files(directory: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """A CA and a certificate it signed for `names` (DNS names, or IP:a.b.c.d), usable by
    servers and clients: the keys of a cert-manager Secret (ca.crt, tls.crt, tls.key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        directory,
        *("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2"),
        *("-subj", "/CN=chart-test-ca", "-addext", "basicConstraints=critical,CA:TRUE"),
        *("-addext", "keyUsage=critical,keyCertSign,cRLSign"),
    )
    _openssl(directory, "req", *ec, "-keyout", "tls.key", "-out", "tls.csr", "-subj", "/CN=cdc")
    sans = ",".join(n if n.startswith("IP:") else f"DNS:{n}" for n in names)
    (directory / "ext.cnf").write_text(
        f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl(
        directory,
        *("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key"),
        *("-set_serial", "2", "-days", "2", "-extfile", "ext.cnf", "-out", "tls.crt"),
    )
    return {name: (directory / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}


def _openssl(directory: Path, *args: str) -> None:
    if shutil.which("openssl") is None:
        raise RuntimeError("the test certificates are made with openssl: apt-get install openssl")
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


class HealthServer:
    """A gRPC server with the standard health service, secured like cdc-server's admin port."""

    def __init__(self, port: int, credentials: grpc.ServerCredentials | None) -> None:
        self.health = health.HealthServicer()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        address = f"127.0.0.1:{port}"
        if credentials is None:
            self.server.add_insecure_port(address)
        else:
            self.server.add_secure_port(address, credentials)
        self.serving(True)
        self.server.start()

    def serving(self, on: bool) -> None:
        states = health_pb2.HealthCheckResponse
        self.health.set("", states.SERVING if on else states.NOT_SERVING)

    def stop(self) -> None:
        self.server.stop(grace=None)


def existing_secrets() -> dict[str, dict[str, bytes]]:
    """What an operator puts into the Secrets production-values.yaml names."""
    admin_names = ("IP:127.0.0.1", "cdc.data.svc", "*.cdc-headless.data.svc")
    return {
        "cdc-etcd": {"password": ETCD_PASSWORD.encode()},
        "cdc-etcd-client-tls": tls_secret(("etcd.infra.svc",)),
        "cdc-admin-tls": tls_secret(admin_names),
        "cdc-admin-token": {
            "token": f"{ADMIN_TOKEN}\n".encode(),
            "read-token": f"{READ_TOKEN}\n".encode(),
        },
        "cdc-credentials": {"source-password": b"src", "sink-password": b"snk"},
    }


@functools.lru_cache(maxsize=8)
def tls_secret(names: tuple[str, ...]) -> dict[str, bytes]:
    """The contents of a TLS Secret for `names`, made once per test session."""
    with tempfile.TemporaryDirectory() as directory:
        return make_tls_files(Path(directory), names)
