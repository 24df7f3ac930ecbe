"""Package exports imported on first use (``cdc.lazy``): same names, lighter imports."""

from __future__ import annotations

import ast

import pytest
from testkit import run_python

import cdc.diff
import cdc.filter
import cdc.schema
import cdc.sink.file
import cdc.sink.mysql
import cdc.snapshot
import cdc.store
from cdc.lazy import exports
from cdc.snapshot.chunk import SnapshotChunk
from cdc.store.etcd import EtcdStore


def test_a_package_name_is_its_module_s_object_and_is_kept() -> None:
    assert cdc.snapshot.SnapshotChunk is SnapshotChunk
    assert cdc.store.EtcdStore is EtcdStore
    assert "EtcdStore" in vars(cdc.store)  # the next lookup is a plain attribute


@pytest.mark.parametrize(
    "package",
    [cdc.diff, cdc.filter, cdc.schema, cdc.sink.file, cdc.sink.mysql, cdc.snapshot, cdc.store],
    ids=str,
)
def test_every_name_a_lazy_package_lists_resolves(package: object) -> None:
    names = package.__all__  # type: ignore[attr-defined]
    assert names and all(getattr(package, name) is not None for name in names)


def test_a_name_not_exported_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="'cdc.store' has no attribute 'Nope'"):
        _ = cdc.store.Nope  # type: ignore[attr-defined]
    package = {"__name__": "pkg"}
    getter = exports(package, {"cdc.masking": ("mask_secret",)})
    assert getter("mask_secret") is package["mask_secret"]
    with pytest.raises(AttributeError):
        getter("MASK")


def imported(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in {modules!r} if m in sys.modules))\n"
    return ast.literal_eval(run_python(probe))


def test_the_key_layout_and_chunk_ranges_import_no_etcd_client_and_no_chunk_reader() -> None:
    heavy = ("pyetcd", "grpc", "cdc.snapshot.reader", "cdc.binlog.puller")
    assert imported("import cdc.snapshot.chunk, cdc.store.keys", heavy) == []


def test_reading_a_changefeed_config_imports_no_sink_machinery_and_no_sql_parser() -> None:
    """What every cdcctl command that reads a configuration pays at start-up."""
    read = (
        "from cdc.config import load_changefeed_config\n"
        "load_changefeed_config(None, {'changefeed_id': 'cf', 'source_uri': 'mysql://u@h/',"
        " 'sink_uri': 'kafka://h:9092/t?protocol=canal-json'})"
    )
    heavy = (
        "sqlglot",
        "confluent_kafka",
        "cdc.sink.mysql.sink",
        "cdc.sink.file.reader",
        "cdc.sink.kafka.sink",
        "cdc.snapshot.reader",
    )
    assert imported(read, heavy) == []


def test_cdcctl_starts_without_the_sql_parser() -> None:
    """Only the commands that parse SQL (``ddl replace``'s check, ``diff``) import it."""
    heavy = ("sqlglot", "cdc.schema.ddl", "cdc.diff.checker")
    assert imported("import cdc.cli.main", heavy) == []


def test_cdcctl_starts_without_the_etcd_client_and_what_one_command_alone_needs() -> None:
    """Imported by the commands that use them: the etcd client and metrics (`capture list
    --etcd`, `subscription list --etcd`), the subscription client and the changefeed store
    (`subscription`), the playground's servers and the Kafka client (`playground`)."""
    heavy = (
        "pyetcd",
        "prometheus_client",
        "cdc.store.keys",
        "cdc.subscription",
        "cdc.changefeed",
        "cdc.playground.local",
        "confluent_kafka",
    )
    assert imported("import cdc.cli.main", heavy) == []
