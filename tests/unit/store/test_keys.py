"""The etcd key layout: every kind round-trips, bad names and foreign keys are refused."""

from __future__ import annotations

import pytest

from cdc.store.keys import (
    KINDS,
    BarrierKey,
    CaptureKey,
    ChangefeedHistoryKey,
    ChangefeedInfoKey,
    ChangefeedStatusKey,
    InvalidKeyError,
    Key,
    KeySpace,
    OwnerKey,
    SnapshotChunkKey,
    SnapshotPlanKey,
    SnapshotRequestKey,
    SnapshotShareKey,
    StreamProgressKey,
    SubscriptionDdlKey,
    SubscriptionKey,
    TableCheckpointKey,
    TaskKey,
    chunk_id,
    cluster_prefix,
    normalize_prefix,
    parse_chunk_id,
    parse_key,
    prefix_of,
    split_table,
    table_name,
)

P = "/cdc/default"

ROUND_TRIP: list[tuple[Key, str]] = [
    (OwnerKey(P), "/cdc/default/owner"),
    (CaptureKey(P, "capture-1"), "/cdc/default/capture/capture-1"),
    (ChangefeedInfoKey(P, "cf-1"), "/cdc/default/changefeed/info/cf-1"),
    (ChangefeedStatusKey(P, "cf-1"), "/cdc/default/changefeed/status/cf-1"),
    (ChangefeedHistoryKey(P, "cf-1"), "/cdc/default/changefeed/history/cf-1"),
    (TaskKey(P, "cf-1", "shop.orders"), "/cdc/default/task/cf-1/shop.orders"),
    (
        TableCheckpointKey(P, "cf-1", "shop.orders"),
        "/cdc/default/table-checkpoint/cf-1/shop.orders",
    ),
    (
        StreamProgressKey(P, "cf-1", "capture-1", "a1b2c3d4.2"),
        "/cdc/default/stream-progress/cf-1/capture-1/a1b2c3d4.2",
    ),
    (SnapshotChunkKey(P, "cf-1", "shop.orders", 0), "/cdc/default/snapshot/cf-1/shop.orders/0"),
    (SnapshotChunkKey(P, "cf-1", "shop.orders", 17), "/cdc/default/snapshot/cf-1/shop.orders/17"),
    (SnapshotPlanKey(P, "cf-1", "shop.orders"), "/cdc/default/snapshot-plan/cf-1/shop.orders"),
    (
        SnapshotRequestKey(P, "cf-1", "shop.orders"),
        "/cdc/default/snapshot-request/cf-1/shop.orders",
    ),
    (
        SnapshotShareKey(P, "cf-1", "shop.orders", 4),
        "/cdc/default/snapshot-share/cf-1/shop.orders/4",
    ),
    (BarrierKey(P, "cf-1"), "/cdc/default/barrier/cf-1"),
    (SubscriptionKey(P, "cf-1", "client-a"), "/cdc/default/subscription/cf-1/client-a"),
    (SubscriptionDdlKey(P, "cf-1"), "/cdc/default/subscription-ddl/cf-1"),
    # Names with dots, colons, backticks and non-ASCII survive (dotted parts quoted).
    (TaskKey("/a/b", "cf.v2", "db.`tab.le`"), "/a/b/task/cf.v2/db.`tab.le`"),
    (
        TableCheckpointKey("/a", "cf", "`shop-eu.v2`.`it's a.table`"),
        "/a/table-checkpoint/cf/`shop-eu.v2`.`it's a.table`",
    ),
    (SnapshotChunkKey("/a", "cf", "`a``b`.表 x", 3), "/a/snapshot/cf/`a``b`.表 x/3"),
    (CaptureKey("/x", "h:8300"), "/x/capture/h:8300"),
    (ChangefeedInfoKey("/x", "flux-ä"), "/x/changefeed/info/flux-ä"),
]


@pytest.mark.parametrize(("key", "text"), ROUND_TRIP, ids=lambda v: str(v))
def test_key_round_trips(key: Key, text: str) -> None:
    assert str(key) == text
    prefix = text[: text.index("/" + key.kind)]
    assert type(key).parse(text, prefix) == key
    assert parse_key(text, prefix) == key


def test_every_kind_is_in_the_round_trip_table() -> None:
    assert {type(key) for key, _ in ROUND_TRIP} == set(KINDS)


def test_kinds_do_not_parse_each_others_keys() -> None:
    for key, text in ROUND_TRIP[:10]:
        for kind in KINDS:
            if kind is type(key):
                continue
            with pytest.raises(InvalidKeyError):
                kind.parse(text, key.prefix)


def test_prefix_is_normalized() -> None:
    assert CaptureKey("/cdc-test-ab12/", "c") == CaptureKey("/cdc-test-ab12", "c")
    assert str(CaptureKey("/cdc-test-ab12/", "c")) == "/cdc-test-ab12/capture/c"
    assert normalize_prefix("/cdc/x///") == "/cdc/x"
    assert cluster_prefix() == "/cdc/default"
    assert cluster_prefix("prod") == "/cdc/prod"


