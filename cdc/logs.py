"""Logging set-up shared by `cdc-server` and `cdcctl`.

Every line is `key=value` structured so operators can grep by changefeed and
table (`changefeed=orders table=shop.items`), and every line passes through a
filter that masks credentials in URIs: a password must never reach a log file,
whatever code formatted the message.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from cdc.masking import mask_secret

_FORMAT = "%(asctime)s %(levelname)s %(name)s %(context)s%(message)s"


class _MaskingFilter(logging.Filter):
    """Renders the message once, masks URIs in it, and adds the context fields."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_secret(record.getMessage())
        record.args = None
        if record.exc_text:
            record.exc_text = mask_secret(record.exc_text)
        fields = getattr(record, "cdc_context", None) or {}
        record.context = "".join(f"{k}={v} " for k, v in fields.items())
        return True


class _MaskingFormatter(logging.Formatter):
    """Masks secrets in tracebacks too, which the filter cannot see yet."""

    def formatException(self, ei: Any) -> str:  # logging's name
        return mask_secret(super().formatException(ei))


def setup_logging(level: str = "INFO", stream: Any = None) -> None:
    """Configures the root logger; safe to call more than once."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(_MaskingFilter())
    handler.setFormatter(_MaskingFormatter(_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


class ContextLogger(logging.LoggerAdapter):
    """A logger that stamps every line with fixed fields (changefeed, table, capture)."""

    def __init__(self, logger: logging.Logger, **context: Any) -> None:
        super().__init__(logger, context)

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        extra: Mapping[str, Any] = self.extra or {}
        kwargs.setdefault("extra", {})["cdc_context"] = dict(extra)
        return msg, kwargs

    def bind(self, **more: Any) -> ContextLogger:
        """A child logger with extra fields, e.g. `log.bind(table="db.t")`."""
        return ContextLogger(self.logger, **{**(self.extra or {}), **more})


def get_logger(name: str, **context: Any) -> ContextLogger:
    return ContextLogger(logging.getLogger(name), **context)
