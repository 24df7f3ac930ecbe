"""Per-table checkpoints in etcd: the position each table's sink has durably written.

Written by the processor that runs the table (`table-checkpoint/<cf>/<table>`);
the changefeed checkpoint is their minimum (the owner persists it). Values
carry the format version (`cdc.store.codec`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.store import EtcdStore, Put
from cdc.store.keys import TableCheckpointKey

_BATCH = 64


class TableCheckpoints:
    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.changefeed_id = changefeed_id

    def save(self, tables: Iterable[TableName], position: Position) -> None:
        """Records `position` for every table, 64 keys per etcd transaction."""
        value = {"checkpoint": position.to_dict(), "updated_at": time.time()}
        keys = [str(self.store.keys.table_checkpoint(self.changefeed_id, str(t))) for t in tables]
        for first in range(0, len(keys), _BATCH):
            self.store.txn([], [Put(k, value) for k in keys[first : first + _BATCH]])

    def load(self) -> dict[str, Position]:
        prefix = self.store.keys.prefix_of(TableCheckpointKey, self.changefeed_id)
        out = {}
        for item in self.store.get_prefix(prefix):
            key = self.store.keys.parse(item.key)
            if isinstance(key, TableCheckpointKey):
                out[key.table] = Position.from_dict(item.json()["checkpoint"])
        return out

    def changefeed_checkpoint(self) -> Position | None:
        """The minimum over the tables: every change up to here is durably in the sink."""
        positions = list(self.load().values())
        return min(positions) if positions else None
