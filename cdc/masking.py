"""Hiding credentials in URIs and in free text (log lines, error messages).

Best effort by design: these functions run on whatever text reaches a log,
including URIs too malformed to parse, so they never raise and prefer hiding
too much to hiding too little. A leaf module: it imports nothing of the
project, so that every layer (logging included) can mask.

A URI's password is the text between the first ``:`` after ``scheme://`` and
the ``@`` that ends the user information. A password may itself contain
``@``, ``/`` or ``?`` when the user forgot to percent-encode it, so the end of
the user information is the *last* ``@`` of the URI, unless that ``@`` sits
inside a ``key=value`` query (``password-file=/a@b``).
"""

from __future__ import annotations

import re

__all__ = ["MASK", "SECRET_PARAMS", "mask_secret", "mask_uri"]

MASK = "******"

#: Query parameters whose value is a credential (references such as
#: ``password-env`` and ``password-file`` name where a secret lives and stay visible).
SECRET_PARAMS = frozenset({"password", "passwd", "pwd", "token", "secret", "ssl-key-password"})

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_SECRET_PARAM = re.compile(
    r"(?P<key>(?:^|[?&;])(?:" + "|".join(re.escape(p) for p in sorted(SECRET_PARAMS)) + r")=)"
    r"(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)


def userinfo_end(rest: str, *, strict: bool = True) -> int:
    """Index of the ``@`` that ends the user information in ``rest`` (the text after ``://``).

    The last ``@`` wins, so an unencoded ``@`` in a password still splits
    correctly, unless that ``@`` sits inside a ``key=value`` query: then the
    search continues before the query. Returns -1 when there is no user
    information; with ``strict=False`` (masking) a lone ``@`` inside what looks
    like a query still counts, hiding too much rather than too little.
    """
    end = len(rest)
    last = rest.rfind("@")
    while True:
        at = rest.rfind("@", 0, end)
        if at == -1:
            return -1 if strict else last
        query = rest.find("?", 0, at)
        if query == -1 or "=" not in rest[query:at]:
            return at
        end = query


def _mask_userinfo(uri: str, scheme_end: int) -> str:
    rest = uri[scheme_end:]
    at = userinfo_end(rest, strict=False)
    if at == -1:
        return uri
    colon = rest.find(":", 0, at)
    if colon == -1:
        return uri
    return uri[:scheme_end] + rest[: colon + 1] + MASK + rest[at:]


def mask_uri(uri: str) -> str:
    """``uri`` with its password and secret query parameters replaced by ``******``.

    Works on any input, parseable or not; never raises.
    """
    try:
        text = uri if isinstance(uri, str) else str(uri)
        match = _SCHEME.match(text)
        if match is not None:
            text = _mask_userinfo(text, match.end())
        return _SECRET_PARAM.sub(lambda m: m.group("key") + MASK, text)
    except Exception:  # masking must never be the reason a log line is lost
        return MASK


def mask_secret(text: str) -> str:
    """``text`` with every URI inside it masked as by :func:`mask_uri`.

    A URI is taken to run from its ``scheme://`` to the next whitespace, which
    is how URIs appear in log lines and error messages (quotes or commas
    trailing the URI are harmless: they only widen the region searched).
    """
    try:
        source = text if isinstance(text, str) else str(text)
        parts: list[str] = []
        pos = 0
        for match in _SCHEME.finditer(source):
            if match.start() < pos:
                continue
            end = match.end()
            while end < len(source) and not source[end].isspace():
                end += 1
            parts.append(source[pos : match.start()])
            parts.append(_mask_userinfo(source[match.start() : end], match.end() - match.start()))
            pos = end
        parts.append(source[pos:])
        return _SECRET_PARAM.sub(lambda m: m.group("key") + MASK, "".join(parts))
    except Exception:  # masking must never be the reason a log line is lost
        return MASK
