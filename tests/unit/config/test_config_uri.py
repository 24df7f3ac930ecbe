"""Source and sink URIs: every kind parses, every mistake gets a precise error."""

from pathlib import Path

import pytest

from cdc.errors import ConfigError
from cdc.sink.blackhole import BlackholeSinkURI
from cdc.sink.file.uri import FileProtocol, FileSinkURI
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.sink.registry import parse_sink_uri
from cdc.uri.mysql import SOURCE_PARAMS, MySQLURI, parse_source_uri


def error_of(call, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    return info.value


# --- source URIs -------------------------------------------------------------------------------


def test_source_uri_happy_path() -> None:
    uri = parse_source_uri(
        "mysql://repl:p%40ss%2Fw@db.example.com:3307/?server-id=1001&time-zone=UTC"
        "&heartbeat-interval=1.5&ssl-ca=/etc/tls/ca.pem&ssl-cert=/etc/tls/c.pem"
        "&ssl-key=/etc/tls/k.pem"
    )
    assert (uri.scheme, uri.user, uri.password, uri.host, uri.port) == (
        "mysql",
        "repl",
        "p@ss/w",
        "db.example.com",
        3307,
    )
    assert uri.server_id == 1001
    assert uri.heartbeat_interval == 1.5
    assert uri.time_zone == "UTC"
    assert dict(uri.ssl) == {
        "ca": "/etc/tls/ca.pem",
        "cert": "/etc/tls/c.pem",
        "key": "/etc/tls/k.pem",
    }
    assert uri.field_name == "source-uri"
    assert uri.resolve_password() == "p@ss/w"


def test_source_uri_defaults_and_mariadb_scheme() -> None:
    uri = parse_source_uri("MariaDB://repl@127.0.0.1")
    assert (uri.scheme, uri.password, uri.port, dict(uri.params)) == ("mariadb", "", 3306, {})
    assert uri.server_id is None and uri.heartbeat_interval is None and uri.time_zone is None
    assert str(uri) == "mariadb://repl@127.0.0.1:3306/"


def test_unencoded_at_sign_in_password_still_parses() -> None:
    uri = parse_source_uri("mysql://root:p@ss@h:3306/")
    assert (uri.user, uri.password, uri.host) == ("root", "p@ss", "h")


def test_ipv6_host() -> None:
    uri = parse_source_uri("mysql://u:pw@[::1]:3310/")
    assert (uri.host, uri.port) == ("::1", 3310)
    assert uri.unmasked() == "mysql://u:pw@[::1]:3310/"


@pytest.mark.parametrize(
    "text",
    [
        "mysql://repl:s%20e%3Acret@h:3306/?server-id=7&time-zone=SYSTEM",
        "mysql://repl@h:3306/?password-file=/run/secrets/pw",
        "mariadb://r%40ot:pw@[fe80::1]:1/?time-zone=%2B08:00",
        "mysql://repl:a%2Fb%3Fc%23d@h/",
    ],
)
def test_unmasked_round_trips(text: str) -> None:
    uri = parse_source_uri(text)
    again = parse_source_uri(uri.unmasked())
    assert again == uri
    assert again.password == uri.password


def test_str_and_repr_are_masked() -> None:
    uri = parse_source_uri("mysql://repl:hunter2@h:3306/?server-id=5")
    assert str(uri) == "mysql://repl:******@h:3306/?server-id=5"
    assert "hunter2" not in repr(uri)
    assert "password='******'" in repr(uri)
    assert uri.unmasked() == "mysql://repl:hunter2@h:3306/?server-id=5"
    assert "hunter2" not in repr([uri]) and "hunter2" not in f"{uri}"


def test_uri_is_frozen_and_hashable() -> None:
    uri = parse_source_uri("mysql://repl:pw@h/?server-id=5")
    with pytest.raises(AttributeError):
        uri.host = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        uri.params["server-id"] = "6"  # type: ignore[index]
    assert hash(uri) == hash(parse_source_uri("mysql://repl:pw@h/?server-id=5"))


def test_connection_kwargs() -> None:
    uri = parse_source_uri("mysql://repl:pw@h:3307/?ssl-ca=/ca.pem")
    kwargs = uri.connection_kwargs()
    assert sorted(kwargs.pop("auth_plugin_map")) == [
        "caching_sha2_password",
        "dialog",
        "mysql_clear_password",
        "sha256_password",
    ]
    assert kwargs == {
        "host": "h",
        "port": 3307,
        "user": "repl",
        "password": "pw",
        "ssl": {"ca": "/ca.pem"},
    }


def test_without_password_keeps_references() -> None:
    uri = parse_source_uri("mysql://repl@h/?password-env=PW").without_password()
    assert uri.password_env == "PW"
    stripped = parse_source_uri("mysql://repl:pw@h/").without_password()
    assert stripped.password == "" and stripped.unmasked() == "mysql://repl@h:3306/"


# --- password references ------------------------------------------------------------------------


def test_password_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_TEST_SOURCE_PW", "from-env")
    uri = parse_source_uri("mysql://repl@h/?password-env=CDC_TEST_SOURCE_PW")
    assert uri.password == ""
    assert uri.password_env == "CDC_TEST_SOURCE_PW"
    assert uri.resolve_password() == "from-env"


def test_password_env_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_TEST_MISSING_PW", raising=False)
    uri = parse_source_uri("mysql://repl@h/?password-env=CDC_TEST_MISSING_PW")
    err = error_of(uri.resolve_password)
    assert err.field == "source-uri.password-env"
    assert "CDC_TEST_MISSING_PW is not set" in err.message
    assert "export CDC_TEST_MISSING_PW=" in err.message


def test_password_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    uri = parse_source_uri(f"mysql://repl@h/?password-file={secret}")
    assert uri.resolve_password() == "from-file"


def test_password_file_missing_or_directory(tmp_path: Path) -> None:
    missing = parse_source_uri(f"mysql://repl@h/?password-file={tmp_path}/nope")
    err = error_of(missing.resolve_password)
    assert err.field == "source-uri.password-file"
    assert f"{tmp_path}/nope does not exist" in err.message
    directory = parse_sink_uri(f"mysql://root@h/?password-file={tmp_path}")
    assert isinstance(directory, MySQLSinkURI)
    err = error_of(directory.connection.resolve_password)
    assert err.field == "sink-uri.password-file"
    assert "is a directory" in err.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mysql://r:pw@h/?password-env=PW", "both an inline password and password-env"),
        ("mysql://r@h/?password-env=PW&password-file=/pw", "one way only"),
        ("mysql://r@h/?password-env=1BAD", "not an environment variable name"),
        ("mysql://r@h/?password-file=pw.txt", "not an absolute path"),
    ],
)
def test_password_reference_errors(text: str, message: str) -> None:
    err = error_of(parse_source_uri, text)
    assert err.field.startswith("source-uri")
    assert message in err.message


