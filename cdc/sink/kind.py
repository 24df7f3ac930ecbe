"""One seam per sink kind: everything the rest of the code asks of a kind of sink.

A kind lives in its own package (``cdc.sink.mysql``, ``cdc.sink.file``) or
module (``cdc.sink.blackhole``, ``cdc.sink.pull``) and is looked up by scheme
or by parsed URI in ``cdc.sink.registry``; nothing outside ``cdc.sink`` asks
which kind a URI is (as TiCDC's sink factory and Canal's ``CanalEventSink``
implementations keep each sink's knowledge in the sink)::

    parse(text, field, defaults) -> URI    its URI type and parameters (``params``)
    check_tables(uri, tables)              create time: can it write these tables?
    check_reachable(uri)                   create time: can it be reached / written now?
    prepare_table(uri, source, schema)     before a table's first chunk (create it downstream)
    check_existing(uri, schemas)           a tables update: can the existing tables take the rows?
    drop_table(uri, name)                  a table the changefeed let go of
    open(uri, schemas, changefeed_id)      the Sink a table pipeline writes through
    apply_ddl(uri, ddl, changefeed_id)     the owner's DDL, once every table reached it
    chunk_sink(uri, changefeed_id)         where a Spark task writes snapshot chunks
    range_repair(uri, changefeed_id)       where it writes a running table's re-snapshot
                                           chunks (``no_resnapshot``: why a kind cannot)
    resnapshot_refusal(uri, source, schema)
                                           why this table cannot be re-snapshotted into it
    checkpoint_writer(uri, changefeed_id)  where the owner announces each new checkpoint, if
                                           anywhere (a Kafka sink's watermarks)
    database(uri)                          the MySQL/MariaDB server it writes into, if any

Adding a kind (Kafka, say) is one package with its URI type and a subclass of
:class:`SinkKind`, plus its line in ``cdc.sink.registry.KINDS``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SchemaLookup, Sink
from cdc.uri.grammar import ParamCheck, check_bare, split_scheme
from cdc.uri.mysql import MySQLURI

if TYPE_CHECKING:  # the chunk sinks, imported where a kind makes one
    from cdc.sink.chunks import ChunkSink, RangeRepairer

__all__ = [
    "BareSinkURI",
    "CheckpointWriter",
    "DownstreamTableMismatch",
    "NoPassword",
    "SinkCheckFailed",
    "SinkKind",
    "SinkURI",
]


class SinkURI(Protocol):
    """What every kind's parsed sink URI offers: a frozen dataclass in the kind's package,
    whose ``str()`` is ``masked``."""

    @property
    def scheme(self) -> str:
        """The scheme it was written with (``mysql``, ``mariadb``, ``file``...)."""

    @property
    def masked(self) -> str:
        """The URI text with any password replaced by the mask, for logs and display."""

    @property
    def password(self) -> str:
        """The inline password, empty when the URI holds none (references are not passwords)."""

    def unmasked(self) -> str:
        """The full URI text; parsing it gives this URI back."""

    def without_password(self) -> Self:
        """This URI with its inline password dropped (what a changefeed stores by default)."""

    def describe(self) -> dict[str, Any]:
        """The effective settings, masked, for printing (``kind`` and ``uri`` first)."""


class CheckpointWriter(Protocol):
    """Where the owner announces the changefeed checkpoint to the sink's readers (TiCDC's
    ``EmitCheckpointTs``): every change of ``tables`` up to it is in the sink."""

    def write(self, checkpoint: Position, tables: Collection[TableName]) -> None:
        """Announces ``checkpoint``; must not wait for the sink (the owner's cycle calls it)."""

    def close(self) -> None:
        """Stops announcing."""


class NoPassword:
    """For sink URIs that hold no secret."""

    @property
    def password(self) -> str:
        return ""

    def without_password(self) -> Self:
        return self


@dataclass(frozen=True)
class BareSinkURI(NoPassword):
    """A sink URI that is its scheme alone (``blackhole://``, ``pull://``): nothing to
    set, nothing secret. Subclasses set :attr:`kind`."""

    #: The scheme, which is also the kind's name.
    kind: ClassVar[str]

    @classmethod
    def parse(cls, text: str, field: str) -> Self:
        """``<kind>://`` and nothing after it."""
        scheme, rest = split_scheme(text, field, f"{cls.kind}://")
        check_bare(scheme, rest, field)
        return cls()

    @property
    def scheme(self) -> str:
        return self.kind

    @property
    def masked(self) -> str:
        return f"{self.kind}://"

    def unmasked(self) -> str:
        return self.masked

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "uri": self.masked}

    def __str__(self) -> str:
        return self.masked


