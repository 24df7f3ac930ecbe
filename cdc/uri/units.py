"""Sizes and durations as people write them in URIs and config files.

Sizes: plain bytes (``1048576``) or a number with a unit, decimal (``KB``,
``MB``, ``GB``, ``TB``: powers of 1000) or binary (``KiB``, ``MiB``, ``GiB``,
``TiB``: powers of 1024); units are case-insensitive. Durations: one or more
``<number><unit>`` groups with units ``ms``, ``s``, ``m``, ``h`` (``5s``,
``200ms``, ``1m30s``), as Go's ``time.ParseDuration`` reads them in TiCDC; a
bare number is refused because seconds and milliseconds are both plausible.
"""

from __future__ import annotations

import re

from cdc.errors import ConfigError

__all__ = ["format_size", "parse_duration", "parse_size"]

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+")


def parse_size(text: str, *, field: str) -> int:
    """The number of bytes in ``text`` (``64MiB``, ``1GB``, ``1048576``)."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise ConfigError(
            field,
            f"{text!r} is not a size; write bytes or a number with a unit "
            "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 64MiB, 1GB or 1048576",
        )
    number = match.group(1)
    if "." in number and not unit:
        raise ConfigError(
            field,
            f"{text!r}: a plain byte count must be a whole number; e.g. 1024, "
            "or add a unit as in 1.5KiB or 64MiB",
        )
    return int(float(number) * _SIZE_UNITS[unit])


def format_size(size: int) -> str:
    """The shortest exact text for ``size`` that :func:`parse_size` reads back."""
    for unit in ("TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB"):
        factor = _SIZE_UNITS[unit.lower()]
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def parse_duration(text: str, *, field: str) -> float:
    """The number of seconds in ``text`` (``5s``, ``200ms``, ``1m30s``)."""
    compact = text.strip()
    if _DURATION.fullmatch(compact) is None:
        hint = " (add a unit: 5s or 5000ms?)" if re.fullmatch(r"\d+(\.\d+)?", compact) else ""
        raise ConfigError(
            field,
            f"{text!r} is not a duration{hint}; write a number with a unit "
            "(ms, s, m, h), e.g. 5s, 200ms or 1m30s",
        )
    return sum(
        float(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(compact)
    )
