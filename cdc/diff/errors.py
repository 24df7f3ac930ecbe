"""Why a consistency check could not run; each kind maps to one cdcctl exit code.

The messages are masked when they are made, so a URI quoted in one never
shows its password, whoever prints it.
"""

from __future__ import annotations

from cdc.masking import mask_secret

__all__ = ["DiffError", "DiffInputError", "DiffUnavailableError"]


class DiffError(RuntimeError):
    """The check failed midway (a statement the server refused, a table that changed shape)."""

    def __init__(self, message: str) -> None:
        super().__init__(mask_secret(message))


class DiffInputError(DiffError):
    """The request cannot be checked as given: no table matches, wrong credentials, bad sizes."""


class DiffUnavailableError(DiffError):
    """A server could not be reached, or the connection to it was lost."""
