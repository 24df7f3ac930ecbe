"""The configuration layer: a changefeed's settings, loaded, validated and stored.

Everything a user can get wrong is checked here, once, and reported as a
:class:`cdc.errors.ConfigError` naming the dotted key; the rest of the code
receives validated, frozen values. A changefeed's configuration is made of
parts declared elsewhere: the source URI (``cdc.uri.mysql``), the sink URI of
its kind (each sink kind's package, parsed through ``cdc.sink.registry``) and
table rules (``cdc.filter``); this package sits above them. The error type and
secret masking (``cdc.errors``, ``cdc.masking``) are leaf modules, so that
every layer can raise and mask without importing the configuration.
"""

from cdc.config.changefeed import (
    DEFAULT_SUPPORTED_DDL,
    DML_EVENTS,
    OVERRIDE_KEYS,
    ChangefeedConfig,
    EventFilterRule,
    SnapshotMode,
    load_changefeed_config,
)

__all__ = [
    "DEFAULT_SUPPORTED_DDL",
    "DML_EVENTS",
    "OVERRIDE_KEYS",
    "ChangefeedConfig",
    "EventFilterRule",
    "SnapshotMode",
    "load_changefeed_config",
]
