"""Refusing to send a password in clear text to a server we cannot verify.

A MySQL server may switch the client to ``mysql_clear_password`` (or PAM's
``dialog``), and PyMySQL then sends the password as it is. Whoever may create
a changefeed chooses the addresses the captures connect to, so a server of
their choosing would receive the password of a URI that reads it from a file
or an environment variable of the capture (``password-file`` /
``password-env``). These plugins are answered only over TLS whose
certificate was verified (``ssl-ca`` set); otherwise the connection fails
before anything is sent, naming the server and what to change.
"""

from __future__ import annotations

import ssl
from typing import Any

from cdc.errors import ConfigError

__all__ = ["CLEAR_TEXT_PLUGINS", "guarded_auth_plugins"]

#: Authentication plugins whose answer is the password itself.
CLEAR_TEXT_PLUGINS = ("mysql_clear_password", "dialog")


class _Refusal:
    """PyMySQL's handler for a clear-text plugin over an unverified connection."""

    def __init__(self, conn: Any, plugin: str) -> None:
        self.conn, self.plugin = conn, plugin

    def authenticate(self, _packet: Any) -> Any:
        raise ConfigError(
            "ssl-ca",
            f"the server at {self.conn.host}:{self.conn.port} asked for the password in clear "
            f"text ({self.plugin}) over a connection whose TLS certificate is not verified; "
            "nothing was sent. Connect with TLS (ssl-ca=/path/to/ca.pem), or give the user "
            "an authentication plugin that does not send the password "
            "(mysql_native_password, ed25519)",
        )


def _verified_tls(conn: Any) -> bool:
    # PyMySQL keeps the socket it wrapped in TLS and the context it verified with.
    context = getattr(conn, "ctx", None)
    return (
        isinstance(getattr(conn, "_sock", None), ssl.SSLSocket)
        and context is not None
        and context.verify_mode == ssl.CERT_REQUIRED
    )


def _guard(plugin: str) -> Any:
    def handler(conn: Any) -> _Refusal | None:
        # None: PyMySQL answers the plugin itself, which is safe over verified TLS.
        return None if _verified_tls(conn) else _Refusal(conn, plugin)

    return handler


def guarded_auth_plugins() -> dict[str, Any]:
    """PyMySQL's ``auth_plugin_map`` that refuses clear-text plugins without verified TLS."""
    return {plugin: _guard(plugin) for plugin in CLEAR_TEXT_PLUGINS}
