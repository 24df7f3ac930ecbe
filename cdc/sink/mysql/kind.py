"""The MySQL / MariaDB sink kind (``mysql://``, ``mariadb://``): see ``cdc.sink.kind``.

The sink's machinery is imported by the methods that use it: parsing a URI (every
``cdcctl`` command that reads a changefeed's configuration) needs none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cdc.model.schema import TableName, TableSchema
from cdc.sink.kind import SinkCheckFailed, SinkKind
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.sink.mysql.uri import MYSQL_SINK_PARAMS, MySQLSinkURI, parse_mysql_sink
from cdc.source.connect import connect
from cdc.source.flavor import SourceError
from cdc.uri.mysql import MYSQL_SCHEMES, MySQLURI

if TYPE_CHECKING:
    from cdc.sink.base import SchemaLookup, Sink
    from cdc.sink.chunks import ChunkSink, RangeRepairer

__all__ = ["MYSQL", "MySQLKind"]


class MySQLKind(SinkKind[MySQLSinkURI]):
    """Tables in a MySQL or MariaDB database, written by key in parallel lanes."""

    name = "mysql"
    schemes = MYSQL_SCHEMES
    uri_type = MySQLSinkURI
    params = MYSQL_SINK_PARAMS
    no_resnapshot = ""

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> MySQLSinkURI:
        return parse_mysql_sink(text, field, defaults)

    def check_tables(self, uri: MySQLSinkURI, tables: Mapping[TableName, TableSchema]) -> None:
        """Every table needs a key: rows are upserted and deleted by it."""
        for table, schema in tables.items():
            if not schema.key_columns:
                raise SinkCheckFailed(
                    "filter.rules",
                    f"table {table} has no primary key and no unique key on NOT NULL "
                    "columns; the MySQL sink writes rows by key (upsert and delete by key) and "
                    "cannot write it: add a primary key on the source, or leave the table out "
                    f"with a filter rule such as '!{table}'",
                )

    def check_reachable(self, uri: MySQLSinkURI) -> None:
        try:
            connect(uri.connection, "sink").close()
        except SourceError as exc:
            raise SinkCheckFailed("sink-uri", str(exc)) from None

    def prepare_table(
        self,
        uri: MySQLSinkURI,
        source_conn: Any,
        schema: TableSchema,
        *,
        replace: bool = False,
        source_schema: TableSchema | None = None,
    ) -> str:
        from cdc.sink.mysql import tables as downstream_tables

        return downstream_tables.prepare_table(
            uri, source_conn, schema, replace=replace, source_schema=source_schema
        )

    def check_existing(self, uri: MySQLSinkURI, schemas: list[TableSchema]) -> None:
        from cdc.sink.mysql import tables as downstream_tables

        downstream_tables.check_existing(uri, schemas)

    def drop_table(self, uri: MySQLSinkURI, name: TableName) -> None:
        from cdc.sink.mysql import tables as downstream_tables

        downstream_tables.drop_table(uri, name)

    def open(
        self,
        uri: MySQLSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        from cdc.sink.mysql.sink import MySQLSink

        return MySQLSink(uri, schemas, changefeed_id, MySQLSinkOptions(writable=writable))

    def chunk_sink(self, uri: MySQLSinkURI, changefeed_id: str) -> ChunkSink:
        """Each chunk as one LOAD DATA; as statements on the same connection if the
        downstream refuses that. A chunk's rows have distinct keys and no order among
        them: Spark's tasks are the parallelism, and one connection with large batches
        is the fastest way in for each of them."""
        from cdc.sink.mysql.chunkload import ChunkLoader, LoadOrStatements

        return LoadOrStatements(ChunkLoader(uri, changefeed_id))

    def range_repair(self, uri: MySQLSinkURI, changefeed_id: str) -> RangeRepairer:
        """Each chunk in one transaction under the range's row locks (``rangerepair``)."""
        from cdc.sink.mysql.rangerepair import RangeRepair

        return RangeRepair(uri, changefeed_id)

    def resnapshot_refusal(
        self,
        uri: MySQLSinkURI,
        source_conn: Any,
        schema: TableSchema,
        chunk_column: str | None = None,
    ) -> str | None:
        """``repaircheck.refusal`` on the source's and the downstream's facts of the table:
        InnoDB downstream, no unique key but the row key, equal key collations."""
        from cdc.schema.tablefacts import read_table_facts
        from cdc.sink.mysql.repaircheck import refusal as resnapshot_refusal

        source = read_table_facts(source_conn, schema.name)
        try:
            conn = connect(uri.connection, "sink")
        except SourceError as exc:
            return f"the downstream cannot be reached to check table {schema.name}: {exc}"
        try:
            downstream = read_table_facts(conn, schema.name)
        finally:
            conn.close()
        return resnapshot_refusal(schema.name, schema.key_columns, source, downstream, chunk_column)

    def database(self, uri: MySQLSinkURI) -> MySQLURI:
        return uri.connection


MYSQL = MySQLKind()
