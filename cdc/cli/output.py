"""How cdcctl prints results: JSON by default (for scripts), tables for people.

Everything printed goes through `mask_secret`, so no command can leak a
password it happened to hold.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from cdc.masking import mask_secret

FORMATS = ("json", "table")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def emit(data: Any, fmt: str = "json", columns: Sequence[str] | None = None) -> None:
    """Prints `data` (a mapping, or a list of mappings for tables) in `fmt`."""
    if fmt == "json":
        sys.stdout.write(mask_secret(json.dumps(_plain(data), indent=2, sort_keys=False)) + "\n")
        return
    rows = data if isinstance(data, list) else [data]
    cols = list(columns or (rows[0].keys() if rows else []))
    table = Table(*cols)
    for row in rows:
        table.add_row(*(mask_secret(_cell(row.get(c))) for c in cols))
    Console().print(table)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(_plain(value))
    return str(value)


def error(message: str) -> None:
    """One line on stderr, masked, prefixed so scripts can tell it from output."""
    sys.stderr.write("cdcctl: error: " + mask_secret(message) + "\n")
