"""``scheme://rest?name=value``: what every URI kind shares, and the checks of its values.

Each URI kind (the source's, each sink kind's) declares its query parameters
as a mapping from name to :data:`ParamCheck`; :func:`parse_query` refuses
unknown, repeated and empty parameters against that mapping and
:func:`check_params` turns the values into typed ones. Errors name
``<field>.<parameter>`` and say what is allowed, with an example.
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from cdc.errors import ConfigError
from cdc.masking import SECRET_PARAMS

__all__ = [
    "ParamCheck",
    "absolute_path",
    "bool_value",
    "check_bare",
    "check_params",
    "check_scheme",
    "env_name",
    "int_value",
    "parse_query",
    "positive_seconds",
    "render_query",
    "split_scheme",
    "suggest",
    "time_zone",
    "unsupported_scheme",
    "with_defaults",
]

ParamCheck = Callable[[str, str], Any]
"""A query parameter's check: (raw value, dotted field) -> typed value, or ConfigError."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TZ_OFFSET = re.compile(r"[+-](0\d|1[0-4]):[0-5]\d")
_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


def suggest(name: str, allowed: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the closest allowed name, or nothing."""
    close = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


# --- value checks ----------------------------------------------------------------------------


def int_value(value: str, field: str, low: int, high: int, example: str) -> int:
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise ConfigError(
            field, f"{value!r} is not an integer; expected a whole number, e.g. {example}"
        ) from None
    if not low <= number <= high:
        raise ConfigError(field, f"{number} is out of range; allowed {low}..{high}, e.g. {example}")
    return number


def bool_value(value: str, field: str, example: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(field, f"{value!r} is not a boolean; write true or false, e.g. {example}")


def positive_seconds(value: str, field: str, example: str) -> float:
    try:
        seconds = float(value.strip())
    except ValueError:
        raise ConfigError(field, f"{value!r} is not a number of seconds; e.g. {example}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(field, f"{value!r} must be a positive number of seconds, e.g. {example}")
    return seconds


def absolute_path(value: str, field: str, example: str) -> str:
    if not value.startswith("/"):
        raise ConfigError(
            field,
            f"{value!r} is not an absolute path; every cdc-server reads it from its own "
            f"working directory, so give the full path, e.g. {example}",
        )
    return value


def time_zone(value: str, field: str) -> str:
    if value.upper() == "SYSTEM" or _TZ_OFFSET.fullmatch(value):
        return value
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError(
            field,
            f"{value!r} is not a known time zone; write SYSTEM, an offset like +08:00, "
            "or a zone name like UTC or Asia/Shanghai",
        ) from None
    return value


def env_name(value: str, field: str) -> str:
    if _ENV_NAME.fullmatch(value) is None:
        raise ConfigError(
            field,
            f"{value!r} is not an environment variable name; use letters, digits and '_', "
            "e.g. password-env=CDC_SOURCE_PASSWORD",
        )
    return value


def check_params(
    params: Mapping[str, str], checks: Mapping[str, ParamCheck], *, field: str
) -> dict[str, Any]:
    """Validates each parameter's value with its check; returns them typed, keyed by name.

    Every name must be in ``checks`` (:func:`parse_query` made sure). Errors
    name ``<field>.<parameter>``.
    """
    return {name: checks[name](value, f"{field}.{name}") for name, value in params.items()}


# --- the URI text ----------------------------------------------------------------------------


def split_scheme(text: Any, field: str, expected: str) -> tuple[str, str]:
    """``(scheme, rest)`` of ``scheme://rest``, the scheme lower-cased; ``expected`` is the
    example the errors show."""
    if not isinstance(text, str):
        raise ConfigError(
            field, f"expected a URI string such as {expected}, got {type(text).__name__}"
        )
    scheme, sep, rest = text.strip().partition("://")
    if not sep or not scheme:
        raise ConfigError(field, f"not a URI: expected <scheme>://..., e.g. {expected}")
    if any(ch.isspace() for ch in rest):
        raise ConfigError(
            field, f"URI contains whitespace; percent-encode it (%20), e.g. {expected}"
        )
    if "#" in rest.rpartition("@")[2]:
        raise ConfigError(field, f"URI fragments ('#...') are not allowed, e.g. {expected}")
    return scheme.lower(), rest


def check_scheme(scheme: str, supported: Iterable[str], field: str, example: str) -> None:
    supported = tuple(supported)
    if scheme not in supported:
        raise unsupported_scheme(scheme, supported, field, example)


def unsupported_scheme(
    scheme: str, supported: Iterable[str], field: str, example: str
) -> ConfigError:
    """The error for a scheme not in ``supported``: those listed, the closest suggested."""
    supported = tuple(supported)
    listed = ", ".join(f"{s}://" for s in supported)
    return ConfigError(
        field,
        f"unsupported scheme {scheme + '://'!r}; {suggest(scheme, supported)}"
        f"supported: {listed}, e.g. {example}",
    )


def parse_query(query: str, field: str, allowed: Collection[str]) -> dict[str, str]:
    """``a=1&b=2`` as an ordered dict; unknown, duplicate and empty parameters are errors."""
    params: dict[str, str] = {}
    for piece in query.split("&"):
        if not piece:
            continue
        raw_name, sep, raw_value = piece.partition("=")
        name = unquote(raw_name).strip().lower()
        if name not in allowed:
            if allowed:
                hint = f"{suggest(name, allowed)}allowed: {', '.join(sorted(allowed))}"
            else:
                hint = "this URI takes no parameters"
            if name in SECRET_PARAMS and "password-env" in allowed:
                hint = (
                    "a password goes before the host (mysql://user:password@host:3306/) or "
                    f"is named by password-env=VAR or password-file=/path; {hint}"
                )
            raise ConfigError(f"{field}.{name}", f"unknown parameter {name!r}; {hint}")
        if name in params:
            raise ConfigError(
                f"{field}.{name}", f"parameter {name!r} is given twice; keep one of them"
            )
        value = unquote(raw_value)
        if not sep or not value:
            raise ConfigError(
                f"{field}.{name}", f"parameter {name!r} has no value; write {name}=<value>"
            )
        params[name] = value
    return params


def render_query(params: Mapping[str, str]) -> str:
    """``?a=1&b=2`` (empty without parameters), the inverse of :func:`parse_query`."""
    if not params:
        return ""
    return "?" + "&".join(f"{name}={quote(value, safe='/:,+')}" for name, value in params.items())


def with_defaults(params: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    """``params`` with the ``defaults`` it does not give itself added after them."""
    merged = dict(params)
    for name, value in defaults.items():
        merged.setdefault(name, value)
    return merged


def check_bare(scheme: str, rest: str, field: str) -> None:
    """A URI that is its scheme alone (``blackhole://``): no host, path or parameters."""
    if rest not in ("", "/"):
        if "?" in rest:
            parse_query(rest.partition("?")[2], field, frozenset())
        raise ConfigError(
            field, f"{scheme}:// takes no host, path or parameters; write just {scheme}://"
        )
