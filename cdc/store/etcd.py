"""The one module that talks to etcd (through ``pyetcd``); nothing else imports it.

What it guarantees to the rest of the project:

* Reads return ``Versioned`` values carrying the ``mod_revision`` they were read
  at; writes that depend on a read are compare-and-swap on it
  (``compare_and_swap``, ``update``), create-only writes compare
  ``create_revision == 0`` (``create``).
* Owner-only writes carry a ``Fence`` (the owner key and the create revision at
  which it was won): the transaction also compares the owner key's
  ``create_revision``, so a deposed owner changes nothing and gets
  ``FencedError``.
* Every failure to reach etcd (down, wrong TLS, bad credentials, timeout) is a
  ``StoreUnavailable`` naming the endpoint, the reason and what to check.
* Watches survive broken streams: they re-attach from the revision after the
  last delivered event, so no event is lost or repeated.
* Every write this store applies is told, with its revision, to the write
  listeners (``add_write_listener``): an in-memory mirror of keys
  (``cdc.store.mirror``) shows its owner's own writes at once, before the
  watch brings them back.

Connections: one gRPC channel to one endpoint at a time. A connection failure
moves the next request to the next endpoint; an expired auth token is renewed
and the request retried once (it was rejected, so nothing was applied). Other
requests are never retried here: a timed-out write may have been applied, and
only the caller knows whether repeating it is safe.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc
import pyetcd
from pyetcd import exceptions as etcd_exceptions
from pyetcd import utils as etcd_utils
from pyetcd.events import DeleteEvent

from cdc.errors import ConfigError
from cdc.metrics import ETCD_REQUESTS
from cdc.store.codec import decode, encode
from cdc.store.config import EtcdConfig, split_endpoint
from cdc.store.errors import (
    ConflictError,
    FencedError,
    LeaseLost,
    StoreError,
    StoreUnavailable,
    WatchCompacted,
)
from cdc.store.keys import KeySpace
from cdc.store.lease import Lease
from cdc.store.records import (
    Absent,
    Condition,
    CreateRevisionIs,
    Delete,
    DeletePrefix,
    EventKind,
    Fence,
    KeyLike,
    ModRevisionIs,
    Op,
    Put,
    Value,
    Versioned,
    WatchEvent,
    WriteListener,
)
from cdc.store.watch import Item, WatchHandle

__all__ = [
    "Absent",
    "Condition",
    "CreateRevisionIs",
    "Delete",
    "DeletePrefix",
    "EtcdConfig",
    "EtcdStore",
    "EventKind",
    "Fence",
    "ModRevisionIs",
    "Op",
    "Put",
    "Versioned",
    "WatchEvent",
    "WatchHandle",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: gRPC channel options: reconnect quickly after etcd comes back, notice dead
#: connections under long-lived watch streams, accept large range pages.
_GRPC_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]
#: Keys per range request; pages of one read share one revision.
_PAGE = 1000
#: How long a watch creation may wait for etcd's answer, which comes on the
#: connection's one watch stream behind the events already queued there.
_WATCH_CREATE_DEADLINE = 30.0
#: Tries to create one watch, each on a fresh connection after the last timed out.
_WATCH_CREATE_TRIES = 3
_TLS_WORDS = ("ssl", "tls", "handshake", "certificate", "x509")


def _key(key: KeyLike) -> str:
    text = str(key)
    if not text:
        raise ValueError("etcd key must not be empty")
    return text


def _value(value: Value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict):
        return encode(value)
    raise TypeError(f"etcd values are bytes, str or dict, got {type(value).__name__}")


def _lease_id(lease: Lease | int | None) -> int | None:
    if lease is None:
        return None
    return lease.id if isinstance(lease, Lease) else int(lease)


def _versioned(value: bytes, meta: Any) -> Versioned:
    return Versioned(
        key=meta.key.decode(),
        value=bytes(value),
        mod_revision=meta.mod_revision,
        create_revision=meta.create_revision,
        lease=meta.lease_id or None,
    )


def _rpc_status(exc: BaseException) -> tuple[grpc.StatusCode | None, str]:
    """The gRPC status behind ``exc`` (pyetcd re-raises its own types from gRPC errors)."""
    for candidate in (exc, exc.__context__):
        if isinstance(candidate, grpc.RpcError) and hasattr(candidate, "code"):
            return candidate.code(), candidate.details() or ""
    if isinstance(exc, etcd_exceptions.ConnectionTimeoutError | etcd_exceptions.WatchTimedOut):
        return grpc.StatusCode.DEADLINE_EXCEEDED, "no answer in time"
    if isinstance(
        exc, etcd_exceptions.ConnectionFailedError | etcd_exceptions.NoServerAvailableError
    ):
        return grpc.StatusCode.UNAVAILABLE, "connection failed"
    return None, str(exc) or type(exc).__name__


def _token_expired(exc: BaseException) -> bool:
    """Whether etcd rejected the request for a stale auth token (renew and retry)."""
    return "invalid auth token" in _rpc_status(exc)[1].lower()


def _is_etcd_error(exc: BaseException) -> bool:
    return isinstance(exc, grpc.RpcError | etcd_exceptions.Etcd3Exception)


class EtcdStore:
    """Typed access to one cluster's keys in etcd (see the module docstring).

    Connects on construction and raises ``StoreUnavailable`` when no endpoint
    answers. Keys may be given as ``str`` or as typed keys from
    ``cdc.store.keys``; ``self.keys`` builds them for this cluster's prefix.
    Thread-safe; close it (or use ``with``) to end watches and connections.
    """

    def __init__(self, config: EtcdConfig) -> None:
        self.config = config
        self.keys = KeySpace(config.prefix)
        self._lock = threading.Lock()
        #: One watch created at a time, so that none is created on a connection whose
        #: last creation timed out (``_attach_watch``).
        self._watch_create = threading.Lock()
        self._index = 0
        self._client: Any = None
        self._credentials: grpc.ChannelCredentials | None = self._load_credentials()
        self._watches: set[WatchHandle] = set()
        self._write_listeners: list[WriteListener] = []
        self._opened: list[Any] = []
        self._closed = False
        self._connect()

    # -- connections -------------------------------------------------------

    def _load_credentials(self) -> grpc.ChannelCredentials | None:
        cfg = self.config
        if cfg.ca is None:
            return None
        files: dict[str, bytes | None] = {}
        for name, path in (("ca", cfg.ca), ("cert", cfg.cert), ("key", cfg.key)):
            if path is None:
                files[name] = None
                continue
            try:
                with open(path, "rb") as handle:
                    files[name] = handle.read()
            except OSError as exc:
                raise ConfigError(f"etcd.{name}", f"cannot read {path!r}: {exc.strerror}") from None
        return grpc.ssl_channel_credentials(files["ca"], files["key"], files["cert"])

    def _open(self, endpoint: str) -> Any:
        host, port = split_endpoint(endpoint)
        cfg = self.config
        ep = pyetcd.Endpoint(
            host,
            port,
            secure=self._credentials is not None,
            creds=self._credentials,
            time_retry=0,
            opts=_GRPC_OPTIONS,
        )
        try:
            client = _Client(
                endpoints=[ep], timeout=cfg.dial_timeout, user=cfg.user, password=cfg.password
            )
        except BaseException:
            ep.close()
            raise
        if self._credentials is None:
            # gRPC sends call credentials only over TLS; without TLS the auth
            # token travels as plain metadata, which pyetcd sends as well.
            client.call_credentials = None
        return client

    def _connect(self) -> None:
        """Open a client on the first endpoint that answers, else ``StoreUnavailable``."""
        endpoints = self.config.endpoints
        failures: list[StoreError] = []
        for step in range(len(endpoints)):
            index = (self._index + step) % len(endpoints)
            endpoint = endpoints[index]
            try:
                client = self._open(endpoint)
            except Exception as exc:
                if not _is_etcd_error(exc):
                    raise
                failures.append(self._translate(exc, endpoint, "connecting"))
                continue
            try:
                client.get_response(str(self.keys.owner()), count_only=True)
            except Exception as exc:
                client.close()
                if not _is_etcd_error(exc):
                    raise
                failures.append(self._translate(exc, endpoint, "connecting"))
                continue
            with self._lock:
                self._index, self._client = index, client
                self._opened.append(client)
            log.info("connected to etcd at %s (prefix %s)", endpoint, self.keys.prefix)
            return
        if len(failures) == 1:
            raise failures[0]
        reasons = "; ".join(str(f) for f in failures)
        raise StoreUnavailable(
            ",".join(endpoints),
            f"no endpoint answered ({reasons})",
            "check that the etcd cluster is up and reachable from this host",
        )

    def _active(self) -> tuple[Any, str]:
        with self._lock:
            if self._closed:
                raise StoreError("the etcd store is closed")
            endpoint = self.config.endpoints[self._index]
            if self._client is None:
                try:
                    self._client = self._open(endpoint)
                    self._opened.append(self._client)
                except Exception as exc:
                    if not _is_etcd_error(exc):
                        raise
                    self._index = (self._index + 1) % len(self.config.endpoints)
                    raise self._translate(exc, endpoint, "connecting") from None
            return self._client, endpoint

    def _drop(self, client: Any, *, next_endpoint: bool) -> None:
        """Stop using ``client``: the next request opens a fresh one (maybe elsewhere).

        The old client is closed only after a grace period, as other threads
        may still be inside a request on it; closing it ends its watch streams,
        which then re-attach through the new client.
        """
        with self._lock:
            if self._client is not client:
                return
            self._client = None
            if next_endpoint:
                self._index = (self._index + 1) % len(self.config.endpoints)
        timer = threading.Timer(2 * self.config.dial_timeout + 1, self._retire, args=(client,))
        timer.daemon = True
        timer.start()

    def _retire(self, client: Any) -> None:
        with self._lock:
            if client not in self._opened:
                return
            self._opened.remove(client)
        client.close()

    def _call(self, what: str, fn: Callable[[Any], T], lease_id: int | None = None) -> T:
        """``fn(client)`` with etcd errors turned into ``StoreError``s (see module docstring)."""
        for attempt in range(2):
            client, endpoint = self._active()
            ETCD_REQUESTS.inc()
            try:
                return fn(client)
            except Exception as exc:
                if not _is_etcd_error(exc):
                    raise
                if attempt == 0 and _token_expired(exc):
                    log.info("etcd auth token expired; authenticating again")
                    self._drop(client, next_endpoint=False)
                    continue
                error = self._translate(exc, endpoint, what, lease_id)
                if isinstance(error, StoreUnavailable) and len(self.config.endpoints) > 1:
                    self._drop(client, next_endpoint=True)
                raise error from None
        raise AssertionError("unreachable")

    def _translate(
        self, exc: BaseException, endpoint: str, what: str, lease_id: int | None = None
    ) -> StoreError:
        code, details = _rpc_status(exc)
        low = details.lower()
        user = self.config.user
        if isinstance(exc, etcd_exceptions.RevisionCompactedError):
            return WatchCompacted(what, exc.compacted_revision)
        if code is grpc.StatusCode.NOT_FOUND and "lease not found" in low:
            return LeaseLost(lease_id if lease_id is not None else 0)
        if code is grpc.StatusCode.UNAVAILABLE or code is grpc.StatusCode.CANCELLED:
            if any(word in low for word in _TLS_WORDS):
                return StoreUnavailable(
                    endpoint,
                    f"TLS handshake failed while {what} ({details})",
                    f"check that etcd serves TLS (https) on {endpoint} (TLS is on because a CA "
                    "file is set), that this CA file signed the server's certificate and that "
                    "the server accepts the client certificate",
                )
            mode = (
                "TLS is on (a CA file is set), so etcd must serve https"
                if self.config.tls
                else "TLS is off (no CA file set), so etcd must serve plain http"
            )
            return StoreUnavailable(
                endpoint,
                f"cannot reach etcd while {what} ({details})",
                f"check that etcd is running and listening on {endpoint}; {mode}",
            )
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return StoreUnavailable(
                endpoint,
                f"no answer within {self.config.dial_timeout}s while {what}; a write may or "
                "may not have been applied",
                "check the network and etcd's health; raise the dial timeout if etcd is slow",
            )
        if "authentication failed" in low:
            return StoreUnavailable(
                endpoint,
                f"authentication failed for user {user!r}",
                "check the etcd user and password",
            )
        if "authentication is not enabled" in low:
            return StoreUnavailable(
                endpoint,
                "credentials were given but this etcd has authentication disabled",
                "remove the etcd user and password, or enable auth in etcd",
            )
        if "user name is empty" in low or code is grpc.StatusCode.UNAUTHENTICATED:
            return StoreUnavailable(
                endpoint,
                f"etcd requires authentication ({details})",
                "set the etcd user and password",
            )
        if code is grpc.StatusCode.PERMISSION_DENIED:
            return StoreUnavailable(
                endpoint,
                f"permission denied for user {user!r} while {what}",
                f"grant the user read/write on prefix {self.keys.prefix}/ "
                "(etcdctl role grant-permission --prefix)",
            )
        if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
            return StoreUnavailable(
                endpoint,
                f"etcd refused {what}: {details}",
                "etcd is out of space: compact and defragment it, then disarm the NOSPACE alarm",
            )
        name = code.name if code is not None else type(exc).__name__
        return StoreError(f"etcd at {endpoint} refused {what}: {name}: {details}")

    def close(self) -> None:
        """Cancel every watch and close the connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            watches = list(self._watches)
        for handle in watches:
            handle.cancel()
        with self._lock:
            opened, self._opened, self._client = self._opened, [], None
        for client in opened:
            client.close()

    def __enter__(self) -> EtcdStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_range(self, prefix: str) -> str:
        base = self.keys.prefix + "/"
        if not isinstance(prefix, str) or not prefix.startswith(base):
            raise ValueError(
                f"refusing to touch range {prefix!r}: a store only deletes inside its cluster "
                f"prefix {base!r}"
            )
        return prefix

    # -- reads ---------------------------------------------------------------

    def get(self, key: KeyLike) -> Versioned | None:
        """The value of ``key`` with its revisions, or ``None`` when absent."""
        k = _key(key)
        value, meta = self._call(f"reading {k}", lambda c: c.get(k))
        return None if meta is None else _versioned(value, meta)

    def get_with_revision(
        self, key: KeyLike, at: int | None = None
    ) -> tuple[Versioned | None, int]:
        """The value of ``key`` (``None`` when absent) as it was at revision ``at`` (else
        now), and the store's current revision.

        Both come from one response, so watching from ``revision + 1`` follows
        the key without a gap: a put between two separate reads can be missed.
        """
        k = _key(key)
        kwargs: dict[str, Any] = {} if at is None else {"revision": at}
        response = self._call(f"reading {k}", lambda c: c.get_response(k, **kwargs))
        kvs = list(response.kvs)
        found = _versioned(kvs[0].value, _Meta(kvs[0])) if kvs else None
        return found, response.header.revision

    def get_at_one_revision(self, *keys: KeyLike) -> list[Versioned | None]:
        """The values of ``keys`` (``None`` when absent) as they all were at one revision.

        Keys written together in one transaction are seen both old or both new: two
        separate reads can see one before such a write and the other after it."""
        if not keys:
            return []
        first, revision = self.get_with_revision(keys[0])
        return [first, *(self.get_with_revision(key, at=revision)[0] for key in keys[1:])]

    def get_prefix_with_revision(
        self, prefix: str, at: int | None = None
    ) -> tuple[list[Versioned], int]:
        """Every key under ``prefix`` (sorted) and the revision they were read at
        (``at``, else the current one).

        All pages are read at one revision, so the result is one consistent
        snapshot; watch from ``revision + 1`` to follow it without a gap.
        """
        if not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty string")
        start = prefix.encode()
        end = etcd_utils.prefix_range_end(start)
        items: list[Versioned] = []
        revision = at
        while True:
            kwargs: dict[str, Any] = {"limit": _PAGE, "sort_order": "ascend"}
            if revision is not None:
                kwargs["revision"] = revision

            def read_page(c: Any, s: bytes = start, kw: dict[str, Any] = kwargs) -> Any:
                return c.get_range_response(s, end, **kw)

            response = self._call(f"reading prefix {prefix}", read_page)
            if revision is None:
                revision = response.header.revision
            items.extend(_versioned(kv.value, _Meta(kv)) for kv in response.kvs)
            if not response.more or not response.kvs:
                return items, revision
            start = response.kvs[-1].key + b"\0"

    def get_prefix(self, prefix: str) -> list[Versioned]:
        """Every key under ``prefix``, sorted by key, read at one revision."""
        return self.get_prefix_with_revision(prefix)[0]

    def revision(self) -> int:
        """The current revision of the etcd store."""
        key = str(self.keys.owner())
        response = self._call(
            "reading the revision", lambda c: c.get_response(key, count_only=True)
        )
        return response.header.revision

    # -- writes --------------------------------------------------------------

    def add_write_listener(self, listener: WriteListener) -> None:
        """Calls ``listener(ops, revision)`` after every write this store applied (from the
        writing thread, which it must not block)."""
        with self._lock:
            self._write_listeners.append(listener)

    def remove_write_listener(self, listener: WriteListener) -> None:
        with self._lock:
            if listener in self._write_listeners:
                self._write_listeners.remove(listener)

    def _written(self, ops: Sequence[Op], revision: int) -> None:
        for listener in list(self._write_listeners):
            try:
                listener(ops, revision)
            except Exception:
                log.exception("a write listener failed on revision %d", revision)

    def put(self, key: KeyLike, value: Value, lease: Lease | int | None = None) -> int:
        """Write unconditionally; the revision of the write."""
        k, data, lease_id = _key(key), _value(value), _lease_id(lease)
        response = self._call(
            f"writing {k}", lambda c: c.put(k, data, lease=lease_id), lease_id=lease_id
        )
        self._written([Put(k, data, lease_id)], response.header.revision)
        return response.header.revision

    def applied_through(self, prefix: str) -> int | None:
        """Reads go to etcd at its current revision: a later read sees every earlier write
        (``KeyReader.applied_through``)."""
        return None

    def changes_since(self, prefix: str, position: int) -> None:
        """Nothing journals etcd's changes here: a reader reads the prefix
        (``KeyReader.changes_since``)."""
        return None

    def journal_position(self, prefix: str) -> None:
        """See ``changes_since``."""
        return None

    def create_or_get(
        self, key: KeyLike, value: Value, lease: Lease | int | None = None
    ) -> tuple[bool, Versioned]:
        """Create ``key`` only if absent; ``(created, what the key holds now)``, atomically."""
        k, data, lease_id = _key(key), _value(value), _lease_id(lease)

        def run(c: Any) -> tuple[bool, list[Any]]:
            tx = c.transactions
            return c.transaction(
                compare=[tx.create(k) == 0],
                success=[tx.put(k, data, lease=lease_id), tx.get(k)],
                failure=[tx.get(k)],
            )

        created, responses = self._call(f"creating {k}", run, lease_id=lease_id)
        value_, meta = responses[-1][0]
        if created:
            self._written([Put(k, data, lease_id)], meta.mod_revision)
        return created, _versioned(value_, meta)

    def create(self, key: KeyLike, value: Value, lease: Lease | int | None = None) -> bool:
        """Write only if ``key`` does not exist (``create_revision == 0``); whether it did."""
        return self.txn([Absent(key)], [Put(key, value, lease)])

    def compare_and_swap(
        self, key: KeyLike, value: Value, mod_revision: int, lease: Lease | int | None = None
    ) -> bool:
        """Write only if ``key`` is still at ``mod_revision`` (0: still absent); whether it was."""
        return self.txn([ModRevisionIs(key, mod_revision)], [Put(key, value, lease)])

    def update(
        self,
        key: KeyLike,
        fn: Callable[[dict[str, Any] | None], dict[str, Any] | None],
        retries: int = 16,
        *,
        fence: Fence | None = None,
        lease: Lease | int | None = None,
    ) -> dict[str, Any] | None:
        """Apply the pure function ``fn(old) -> new`` to a JSON value; the new value.

        ``old`` is ``None`` when the key is absent; returning ``None`` deletes
        it. The write is a compare-and-swap on the value ``fn`` saw; on
        conflict the key is read again and ``fn`` re-applied, up to
        ``retries`` times, then ``ConflictError``. ``fn`` gets a copy and must
        have no side effects: it may run several times. An unchanged value is
        not written. With ``fence`` the write is owner-only (``FencedError``).
        """
        k = _key(key)
        for attempt in range(retries + 1):
            current = self.get(k)
            old = current.json() if current is not None else None
            new = fn(copy.deepcopy(old))
            data = None if new is None else encode(new)
            if current is None and data is None:
                return None
            if current is not None and data == current.value:
                return decode(data, k)
            condition = ModRevisionIs(k, current.mod_revision) if current else Absent(k)
            op: Op = Delete(k) if data is None else Put(k, data, lease)
            if self.txn([condition], [op], fence=fence):
                return None if data is None else decode(data, k)
            time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise ConflictError(
            f"update of {k} lost the compare-and-swap {retries + 1} times to concurrent writers"
        )

    def delete(self, key: KeyLike) -> bool:
        """Delete ``key``; whether it existed."""
        k = _key(key)
        response = self._call(f"deleting {k}", lambda c: c.delete(k, return_response=True))
        if response.deleted:
            self._written([Delete(k)], response.header.revision)
        return bool(response.deleted)

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under ``prefix`` (inside the cluster prefix); how many there were."""
        p = self._check_range(prefix)
        response = self._call(f"deleting prefix {p}", lambda c: c.delete_prefix(p))
        if response.deleted:
            self._written([DeletePrefix(p)], response.header.revision)
        return response.deleted

    def txn(
        self, conditions: Sequence[Condition], ops: Sequence[Op], fence: Fence | None = None
    ) -> bool:
        """Apply ``ops`` atomically if every condition holds; whether they were applied.

        With ``fence``, the transaction also requires the owner key to still
        have the fence's create revision; if it does not, ``FencedError`` is
        raised (whatever the other conditions say) and nothing is written.
        """
        return self.txn_revision(conditions, ops, fence) is not None

    def txn_revision(
        self, conditions: Sequence[Condition], ops: Sequence[Op], fence: Fence | None = None
    ) -> int | None:
        """``txn``, telling the revision the operations were applied at (None: not applied).

        A writer that later points at what it wrote (a stream's progress naming the
        last record it wrote) needs the revision, not just the success."""
        compares = list(conditions)
        if fence is not None:
            compares.append(CreateRevisionIs(fence.key, fence.create_revision))
        built = [self._build_op(op) for op in ops]
        # _build_op turned every lease into its id
        lease_ids = [op.lease for op in built if isinstance(op, Put) and isinstance(op.lease, int)]

        def run(c: Any) -> tuple[bool, list[Any]]:
            tx = c.transactions
            return c.transaction(
                compare=[_compare(tx, cond) for cond in compares],
                success=[_request(tx, op) for op in built],
                failure=[tx.get(fence.key)] if fence is not None else [],
            )

        keys = ", ".join(_op_key(op) for op in built) or "no keys"
        applied, responses = self._call(
            f"transaction on {keys}", run, lease_id=lease_ids[0] if lease_ids else None
        )
        if not applied and fence is not None:
            owner = responses[0] if responses else []
            current = owner[0][1].create_revision if owner else None
            if current != fence.create_revision:
                raise FencedError(fence.key, fence.create_revision, current)
        if not applied:
            return None
        revision = _txn_revision(responses[0]) if responses else 0
        if built:
            self._written(built, revision)
        return revision

    def _build_op(self, op: Op) -> Op:
        if isinstance(op, Put):
            return Put(_key(op.key), _value(op.value), _lease_id(op.lease))
        if isinstance(op, Delete):
            return Delete(_key(op.key))
        if isinstance(op, DeletePrefix):
            return DeletePrefix(self._check_range(op.prefix))
        raise TypeError(f"not a transaction operation: {op!r}")

    def fenced_put(
        self,
        key: KeyLike,
        value: Value,
        fence: Fence,
        *,
        lease: Lease | int | None = None,
        mod_revision: int | None = None,
    ) -> bool:
        """Owner-only write: ``FencedError`` if ``fence`` no longer holds.

        With ``mod_revision`` it is also a compare-and-swap and returns False
        on conflict; otherwise it returns True.
        """
        conditions = [] if mod_revision is None else [ModRevisionIs(key, mod_revision)]
        return self.txn(conditions, [Put(key, value, lease)], fence=fence)

    def fenced_delete(self, key: KeyLike, fence: Fence, *, mod_revision: int | None = None) -> bool:
        """Owner-only delete: ``FencedError`` if ``fence`` no longer holds; as ``fenced_put``."""
        conditions = [] if mod_revision is None else [ModRevisionIs(key, mod_revision)]
        return self.txn(conditions, [Delete(key)], fence=fence)

    # -- leases --------------------------------------------------------------

    def grant_lease(self, ttl: int) -> Lease:
        """A new lease of ``ttl`` seconds (etcd may round a tiny TTL up)."""
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
            raise ValueError(f"lease TTL must be a whole number of seconds >= 1, got {ttl!r}")
        granted = self._call(f"granting a {ttl}s lease", lambda c: c.lease(ttl))
        return Lease(self, granted.id, granted.ttl)

    def refresh_lease(self, lease_id: int) -> int:
        """Renew a lease; its TTL, or 0 when it no longer exists."""
        responses = self._call(
            f"refreshing lease {lease_id:x}", lambda c: list(c.refresh_lease(lease_id)), lease_id
        )
        return max((r.TTL for r in responses), default=0)

    def revoke_lease(self, lease_id: int) -> None:
        """Revoke a lease (deleting its keys); a lease already gone is fine."""
        try:
            self._call(f"revoking lease {lease_id:x}", lambda c: c.revoke_lease(lease_id), lease_id)
        except LeaseLost:
            return

    def lease_ttl(self, lease_id: int) -> int:
        """Seconds left on a lease, or -1 when it no longer exists."""
        info = self._call(
            f"reading lease {lease_id:x}", lambda c: c.get_lease_info(lease_id), lease_id
        )
        return info.TTL

    # -- watches -------------------------------------------------------------

    def watch_prefix(
        self,
        prefix: str,
        callback: Callable[[WatchEvent], None],
        start_revision: int | None = None,
        on_error: Callable[[StoreError], None] | None = None,
    ) -> WatchHandle:
        """Call ``callback`` for every change under ``prefix`` from ``start_revision``.

        Without ``start_revision`` the watch starts after the current revision.
        Events arrive in revision order on the watch's own thread. If etcd
        compacted the history the watch needs, ``on_error`` gets a
        ``WatchCompacted`` (or this call raises it) and the watch ends: re-read
        with ``get_prefix_with_revision`` and watch again. ``cancel()`` the
        handle to stop. The callback must not block for long; it may use the
        store.
        """
        if not isinstance(prefix, str) or not prefix:
            raise ValueError("prefix must be a non-empty string")
        return self._watch(prefix, True, callback, start_revision, on_error)

    def watch_key(
        self,
        key: KeyLike,
        callback: Callable[[WatchEvent], None],
        start_revision: int | None = None,
        on_error: Callable[[StoreError], None] | None = None,
    ) -> WatchHandle:
        """Like ``watch_prefix`` for exactly one key."""
        return self._watch(_key(key), False, callback, start_revision, on_error)

    def _watch(
        self,
        key: str,
        prefix: bool,
        callback: Callable[[WatchEvent], None],
        start_revision: int | None,
        on_error: Callable[[StoreError], None] | None,
    ) -> WatchHandle:
        start = start_revision if start_revision is not None else self.revision() + 1
        handle = WatchHandle(self, key, prefix, callback, start, on_error)
        with self._lock:
            if self._closed:
                handle.cancel()
                raise StoreError("the etcd store is closed")
            self._watches.add(handle)
        return handle

    def _attach_watch(
        self,
        key: str,
        prefix: bool,
        deliver: Callable[[Item], None],
        start_revision: int,
    ) -> Callable[[], None]:
        """Start one etcd watch feeding ``deliver``; the function that cancels it."""
        range_end = etcd_utils.prefix_range_end(key.encode()) if prefix else None

        def on_response(response: Any) -> None:
            deliver(_watch_item(key, response))

        timed_out = False

        def run(c: Any) -> Callable[[], None]:
            nonlocal timed_out
            # pyetcd drops the "canceled" answer etcd gives a watch it refuses
            # (stale auth token, no permission): read the range first, so such
            # a refusal surfaces as an error here (and a stale token is renewed).
            c.get_response(key, range_end=range_end, count_only=True)
            try:
                watch_id = c.add_watch_callback(
                    key, on_response, range_end=range_end, start_revision=start_revision
                )
            except etcd_exceptions.WatchTimedOut:
                # etcd answers a creation on the connection's one watch stream, behind
                # the events queued for the other watches (seconds, when this process
                # reads them slower than they come). pyetcd would hand that late answer
                # to the next watch created on the stream, which would then receive
                # this key's events: that stream takes no more creations.
                timed_out = True
                self._drop(c, next_endpoint=False)
                raise
            return lambda: _cancel_watch(c, watch_id, key)

        attempt = 1
        while True:
            timed_out = False
            try:
                with self._watch_create:
                    return self._call(f"watching {key}", run)
            except WatchCompacted as exc:
                raise WatchCompacted(key, exc.compacted_revision) from None
            except StoreUnavailable as exc:
                if not timed_out or attempt == _WATCH_CREATE_TRIES:
                    raise
                log.warning(
                    "watch on %s: creation timed out, again on a new connection: %s", key, exc
                )
            attempt += 1

    def _forget(self, handle: WatchHandle) -> None:
        with self._lock:
            self._watches.discard(handle)


class _Client(pyetcd.MultiEndpointEtcd3Client):
    """pyetcd's client, whose watch creations wait ``_WATCH_CREATE_DEADLINE`` (pyetcd makes
    a new watcher, with the request timeout, whenever the connection fails)."""

    def get_watcher(self) -> Any:
        watcher = super().get_watcher()
        watcher.timeout = max(_WATCH_CREATE_DEADLINE, self.timeout)
        return watcher


class _Meta:
    """pyetcd's KVMetadata fields from a raw protobuf KeyValue (range pages)."""

    def __init__(self, kv: Any) -> None:
        self.key = kv.key
        self.mod_revision = kv.mod_revision
        self.create_revision = kv.create_revision
        self.lease_id = kv.lease


