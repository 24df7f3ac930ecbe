"""The Dockerfile, read instruction by instruction (no Docker daemon needed).

Multi-stage, unprivileged runtime with Java 17, the chart's ports exposed, and a
HEALTHCHECK that is run here for real (plain and TLS) against a gRPC health
server; .dockerignore lets in what the build copies and nothing generated.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest
from chart_helpers import (
    REPO,
    HealthServer,
    make_tls_files,
    manifests,
    render,
    server_container,
)

from capture.security import load_server_tls
from cdc.playground.ports import free_port

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    text: str
    stage: int
    heredoc: str = ""


def parse_dockerfile(text: str) -> tuple[list[Instruction], dict[str, str]]:
    """Instructions (continuations joined, comments dropped, a heredoc's body kept with
    its instruction) with the stage each belongs to (-1 before the first FROM), and
    the ARG defaults."""
    instructions: list[Instruction] = []
    args: dict[str, str] = {}
    lines = iter(text.splitlines())
    stage = -1
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\"):
            line = line[:-1] + " " + next(lines).strip()
        keyword, _, rest = line.strip().partition(" ")
        keyword = keyword.upper()
        heredoc = re.search(r"<<-?'?(\w+)'?", rest)
        body: list[str] = []
        if heredoc:
            for body_line in lines:
                if body_line.strip() == heredoc.group(1):
                    break
                body.append(body_line)
        if keyword == "FROM":
            stage += 1
        if keyword == "ARG" and "=" in rest:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        heredoc_text = "\n".join(body) + "\n" if body else ""
        instructions.append(Instruction(keyword, rest.strip(), stage, heredoc_text))
    return instructions, args


def resolve(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], m[0]), text)


INSTRUCTIONS, ARGS = parse_dockerfile(DOCKERFILE.read_text())
FINAL = max(i.stage for i in INSTRUCTIONS)


def final(keyword: str) -> list[str]:
    return [i.text for i in INSTRUCTIONS if i.keyword == keyword and i.stage == FINAL]


def test_build_and_runtime_are_separate_python_311_stages() -> None:
    froms = [resolve(i.text, ARGS).split() for i in INSTRUCTIONS if i.keyword == "FROM"]
    assert len(froms) >= 2
    for image, as_, _name in froms:
        assert as_.upper() == "AS"
        assert re.fullmatch(r"python:3\.11-slim-bookworm", image), image
    assert [f[2] for f in froms] == ["build", "runtime"]
    copies = final("COPY")
    assert any(c.startswith("--from=build /opt/cdc") for c in copies)


def test_build_stage_generates_stubs_and_installs_the_project() -> None:
    build = " ".join(i.text for i in INSTRUCTIONS if i.keyword == "RUN" and i.stage == 0)
    assert "scripts/gen-proto.sh" in build
    assert "ln -s /opt/cdc .venv" in build, "gen-proto.sh runs .venv/bin/python"
    assert "pip install --no-deps ." in build
    assert build.index("gen-proto.sh") < build.index("pip install --no-deps .")


def test_runtime_has_java_17_and_the_console_scripts() -> None:
    runtime = " ".join(final("RUN"))
    assert "openjdk-17-jre-headless" in runtime
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"cdc-server", "cdcctl"} <= set(scripts)
    env = " ".join(final("ENV"))
    assert "PATH=/opt/cdc/bin:$PATH" in env, "the venv's console scripts are on PATH"
    entrypoint = shlex.split(final("ENTRYPOINT")[0].strip("[]").replace(",", " "))
    assert entrypoint[-1] == "/usr/local/bin/cdc-entrypoint"


def entrypoint_script(tmp_path: Path) -> Path:
    (copy,) = [i for i in INSTRUCTIONS if i.heredoc and "/usr/local/bin/cdc-entrypoint" in i.text]
    script = tmp_path / "cdc-entrypoint"
    script.write_text(copy.heredoc)
    return script


def test_entrypoint_runs_any_other_command_as_given(tmp_path: Path) -> None:
    script = entrypoint_script(tmp_path)
    echoed = subprocess.run(
        ["bash", str(script), "printf", "%s|", "cdc-server", "--etcd=e:2379"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert echoed.stdout == "cdc-server|--etcd=e:2379|"
    failed = subprocess.run(["bash", str(script), "sh", "-c", "exit 7"], check=False)
    assert failed.returncode == 7


def test_entrypoint_starts_executors_from_pysparks_own_jars() -> None:
    """The executor branch runs Spark's Kubernetes executor backend from $SPARK_HOME/jars;
    SPARK_HOME is where pip puts pyspark in a Python 3.11 venv at /opt/cdc."""
    env = " ".join(final("ENV"))
    spark_home = re.search(r"SPARK_HOME=(\S+)", env)
    assert spark_home is not None
    spec = find_spec("pyspark")
    assert spec is not None and spec.origin is not None
    pyspark_dir = Path(spec.origin).parent
    installed = pyspark_dir.relative_to(sys.prefix).as_posix()
    assert spark_home.group(1) == f"/opt/cdc/{installed}"
    (script,) = [i.heredoc for i in INSTRUCTIONS if "cdc-entrypoint" in i.text and i.heredoc]
    backend = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    assert backend in script
    class_file = backend.replace(".", "/") + ".class"
    jars = (pyspark_dir / "jars").glob("spark-kubernetes_*.jar")
    assert any(class_file in zipfile.ZipFile(jar).namelist() for jar in jars)


def test_runtime_runs_as_an_unprivileged_numeric_user() -> None:
    users = final("USER")
    assert users, "the runtime stage sets USER"
    user = resolve(users[-1], ARGS).split(":")[0]
    assert user.isdigit() and int(user) != 0, user
    chart_pod = render()
    statefulset = next(d for d in manifests(chart_pod) if d["kind"] == "StatefulSet")
    assert statefulset["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(user)


def test_exposed_ports_are_the_charts_container_ports() -> None:
    exposed = {int(p.split("/")[0]) for text in final("EXPOSE") for p in text.split()}
    container = server_container(manifests(render()))
    assert exposed == {p["containerPort"] for p in container["ports"]}
    health_addr = re.search(r"CDC_HEALTH_ADDR=(\S+)", " ".join(final("ENV")))
    assert health_addr is not None
    assert int(health_addr.group(1).rsplit(":", 1)[1]) in exposed


def healthcheck_command() -> str:
    (check,) = final("HEALTHCHECK")
    _, _, command = check.partition(" CMD ")
    assert "cdc.api.health" in command
    return command


def run_healthcheck(env: dict[str, str]) -> int:
    """The HEALTHCHECK shell command as Docker runs it (/bin/sh -c), the venv on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CDC_")}
    done = subprocess.run(
        ["/bin/sh", "-c", healthcheck_command()],
        env={**clean, "PATH": path, **env},
        capture_output=True,
        timeout=30,
    )
    return done.returncode


