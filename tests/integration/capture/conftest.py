"""Fixtures of the capture tests: a connection to the shared source and its flavour."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
