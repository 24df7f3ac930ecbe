"""Which files and variables a password reference may name (cdc.uri.secrets, issue #18)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capture.main import build_parser, config_from_args
from cdc.errors import ConfigError
from cdc.uri.mysql import parse_source_uri
from cdc.uri.secrets import (
    DIRS_VARIABLE,
    PREFIX_VARIABLE,
    RESERVED_VARIABLE,
    UNRESTRICTED,
    SecretPolicy,
    current_policy,
    install_policy,
)

BASE = ["--etcd=127.0.0.1:2379", "--addr=127.0.0.1:8300"]


@pytest.fixture(autouse=True)
def no_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (DIRS_VARIABLE, PREFIX_VARIABLE, RESERVED_VARIABLE):
        monkeypatch.delenv(name, raising=False)


def _refusal(policy: SecretPolicy, uri: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_source_uri(uri).check_password_ref(policy)
    return info.value


def test_files_only_inside_the_secrets_directories(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "pw").write_text("x\n")
    (secrets / "nested").mkdir()
    (secrets / "escape").symlink_to("/etc/hostname")
    policy = SecretPolicy.of([str(secrets)], "CDC_")
    for allowed in (secrets / "pw", secrets / "nested" / "pw", secrets / "not-yet-there"):
        parse_source_uri(f"mysql://u@h/?password-file={allowed}").check_password_ref(policy)
    for path in (
        "/etc/hostname",
        f"{secrets}/../pw",
        f"{secrets}/escape",
        str(secrets),
        f"{secrets}-other/pw",
    ):
        error = _refusal(policy, f"mysql://u@h/?password-file={path}")
        assert error.field == "source-uri.password-file"
        assert f"reads them in {secrets}" in error.message
        assert "cdc-server --secrets-dir DIR" in error.message
    error = _refusal(policy, f"mysql://u@h/?password-file={secrets}/escape")
    assert "(that is /etc/hostname)" in error.message


def test_no_directory_lends_no_file() -> None:
    error = _refusal(SecretPolicy.of([], "CDC_"), "mysql://u@h/?password-file=/etc/cdc/secrets/pw")
    assert "reads them nowhere (no --secrets-dir is set)" in error.message


def test_variables_only_with_the_prefix_and_never_the_servers_own() -> None:
    policy = SecretPolicy.of(["/etc/cdc/secrets"], "CDC_", ["CDC_ETCD_PASSWORD"])
    parse_source_uri("mysql://u@h/?password-env=CDC_SOURCE_PASSWORD").check_password_ref(policy)
    error = _refusal(policy, "mysql://u@h/?password-env=HOME")
    assert error.field == "source-uri.password-env"
    assert "their names start with CDC_ (e.g. CDC_SOURCE_PASSWORD)" in error.message
    error = _refusal(policy, "mysql://u@h/?password-env=CDC_ETCD_PASSWORD")
    assert "one of this cdc-server's own settings" in error.message


def test_inline_passwords_and_an_unrestricted_process_pass() -> None:
    policy = SecretPolicy.of([], "NOTHING_")
    parse_source_uri("mysql://u:pw@h/").check_password_ref(policy)
    parse_source_uri("mysql://u@h/?password-file=/etc/hostname").check_password_ref(UNRESTRICTED)
    assert current_policy() == UNRESTRICTED


def test_the_policy_travels_in_the_environment(tmp_path: Path, monkeypatch) -> None:
    policy = SecretPolicy.of([str(tmp_path), "/etc/cdc/secrets"], "CDC_", ["CDC_ETCD_PASSWORD"])
    install_policy(policy)
    try:
        assert current_policy() == policy
        assert os.environ[DIRS_VARIABLE] == f"{tmp_path.resolve()}:/etc/cdc/secrets"
        uri = parse_source_uri("mysql://u@h/?password-file=/etc/hostname")
        with pytest.raises(ConfigError, match="password-file: /etc/hostname is not in"):
            uri.resolve_password()  # refused before the file is read
    finally:
        install_policy(UNRESTRICTED)
    assert current_policy() == UNRESTRICTED


def test_server_flags_and_their_defaults(tmp_path: Path, monkeypatch) -> None:
    def secrets(*flags: str) -> SecretPolicy:
        return config_from_args(build_parser().parse_args([*BASE, *flags])).secrets

    default = secrets()
    assert default.directories == ("/etc/cdc/secrets",)
    assert default.env_prefix == "CDC_"
    assert {"CDC_ETCD_PASSWORD", "CDC_AUTH_TOKEN_FILE"} <= default.reserved_env
    two = secrets(f"--secrets-dir={tmp_path}", "--secrets-dir=/run/secrets")
    assert two.directories == (str(tmp_path.resolve()), "/run/secrets")
    assert "MY_ETCD_PW" in secrets("--etcd-password-env=MY_ETCD_PW").reserved_env
    assert secrets("--secrets-env-prefix=PW_").env_prefix == "PW_"
    monkeypatch.setenv(DIRS_VARIABLE, f"{tmp_path}:/run/secrets")
    assert secrets().directories == (str(tmp_path.resolve()), "/run/secrets")
    with pytest.raises(ConfigError, match="--secrets-dir: 'relative' is not an absolute path"):
        secrets("--secrets-dir=relative")
