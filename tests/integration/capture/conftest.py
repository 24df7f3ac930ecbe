"""Fixtures of the capture tests: a connection to the shared source and its flavour."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cdc.binlog.decode_pool import DecodePool
from cdc.playground.mariadb import MariaDBServer
from cdc.source.flavor import ServerInfo, detect


@pytest.fixture
def conn(source_db: MariaDBServer) -> Iterator[Any]:
    connection = source_db.connect()
    yield connection
    connection.close()


@pytest.fixture
def info(conn: Any) -> ServerInfo:
    return detect(conn)


@pytest.fixture(scope="module")
def decode_pool() -> Iterator[DecodePool]:
    pool = DecodePool(2)
    yield pool
    pool.close()


@pytest.fixture(params=["in-thread", "workers"])
def decode(request: pytest.FixtureRequest, decode_pool: DecodePool) -> DecodePool | None:
    """Each puller test runs twice: rows decoded by the thread reading the stream, and
    read ahead for decode worker processes (``PullerConfig.decode``)."""
    return decode_pool if request.param == "workers" else None
