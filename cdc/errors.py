"""The one exception type of the configuration layer, importable from any layer.

A leaf module (it imports only ``cdc.masking``): the store, the filters and
the sinks raise ``ConfigError`` for a bad setting without depending on
``cdc.config``, which sits above them.

Every configuration problem names the dotted path of the offending setting
(``sink-uri``, ``filter.event-filters[0].ignore-event``) so that a CLI can
print it next to the flag or TOML key the user has to change. The message says
what was wrong, what is allowed and gives an example.

Messages pass through :func:`cdc.masking.mask_secret` on construction:
whatever value an error quotes, a password inside a URI never reaches a log.
"""

from __future__ import annotations

from cdc.masking import mask_secret

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration value is missing, malformed or inconsistent.

    ``field`` is the dotted path of the setting, ``message`` the explanation;
    ``str()`` is ``"<field>: <message>"``.
    """

    field: str
    message: str

    def __init__(self, field: str, message: str) -> None:
        masked = mask_secret(message)
        super().__init__(field, masked)
        self.field = field
        self.message = masked

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"
