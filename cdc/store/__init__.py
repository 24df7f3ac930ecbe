"""Shared state in etcd: typed keys, the store, leases, watches and owner election.

``cdc.store.etcd`` is the only module of the project that talks to etcd; the
key layout is drawn in ``cdc.store.keys`` and documented in docs/etcd-layout.md.

The names below are imported when first used (``cdc.lazy``): the key layout needs
no etcd client.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.store.codec import FORMAT_VERSION, decode, encode
    from cdc.store.config import EtcdConfig
    from cdc.store.decoded import DecodedValues
    from cdc.store.election import CampaignCancelled, CampaignTimeout, Election
    from cdc.store.errors import (
        ConflictError,
        FencedError,
        LeaseLost,
        StoreError,
        StoreUnavailable,
        ValueFormatError,
        WatchCompacted,
    )
    from cdc.store.etcd import (
        Absent,
        Condition,
        CreateRevisionIs,
        Delete,
        DeletePrefix,
        EtcdStore,
        EventKind,
        Fence,
        ModRevisionIs,
        Put,
        Versioned,
        WatchEvent,
        WatchHandle,
    )
    from cdc.store.keys import KeySpace, chunk_id, cluster_prefix, parse_chunk_id, parse_key
    from cdc.store.lease import KeepAlive, Lease
    from cdc.store.mirror import Changes, KeyMirror, KeyReader, MirroredReads

__all__ = [
    "Changes",
    "FORMAT_VERSION",
    "Absent",
    "CampaignCancelled",
    "CampaignTimeout",
    "Condition",
    "ConflictError",
    "CreateRevisionIs",
    "DecodedValues",
    "Delete",
    "DeletePrefix",
    "Election",
    "EtcdConfig",
    "EtcdStore",
    "EventKind",
    "Fence",
    "FencedError",
    "KeepAlive",
    "KeyMirror",
    "KeyReader",
    "KeySpace",
    "Lease",
    "LeaseLost",
    "ModRevisionIs",
    "MirroredReads",
    "Put",
    "StoreError",
    "StoreUnavailable",
    "ValueFormatError",
    "Versioned",
    "WatchCompacted",
    "WatchEvent",
    "WatchHandle",
    "chunk_id",
    "cluster_prefix",
    "decode",
    "encode",
    "parse_chunk_id",
    "parse_key",
]

__getattr__ = exports(
    globals(),
    {
        "cdc.store.codec": (
            "FORMAT_VERSION",
            "decode",
            "encode",
        ),
        "cdc.store.config": ("EtcdConfig",),
        "cdc.store.decoded": ("DecodedValues",),
        "cdc.store.election": (
            "CampaignCancelled",
            "CampaignTimeout",
            "Election",
        ),
        "cdc.store.errors": (
            "ConflictError",
            "FencedError",
            "LeaseLost",
            "StoreError",
            "StoreUnavailable",
            "ValueFormatError",
            "WatchCompacted",
        ),
        "cdc.store.etcd": (
            "Absent",
            "Condition",
            "CreateRevisionIs",
            "Delete",
            "DeletePrefix",
            "EtcdStore",
            "EventKind",
            "Fence",
            "ModRevisionIs",
            "Put",
            "Versioned",
            "WatchEvent",
            "WatchHandle",
        ),
        "cdc.store.keys": (
            "KeySpace",
            "chunk_id",
            "cluster_prefix",
            "parse_chunk_id",
            "parse_key",
        ),
        "cdc.store.lease": (
            "KeepAlive",
            "Lease",
        ),
        "cdc.store.mirror": (
            "Changes",
            "KeyMirror",
            "KeyReader",
            "MirroredReads",
        ),
    },
)