def test_healthcheck_asks_the_grpc_health_service() -> None:
    port = free_port()
    server = HealthServer(port, None)
    try:
        assert run_healthcheck({"CDC_HEALTH_ADDR": f"127.0.0.1:{port}"}) == 0
        server.serving(False)
        assert run_healthcheck({"CDC_HEALTH_ADDR": f"127.0.0.1:{port}"}) == 1
    finally:
        server.stop()


def test_healthcheck_speaks_mutual_tls_through_the_cdcctl_variables(tmp_path: Path) -> None:
    make_tls_files(tmp_path, ("IP:127.0.0.1",))
    files = {name: str(tmp_path / name) for name in ("ca.crt", "tls.crt", "tls.key")}
    tls = load_server_tls(files["tls.crt"], files["tls.key"], files["ca.crt"])
    assert tls is not None
    port = free_port()
    server = HealthServer(port, tls.credentials())
    env = {
        "CDC_HEALTH_ADDR": f"127.0.0.1:{port}",
        "CDC_TLS_CA": files["ca.crt"],
        "CDC_TLS_CERT": files["tls.crt"],
        "CDC_TLS_KEY": files["tls.key"],
    }
    try:
        assert run_healthcheck(env) == 0
    finally:
        server.stop()


def glob_regex(glob: str) -> str:
    """A .dockerignore pattern as a regex: `*` and `?` stay inside one path segment,
    `**` crosses segments (`**/` also matches no folder at all)."""
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return out


def dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = glob_regex(pattern.removeprefix("!").rstrip("/"))
        if any(re.fullmatch(regex, c) for c in candidates):
            excluded = not negate
    return excluded


@pytest.fixture(scope="module")
def ignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_dockerignore_lets_in_what_the_build_copies(ignore_patterns: list[str]) -> None:
    sources = [
        src
        for text in (i.text for i in INSTRUCTIONS if i.keyword == "COPY")
        if not text.startswith("--") and "<<" not in text
        for src in text.split()[:-1]
    ]
    assert "cdc" in sources and "proto" in sources
    for source in sources:
        root = REPO / source.rstrip("/").removeprefix("./")
        files = [root] if root.is_file() else [p for p in root.rglob("*.py*") if p.is_file()]
        files += list(root.rglob("*.proto")) if root.is_dir() else []
        for file in files:
            relative = file.relative_to(REPO).as_posix()
            generated = "__pycache__" in relative or relative.startswith("cdc/api/gen/")
            assert dockerignore_excludes(relative, ignore_patterns) == generated, relative


def test_dockerignore_keeps_out_local_state(ignore_patterns: list[str]) -> None:
    for path in (".venv/bin/python", ".git/config", "tests/conftest.py", "charts/cdc/Chart.yaml"):
        assert dockerignore_excludes(path, ignore_patterns), path
    for path in ("pyproject.toml", "README.md", "scripts/gen-proto.sh", "proto/cdc/v1/a.proto"):
        assert not dockerignore_excludes(path, ignore_patterns), path
