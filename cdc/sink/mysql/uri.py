"""A MySQL or MariaDB database as the sink: its URI and write settings.

::

    mysql://root@127.0.0.1:3307/?password-env=CDC_SINK_PASSWORD&worker-count=16

The connection part is a :class:`cdc.uri.mysql.MySQLURI` (password
references, TLS files, time zone); the rest are this sink's write settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from cdc.uri.grammar import ParamCheck, bool_value, check_params, int_value, with_defaults
from cdc.uri.mysql import CONNECTION_PARAMS, MySQLURI

__all__ = ["MYSQL_SINK_PARAMS", "MySQLSinkURI", "parse_mysql_sink"]

_WORKER_COUNT_MAX = 1024
_MAX_TXN_ROW_MAX = 10_000
_LOAD_DATA_ROWS_MAX = 1_000_000

#: The query parameters of a database sink URI, each with its check.
MYSQL_SINK_PARAMS: Mapping[str, ParamCheck] = MappingProxyType(
    {
        "worker-count": lambda v, f: int_value(v, f, 1, _WORKER_COUNT_MAX, "worker-count=1"),
        "max-txn-row": lambda v, f: int_value(v, f, 1, _MAX_TXN_ROW_MAX, "max-txn-row=4096"),
        "safe-mode": lambda v, f: bool_value(v, f, "safe-mode=true"),
        "transaction-atomicity": lambda v, f: bool_value(v, f, "transaction-atomicity=false"),
        "load-data-rows": lambda v, f: int_value(
            v, f, 0, _LOAD_DATA_ROWS_MAX, "load-data-rows=256 (0: never LOAD DATA)"
        ),
        **CONNECTION_PARAMS,
    }
)


@dataclass(frozen=True)
class MySQLSinkURI:
    """A MySQL or MariaDB database as the sink, with its write settings.

    ``load_data_rows``: from how many upserts of one table in one lane transaction
    these go as one ``LOAD DATA LOCAL INFILE`` (``cdc.sink.mysql.bulk``); 0: never,
    snapshot chunks included.
    """

    connection: MySQLURI
    worker_count: int = 1
    max_txn_row: int = 4096
    safe_mode: bool = True
    transaction_atomicity: bool = False
    load_data_rows: int = 256

    @property
    def scheme(self) -> str:
        return self.connection.scheme

    @property
    def masked(self) -> str:
        return str(self.connection)

    @property
    def password(self) -> str:
        return self.connection.password

    def unmasked(self) -> str:
        return self.connection.unmasked()

    def without_password(self) -> MySQLSinkURI:
        return replace(self, connection=self.connection.without_password())

    def describe(self) -> dict[str, Any]:
        """The effective settings, masked, for printing."""
        return {
            "kind": "mysql",
            "uri": self.masked,
            "worker-count": self.worker_count,
            "max-txn-row": self.max_txn_row,
            "safe-mode": self.safe_mode,
            "transaction-atomicity": self.transaction_atomicity,
            "load-data-rows": self.load_data_rows,
        }

    def __str__(self) -> str:
        return self.masked


def parse_mysql_sink(text: str, field: str, defaults: Mapping[str, str]) -> MySQLSinkURI:
    """``mysql://`` or ``mariadb://`` as a sink; ``defaults`` fill the parameters it lacks."""
    connection = MySQLURI.parse(text, field=field, params=MYSQL_SINK_PARAMS)
    connection = replace(connection, params=with_defaults(connection.params, defaults))
    typed = check_params(connection.params, MYSQL_SINK_PARAMS, field=field)
    settings = {
        attribute: typed[name]
        for name, attribute in (
            ("worker-count", "worker_count"),
            ("max-txn-row", "max_txn_row"),
            ("safe-mode", "safe_mode"),
            ("transaction-atomicity", "transaction_atomicity"),
            ("load-data-rows", "load_data_rows"),
        )
        if name in typed
    }
    return MySQLSinkURI(connection, **settings)
