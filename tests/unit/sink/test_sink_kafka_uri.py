"""The Kafka sink URI and its dispatchers: what parses, and what each bad input says."""

from __future__ import annotations

import pytest

from cdc.config import load_changefeed_config
from cdc.errors import ConfigError
from cdc.model.schema import TableName
from cdc.sink.kafka.dispatch import Dispatcher, PartitionBy, key_partition, table_partition
from cdc.sink.kafka.uri import KafkaProtocol, KafkaSinkURI
from cdc.sink.registry import parse_sink_uri


def kafka(text: str, **defaults: str) -> KafkaSinkURI:
    uri = parse_sink_uri(text, defaults=defaults)
    assert isinstance(uri, KafkaSinkURI)
    return uri


def test_everything_given() -> None:
    uri = kafka(
        "kafka://k1:9093,k2,[::1]:9094/cdc.events?protocol=debezium&partition-num=6"
        "&max-message-bytes=2MiB&replication-factor=3"
    )
    assert uri.brokers == ("k1:9093", "k2:9092", "[::1]:9094")
    assert uri.topic == "cdc.events"
    assert uri.protocol is KafkaProtocol.DEBEZIUM
    assert (uri.partition_num, uri.max_message_bytes, uri.replication_factor) == (6, 2 << 20, 3)
    assert parse_sink_uri(uri.unmasked()) == uri
    assert uri.describe()["replication-factor"] == 3


def test_defaults() -> None:
    uri = kafka("kafka://127.0.0.1:9092/t")
    assert uri.protocol is KafkaProtocol.CANAL_JSON
    assert (uri.partition_num, uri.max_message_bytes, uri.replication_factor) == (3, 1 << 20, None)
    assert uri.dispatchers == ()


