"""The security and metrics settings of cdc-server and cdcctl, checked before anything runs."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path

import pytest

from capture.main import build_parser, config_from_args
from cdc.api.channel import ClientSecurity, read_token_file
from cdc.cli.api_client import ServerTarget, add_server_flag, server_of
from cdc.errors import ConfigError

BASE = ["--etcd=127.0.0.1:2379", "--addr=127.0.0.1:8300"]


def _server_config(*flags: str):
    return config_from_args(build_parser().parse_args([*BASE, *flags]))


def test_metrics_addr_is_host_and_port() -> None:
    assert _server_config().metrics_addr is None
    assert _server_config("--metrics-addr=0.0.0.0:9300").metrics_addr == ("0.0.0.0", 9300)
    assert _server_config("--metrics-addr=[::]:9300").metrics_addr == ("::", 9300)
    for bad in ("9300", "host:", "h:port", "h:70000"):
        with pytest.raises(ConfigError) as info:
            _server_config(f"--metrics-addr={bad}")
        assert info.value.field == "--metrics-addr"


def test_auth_token_file_from_flag_or_environment(tmp_path: Path, monkeypatch) -> None:
    token = tmp_path / "token"
    token.write_text("  s3cret-token \nignored\n")
    config = _server_config(f"--auth-token-file={token}")
    assert config.auth_token == "s3cret-token"
    assert "s3cret-token" not in repr(config)
    monkeypatch.setenv("CDC_AUTH_TOKEN_FILE", str(token))
    assert config_from_args(build_parser().parse_args(BASE)).auth_token == "s3cret-token"
    monkeypatch.setenv("CDC_AUTH_TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="--auth-token-file: cannot read"):
        config_from_args(build_parser().parse_args(BASE))


def test_read_token_file_refuses_an_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n  \n")
    with pytest.raises(ConfigError, match="--flag: .* is empty; put the token on its first line"):
        read_token_file(str(empty), "--flag")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cert": "c.pem"}, "--tls-key"),
        ({"key": "c.key"}, "--tls-cert"),
        ({"cert": "c.pem", "key": "c.key"}, "--tls-ca"),
        ({"server_name": "cdc.example"}, "--tls-server-name"),
    ],
)
def test_client_security_needs_consistent_files(kwargs: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        ClientSecurity(**kwargs)
    assert info.value.field == field


def test_client_security_hides_the_token() -> None:
    security = ClientSecurity(ca="ca.pem", token="t0ken-value")
    assert security.tls and "t0ken-value" not in repr(security)
    assert not ClientSecurity().tls


def _cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_flag(parser)
    return parser.parse_args(list(argv))


def test_server_flags_and_their_environment(tmp_path: Path, monkeypatch) -> None:
    names = ("CDC_SERVER", "CDC_TLS_CA", "CDC_TLS_CERT", "CDC_TLS_KEY", "CDC_TLS_SERVER_NAME")
    for env in (*names, "CDC_TOKEN_FILE"):
        monkeypatch.delenv(env, raising=False)
    token = tmp_path / "token"
    token.write_text("abc\n")
    target = server_of(
        _cli_args("--server", "h:1", "--tls-ca", "ca.pem", "--token-file", str(token))
    )
    # cdcctl also says who runs it, for the changefeeds' audit history
    user = getpass.getuser()
    assert target == ServerTarget("h:1", ClientSecurity(ca="ca.pem", token="abc", user=user))
    assert str(target) == "h:1"
    monkeypatch.setenv("CDC_SERVER", "h:2")
    monkeypatch.setenv("CDC_TLS_CA", "ca.pem")
    monkeypatch.setenv("CDC_TLS_CERT", "c.pem")
    monkeypatch.setenv("CDC_TLS_KEY", "c.key")
    monkeypatch.setenv("CDC_TLS_SERVER_NAME", "cdc.example")
    monkeypatch.setenv("CDC_TOKEN_FILE", str(token))
    assert server_of(_cli_args()) == ServerTarget(
        "h:2", ClientSecurity("ca.pem", "c.pem", "c.key", "abc", "cdc.example", user=user)
    )
    monkeypatch.delenv("CDC_SERVER")
    with pytest.raises(ConfigError, match="--server"):
        server_of(_cli_args())
