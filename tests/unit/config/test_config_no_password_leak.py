"""The password never shows: not in str/repr/describe/to_dict(mask=True), not in errors.

Each case puts a distinctive password into a URI (raw and percent-encoded
forms are both searched for) and checks every text a user or a log could see.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from cdc.config import ChangefeedConfig, load_changefeed_config
from cdc.errors import ConfigError
from cdc.sink.registry import parse_sink_uri
from cdc.uri.mysql import parse_source_uri

SECRET = "Zq9-s3cr3t"
# A password with characters that must be percent-encoded: '@' and '/'.
ODD_SECRET = "Zq9@s3/cr3t"
ODD_ENCODED = "Zq9%40s3%2Fcr3t"


def assert_hidden(*texts: Any) -> None:
    for text in texts:
        rendered = (
            text
            if isinstance(text, str)
            else json.dumps(text)
            if isinstance(text, dict)
            else repr(text)
        )
        for secret in (SECRET, ODD_SECRET, ODD_ENCODED, "s3cr3t", "s3/cr3t"):
            assert secret not in rendered, rendered


def assert_error_hides(err: ConfigError) -> None:
    assert_hidden(str(err), repr(err), err.message, err.field, err.args)


def test_parsed_uris_hide_the_password() -> None:
    for password in (SECRET, ODD_ENCODED):
        source = parse_source_uri(f"mysql://repl:{password}@h:3306/?server-id=3")
        sink = parse_sink_uri(f"mysql://root:{password}@h:3307/")
        assert_hidden(str(source), repr(source), f"{source!s}", str(sink), repr(sink), sink.masked)
        assert_hidden(sink.describe())
        assert password in source.unmasked()  # the unmasked text is the only way to get it


def test_unencoded_special_characters_are_hidden_too() -> None:
    source = parse_source_uri(f"mysql://repl:{ODD_SECRET}@h:3306/")
    assert source.password == ODD_SECRET
    assert_hidden(str(source), repr(source))


def test_changefeed_views_hide_the_password() -> None:
    config = ChangefeedConfig(
        changefeed_id="cf",
        source_uri=f"mysql://repl:{SECRET}@h:3306/",
        sink_uri=f"mysql://root:{ODD_ENCODED}@h2:3306/",
        store_credentials=True,
    )
    assert_hidden(str(config), repr(config), config.describe(), config.to_dict(mask=True))
    # storage keeps the password only because store_credentials is set
    assert SECRET in json.dumps(config.to_dict(mask=False))


def test_stored_dict_without_store_credentials_never_holds_the_password() -> None:
    config = ChangefeedConfig(
        changefeed_id="cf",
        source_uri=f"mysql://repl:{SECRET}@h:3306/",
        sink_uri=f"mysql://root:{ODD_ENCODED}@h2:3306/?worker-count=2",
    )
    stored = config.to_dict(mask=False)
    assert_hidden(stored, config.to_dict(mask=True))
    assert stored["sink-uri"] == "mysql://root@h2:3306/?worker-count=2"


@pytest.mark.parametrize(
    "tail",
    [
        "h:abc/",  # bad port
        "h:70000/",  # port out of range
        "/",  # missing host
        "h/?server-idd=3",  # unknown parameter
        "h/?server-id=0",  # bad value
        "h/?server-id=1&server-id=2",  # duplicate
        "h/db",  # database path
        "h/?password-env=PW",  # inline password plus reference
        "h/?time-zone=Nowhere/Land",
        "h/ x",  # whitespace
        "h!/",  # bad host
    ],
)
@pytest.mark.parametrize("password", [SECRET, ODD_ENCODED, ODD_SECRET])
def test_errors_elsewhere_in_the_uri_hide_the_password(tail: str, password: str) -> None:
    for parse in (parse_source_uri, parse_sink_uri):
        with pytest.raises(ConfigError) as info:
            parse(f"mysql://repl:{password}@{tail}")
        assert_error_hides(info.value)


@pytest.mark.parametrize(
    "text",
    [
        f"postgres://repl:{SECRET}@h/",  # unknown scheme
        f"repl:{SECRET}@h:3306",  # no scheme at all
        f"mysql://repl:{SECRET}",  # no '@'
        f"mysql://repl:{SECRET}?x=1@h/",  # unencoded '?' in the password
        f"file://repl:{SECRET}@h/out",  # credentials in a file URI
        f"pull://repl:{SECRET}@h",
        f"blackhole://repl:{SECRET}@",
    ],
)
def test_malformed_uris_hide_the_password(text: str) -> None:
    for parse in (parse_source_uri, parse_sink_uri):
        with pytest.raises(ConfigError) as info:
            parse(text)
        assert_error_hides(info.value)


def test_config_errors_mask_uris_quoted_in_messages() -> None:
    err = ConfigError("sink-uri", f"cannot reach mysql://root:{SECRET}@h:3306/ (timeout)")
    assert_error_hides(err)
    assert "mysql://root:******@h:3306/" in str(err)


def test_toml_errors_hide_the_password(tmp_path: Path) -> None:
    path = tmp_path / "cf.toml"
    path.write_text(
        f'changefeed-id = "cf"\nsource-uri = "mysql://repl:{SECRET}@h:3306/"\n'
        'sink-uri = "blackhole://"\n[snapshot]\nchunk-size = "big"\n'
    )
    with pytest.raises(ConfigError) as info:
        load_changefeed_config(path, {})
    assert_error_hides(info.value)
    path.write_text(
        f'changefeed-id = "cf"\nsource-uri = ["mysql://repl:{SECRET}@h:3306/"]\n'
        'sink-uri = "blackhole://"\n'
    )
    with pytest.raises(ConfigError) as info:
        load_changefeed_config(path, {})
    assert info.value.field == "source-uri"
    assert_error_hides(info.value)


def test_validation_errors_of_a_config_hide_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        ChangefeedConfig(
            changefeed_id="bad id",
            source_uri=f"mysql://repl:{SECRET}@h:3306/",
            sink_uri=f"mysql://root:{SECRET}@h2/",
        )
    assert_error_hides(info.value)
    with pytest.raises(ConfigError) as info:
        ChangefeedConfig.from_dict({"v": 1, "source-uri": f"mysql://repl:{SECRET}@h:x/"})
    assert_error_hides(info.value)