# --- source URI errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "fragments"),
    [
        ("postgres://u@h/", "source-uri", ["'postgres://'", "mysql://, mariadb://"]),
        ("mysq://u@h/", "source-uri", ["did you mean 'mysql'"]),
        ("127.0.0.1:3306", "source-uri", ["not a URI", "e.g. mysql://"]),
        ("mysql://h:3306/", "source-uri", ["missing user", "percent-encode"]),
        ("mysql://:pw@h/", "source-uri", ["missing user name"]),
        ("mysql://u:pw@/", "source-uri", ["missing host"]),
        ("mysql://u:pw@:3306/", "source-uri", ["missing host"]),
        ("mysql://u:pw@h:abc/", "source-uri", ["port 'abc' is not an integer", "1..65535"]),
        ("mysql://u:pw@h:70000/", "source-uri", ["port 70000 is out of range"]),
        ("mysql://u:pw@h:0/", "source-uri", ["port 0 is out of range"]),
        ("mysql://u:pw@h:/", "source-uri", ["empty port"]),
        ("mysql://u:pw@h!x:1/", "source-uri", ["'h!x' is not a valid host"]),
        ("mysql://u:pw@::1:3306/", "source-uri", ["IPv6 addresses must be written in brackets"]),
        ("mysql://u:pw@[::1:3306/", "source-uri", ["closing ']'"]),
        ("mysql://u:pw@[zz]:3306/", "source-uri", ["not an IPv6 address"]),
        ("mysql://u:pw@h/shop", "source-uri", ["database path ('/shop') is not supported"]),
        ("mysql://u:pw@h/#frag", "source-uri", ["fragments"]),
        ("mysql://u:pw@h/?a b=1", "source-uri", ["whitespace"]),
        (
            "mysql://u:pw@h/?server_id=1",
            "source-uri.server_id",
            ["unknown parameter 'server_id'", "did you mean 'server-id'?", "heartbeat-interval"],
        ),
        (
            "mysql://u:pw@h/?worker-count=1",
            "source-uri.worker-count",
            ["unknown parameter 'worker-count'", "allowed: heartbeat-interval, password-env"],
        ),
        (
            "mysql://u@h/?password=pw",
            "source-uri.password",
            ["unknown parameter 'password'", "a password goes before the host"],
        ),
        ("mysql://u:pw@h/?server-id=1&server-id=2", "source-uri.server-id", ["given twice"]),
        ("mysql://u:pw@h/?server-id", "source-uri.server-id", ["has no value"]),
        ("mysql://u:pw@h/?server-id=", "source-uri.server-id", ["has no value"]),
        ("mysql://u:pw@h/?server-id=abc", "source-uri.server-id", ["'abc' is not an integer"]),
        ("mysql://u:pw@h/?server-id=0", "source-uri.server-id", ["out of range", "4294967295"]),
        ("mysql://u:pw@h/?server-id=4294967296", "source-uri.server-id", ["out of range"]),
        (
            "mysql://u:pw@h/?heartbeat-interval=0",
            "source-uri.heartbeat-interval",
            ["positive number of seconds"],
        ),
        (
            "mysql://u:pw@h/?heartbeat-interval=5s",
            "source-uri.heartbeat-interval",
            ["not a number of seconds", "heartbeat-interval=1.5"],
        ),
        ("mysql://u:pw@h/?time-zone=Mars/Base", "source-uri.time-zone", ["not a known time zone"]),
        ("mysql://u:pw@h/?ssl-ca=ca.pem", "source-uri.ssl-ca", ["not an absolute path"]),
    ],
)
def test_source_uri_errors(text: str, field: str, fragments: list[str]) -> None:
    err = error_of(parse_source_uri, text)
    assert err.field == field
    for fragment in fragments:
        assert fragment in err.message
    assert str(err) == f"{field}: {err.message}"
    assert isinstance(err, ValueError)


