"""The exceptions of the store layer.

Callers catch ``StoreError`` for "etcd said no" and ``StoreUnavailable`` for
"etcd could not be reached or refused us": the latter always says which
endpoint, why, and what to do about it, never a raw gRPC traceback.
"""

from __future__ import annotations

from cdc.masking import mask_secret

__all__ = [
    "ConflictError",
    "FencedError",
    "LeaseLost",
    "StoreError",
    "StoreUnavailable",
    "ValueFormatError",
    "WatchCompacted",
]


class StoreError(Exception):
    """Base of every error raised by ``cdc.store``."""


class StoreUnavailable(StoreError):
    """etcd is unreachable, speaks another TLS mode, or rejected our credentials.

    ``endpoint`` is the endpoint (or comma-joined endpoints) tried, ``reason``
    what went wrong, ``hint`` what the operator should check. Callers may
    retry: nothing was written unless ``reason`` says the request timed out.
    """

    def __init__(self, endpoint: str, reason: str, hint: str) -> None:
        self.endpoint = mask_secret(endpoint)
        self.reason = mask_secret(reason)
        self.hint = hint
        super().__init__(f"etcd at {self.endpoint} is unavailable: {self.reason}. {self.hint}")


class FencedError(StoreError):
    """An owner-only write was refused: the writer is no longer the owner.

    ``current_revision`` is the create revision of the owner key now (``None``
    when nobody owns the cluster); the fence carried ``fence_revision``.
    """

    def __init__(self, key: str, fence_revision: int, current_revision: int | None) -> None:
        self.key = key
        self.fence_revision = fence_revision
        self.current_revision = current_revision
        now = "no owner" if current_revision is None else f"owner revision {current_revision}"
        super().__init__(
            f"fenced write refused: owner key {key} was won at revision {fence_revision}, "
            f"now {now}; this process is no longer the owner and must step down"
        )


class ConflictError(StoreError):
    """An ``update`` lost the compare-and-swap race more often than it may retry."""


class LeaseLost(StoreError):
    """A lease expired or was revoked; keys written under it are gone."""

    def __init__(self, lease_id: int) -> None:
        self.lease_id = lease_id
        super().__init__(f"etcd lease {lease_id:x} has expired or was revoked")


class WatchCompacted(StoreError):
    """A watch asked for history that etcd has already compacted away.

    The watcher must re-read the current state and watch again from there.
    """

    def __init__(self, key: str, compacted_revision: int) -> None:
        self.key = key
        self.compacted_revision = compacted_revision
        super().__init__(
            f"watch on {key} lost history: etcd compacted it up to revision "
            f"{compacted_revision}; re-read the current state and watch from there"
        )


class ValueFormatError(StoreError, ValueError):
    """A stored value is not JSON of a known format version."""
