"""The configuration layer: source/sink URIs, changefeed settings, secret masking.

Everything a user can get wrong is checked here, once, and reported as a
:class:`ConfigError` naming the dotted key; the rest of the code receives
validated, frozen values.
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
from cdc.config.errors import ConfigError
from cdc.config.masking import MASK, mask_secret, mask_uri
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
    "MASK",
    "OVERRIDE_KEYS",
    "BlackholeSinkURI",
    "ChangefeedConfig",
    "ConfigError",
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
    "mask_secret",
    "mask_uri",
    "parse_duration",
    "parse_size",
    "parse_sink_uri",
    "parse_source_uri",
]