def test_source_uri_rejects_non_strings() -> None:
    err = error_of(parse_source_uri, 3306)
    assert "got int" in err.message


@pytest.mark.parametrize("zone", ["SYSTEM", "UTC", "+08:00", "-05:30", "Asia/Shanghai"])
def test_time_zones(zone: str) -> None:
    encoded = zone.replace("+", "%2B")
    assert parse_source_uri(f"mysql://u@h/?time-zone={encoded}").time_zone == zone


def test_mysql_uri_parse_with_own_parameter_set() -> None:
    own = {"server-id": SOURCE_PARAMS["server-id"]}
    uri = MySQLURI.parse("mysql://u@h/?server-id=3", field="x", params=own)
    assert uri.field_name == "x" and uri.server_id == 3
    err = error_of(MySQLURI.parse, "mysql://u@h/?server-id=0", field="x", params=own)
    assert err.field == "x.server-id" and "out of range" in err.message
    err = error_of(MySQLURI.parse, "mysql://u@h/?time-zone=UTC", field="x", params={})
    assert err.field == "x.time-zone"
    assert {"server-id", "password-env", "heartbeat-interval"} <= SOURCE_PARAMS.keys()


# --- sink URIs ----------------------------------------------------------------------------------


def test_mysql_sink_defaults() -> None:
    sink = parse_sink_uri("mysql://root:pw@127.0.0.1:3307/")
    assert isinstance(sink, MySQLSinkURI)
    assert (sink.worker_count, sink.max_txn_row, sink.safe_mode, sink.transaction_atomicity) == (
        1,
        4096,
        True,
        False,
    )
    assert sink.load_data_rows == 256
    assert sink.scheme == "mysql"
    assert sink.masked == "mysql://root:******@127.0.0.1:3307/" == str(sink)
    assert sink.unmasked() == "mysql://root:pw@127.0.0.1:3307/"
    assert sink.connection.field_name == "sink-uri"


