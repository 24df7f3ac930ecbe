"""NOTES.txt: the commands it prints are accepted by the real cdcctl parser, and the
first changefeed it shows reads its passwords from the Secret the pods mount."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import (
    NAMESPACE,
    Pod,
    existing_secrets,
    manifests,
    notes,
    one,
    production_values,
    render,
)

from cdc.cli.api_client import server_of
from cdc.cli.changefeed_flags import config_from_args
from cdc.cli.main import build_parser
from cdc.uri.mysql import parse_source_uri


def cdcctl_commands(text: str) -> list[list[str]]:
    """Each command line of the notes that runs cdcctl (directly or through kubectl exec,
    continuations joined), from `cdcctl` on."""
    commands, pending = [], ""
    for line in text.splitlines():
        pending += line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        words = shlex.split(pending) if pending.startswith(("kubectl ", "cdcctl ")) else []
        pending = ""
        if "cdcctl" in words:
            commands.append(words[words.index("cdcctl") :])
    return commands


@pytest.mark.parametrize("production", [False, True], ids=["default", "production"])
def test_every_cdcctl_command_in_the_notes_parses(production: bool) -> None:
    values = production_values() if production else None
    commands = cdcctl_commands(notes(render(values)))
    assert len(commands) == 4
    for command in commands:
        build_parser().parse_args(command[1:])


def test_first_changefeed_uses_the_service_and_the_mounted_credentials(
    tmp_path: Path,
) -> None:
    values: dict[str, Any] = production_values()
    rendered = render(values)
    docs = manifests(rendered)
    create = next(c for c in cdcctl_commands(notes(rendered)) if "create" in c)
    args = build_parser().parse_args(create[1:])
    service = one(docs, "Service", "cdc")
    admin = next(p for p in service["spec"]["ports"] if p["name"] == "admin")
    assert server_of(args).address == f"cdc.{NAMESPACE}.svc:{admin['port']}"
    config = config_from_args(args)
    assert config.changefeed_id == "shop-to-dw"
    assert config.spark_master == values["spark"]["master"]
    pod = Pod(docs, tmp_path / "pod", secrets=existing_secrets())
    for uri, key in ((args.source_uri, "source-password"), (args.sink_uri, "sink-password")):
        path = parse_source_uri(uri).password_file
        assert path is not None and pod.mounted_from(path) == "cdc-credentials"
        mounted = parse_source_uri(pod.localize(uri))
        assert mounted.resolve_password() == pod.secrets["cdc-credentials"][key].decode()


def test_notes_say_when_no_credentials_are_mounted() -> None:
    text = notes(render())
    assert "set credentials.existingSecret" in text
    assert "Secret cdc-credentials, mounted at /etc/cdc/secrets" in notes(
        render({"credentials": {"existingSecret": "cdc-credentials"}})
    )


def test_notes_name_the_client_options_for_tls_and_token() -> None:
    text = notes(render(production_values()))
    assert "pass --tls-ca --tls-cert --tls-key --token-file." in text
    for flag in ("--tls-ca", "--tls-cert", "--tls-key", "--token-file"):
        args = build_parser().parse_args(["capture", "list", flag, "x"])
        assert getattr(args, flag.removeprefix("--").replace("-", "_")) == "x"
