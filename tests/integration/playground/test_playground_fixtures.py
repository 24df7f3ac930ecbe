"""Smoke tests of the session fixtures in tests/conftest.py.

This module deliberately has no ``pytestmark``: the conftest hook must mark
it ``integration`` because it lives under tests/integration/.
"""

from __future__ import annotations

import re

import pytest

from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer


def test_integration_marker_is_added_by_the_conftest_hook(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("integration") is not None


def test_spark_session_runs_a_job(spark) -> None:
    assert spark.range(10).count() == 10
    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_source_database_is_fresh_and_named_after_the_test(
    source_db: MariaDBServer, source_database: str
) -> None:
    assert re.fullmatch(
        r"test_source_database_is_fresh_and_named_after_the_test_[0-9a-f]{8}", source_database
    )
    conn = source_db.connect(database=source_database)
    with conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        assert cur.fetchall() == ()
    conn.close()


@pytest.mark.parametrize("flavour", ["a-b", "C D"])
def test_sink_database_names_are_valid_identifiers(
    sink_db: MariaDBServer, sink_database: str, flavour: str
) -> None:
    assert re.fullmatch(r"[a-z0-9_]{1,64}", sink_database)
    conn = sink_db.connect(database=sink_database)
    with conn.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        assert cur.fetchone() == (sink_database,)
    conn.close()


def test_etcd_prefix_is_fresh(etcd_server: EtcdServer, etcd_prefix: str) -> None:
    assert re.fullmatch(r"/cdc-test-[0-9a-f]{8}/", etcd_prefix)
    with etcd_server.store(etcd_prefix) as store:
        assert store.get_prefix(etcd_prefix) == []
        store.put(f"{etcd_prefix}x", "1")