@pytest.mark.parametrize("prefix", ["", "/", "cdc/x", "/cdc//x", "relative"])
def test_bad_prefix(prefix: str) -> None:
    with pytest.raises(InvalidKeyError, match="prefix"):
        KeySpace(prefix)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: CaptureKey(P, ""), "capture id must not be empty"),
        (lambda: CaptureKey(P, "a/b"), "capture id 'a/b' must not contain '/'"),
        (lambda: ChangefeedInfoKey(P, "cf/1"), "changefeed id 'cf/1' must not contain '/'"),
        (lambda: ChangefeedStatusKey(P, ""), "changefeed id must not be empty"),
        (lambda: TaskKey(P, "cf", "orders"), "must be written 'schema.table'"),
        (lambda: TaskKey(P, "cf", "shop/x.orders"), "must not contain '/'"),
        (lambda: TaskKey(P, "cf", ".orders"), "must be written 'schema.table'"),
        (lambda: TaskKey(P, "cf", "shop."), "must be written 'schema.table'"),
        (lambda: SnapshotChunkKey(P, "cf", "s.t", -1), "non-negative integer"),
        (lambda: SnapshotChunkKey(P, "cf", "s.t", True), "non-negative integer"),
        (lambda: SubscriptionKey(P, "cf", "bad\nname"), "control characters"),
        (lambda: BarrierKey(P, 7), "must be a string"),
        (lambda: cluster_prefix("a/b"), "cluster id 'a/b' must not contain '/'"),
    ],
)
def test_bad_names_are_rejected_clearly(make, message: str) -> None:
    with pytest.raises(InvalidKeyError, match=message.replace("(", r"\(")):
        make()


@pytest.mark.parametrize(
    "text",
    [
        "/cdc/default",
        "/cdc/other/owner",
        "/cdc/default/owners",
        "/cdc/default/unknown/x",
        "/cdc/default/capture",
        "/cdc/default/capture/",
        "/cdc/default/capture/a/b",
        "/cdc/default/task/cf",
        "/cdc/default/task/cf/notable",
        "/cdc/default/snapshot/cf/s.t/x",
        "/cdc/default/snapshot/cf/s.t/07",
        "/cdc/default/snapshot/cf/s.t/-1",
        "/cdc/default/changefeed/info",
        "/cdc/default/changefeed/other/cf",
    ],
)
def test_foreign_strings_do_not_parse(text: str) -> None:
    with pytest.raises(InvalidKeyError):
        parse_key(text, P)


def test_prefix_of_ranges() -> None:
    assert prefix_of(P) == "/cdc/default/"
    assert prefix_of(P, CaptureKey) == "/cdc/default/capture/"
    assert prefix_of(P, ChangefeedInfoKey) == "/cdc/default/changefeed/info/"
    assert prefix_of(P, TaskKey, "cf1") == "/cdc/default/task/cf1/"
    assert prefix_of(P, SnapshotChunkKey, "cf1", "s.t") == "/cdc/default/snapshot/cf1/s.t/"
    # A range never matches a longer id with the same beginning.
    assert not str(TaskKey(P, "cf10", "s.t")).startswith(prefix_of(P, TaskKey, "cf1"))
    # Every key of a kind lies inside the kind's range.
    for key, text in ROUND_TRIP:
        if isinstance(key, OwnerKey):
            continue
        assert text.startswith(prefix_of(key.prefix, type(key)))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((OwnerKey,), "single key"),
        ((CaptureKey, "c1"), "at most 0 leading segments"),
        ((TaskKey, "cf", "s.t"), "at most 1 leading segments"),
        ((SnapshotChunkKey, "cf", "nodot"), "schema.table"),
        ((TaskKey, "c/f"), "must not contain '/'"),
    ],
)
def test_prefix_of_rejects_bad_requests(args: tuple, message: str) -> None:
    with pytest.raises(InvalidKeyError, match=message):
        prefix_of(P, *args)


def test_keyspace_builds_the_same_keys() -> None:
    ks = KeySpace("/cdc/default/")
    assert ks.owner() == OwnerKey(P)
    assert ks.capture("c") == CaptureKey(P, "c")
    assert ks.changefeed_info("cf") == ChangefeedInfoKey(P, "cf")
    assert ks.changefeed_status("cf") == ChangefeedStatusKey(P, "cf")
    assert ks.task("cf", "s.t") == TaskKey(P, "cf", "s.t")
    assert ks.table_checkpoint("cf", "s.t") == TableCheckpointKey(P, "cf", "s.t")
    assert ks.snapshot_chunk("cf", "s.t", 2) == SnapshotChunkKey(P, "cf", "s.t", 2)
    assert ks.barrier("cf") == BarrierKey(P, "cf")
    assert ks.subscription("cf", "c") == SubscriptionKey(P, "cf", "c")
    assert ks.subscription_ddl("cf") == SubscriptionDdlKey(P, "cf")
    assert ks.parse("/cdc/default/barrier/cf") == BarrierKey(P, "cf")
    assert ks.prefix_of(TaskKey, "cf") == "/cdc/default/task/cf/"


