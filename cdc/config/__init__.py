"""The configuration layer: source/sink URIs, changefeed settings, sizes and durations.

Everything a user can get wrong is checked here, once, and reported as a
:class:`cdc.errors.ConfigError` naming the dotted key; the rest of the code
receives validated, frozen values. The error type and secret masking
(``cdc.masking``) are leaf modules of ``cdc`` rather than part of this package,
so that every layer can raise and mask without importing the configuration
(which itself needs ``cdc.filter`` to check table rules).
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
from cdc.config.units import format_size, parse_duration, parse_size
from cdc.config.uri import (
    BlackholeSinkURI,
    FileProtocol,
    FileSinkURI,
    MySQLSinkURI,
    MySQLURI,
    PullSinkURI,
    SinkURI,
    SourceURI,
    parse_sink_uri,
    parse_source_uri,
)

__all__ = [
    "DEFAULT_SUPPORTED_DDL",
    "DML_EVENTS",
    "OVERRIDE_KEYS",
    "BlackholeSinkURI",
    "ChangefeedConfig",
    "EventFilterRule",
    "FileProtocol",
    "FileSinkURI",
    "MySQLSinkURI",
    "MySQLURI",
    "PullSinkURI",
    "SinkURI",
    "SnapshotMode",
    "SourceURI",
    "format_size",
    "load_changefeed_config",
    "parse_duration",
    "parse_size",
    "parse_sink_uri",
    "parse_source_uri",
]
