"""Module-wide fixtures of the console tests: one cluster, one browser, one screenshot folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from console_kit import ConsoleCluster, Tokens, make_tokens, open_browser

from cdc.playground.etcd import EtcdServer


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return make_tokens(tmp_path_factory.mktemp("console-tokens"))


@pytest.fixture(scope="module")
def cluster(
    etcd_server: EtcdServer, tokens: Tokens, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleCluster]:
    """Two captures, console-a and console-b, each with its own console."""
    running = ConsoleCluster(
        etcd_server.endpoint,
        tokens,
        tmp_path_factory.mktemp("console-servers"),
        ("console-a", "console-b"),
    )
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with open_browser() as running:
        yield running


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the run saves a screenshot of each view (printed at the end of the module)."""
    folder = tmp_path_factory.mktemp("console-screenshots")
    yield folder
    print(f"\nconsole screenshots: {folder}")