def test_mysql_sink_all_parameters() -> None:
    sink = parse_sink_uri(
        "mariadb://root@h/?worker-count=16&max-txn-row=512&safe-mode=false"
        "&transaction-atomicity=TRUE&ssl-ca=/ca.pem&ssl-cert=/c.pem&ssl-key=/k.pem"
        "&password-env=SINK_PW&time-zone=UTC&load-data-rows=2000"
    )
    assert isinstance(sink, MySQLSinkURI)
    assert sink.scheme == "mariadb"
    assert (sink.worker_count, sink.max_txn_row, sink.safe_mode, sink.transaction_atomicity) == (
        16,
        512,
        False,
        True,
    )
    assert sink.load_data_rows == 2000
    assert sink.connection.password_env == "SINK_PW"
    assert parse_sink_uri(sink.unmasked()) == sink
    assert sink.describe()["worker-count"] == 16
    assert sink.describe()["load-data-rows"] == 2000
    never = parse_sink_uri("mysql://root@h/?load-data-rows=0")
    assert isinstance(never, MySQLSinkURI) and never.load_data_rows == 0


def test_sink_defaults_fill_missing_parameters_only() -> None:
    sink = parse_sink_uri("mysql://root@h/?worker-count=4", defaults={"worker-count": "32"})
    assert isinstance(sink, MySQLSinkURI) and sink.worker_count == 4
    sink = parse_sink_uri("mysql://root@h/", defaults={"worker-count": "32"})
    assert isinstance(sink, MySQLSinkURI) and sink.worker_count == 32
    assert "worker-count=32" in sink.unmasked()
    file_sink = parse_sink_uri("file:///out", defaults={"protocol": "csv"})
    assert isinstance(file_sink, FileSinkURI) and file_sink.protocol is FileProtocol.CSV


def test_sink_defaults_errors_name_the_sink_table() -> None:
    err = error_of(parse_sink_uri, "mysql://root@h/", defaults={"protocol": "csv"})
    assert err.field == "sink.protocol"
    assert "applies to file://, kafka:// sinks" in err.message and "mysql://" in err.message
    err = error_of(parse_sink_uri, "mysql://root@h/", defaults={"worker-count": "0"})
    assert err.field == "sink.worker-count"
    assert "out of range; allowed 1..1024" in err.message


def test_file_sink() -> None:
    sink = parse_sink_uri(
        "file:///var/lib/cdc/my%20out?protocol=csv&file-size=1GB&flush-interval=1m30s"
    )
    assert isinstance(sink, FileSinkURI)
    assert sink.path == "/var/lib/cdc/my out"
    assert sink.protocol is FileProtocol.CSV
    assert sink.file_size == 10**9
    assert sink.flush_interval == 90.0
    assert sink.scheme == "file"
    assert parse_sink_uri(sink.unmasked()) == sink
    assert sink.describe()["protocol"] == "csv"


def test_file_sink_defaults() -> None:
    sink = parse_sink_uri("file:///tmp/out")
    assert isinstance(sink, FileSinkURI)
    assert (sink.protocol, sink.file_size, sink.flush_interval) == (
        FileProtocol.CANAL_JSON,
        64 * 1024**2,
        5.0,
    )
    assert sink.masked == "file:///tmp/out"


