"""The fence tokens of snapshot chunk writes, against a real etcd (cdc.sink.mysql.chunkfence).

A token is the etcd revision at which a capture proved it holds the chunks: its share
still as it took it, or its table's task still naming it. Whoever takes them over
proves it later, with a larger token; the capture that lost them proves nothing more.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdc.changefeed import TableTask
from cdc.changefeed.snapshot_shares import ShareBook
from cdc.model import Column, TableName, TableSchema
from cdc.store import EtcdStore
from processor.table_records import RecordWriter, TableLost, TaskGuard

pytestmark = pytest.mark.integration

CF = "fence-tokens"
TABLE = TableName("db", "t")
SCHEMA = TableSchema(TABLE, (Column("id", "int", "int(11)", nullable=False),), ("id",))


def test_a_share_taken_over_is_proved_later_and_no_longer_by_its_old_capture(
    store: EtcdStore,
) -> None:
    book = ShareBook(store, CF)
    book.publish(TABLE, SCHEMA, 40)
    first = book.held(TABLE)[0]
    assert book.swap(first, replace(first.share, capture="c1"))
    mine = book.held(TABLE)[0]
    token = book.proof(mine)
    assert token is not None and token >= mine.revision
    assert book.proof(mine) == store.revision()  # proved now, not when taken

    assert book.swap(mine, replace(mine.share, capture="c2"))
    assert book.proof(mine) is None
    theirs = book.held(TABLE)[0]
    later = book.proof(theirs)
    assert later is not None and later > token


def test_a_table_moved_is_proved_later_and_no_longer_by_its_old_capture(
    store: EtcdStore,
) -> None:
    key = store.keys.task(CF, str(TABLE))
    store.put(key, TableTask("c1").to_dict())
    item = store.get(key)
    assert item is not None
    old = RecordWriter(store, CF, str(TABLE), "c1", TaskGuard(item.mod_revision))
    token = old.proof()
    assert token is not None and token >= item.mod_revision

    store.put(key, TableTask("c2").to_dict())
    moved = store.get(key)
    assert moved is not None
    with pytest.raises(TableLost, match="names another capture"):
        old.proof()
    new = RecordWriter(store, CF, str(TABLE), "c2", TaskGuard(moved.mod_revision))
    later = new.proof()
    assert later is not None and later > token
