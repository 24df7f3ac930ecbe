"""The schema history's error, apart from the DDL parser, so that code which only names
it (the changefeed's error classes, which every ``cdcctl`` command imports) does not
import sqlglot."""

from __future__ import annotations

__all__ = ["DdlApplyError"]


class DdlApplyError(ValueError):
    """A DDL the server ran does not fit the schema history (the history is out of step)."""
