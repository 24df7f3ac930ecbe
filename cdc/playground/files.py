"""Private files under a service's base directory.

Credentials, init scripts and the playground state hold passwords, so they
are written owner-only (0600) and atomically: a reader never sees half a
JSON document, even when ``cdcctl playground up`` is interrupted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cdc.playground.errors import ServiceError


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) owner-only; an existing directory is left as it is."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ServiceError(f"cannot create directory {path}: {exc.strerror}") from exc


def write_private(path: Path, text: str) -> None:
    """Atomically replace ``path`` with ``text``, readable by the owner only."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_private(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, version: int) -> dict[str, Any] | None:
    """The JSON object in ``path`` written with format ``version``; None when absent.

    A file that is not such an object is reported with the advice to
    remove it, since it was written by us and can be regenerated.
    """
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ServiceError(f"cannot read {path} ({exc}); remove it and try again") from exc
    if not isinstance(data, dict) or data.get("version") != version:
        raise ServiceError(f"{path} is not a version {version} state file; remove it and try again")
    return data
