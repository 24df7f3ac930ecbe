"""Kafka sink URIs that could never work, refused by ``cdcctl changefeed create`` (issue 17).

Each gives exit 2 and one line naming the field and what to write instead,
and nothing is created: a malformed URI, a password in it, an unknown or
unsupported protocol, a bad dispatcher, brokers that do not answer, and a
topic whose partition count disagrees with ``partition-num``. docs/bad-input.md
lists them.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from badinput_helpers import Cli
from confluent_kafka.admin import AdminClient, NewTopic
from testkit import execute

from cdc.playground.kafka import KafkaBroker
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never")


def refused(result: object, *words: str) -> None:
    code, out, err = result.code, result.out, result.err  # type: ignore[attr-defined]
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and err.startswith("cdcctl: error: "), err
    assert err.count("\n") == 1, err
    for word in words:
        assert word in err, (word, err)


@pytest.fixture
def table(source_db: MariaDBServer, db: str) -> str:
    execute(source_db, f"CREATE TABLE `{db}`.items (id INT PRIMARY KEY, v INT)")
    return f"{db}.items"


def test_malformed_kafka_uris(cli: Cli, server: object, source_uri: str, table: str) -> None:
    rule = ("--filter-rule", table, *NEVER)
    for sink_uri, words in [
        ("kafka://127.0.0.1:9092", ("sink-uri: no topic given", "e.g. kafka://")),
        ("kafka:///cdc", ("sink-uri: no broker given",)),
        ("kafka://127.0.0.1:90921/cdc", ("sink-uri: 90921 is out of range",)),
        ("kafka://u:hunter2@127.0.0.1:9092/cdc", ("SASL is not supported yet",)),
        ("kafka://127.0.0.1:9092/a$b", ("'a$b' is not a Kafka topic name",)),
        (
            "kafka://127.0.0.1:9092/cdc?protocol=protobuf",
            ("sink-uri.protocol: unknown protocol 'protobuf'", "canal-json, debezium"),
        ),
        (
            "kafka://127.0.0.1:9092/cdc?protocol=avro",
            ("protocol=avro is not supported", "schema registry"),
        ),
        (
            "kafka://127.0.0.1:9092/cdc?partition-num=0",
            ("sink-uri.partition-num: 0 is out of range",),
        ),
        (
            "kafka://127.0.0.1:9092/cdc?max-message-bytes=100",
            ("sink-uri.max-message-bytes", "between 4KiB and 1GB"),
        ),
    ]:
        result = cli.create("cf", source_uri, sink_uri, *rule)
        refused(result, *words)
        assert "hunter2" not in result.err
    assert cli.list_ids() == []


def test_a_bad_dispatcher_in_the_config_file(
    cli: Cli, server: object, source_uri: str, table: str, tmp_path: Path
) -> None:
    config = tmp_path / "cf.toml"
    config.write_text('[sink]\ndispatchers = [{ matcher = ["*.*"], partition = "ts" }]\n')
    result = cli.create(
        "cf",
        source_uri,
        "kafka://127.0.0.1:9092/cdc",
        "--config",
        str(config),
        "--filter-rule",
        table,
        *NEVER,
    )
    refused(result, "sink.dispatchers[0].partition", "spreads one row's changes", "index-value")


def test_brokers_that_do_not_answer(cli: Cli, server: object, source_uri: str, table: str) -> None:
    port = free_port()
    result = cli.create(
        "cf", source_uri, f"kafka://127.0.0.1:{port}/cdc", "--filter-rule", table, *NEVER
    )
    refused(result, f"cannot reach the Kafka brokers 127.0.0.1:{port}", "check that they run")
    assert cli.list_ids() == []


def test_a_topic_with_other_partitions(
    cli: Cli, server: object, source_uri: str, table: str, kafka_broker: KafkaBroker
) -> None:
    topic = f"six-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result()
    result = cli.create(
        "cf",
        source_uri,
        f"kafka://{kafka_broker.bootstrap}/{topic}?partition-num=3",
        "--filter-rule",
        table,
        *NEVER,
    )
    refused(result, "has 6 partitions but partition-num is 3", "set partition-num=6")
    assert cli.list_ids() == []
