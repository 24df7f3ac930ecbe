"""Refusing, before anything is written, a changefeed whose password references the server
would not resolve (``cdc.uri.secrets``): a file outside ``--secrets-dir``, a variable outside
``--secrets-env-prefix`` or one of the server's own.

Create and update check here, so the author hears it at once (INVALID_ARGUMENT naming
the allowed directories or prefix) rather than from a changefeed that fails when a
capture first connects; the captures check again wherever they resolve a reference.
"""

from __future__ import annotations

from cdc.config import ChangefeedConfig
from cdc.sink.registry import kind_of
from cdc.uri.secrets import SecretPolicy

__all__ = ["check_password_refs"]


def check_password_refs(config: ChangefeedConfig, policy: SecretPolicy) -> None:
    """ConfigError for the first source or sink password reference ``policy`` does not lend."""
    config.source_uri.check_password_ref(policy)
    database = kind_of(config.sink_uri).database(config.sink_uri)
    if database is not None:
        database.check_password_ref(policy)
