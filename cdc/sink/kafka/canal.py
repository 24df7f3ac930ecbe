"""canal-json on Kafka: the file sink's canal-json messages, one per Kafka message.

Rows and DDL are exactly what ``cdc.sink.file.canal_json`` writes to files
(without the line's newline), so one reader understands both. A watermark
follows TiCDC's canal-json WATERMARK message, with our position in place of
TiDB's timestamp::

    {"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"WATERMARK",
     "es":1717000000000,"ts":1717000000000,"sql":"","sqlType":null,"mysqlType":null,
     "data":null,"old":null,"_position":{"v":1,"file":"binlog.000003","offset":1234,...}}

A row message's Kafka key is ``{"<key column>":"<text>",...}``; DDL and
watermark messages have none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.sink.file.canal_json import CanalJsonCodec, encode_ddl
from cdc.sink.kafka.codec import KafkaCodec, TableEncoder

__all__ = ["WATERMARK_TYPE", "CanalJson"]

#: The ``type`` of a watermark message.
WATERMARK_TYPE = "WATERMARK"

_FILE_CODEC = CanalJsonCodec()


class _CanalTable(TableEncoder):
    def __init__(self, schema: TableSchema) -> None:
        super().__init__(schema)
        self._line = _FILE_CODEC.encoder(schema)

    def value(self, change: RowChange, now_ms: int) -> bytes:
        return self._line(change, now_ms)[:-1]

    def key(self, key_json: bytes, image: Mapping[str, Any]) -> bytes:
        return key_json


class CanalJson(KafkaCodec):
    """canal-json messages (see the module docstring)."""

    def table(self, schema: TableSchema) -> TableEncoder:
        return _CanalTable(schema)

    def ddl(self, ddl: DdlEvent, now_ms: int) -> bytes:
        return encode_ddl(ddl, now_ms)[:-1]

    def watermark(self, position: Position, now_ms: int) -> bytes:
        message = {
            "id": 0,
            "database": "",
            "table": "",
            "pkNames": None,
            "isDdl": False,
            "type": WATERMARK_TYPE,
            "es": now_ms,
            "ts": now_ms,
            "sql": "",
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_position": position.to_dict(),
        }
        return json.dumps(message, separators=(",", ":")).encode("utf-8")
