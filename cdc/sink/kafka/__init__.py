"""The Kafka sink (``kafka://host:port/topic?protocol=canal-json|debezium``), docs/kafka.md.

``uri`` (parameters), ``dispatch`` (topics and partitions), ``codec`` with
``canal`` and ``debezium`` (message formats), ``fragments`` (messages larger
than ``max-message-bytes``), ``producer`` (librdkafka, acknowledgements),
``sink`` (the ``Sink``), ``watermarks`` (the owner's checkpoint messages),
``kind`` (the seam), and ``consumer`` (reads the topics back into MySQL in
order: the proof that what the sink writes is enough).
"""