class SinkCheckFailed(Exception):
    """A create-time check of the sink failed: the changefeed could not run as configured.

    ``field`` is the setting to change (``sink-uri``, ``filter.rules``); ``str()``
    is ``"<field>: <reason>"``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class DownstreamTableMismatch(RuntimeError):
    """An existing downstream table does not have the source table's columns, or has a
    column that cannot hold the source's values."""


U = TypeVar("U", bound=SinkURI)


class SinkKind(abc.ABC, Generic[U]):
    """A kind of sink: its schemes, URI type and parameters, and its part in each phase.

    Subclasses set the class attributes and implement :meth:`parse` and
    :meth:`open`; the other hooks default to "nothing to do". Every hook is
    given a URI of this kind (``cdc.sink.registry.kind_of`` chose the kind by it).
    """

    #: The kind's name, as ``describe()`` shows it (``"kind": "mysql"``).
    name: str
    #: The URI schemes that name this kind, lower case.
    schemes: tuple[str, ...]
    #: The parsed URI's type.
    uri_type: type[U]
    #: The query parameters its URIs take (also as ``[sink]`` defaults), each with its check.
    params: Mapping[str, ParamCheck] = MappingProxyType({})
    #: Why cdc-server cannot run a changefeed with it yet; empty when it can. Such a
    #: kind's URI is refused when parsed: the changefeed could only fail and retry forever.
    not_served: str = ""
    #: Whether one process at a time writes a changefeed's sink (a folder under a lock, a
    #: pull subscription's rings): the owner then schedules all of the changefeed's tables
    #: on one capture.
    one_writer: bool = False
    #: Why the kind takes no snapshot rows yet; empty when it does. A changefeed with such
    #: a kind must use snapshot mode never (refused when its config is checked).
    no_snapshot: str = ""
    #: Why the kind cannot follow a failover of the source to another server
    #: (``cdc.changefeed.failover``); empty when it can. Such a kind keeps binlog positions
    #: where the changefeed cannot tell which server they belong to.
    no_failover: str = ""

    #: Why the kind cannot take a re-snapshot of a table whose stream keeps running
    #: (``cdcctl changefeed snapshot``); empty when it can (then ``range_repair`` gives the
    #: writer). Such a re-snapshot removes rows by key range in one transaction with the
    #: rows it writes, ordered against the stream's writes by the downstream's row locks.
    no_resnapshot: str = (
        "a re-snapshot of a running table removes rows by key range, ordered against the "
        "stream's writes by the downstream's row locks: only a MySQL/MariaDB sink has them"
    )

    @property
    def runnable(self) -> bool:
        """Whether a changefeed can run with this kind."""
        return not self.not_served

    def owns(self, uri: object) -> bool:
        """Whether ``uri`` is a parsed URI of this kind."""
        return isinstance(uri, self.uri_type)

    @abc.abstractmethod
    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> U:
        """The URI ``text`` (its scheme one of :attr:`schemes`), validated.

        ``defaults``: parameters (already checked, all in :attr:`params`) that the
        URI does not give itself; they become part of it, so its text carries them.
        Errors are ``ConfigError`` naming ``field`` or ``<field>.<parameter>``.
        """

    def check_tables(self, uri: U, tables: Mapping[TableName, TableSchema]) -> None:
        """Create time: raises ``SinkCheckFailed`` if the sink cannot write these
        tables (the ones the changefeed's filter matches on the source)."""

    def check_reachable(self, uri: U) -> None:
        """Create time: raises ``SinkCheckFailed`` if the sink cannot be reached or
        written now (run where the changefeed is created, with that process's environment)."""

    def prepare_table(
        self,
        uri: U,
        source_conn: Any,
        schema: TableSchema,
        *,
        replace: bool = False,
        source_schema: TableSchema | None = None,
    ) -> str:
        """Makes the sink ready for ``schema``'s first snapshot chunk; says what it did.

        ``replace``: what the sink holds of the table is a partial snapshot under an
        older schema; drop it first. ``source_schema``: the table as the source defines
        it, when the sink gets less or other of it than ``schema`` (a changefeed's
        column rules); None when they are the same. ``DownstreamTableMismatch`` if an
        existing table cannot take the rows.
        """
        return "not a database sink"

    def check_existing(self, uri: U, schemas: list[TableSchema]) -> None:
        """``DownstreamTableMismatch`` if the sink holds a table of ``schemas`` that could
        not take its rows (what ``prepare_table`` would say of it); nothing is created."""

    def drop_table(self, uri: U, name: TableName) -> None:
        """Removes what the sink holds of table ``name``, where it holds tables."""

    @abc.abstractmethod
    def open(
        self,
        uri: U,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        """The sink, open and ready for ``write_rows``; ``SinkError`` when it cannot be.

        ``writable`` fences a sink that writes into a shared system: asked before
        every write (``MySQLSinkOptions.writable``).
        """

    def apply_ddl(self, uri: U, ddl: DdlEvent, changefeed_id: str) -> None:
        """Applies ``ddl`` downstream for the owner, every table's rows before it already
        durable (the barrier); ``SinkError`` when the sink refuses it. By default through
        a sink :meth:`open` gives, used for this DDL only."""
        sink = self.open(uri, _no_rows, changefeed_id)
        try:
            sink.apply_ddl(ddl)
        finally:
            sink.close()

    def chunk_sink(self, uri: U, changefeed_id: str) -> ChunkSink:
        """Where a Spark task writes this changefeed's snapshot chunks (in the task's
        process; opened lazily). By default through :meth:`open`'s sink."""
        from cdc.sink.chunks import ThroughSink

        return ThroughSink(lambda schemas: self.open(uri, schemas, changefeed_id))

    def range_repair(self, uri: U, changefeed_id: str) -> RangeRepairer:
        """Where a Spark task writes a re-snapshot's chunks (see :attr:`no_resnapshot`)."""
        raise NotImplementedError(f"sink kind {self.name}: {self.no_resnapshot}")

    def resnapshot_refusal(
        self, uri: U, source_conn: Any, schema: TableSchema, chunk_column: str | None = None
    ) -> str | None:
        """Why ``schema``'s table cannot be re-snapshotted into the sink as the two
        servers define it now, in one line; None when it can (``source_conn``: a
        connection to the source; ``chunk_column``: the configured column its chunks
        are split by, if any). Asked when the re-snapshot is requested and when it is
        planned; the kind's ``range_repair`` checks again in every chunk. By default:
        nothing to check."""
        return None

    def checkpoint_writer(self, uri: U, changefeed_id: str) -> CheckpointWriter | None:
        """Where the owner announces each new changefeed checkpoint downstream, so that a
        reader merging several streams of the sink knows how far all of them are (a
        Kafka sink's watermarks); None: the sink has no such readers."""
        return None

    def database(self, uri: U) -> MySQLURI | None:
        """The MySQL/MariaDB server the sink writes tables into, for tools that compare
        it with the source (``cdcctl diff``); None when the sink is not a database."""
        return None

    def __repr__(self) -> str:
        return f"<sink kind {self.name}: {', '.join(f'{s}://' for s in self.schemes)}>"


def _no_rows(table: TableName) -> TableSchema:
    raise LookupError(f"a sink opened for one DDL writes no rows (asked for {table})")
