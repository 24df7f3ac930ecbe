"""Which errors fail a changefeed for good (the user must act) and which are retried."""

from __future__ import annotations

import pytest

from cdc.changefeed import is_permanent
from cdc.errors import ConfigError
from cdc.schema.changes import DdlApplyError
from cdc.sink.base import SinkError
from cdc.source.flavor import SourceError
from cdc.store import StoreUnavailable, ValueFormatError


@pytest.mark.parametrize(
    "error",
    [ConfigError("sink-uri", "bad"), DdlApplyError("no such column"), ValueFormatError("v9")],
)
def test_permanent(error: Exception) -> None:
    assert is_permanent(error)


@pytest.mark.parametrize(
    "error",
    [
        SinkError("downstream went away"),
        SourceError("source restarting"),
        StoreUnavailable("127.0.0.1:2379", "down", "start it"),
        ConnectionResetError(),
    ],
)
def test_retried(error: Exception) -> None:
    assert not is_permanent(error)