def test_parse_with_a_kind_returns_that_kind_and_refuses_others() -> None:
    ks = KeySpace(P)
    assert ks.parse("/cdc/default/task/cf/s.t", TaskKey).table == "s.t"
    assert ks.parse("/cdc/default/capture/c1", CaptureKey).capture_id == "c1"
    with pytest.raises(InvalidKeyError, match="is not a TableCheckpointKey"):
        ks.parse("/cdc/default/task/cf/s.t", TableCheckpointKey)
    with pytest.raises(InvalidKeyError, match="is not a TaskKey"):
        ks.parse("/other/task/cf/s.t", TaskKey)


def test_changefeed_scope_covers_every_changefeed_kind() -> None:
    ks = KeySpace(P)
    keys, prefixes = ks.changefeed_scope("cf1")
    assert keys == (
        "/cdc/default/changefeed/info/cf1",
        "/cdc/default/changefeed/status/cf1",
        "/cdc/default/barrier/cf1",
        "/cdc/default/subscription-ddl/cf1",
    )
    samples = [
        ks.task("cf1", "s.t"),
        ks.table_checkpoint("cf1", "s.t"),
        ks.snapshot_chunk("cf1", "s.t", 3),
        ks.subscription("cf1", "c"),
    ]
    for sample in samples:
        assert any(str(sample).startswith(p) for p in prefixes)
    # the history outlives a remove (it tells who removed the changefeed)
    other = [
        ks.task("cf10", "s.t"),
        ks.changefeed_info("cf10"),
        ks.capture("cf1"),
        ks.changefeed_history("cf1"),
    ]
    for sample in other:
        assert str(sample) not in keys
        assert not any(str(sample).startswith(p) for p in prefixes)


CHUNKS = [
    ("shop.orders", 0, "shop.orders:0", ("shop", "orders", 0)),
    ("shop.orders", 42, "shop.orders:42", ("shop", "orders", 42)),
    ("db.`weird.name`", 1, "db.`weird.name`:1", ("db", "weird.name", 1)),
    ("`shop-eu.v2`.t:1", 2, "`shop-eu.v2`.t:1:2", ("shop-eu.v2", "t:1", 2)),
    ("`a``b`.`c.d`", 0, "`a``b`.`c.d`:0", ("a`b", "c.d", 0)),
    ("db.t:colon", 5, "db.t:colon:5", ("db", "t:colon", 5)),
]


@pytest.mark.parametrize(("table", "n", "text", "parsed"), CHUNKS)
def test_chunk_id_round_trips(table: str, n: int, text: str, parsed: tuple) -> None:
    assert chunk_id(table, n) == text
    assert parse_chunk_id(text) == parsed
    assert chunk_id(table_name(parsed[0], parsed[1]), parsed[2]) == text
    assert SnapshotChunkKey(P, "cf", table, n).chunk_id == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shop.orders", "must be 'schema.table:n'"),
        ("orders:1", "must be written 'schema.table'"),
        ("shop.orders:", "not a non-negative integer"),
        ("shop.orders:x", "not a non-negative integer"),
        ("shop.orders:01", "without leading 0"),
        ("shop.orders:-1", "not a non-negative integer"),
        (":1", "must be 'schema.table:n'"),
    ],
)
def test_bad_chunk_ids(text: str, message: str) -> None:
    with pytest.raises(InvalidKeyError, match=message):
        parse_chunk_id(text)


def test_chunk_id_rejects_bad_parts() -> None:
    with pytest.raises(InvalidKeyError, match="non-negative integer"):
        chunk_id("s.t", -3)
    with pytest.raises(InvalidKeyError, match="schema.table"):
        chunk_id("orders", 1)


def test_table_names() -> None:
    assert table_name("shop", "orders") == "shop.orders"
    assert split_table("shop.orders") == ("shop", "orders")
    assert table_name("a.b", "t") == "`a.b`.t"
    assert split_table("`a.b`.t") == ("a.b", "t")
    assert split_table("shop.`a.b`") == ("shop", "a.b")
    for name in ("shop.a.b", "shop.a`b"):
        with pytest.raises(InvalidKeyError, match="must be written 'schema.table'"):
            split_table(name)
    # One table, one key: a quoting that str(TableName) would not write is refused.
    with pytest.raises(InvalidKeyError, match="not in the key form of its name, 'shop.orders'"):
        split_table("`shop`.orders")
    with pytest.raises(InvalidKeyError, match="table name must not be empty"):
        table_name("a", "")