def _compare(tx: Any, cond: Condition) -> Any:
    key = _key(cond.key)
    if isinstance(cond, Absent):
        return tx.create(key) == 0
    if isinstance(cond, ModRevisionIs):
        return tx.mod(key) == int(cond.revision)
    if isinstance(cond, CreateRevisionIs):
        return tx.create(key) == int(cond.revision)
    raise TypeError(f"not a transaction condition: {cond!r}")


def _request(tx: Any, op: Op) -> Any:
    if isinstance(op, Put):
        return tx.put(op.key, op.value, lease=op.lease)
    if isinstance(op, Delete):
        return tx.delete(op.key)
    start = op.prefix.encode()
    return tx.delete(start, range_end=etcd_utils.prefix_range_end(start))


def _txn_revision(response: Any) -> int:
    """The revision of a transaction, from one of its put or delete responses."""
    kind = response.WhichOneof("response")
    return int(getattr(response, kind).header.revision)


def _cancel_watch(client: Any, watch_id: int, key: str) -> None:
    try:
        client.cancel_watch(watch_id)
    except Exception as exc:
        if not _is_etcd_error(exc):
            raise
        log.debug("watch on %s: cancel failed (%s); stream already gone", key, exc)


def _op_key(op: Op) -> str:
    return f"{op.prefix}*" if isinstance(op, DeletePrefix) else str(op.key)


def _event(raw: Any) -> WatchEvent:
    kind = EventKind.DELETE if isinstance(raw, DeleteEvent) else EventKind.PUT
    kv = Versioned(
        key=raw.key.decode(),
        value=bytes(raw.value),
        mod_revision=raw.mod_revision,
        create_revision=raw.create_revision,
        lease=raw.lease or None,
    )
    return WatchEvent(kind, kv)


def _watch_item(key: str, response: Any) -> Item:
    """What pyetcd hands a watch callback, in store terms (see ``WatchHandle``)."""
    if hasattr(response, "events"):
        return [_event(raw) for raw in response.events]
    if isinstance(response, etcd_exceptions.RevisionCompactedError):
        return WatchCompacted(key, response.compacted_revision)
    if response is None:
        return "stream closed"
    code, details = _rpc_status(response)
    return f"{code.name}: {details}" if code is not None else details