@pytest.mark.parametrize(
    ("text", "sink_type", "scheme"),
    [
        ("blackhole://", BlackholeSinkURI, "blackhole"),
        ("blackhole:///", BlackholeSinkURI, "blackhole"),
    ],
)
def test_blackhole(text: str, sink_type: type, scheme: str) -> None:
    sink = parse_sink_uri(text)
    assert isinstance(sink, sink_type)
    assert sink.scheme == scheme
    assert sink.masked == f"{scheme}://" == sink.unmasked() == str(sink)
    assert sink.describe() == {"kind": scheme, "uri": f"{scheme}://"}


@pytest.mark.parametrize(
    ("text", "field", "fragments"),
    [
        (
            "pulsar://broker:6650/t",
            "sink-uri",
            [
                "unsupported scheme 'pulsar://'",
                "mysql://, mariadb://, file://, kafka://, blackhole://, pull://, e.g.",
            ],
        ),
        ("blakhole://", "sink-uri", ["did you mean 'blackhole'?"]),
        ("mysql://root@h:99999/", "sink-uri", ["port 99999 is out of range"]),
        (
            "mysql://root@h/?workers=4",
            "sink-uri.workers",
            ["unknown parameter 'workers'", "did you mean 'worker-count'?"],
        ),
        (
            "mysql://root@h/?server-id=4",
            "sink-uri.server-id",
            ["unknown parameter 'server-id'", "allowed: load-data-rows, max-txn-row"],
        ),
        ("mysql://root@h/?worker-count=0", "sink-uri.worker-count", ["allowed 1..1024"]),
        ("mysql://root@h/?worker-count=2000", "sink-uri.worker-count", ["allowed 1..1024"]),
        ("mysql://root@h/?worker-count=many", "sink-uri.worker-count", ["not an integer"]),
        ("mysql://root@h/?max-txn-row=0", "sink-uri.max-txn-row", ["out of range"]),
        (
            "mysql://root@h/?load-data-rows=-1",
            "sink-uri.load-data-rows",
            ["out of range", "allowed 0..1000000", "0: never LOAD DATA"],
        ),
        ("mysql://root@h/?load-data-rows=lots", "sink-uri.load-data-rows", ["not an integer"]),
        (
            "mysql://root@h/?safe-mode=maybe",
            "sink-uri.safe-mode",
            ["not a boolean", "true or false"],
        ),
        (
            "mysql://root@h/?transaction-atomicity=yes!",
            "sink-uri.transaction-atomicity",
            ["not a boolean"],
        ),
        ("file://relative/path", "sink-uri", ["absolute path", "'relative'", "file:///"]),
        ("file://", "sink-uri", ["absolute path"]),
        (
            "file:///out?protocol=avro",
            "sink-uri.protocol",
            ["unknown protocol 'avro'", "supported: canal-json, csv, e.g."],
        ),
        (
            "file:///out?protocol=parquet",
            "sink-uri.protocol",
            ["does not write protocol=parquet yet", "supported: canal-json, csv"],
        ),
        ("file:///out?protocol=cvs", "sink-uri.protocol", ["did you mean 'csv'?"]),
        ("file:///out?file-size=big", "sink-uri.file-size", ["not a size", "64MiB"]),
        ("file:///out?file-size=10", "sink-uri.file-size", ["too small"]),
        ("file:///out?flush-interval=5", "sink-uri.flush-interval", ["add a unit"]),
        ("file:///out?flush-interval=0s", "sink-uri.flush-interval", ["longer than zero"]),
        ("file:///out?worker-count=3", "sink-uri.worker-count", ["unknown parameter"]),
        ("blackhole://host", "sink-uri", ["takes no host, path or parameters"]),
        ("PULL://?name=x", "sink-uri.name", ["unknown parameter 'name'"]),
        ("pull://host", "sink-uri", ["pull:// takes no host, path or parameters"]),
    ],
)
def test_sink_uri_errors(text: str, field: str, fragments: list[str]) -> None:
    err = error_of(parse_sink_uri, text)
    assert err.field == field
    for fragment in fragments:
        assert fragment in err.message


def test_sink_error_uses_given_field_name() -> None:
    err = error_of(parse_sink_uri, "mysql://root@h/?workers=4", field="--sink-uri")
    assert err.field == "--sink-uri.workers"
