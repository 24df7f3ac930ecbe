"""Apply a Kafka sink's canal-json topics to a MySQL/MariaDB database, in order.

    python examples/kafka_consumer.py --bootstrap 127.0.0.1:9092 --topic cdc-events \\
        --target-uri 'mysql://root@127.0.0.1:3317/?password-env=TARGET_PW' [--group shop-dw]

Reads every partition of the topics, buffers rows per partition, and applies
everything at or below the lowest watermark over all partitions in one
transaction (DDL in between, in binlog order): the shape of TiCDC's
kafka-consumer (``cdc.sink.kafka.consumer``, docs/kafka.md). The target's
tables must exist (create them from the source's definitions first); tables
created later by DDL arrive as DDL. Progress is kept in the target
(``_cdc_consumer.progress``, one row per ``--group``), so stopping at any
point and starting again with the same group applies nothing twice.

Prints one JSON line of progress every ``--report`` seconds. Exit codes: 0
interrupted, 1 the target or a message refused (the message says which), 2
bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import KafkaException

from cdc.errors import ConfigError
from cdc.logs import setup_logging
from cdc.sink.kafka.consumer import ConsumerConfig, KafkaChangeConsumer
from cdc.sink.kafka.consumer.apply import ApplyError
from cdc.sink.kafka.consumer.events import MessageError
from cdc.source.flavor import SourceError
from cdc.uri.mysql import parse_source_uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port] of the brokers")
    parser.add_argument("--topic", action="append", required=True, help="a topic (repeatable)")
    parser.add_argument("--target-uri", required=True, help="mysql://user@host:port/ to apply to")
    parser.add_argument("--group", default="cdc-kafka-consumer", help="offsets and progress name")
    parser.add_argument("--report", type=float, default=5.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    setup_logging("WARNING")
    try:
        target = parse_source_uri(args.target_uri, field="--target-uri")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = ConsumerConfig(args.bootstrap, tuple(args.topic), target, group=args.group)
    try:
        consumer = KafkaChangeConsumer(config)
    except (KafkaException, SourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    last = time.monotonic()
    try:
        while True:
            consumer.poll_once()
            if time.monotonic() - last >= args.report:
                last = time.monotonic()
                stats = consumer.stats
                line = {
                    "applied": str(stats.applied) if stats.applied else None,
                    "rows": stats.rows,
                    "ddl": stats.ddls,
                    "messages": stats.messages,
                    "buffered": consumer.merger.buffered,
                }
                print(json.dumps(line), flush=True)
    except KeyboardInterrupt:
        return 0
    except (ApplyError, MessageError, KafkaException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
