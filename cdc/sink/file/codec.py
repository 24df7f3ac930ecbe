"""What both file protocols share: the codec interface, a record, and the read error.

A codec turns a :class:`RowChange` into the bytes of one record (one line in
canal-json; one line, or two for an UPDATE, in csv) and splits a data file back
into records. Splitting yields each record's exact bytes and position before
any value is decoded, so the sink can cut a file at a position (crash repair)
and the reader can skip records past the checkpoint cheaply.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.model.events import RowChange
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.sink.file.uri import FileProtocol
from cdc.sink.file.values import ValueDecoder, ValueEncoder

__all__ = [
    "FileFormatError",
    "Record",
    "RowCodec",
    "RowEncoder",
    "decode_image",
    "encode_image",
    "row_key",
]

RowEncoder = Callable[[RowChange, int], bytes]
"""Encodes one row change; the int is the wall-clock time in milliseconds."""


class FileFormatError(ValueError):
    """A file under a file sink's root cannot be read; the message names file and line."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Record:
    """One row change as stored: its exact bytes, where it starts, its position.

    ``payload`` is what the codec parsed (a JSON object, csv fields) for
    :meth:`RowCodec.decode`; ``where`` is ``path:line`` for messages.
    """

    raw: bytes
    where: str
    position: Position
    payload: Any


class RowCodec(abc.ABC):
    """One file protocol: encodes row changes of a table version, reads them back."""

    protocol: FileProtocol
    extension: str

    @abc.abstractmethod
    def encoder(self, schema: TableSchema) -> RowEncoder:
        """The encoder for rows of ``schema`` (resolve once per table version)."""

    @abc.abstractmethod
    def records(self, lines: Iterable[bytes], path: str) -> Iterator[Record]:
        """Splits a data file (its lines, ``\\n`` kept) into records, in file order."""

    @abc.abstractmethod
    def decoder(self, schema: TableSchema) -> Callable[[Record], RowChange]:
        """The decoder of records of ``schema``; raises :class:`FileFormatError`."""


def encode_image(
    image: Mapping[str, Any],
    encoders: Sequence[tuple[str, ValueEncoder]],
    change: RowChange,
    schema: TableSchema,
) -> list[str | None]:
    """An image's values as text, in schema column order; the image must have every
    column of the schema and no other."""
    if len(image) != len(encoders) or any(name not in image for name, _ in encoders):
        names = {name for name, _ in encoders}
        missing = sorted(names - set(image))
        extra = sorted(set(image) - names)
        raise ValueError(
            f"row change for {change.table} at {change.position} does not fit schema version "
            f"{schema.version} (missing columns {missing}, unknown columns {extra}); "
            "the schema lookup and the row disagree"
        )
    return [encode(image[name]) for name, encode in encoders]


def decode_image(
    texts: Sequence[str | None], decoders: Sequence[tuple[str, ValueDecoder]]
) -> dict[str, Any]:
    """Values of one image, in schema column order, back to canonical values."""
    return {name: decode(text) for (name, decode), text in zip(decoders, texts, strict=True)}


def row_key(schema: TableSchema, image: Mapping[str, Any]) -> tuple[Any, ...]:
    """The row's key values, as :attr:`RowChange.key` holds them."""
    return tuple(image[name] for name in schema.key_columns)
