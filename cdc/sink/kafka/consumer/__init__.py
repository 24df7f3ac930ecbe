"""Reads the Kafka sink's canal-json topics into a MySQL/MariaDB database, in order.

``events`` decodes messages, ``merge`` merges partitions by watermark (what
may be applied, in which order), ``apply`` writes whole watermark steps in
single transactions, ``runner`` is the loop (``examples/kafka_consumer.py``
runs it from the command line). The shape is TiCDC's kafka-consumer.
"""

from cdc.sink.kafka.consumer.runner import ConsumerConfig, ConsumerStats, KafkaChangeConsumer

__all__ = ["ConsumerConfig", "ConsumerStats", "KafkaChangeConsumer"]
