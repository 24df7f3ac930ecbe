"""Canonical values through the server and back, and the example consumer script."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from subscription_helpers import CHANGEFEED, Served, drain, feed, pos, transactions

from cdc.model import DdlEvent, DdlKind, GtidSet, Op, Position, RowChange, TableName
from cdc.typeconv import RawDate, RawDateTime

SHOP = TableName("shop", "everything")
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "subscribe.py"

ROW = {
    "null": None,
    "tiny": -128,
    "ubig": 18446744073709551615,
    "big": -(2**63),
    "dec": Decimal("-12.50"),
    "dec_big": Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
    "float": 0.10000000149011612,
    "double": 0.1,
    "inf": math.inf,
    "text": "é€😀",
    "enum": "",
    "json": '{"a":  [1,2.5]}',
    "binary": b"ab\x00\x00",
    "blob": bytes(range(256)),
    "date": date(2024, 5, 31),
    "zero_date": RawDate(0, 0, 0),
    "datetime": datetime(2024, 5, 31, 1, 2, 3, 500000),
    "zero_datetime": RawDateTime(2024, 0, 15, 10, 0, 0, 1),
    "timestamp": datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
    "zero_timestamp": RawDateTime(0, 0, 0),
    "time": -timedelta(hours=838, minutes=59, seconds=59),
    "time_fsp": timedelta(hours=1, microseconds=5),
    "year": 2155,
    "set": frozenset({"x", "z"}),
    "empty_set": frozenset(),
    "bit": 4095,
}


def test_every_canonical_value_survives_the_server(served: Served) -> None:
    sink = served.open_sink()
    client = served.client("values", ["shop.*"])
    client.subscribe()
    gtid = GtidSet.parse("0-1-100,1-2-5")
    before = {**ROW, "text": "old"}
    sent = [
        RowChange(SHOP, Op.UPDATE, before, ROW, (ROW["ubig"], "k"), Position("b.000001", 4, gtid)),
        RowChange(SHOP, Op.DELETE, ROW, None, (1,), Position("b.000001", 9, gtid), "0-1-101", 7),
        DdlEvent(Position("b.000002", 4), "", (), DdlKind.CREATE_SCHEMA, "CREATE DATABASE shop"),
    ]
    sink.write_rows(sent[:2])
    sink.apply_ddl(sent[2])
    got = drain(client, 3)
    assert got == sent
    for mine, theirs in zip(sent[:2], got[:2], strict=True):
        image = theirs.after if theirs.after is not None else theirs.before
        assert {name: type(value) for name, value in image.items()} == {
            name: type(value) for name, value in ROW.items()
        }
        assert str(image["dec"]) == "-12.50"
        assert mine.position.to_dict() == theirs.position.to_dict()


def run_example(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), served.target, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_example_prints_json_lines_and_acks_what_it_printed(served: Served) -> None:
    sink = served.open_sink()
    txns = transactions([SHOP, TableName("crm", "x")], 12, rows=1)
    served.client("example", ["shop.*"]).subscribe()
    feed(sink, txns)
    first = run_example(served, CHANGEFEED, "example", "--limit", "3", "--batch", "3")
    assert first.returncode == 0, first.stderr
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert [line["position"] for line in lines] == [
        "binlog.000001:100",
        "binlog.000001:120",
        "binlog.000001:140",
    ]
    assert lines[0] == {
        "position": "binlog.000001:100",
        "table": "shop.everything",
        "op": "c",
        "key": [0, 0],
        "before": None,
        "after": {"id": 0, "row": 0},
        "txn_id": "t0",
    }
    assert "acked up to nothing yet" in first.stderr
    assert sink.acked("example") == pos(150), "the crm change at 150 is not for this client"
    second = run_example(served, CHANGEFEED, "example", "--limit", "3", "--batch", "10")
    assert second.returncode == 0, second.stderr
    rest = [json.loads(line) for line in second.stdout.splitlines()]
    assert [line["position"] for line in rest] == [
        "binlog.000001:160",
        "binlog.000001:180",
        "binlog.000001:200",
    ]
    assert rest[0]["ddl"] == "add column" and rest[0]["tables"] == ["shop.everything"]
    assert "rules ['shop.*']" in second.stderr


def test_example_reports_refusals(served: Served) -> None:
    served.open_sink()
    bad = run_example(served, CHANGEFEED, "new-client", "--rule", "shop", "--limit", "1")
    assert bad.returncode == 1
    assert "INVALID_ARGUMENT: filter_rules[0]: invalid table filter rule 'shop'" in bad.stderr
    missing = run_example(served, "no-such-feed", "c1", "--rule", "a.*", "--once")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
    assert run_example(served, CHANGEFEED, "c1", "--batch", "0").returncode == 2
