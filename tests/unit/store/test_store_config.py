"""EtcdConfig: endpoints, prefix, TLS and credential settings are checked up front."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigError
from cdc.store.config import EtcdConfig, split_endpoint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:2379", ("127.0.0.1:2379",)),
        ("127.0.0.1:2379,etcd-2:2380", ("127.0.0.1:2379", "etcd-2:2380")),
        (" h1:1 , h2:2 ", ("h1:1", "h2:2")),
        ("http://h1:2379,https://h2:2379/", ("h1:2379", "h2:2379")),
        ("[::1]:2379", ("[::1]:2379",)),
        ("h:1,h:1", ("h:1",)),
    ],
)
def test_parse_endpoints(text: str, expected: tuple[str, ...]) -> None:
    assert EtcdConfig.parse_endpoints(text) == expected
    assert EtcdConfig(endpoints=text).endpoints == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no endpoint given"),
        ("h1:1,,h2:2", "has an empty entry"),
        ("localhost", "'localhost' has no port"),
        ("h:0", "not a number from 1 to 65535"),
        ("h:65536", "not a number from 1 to 65535"),
        ("h:port", "not a number from 1 to 65535"),
        (":2379", "has no host"),
        ("::1:2379", "put the address in brackets"),
        ("[::1]2379", "no ':port' after ']'"),
        ("h:2379/v3", "has a path or query"),
        ("http://root:pw@h:2379", "credentials do not belong in an endpoint"),
    ],
)
def test_bad_endpoints(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        EtcdConfig.parse_endpoints(text)
    assert info.value.field == "etcd.endpoints"
    assert "pw" not in str(info.value)


def test_split_endpoint() -> None:
    assert split_endpoint("etcd:2379") == ("etcd", 2379)
    assert split_endpoint("[fe80::1]:2379") == ("[fe80::1]", 2379)


def test_defaults_and_prefix_normalization() -> None:
    cfg = EtcdConfig(endpoints=("127.0.0.1:2379",))
    assert cfg.prefix == "/cdc/default"
    assert cfg.dial_timeout == 5.0
    assert not cfg.tls
    assert EtcdConfig(endpoints=("h:1",), prefix="/cdc-test-ab/").prefix == "/cdc-test-ab"


def test_password_is_never_in_repr() -> None:
    cfg = EtcdConfig(endpoints=("h:1",), user="root", password="s3cr3t-value")
    assert "s3cr3t-value" not in repr(cfg)
    assert "root" in repr(cfg)


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"endpoints": ()}, "etcd.endpoints", "no endpoint given"),
        ({"prefix": "cdc"}, "etcd.prefix", "must start with '/'"),
        ({"prefix": "/a//b"}, "etcd.prefix", "empty segment"),
        ({"ca": "/ca.pem", "cert": "/c.pem"}, "etcd.cert", "both the cert and the key"),
        ({"ca": "/ca.pem", "key": "/k.pem"}, "etcd.cert", "both the cert and the key"),
        ({"cert": "/c.pem", "key": "/k.pem"}, "etcd.ca", "set the CA file too"),
        ({"user": "root"}, "etcd.user", "both user and password"),
        ({"password": "x"}, "etcd.user", "both user and password"),
        ({"user": "", "password": "x"}, "etcd.user", "must not be empty"),
        ({"dial_timeout": 0}, "etcd.dial-timeout", "positive number"),
        ({"dial_timeout": True}, "etcd.dial-timeout", "positive number"),
        ({"dial_timeout": "5"}, "etcd.dial-timeout", "positive number"),
    ],
)
def test_bad_settings(kwargs: dict, field: str, message: str) -> None:
    settings = {"endpoints": ("h:1",), **kwargs}
    with pytest.raises(ConfigError, match=message) as info:
        EtcdConfig(**settings)
    assert info.value.field == field
