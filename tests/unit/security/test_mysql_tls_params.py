"""TLS settings of a MySQL URI that would verify nothing are refused (issue #18)."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigError
from cdc.sink.registry import parse_sink_uri
from cdc.uri.mysql import parse_source_uri


@pytest.mark.parametrize("given", ["ssl-cert=/c.pem&ssl-key=/k.pem", "ssl-key=/k.pem"])
def test_a_client_certificate_without_ssl_ca_is_refused(given: str) -> None:
    for parse, field in ((parse_source_uri, "source-uri"), (parse_sink_uri, "sink-uri")):
        with pytest.raises(ConfigError) as info:
            parse(f"mysql://u@h/?{given}", field=field)
        assert info.value.field == field
        assert "without ssl-ca would use TLS without checking the server's certificate" in str(
            info.value
        )


def test_with_ssl_ca_it_is_accepted() -> None:
    uri = parse_source_uri("mysql://u@h/?ssl-ca=/ca.pem&ssl-cert=/c.pem&ssl-key=/k.pem")
    assert dict(uri.ssl) == {"ca": "/ca.pem", "cert": "/c.pem", "key": "/k.pem"}
