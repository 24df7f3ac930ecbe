"""JSON values with a format version.

Every JSON value this project stores carries ``"v"``, the version of its
layout, so a reader can switch on it and a newer layout is recognised instead
of misread (Flink CDC's versioned state serializers, tiflow's meta version).
Only version 1 exists today; a reader meeting anything else stops with a
message naming the key, rather than guessing.
"""

from __future__ import annotations

import json
from typing import Any

from cdc.store.errors import ValueFormatError

__all__ = ["FORMAT_VERSION", "SUPPORTED_VERSIONS", "decode", "encode"]

#: The format version written by ``encode`` when the value names none.
FORMAT_VERSION = 1
#: The format versions this code can read.
SUPPORTED_VERSIONS = frozenset({1})


def _where(key: str | None) -> str:
    return f" at {key}" if key else ""


def _known(version: object) -> bool:
    return type(version) is int and version in SUPPORTED_VERSIONS


def encode(obj: dict[str, Any]) -> bytes:
    """Compact, key-sorted JSON of ``obj`` with ``"v": FORMAT_VERSION`` added if missing."""
    if not isinstance(obj, dict):
        raise TypeError(f"stored JSON values must be objects (dict), got {type(obj).__name__}")
    version = obj.get("v", FORMAT_VERSION)
    if not _known(version):
        raise ValueFormatError(
            f"cannot write format version {version!r}; "
            f"this build writes {sorted(SUPPORTED_VERSIONS)}"
        )
    body = {**obj, "v": version}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def decode(data: bytes, key: str | None = None) -> dict[str, Any]:
    """The object stored in ``data`` (``key`` only improves error messages).

    The result keeps its ``"v"``. A value that is not a JSON object, has no
    ``"v"`` or has one this build does not know raises ``ValueFormatError``.
    """
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        preview = bytes(data[:40])
        raise ValueFormatError(f"value{_where(key)} is not JSON ({exc}): {preview!r}") from None
    if not isinstance(obj, dict):
        raise ValueFormatError(f"value{_where(key)} is JSON {type(obj).__name__}, not an object")
    if "v" not in obj:
        raise ValueFormatError(
            f"value{_where(key)} has no format version 'v'; it was not written by this project"
        )
    version = obj["v"]
    if not _known(version):
        raise ValueFormatError(
            f"value{_where(key)} has format version {version!r}, this build reads "
            f"{sorted(SUPPORTED_VERSIONS)}: was it written by a newer release? upgrade this one"
        )
    return obj
