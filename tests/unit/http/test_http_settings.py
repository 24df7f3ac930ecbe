"""`cdc-server --http-addr`: parsed like --metrics-addr, and one HTTP listener per server."""

from __future__ import annotations

import pytest

from capture.main import build_parser, config_from_args
from capture.server import ServerConfig
from cdc.errors import ConfigError

BASE = ["--etcd=127.0.0.1:2379", "--addr=127.0.0.1:8300"]


def _config(*flags: str) -> ServerConfig:
    return config_from_args(build_parser().parse_args([*BASE, *flags]))


def test_http_addr_is_host_and_port() -> None:
    assert _config().http_addr is None
    assert _config("--http-addr=0.0.0.0:9300").http_addr == ("0.0.0.0", 9300)
    assert _config("--http-addr=[::]:9300").http_addr == ("::", 9300)
    for bad in ("9300", "host:", "h:port", "h:70000"):
        with pytest.raises(ConfigError) as info:
            _config(f"--http-addr={bad}")
        assert info.value.field == "--http-addr"


def test_http_addr_and_metrics_addr_are_not_given_together() -> None:
    with pytest.raises(ConfigError) as info:
        _config("--http-addr=127.0.0.1:9300", "--metrics-addr=127.0.0.1:9301")
    assert info.value.field == "--metrics-addr"
    assert "give --http-addr alone: it serves /metrics too" in str(info.value)
    assert _config("--metrics-addr=127.0.0.1:9301").http_addr is None