@pytest.mark.parametrize(
    ("text", "field", "fragments"),
    [
        ("kafka://h:9092/", "sink-uri", ["no topic given", "the path is the default topic"]),
        ("kafka://h:9092", "sink-uri", ["no topic given"]),
        ("kafka:///t", "sink-uri", ["no broker given"]),
        ("kafka://h:99999/t", "sink-uri", ["99999 is out of range"]),
        ("kafka://h:x/t", "sink-uri", ["'x' is not an integer"]),
        ("kafka://h_1:9092/t", "sink-uri", ["'h_1:9092' is not a broker host[:port]"]),
        ("kafka://u:secret@h:9092/t", "sink-uri", ["SASL is not supported yet"]),
        ("kafka://h:9092/a%20b", "sink-uri", ["is not a Kafka topic name"]),
        ("kafka://h:9092/..", "sink-uri", ["is not a Kafka topic name"]),
        (
            "kafka://h:9092/t?protocol=avro",
            "sink-uri.protocol",
            ["protocol=avro is not supported", "schema registry", "canal-json, debezium"],
        ),
        (
            "kafka://h:9092/t?protocol=open-protocol",
            "sink-uri.protocol",
            ["protocol=open-protocol is not supported", "TiCDC's own format"],
        ),
        (
            "kafka://h:9092/t?protocol=canal_json",
            "sink-uri.protocol",
            ["unknown protocol 'canal_json'", "did you mean 'canal-json'?"],
        ),
        ("kafka://h:9092/t?partition-num=0", "sink-uri.partition-num", ["allowed 1..10000"]),
        ("kafka://h:9092/t?max-message-bytes=1KiB", "sink-uri.max-message-bytes", ["4KiB"]),
        ("kafka://h:9092/t?max-message-bytes=lots", "sink-uri.max-message-bytes", ["not a size"]),
        (
            "kafka://h:9092/t?partitions=3",
            "sink-uri.partitions",
            ["unknown parameter 'partitions'", "did you mean 'partition-num'?"],
        ),
        ("kafka://h:9092/t?dispatchers=[x", "sink-uri.dispatchers", ["not a JSON array"]),
    ],
)
def test_bad_uris_say_what_to_write(text: str, field: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sink_uri(text)
    assert info.value.field == field
    for fragment in fragments:
        assert fragment in info.value.message
    assert "secret" not in str(info.value)


CONFIG = """
changefeed-id = "k"
source-uri = "mysql://root@127.0.0.1:3306/"
sink-uri = "kafka://127.0.0.1:9092/cdc-default"
[sink]
protocol = "debezium"
dispatchers = [
  {{ matcher = ["shop.orders"], topic = "{{schema}}_{{table}}" }},
  {{ matcher = ["shop.*"], partition = "table" }},
  {dispatcher}
]
"""


def load(tmp_path: object, dispatcher: str = "") -> KafkaSinkURI:
    path = tmp_path / "cf.toml"  # type: ignore[operator]
    path.write_text(CONFIG.format(dispatcher=dispatcher))
    uri = load_changefeed_config(path).sink_uri
    assert isinstance(uri, KafkaSinkURI)
    return uri


def test_dispatchers_from_the_changefeed_file_travel_in_the_uri(tmp_path: object) -> None:
    uri = load(tmp_path)
    assert uri.protocol is KafkaProtocol.DEBEZIUM
    assert parse_sink_uri(uri.unmasked()) == uri
    dispatcher = Dispatcher(uri.topic, uri.dispatchers)
    assert dispatcher.route(TableName("shop", "orders")) == ("shop_orders", PartitionBy.KEY)
    assert dispatcher.route(TableName("shop", "items")) == ("cdc-default", PartitionBy.TABLE)
    assert dispatcher.route(TableName("crm", "users")) == ("cdc-default", PartitionBy.KEY)
    assert dispatcher.route(TableName("SHOP", "Orders"))[0] == "SHOP_Orders"


@pytest.mark.parametrize(
    ("rule", "field", "fragment"),
    [
        ('{ matcher = ["a.*"], partition = "ts" }', "partition", "spreads one row's changes"),
        ('{ matcher = ["a.*"], partition = "columns" }', "partition", "is refused"),
        ('{ matcher = ["a.*"], partition = "hash" }', "partition", "unknown partition 'hash'"),
        ('{ matcher = ["a.*"], topic = "a b" }', "topic", "is not a topic expression"),
        ('{ matcher = ["a.*"], topic = "{db}" }', "topic", "is not a topic expression"),
        ("{ matcher = [] }", "matcher", "non-empty array"),
        ('{ matcher = ["a.b.c"] }', "matcher[0]", "invalid table filter rule"),
        ('{ matcher = ["a.*"], topics = "x" }', "topics", "unknown key 'topics'"),
    ],
)
def test_bad_dispatchers_name_the_rule(
    tmp_path: object, rule: str, field: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, rule)
    assert info.value.field == f"sink.dispatchers[2].{field}"
    assert fragment in info.value.message


def test_odd_names_become_valid_topics() -> None:
    rules = kafka('kafka://h/d?dispatchers=[{"matcher":["*.*"],"topic":"cdc-{schema}.{table}"}]')
    dispatcher = Dispatcher(rules.topic, rules.dispatchers)
    assert dispatcher.topic(TableName("shop eu", "örders`x")) == "cdc-shop_eu._rders_x"


def test_partitions_depend_only_on_table_and_key_text() -> None:
    table = TableName("shop", "orders")
    spread = {key_partition(table, b'{"id":"%d"}' % i, 3) for i in range(100)}
    assert spread == {0, 1, 2}
    key = b'{"id":"7"}'
    assert key_partition(table, key, 3) == key_partition(TableName("shop", "orders"), key, 3)
    others = {key_partition(TableName("shop", f"t{i}"), key, 3) for i in range(30)}
    assert others == {0, 1, 2}, "the table seeds the hash"
    assert table_partition(table, 3) == table_partition(table, 3)
