"""Refusing to send a password in clear text to a server we cannot verify.

A MySQL server may switch the client to ``mysql_clear_password`` (or PAM's
``dialog``), and PyMySQL then sends the password as it is. Whoever may create
a changefeed chooses the addresses the captures connect to, so a server of
their choosing would receive the password of a URI that reads it from a file
or an environment variable of the capture (``password-file`` /
``password-env``). These plugins are answered only over TLS whose
certificate was verified (``ssl-ca`` set); otherwise the connection fails
before anything is sent, naming the server and what to change.

MySQL 8's ``caching_sha2_password`` and ``sha256_password`` amount to the same
in their full authentication: PyMySQL sends the password in clear over any TLS
(verified or not), or encrypted with a public key the server itself hands
over, which a server of the author's choosing can decrypt. Their challenge
(``caching_sha2_password``'s fast path, a scramble like
``mysql_native_password``'s) is still answered; the full exchange needs
verified TLS too.
"""

from __future__ import annotations

import ssl
from typing import Any

from pymysql import _auth

from cdc.errors import ConfigError

__all__ = ["CLEAR_TEXT_PLUGINS", "FULL_AUTH_PLUGINS", "guarded_auth_plugins"]

#: Authentication plugins whose answer is the password itself.
CLEAR_TEXT_PLUGINS = ("mysql_clear_password", "dialog")
#: Plugins whose full authentication gives the server the password (see above).
FULL_AUTH_PLUGINS = ("caching_sha2_password", "sha256_password")

_FAST_AUTH_OK = 3


def _refuse(conn: Any, plugin: str, what: str) -> ConfigError:
    return ConfigError(
        "ssl-ca",
        f"the server at {conn.host}:{conn.port} asked for the password {what} ({plugin}) "
        "over a connection whose TLS certificate is not verified; nothing was sent. Connect "
        "with TLS (ssl-ca=/path/to/ca.pem), or give the user an authentication plugin that "
        "does not send the password (mysql_native_password, ed25519)",
    )


class _Refusal:
    """PyMySQL's handler for a clear-text plugin over an unverified connection."""

    def __init__(self, conn: Any, plugin: str) -> None:
        self.conn, self.plugin = conn, plugin

    def authenticate(self, _packet: Any) -> Any:
        raise _refuse(self.conn, self.plugin, "in clear text")


class _ChallengeOnly:
    """PyMySQL's handler for ``caching_sha2_password`` / ``sha256_password`` over an
    unverified connection: the scramble of the fast path, never the full exchange."""

    def __init__(self, conn: Any, plugin: str) -> None:
        self.conn, self.plugin = conn, plugin

    def authenticate(self, packet: Any) -> Any:
        conn = self.conn
        if packet.is_auth_switch_request() and self.plugin == "caching_sha2_password":
            salt = packet.read_all()
            conn.salt = salt[:-1] if salt.endswith(b"\0") else salt
            return _auth._roundtrip(conn, _auth.scramble_caching_sha2(conn.password, conn.salt))
        data = packet.get_all_data()
        if packet.is_extra_auth_data() and len(data) > 1 and data[1] == _FAST_AUTH_OK:
            answer = conn._read_packet()  # the scramble matched: the server's OK follows
            answer.check_error()
            return answer
        raise _refuse(conn, self.plugin, "in full (clear text, or encrypted with its own key)")


def _verified_tls(conn: Any) -> bool:
    # PyMySQL keeps the socket it wrapped in TLS and the context it verified with.
    context = getattr(conn, "ctx", None)
    return (
        isinstance(getattr(conn, "_sock", None), ssl.SSLSocket)
        and context is not None
        and context.verify_mode == ssl.CERT_REQUIRED
    )


def _guard(plugin: str, refusal: type[_Refusal | _ChallengeOnly]) -> Any:
    def handler(conn: Any) -> _Refusal | _ChallengeOnly | None:
        # None: PyMySQL answers the plugin itself, which is safe over verified TLS.
        return None if _verified_tls(conn) else refusal(conn, plugin)

    return handler


def guarded_auth_plugins() -> dict[str, Any]:
    """PyMySQL's ``auth_plugin_map`` that gives no password away without verified TLS."""
    guards = {plugin: _guard(plugin, _Refusal) for plugin in CLEAR_TEXT_PLUGINS}
    return guards | {plugin: _guard(plugin, _ChallengeOnly) for plugin in FULL_AUTH_PLUGINS}
