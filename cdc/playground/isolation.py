"""Names that keep tests apart on shared servers.

Each test gets its own database ``<testname>_<random hex>`` and its own etcd
key prefix ``/cdc-test-<random hex>/``, so tests can share one MariaDB and
one etcd per session and clean up only what is theirs.
"""

from __future__ import annotations

import re
import secrets

# MariaDB identifiers are at most 64 characters.
_MAX_IDENTIFIER = 64
_SUFFIX_HEX_BYTES = 4


def database_name(test_name: str, suffix: str | None = None) -> str:
    """A database name for ``test_name``: lowercase ``[a-z0-9_]``, unique suffix, <= 64 chars.

    Parametrised ids such as ``test_x[utf8-1]`` become ``test_x_utf8_1``;
    a name that would start with a digit gets a ``t_`` prefix.
    """
    suffix = suffix or secrets.token_hex(_SUFFIX_HEX_BYTES)
    stem = re.sub(r"[^a-z0-9_]+", "_", test_name.lower()).strip("_") or "test"
    if stem[0].isdigit():
        stem = f"t_{stem}"
    stem = stem[: _MAX_IDENTIFIER - len(suffix) - 1].rstrip("_")
    return f"{stem}_{suffix}"


def etcd_prefix() -> str:
    """A fresh etcd key prefix ``/cdc-test-<random hex>/``."""
    return f"/cdc-test-{secrets.token_hex(_SUFFIX_HEX_BYTES)}/"
