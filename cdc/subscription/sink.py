"""The pull sink: a changefeed's changes wait in each subscriber's ring until it acks them.

    pipeline ── write_rows / apply_ddl ──► PullSink ──► Subscription "c1" (filter, ring) ◄── Get/Ack
                                                   └──► Subscription "c2" (filter, ring) ◄── Get/Ack

* Every change is offered to every subscription in order; each takes what
  its filter selects. A full ring blocks the pipeline (back-pressure) until
  that client acks, so the slowest client sets the pace, as in Canal.
* ``flush`` waits until every client acked everything handed in: for a pull
  sink a change is durably written only once every client has acked it, so
  the changefeed checkpoint (taken after a flush) follows the consumers.
  ``flushed`` is the lowest acked position over the subscriptions.
* Without any subscription the pipeline waits for the first one, so nothing
  is dropped before the first client arrives. A subscription created while
  changes flow receives the changes handed in after it; subscriptions are
  kept in etcd and restored when the sink opens, so a restart does not turn
  a known client into a new one, and a restored one receives everything the
  changefeed replays (see ``cdc.subscription.subscription`` for why nothing
  is skipped by its acked position).
* A client that goes away for good holds the changefeed back until it is
  unsubscribed.

Served by cdc-server (``Served``): the DDL the owner applied comes from the
changefeed's DDL log before the rows after it (``cdc.subscription.ddl_log``);
every blocking wait gives up once the capture's lease is not known alive, and
clients are refused then (they go to the capture the tables move to).

Thread-safe, unlike other sinks: the pipeline writes from its thread while
the gRPC service serves clients from others, and ``close`` may come from a
third to release a pipeline blocked on a full ring.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cdc.logs import get_logger
from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position
from cdc.sink.base import Sink, SinkClosed, SinkError
from cdc.store import EtcdStore, StoreError
from cdc.store.keys import InvalidKeyError, check_name
from cdc.subscription.ddl_log import DdlFeed
from cdc.subscription.errors import (
    InvalidRequestError,
    NotServingError,
    SubscriptionClosedError,
    UnknownClientError,
)
from cdc.subscription.records import SubscriptionRecords
from cdc.subscription.ring import CHECK_INTERVAL, Cursors, Ring, RingClosedError
from cdc.subscription.subscription import Event, EventBatch, Subscription, parse_rules

__all__ = [
    "DEFAULT_CAPACITY",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_EVENTS",
    "MAX_WAIT",
    "PullSink",
    "Served",
    "SubscribeResult",
    "SubscriptionStatus",
]

#: Entries per subscription ring: Canal's default (canal.instance.memory.buffer.size).
DEFAULT_CAPACITY = 16384
#: The most events one Get may ask for.
MAX_BATCH_EVENTS = 10_000
#: A Get's batch ends before this many bytes of values (about); one event always fits.
MAX_BATCH_BYTES = 8 * 1024 * 1024
#: The longest a Get may wait for its first event, in seconds.
MAX_WAIT = 60.0


@dataclass(frozen=True)
class SubscribeResult:
    """What ``subscribe`` did: the acked position to continue after, the rules in force,
    and whether an existing subscription was resumed."""

    acked: Position | None
    rules: tuple[str, ...]
    resumed: bool


@dataclass(frozen=True)
class Served:
    """How cdc-server runs a pull sink (the module docstring's last part).

    ``writable()``: whether the capture's lease is known alive; ``ddl``: the
    changefeed's DDL log; ``on_close``: called once the sink is closed.
    """

    writable: Callable[[], bool] | None = None
    ddl: DdlFeed | None = None
    on_close: Callable[[PullSink], None] | None = None


@dataclass(frozen=True)
class SubscriptionStatus:
    client_id: str
    rules: tuple[str, ...]
    acked: Position | None
    cursors: Cursors
    outstanding: tuple[int, ...]


@dataclass
class _Member:
    """A subscription and its persisted state; ``lock`` orders its etcd writes."""

    subscription: Subscription
    persisted: Position | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    removed: bool = False


def _later(a: Position | None, b: Position | None) -> bool:
    if a is None:
        return False
    return b is None or a.key() > b.key()


def _first_batch_id() -> int:
    """Microseconds since the epoch: the ids of a new ring start above every id an
    earlier ring (before a restart or an unsubscribe) could have handed out."""
    return time.time_ns() // 1000


def _client_id(client_id: str) -> str:
    try:
        return check_name("client id", client_id)
    except InvalidKeyError as exc:
        raise InvalidRequestError("client_id", str(exc)) from None


class PullSink(Sink):
    """The sink of the module docstring for changefeed ``changefeed_id``.

    Opening it reads the changefeed's subscriptions from etcd (``StoreError``
    when etcd cannot be read); ``capacity`` is the size of each ring.
    """

    def __init__(
        self,
        store: EtcdStore,
        changefeed_id: str,
        capacity: int = DEFAULT_CAPACITY,
        served: Served | None = None,
    ) -> None:
        self.changefeed_id = changefeed_id
        self.capacity = capacity
        self._served = served or Served()
        self._log = get_logger(__name__, changefeed=changefeed_id, sink="pull")
        self._records = SubscriptionRecords(store, changefeed_id)
        self._cond = threading.Condition()
        self._members: dict[str, _Member] = {}
        self._last: Position | None = None
        self._flushed: Position | None = None
        self._closed = False
        self._waiting_logged = False
        for record in self._records.load():
            subscription = self._subscription(record.client_id, record.rules, record.acked)
            self._members[record.client_id] = _Member(subscription, record.acked)
            self._log.info(
                "restored subscription client=%s rules=%s acked=%s",
                record.client_id,
                list(record.rules),
                record.acked,
            )
        self._flushed = self._lowest_acked()

    def _subscription(
        self, client_id: str, rules: Sequence[str], start: Position | None
    ) -> Subscription:
        ring: Ring = Ring(self.capacity, _first_batch_id())
        return Subscription(client_id, rules, ring, start)

    # --- the Sink side -----------------------------------------------------------

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        """Offer each change to every subscription; blocks while a ring is full."""
        if not changes:
            return
        for change in changes:
            if not isinstance(change, RowChange):
                raise SinkError(f"write_rows takes RowChange objects, not {change!r:.80}")
        self._recorded_ddl(max((c.position for c in changes), key=Position.key))
        for change in changes:
            self._offer(change)

    def apply_ddl(self, ddl: DdlEvent) -> None:
        """Offer the DDL like a row: clients see it after every earlier change."""
        if not isinstance(ddl, DdlEvent):
            raise SinkError(f"apply_ddl takes a DdlEvent, not {ddl!r:.80}")
        self._offer(ddl)

    def _recorded_ddl(self, upto: Position | None) -> None:
        """Served: the DDL the owner recorded that must come before rows up to ``upto``
        (None: whatever is recorded now), handed in first."""
        feed = self._served.ddl
        if feed is None:
            return
        try:
            ddl = feed.due(upto)
        except StoreError as exc:
            raise SinkError(
                f"cannot read the DDL log of changefeed {self.changefeed_id} from etcd, so "
                f"rows after a DDL could overtake it: {exc}"
            ) from exc
        if ddl is not None:
            self._log.info("DDL at %s handed to the clients: %s", ddl.position, ddl.kind.value)
            self._offer(ddl)

    def resolve(self, position: Position) -> None:
        """Everything at or before ``position`` has been handed in.

        Optional: it lets ``flushed`` reach a position at which no client
        wants anything, instead of waiting for the next change to prove that
        the transaction at ``position`` is complete.
        """
        with self._cond:
            self._check_open()
            if _later(position, self._last):
                self._last = position
            members = tuple(self._members.values())
        for member in members:
            member.subscription.resolve(position)

    def flush(self, timeout: float | None = None) -> Position | None:
        """Wait until every client has acked everything handed in (up to ``timeout``
        seconds; forever by default), store the acked positions, return ``flushed``.

        Served, it first hands in the DDL recorded since the last look, so that
        the checkpoint that follows this flush covers it. With a timeout it
        returns when the time is up (``flushed`` is always truthful); without
        one it is the ``Sink`` contract, so a sink closed before every client
        acked raises ``SinkError``: returning would let the caller take what
        was handed in as durable.
        """
        self._recorded_ddl(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._check_open()
            members = tuple(self._members.values())
        complete = True
        for member in members:
            if not self._wait_acked(member, deadline):
                complete = False
                break
        for member in members:
            self._persist(member)
        if not complete and deadline is None:
            raise SinkClosed(
                f"the pull sink of changefeed {self.changefeed_id} was closed before its "
                "clients acked everything handed in; what they did not ack comes again"
            )
        return self.flushed

    def _wait_acked(self, member: _Member, deadline: float | None) -> bool:
        ring = member.subscription.ring
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            wait = CHECK_INTERVAL if left is None else min(left, CHECK_INTERVAL)
            if ring.wait_acked(wait) or member.removed:
                return True  # an unsubscribed client's ring is closed: nothing to wait for
            if ring.closed:
                return False
            self._check_writable()

    @property
    def flushed(self) -> Position | None:
        """The lowest acked position of the subscriptions (kept while there are none)."""
        with self._cond:
            if self._members:
                self._flushed = self._lowest_acked()
            return self._flushed

    def close(self) -> None:
        """Release waiters (a blocked pipeline gets ``SinkError``) and store the acked
        positions. Subscriptions stay in etcd for the next run."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            members = tuple(self._members.values())
            self._cond.notify_all()
        for member in members:
            member.subscription.close()
            self._persist(member)
        self._log.info("pull sink closed, %d subscriptions, flushed %s", len(members), self.flushed)
        if self._served.on_close is not None:
            self._served.on_close(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise SinkClosed(f"the pull sink of changefeed {self.changefeed_id} is closed")

    def _check_writable(self) -> None:
        """Ends a wait once the capture's lease is not known alive: the tables may already
        run elsewhere, and nothing more may be handed out here."""
        self._check_open()
        writable = self._served.writable
        if writable is not None and not writable():
            raise SinkClosed(
                f"the capture's lease is not known to be alive: the pull sink of changefeed "
                f"{self.changefeed_id} hands in nothing more"
            )

    def _lowest_acked(self) -> Position | None:
        acked = [member.subscription.acked for member in self._members.values()]
        known = [position for position in acked if position is not None]
        if not known or len(known) < len(acked):
            return None
        return min(known, key=lambda position: position.key())

    def _offer(self, event: Event) -> None:
        with self._cond:
            while not self._members and not self._closed:
                if not self._waiting_logged:
                    self._log.info("waiting for the first subscriber before handing out changes")
                    self._waiting_logged = True
                self._cond.wait(CHECK_INTERVAL)
                if not self._members:
                    self._check_writable()
            self._check_open()
            if _later(event.position, self._last):
                self._last = event.position
            members = tuple(self._members.values())
        for member in members:
            try:
                member.subscription.offer(event, check=self._check_writable)
            except RingClosedError:
                self._check_open()

    # --- the client side ---------------------------------------------------------

    def subscribe(self, client_id: str, rules: Sequence[str] = ()) -> SubscribeResult:
        """Subscribe ``client_id``, or resume it (module docstring of ``cdc.subscription``).

        Rules are required the first time; given again, they replace the
        rules for changes handed in from now on. A resumed client gets its
        unacked batches again. ``StoreError`` when etcd cannot record it.
        """
        client_id = _client_id(client_id)
        rules = tuple(rules)
        with self._cond:
            self._closed_check()
            member = self._members.get(client_id)
            start = self._last if _later(self._last, self._flushed) else self._flushed
        if member is not None:
            return self._resume(member, rules)
        if not rules:
            raise InvalidRequestError(
                "filter_rules",
                f"client {client_id!r} subscribes for the first time: give its table filter "
                "rules, e.g. 'shop.*' (or '*.*' for all tables)",
            )
        parse_rules(rules)
        self._records.save(client_id, rules, start)
        with self._cond:
            self._closed_check()
            member = self._members.get(client_id)
            if member is not None:
                return self._resume(member, rules)
            now = self._last if _later(self._last, self._flushed) else self._flushed
            subscription = self._subscription(client_id, rules, now)
            self._members[client_id] = _Member(subscription, start)
            self._cond.notify_all()
        self._log.info("subscribed client=%s rules=%s from %s", client_id, list(rules), now)
        return SubscribeResult(now, subscription.rules, resumed=False)

    def _resume(self, member: _Member, rules: tuple[str, ...]) -> SubscribeResult:
        subscription = member.subscription
        if rules and rules != subscription.rules:
            parse_rules(rules)
            with member.lock:
                self._records.save(subscription.client_id, rules, member.persisted)
                subscription.set_rules(rules)
            self._log.info("client=%s changed its rules to %s", subscription.client_id, list(rules))
        again = subscription.rollback()
        self._log.info(
            "resumed client=%s after %s, %d events handed out again",
            subscription.client_id,
            subscription.acked,
            again,
        )
        return SubscribeResult(subscription.acked, subscription.rules, resumed=True)

    def unsubscribe(self, client_id: str) -> bool:
        """End the subscription and delete its record; whether it existed."""
        client_id = _client_id(client_id)
        with self._cond:
            member = self._members.get(client_id)
        if member is None:
            return False
        with member.lock:
            self._records.delete(client_id)
            member.removed = True
        with self._cond:
            if self._members.get(client_id) is member:
                del self._members[client_id]
        member.subscription.close()
        self._log.info("unsubscribed client=%s", client_id)
        return True

    def get(self, client_id: str, max_events: int, timeout: float) -> EventBatch:
        """Up to ``max_events`` events after those handed out; waits up to ``timeout``
        seconds for the first. The empty batch (id 0) when none came."""
        if isinstance(max_events, bool) or not isinstance(max_events, int):
            raise InvalidRequestError("max_events", f"must be an int, not {max_events!r}")
        if not 1 <= max_events <= MAX_BATCH_EVENTS:
            raise InvalidRequestError(
                "max_events", f"must be 1 .. {MAX_BATCH_EVENTS}, not {max_events}"
            )
        if not 0 <= timeout <= MAX_WAIT:
            raise InvalidRequestError(
                "timeout", f"must be 0 .. {MAX_WAIT:g} seconds, not {timeout:g}"
            )
        member = self._member(client_id)
        batch = member.subscription.get(max_events, timeout, MAX_BATCH_BYTES)
        if not batch.events:
            self._closed_check()
        return batch

    def ack(self, client_id: str, batch_id: int) -> Position | None:
        """Ack the oldest outstanding batch of ``client_id``; the acked position after it.

        ``UnknownBatchError`` for an id that is not outstanding,
        ``OutOfOrderAckError`` for one that is not the oldest. The position is
        stored in etcd when it moved; should etcd fail, the ack still holds
        and the position is stored with the next ack or flush.
        """
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 1:
            raise InvalidRequestError(
                "batch_id",
                f"{batch_id!r} is not a batch id: ids handed out by Get are positive "
                "(the empty batch, id 0, needs no ack)",
            )
        member = self._member(client_id)
        member.subscription.ack(batch_id)
        self._persist(member)
        return member.subscription.acked

    def rollback(self, client_id: str) -> int:
        """Void the outstanding batches of ``client_id``; how many events come again."""
        return self._member(client_id).subscription.rollback()

    def acked(self, client_id: str) -> Position | None:
        """Every event at or before this position has been acked by ``client_id``."""
        return self._member(client_id).subscription.acked

    def status(self) -> list[SubscriptionStatus]:
        """One line per subscription, by client id."""
        with self._cond:
            members = sorted(self._members.items())
        return [
            SubscriptionStatus(
                client_id,
                m.subscription.rules,
                m.subscription.acked,
                m.subscription.ring.cursors(),
                m.subscription.ring.outstanding(),
            )
            for client_id, m in members
        ]

    def _closed_check(self) -> None:
        if self._closed:
            raise SubscriptionClosedError(self.changefeed_id)
        writable = self._served.writable
        if writable is not None and not writable():
            raise NotServingError(self.changefeed_id)

    def _member(self, client_id: str) -> _Member:
        client_id = _client_id(client_id)
        with self._cond:
            self._closed_check()
            member = self._members.get(client_id)
        if member is None:
            raise UnknownClientError(self.changefeed_id, client_id)
        return member

    def _persist(self, member: _Member) -> None:
        """Store the member's acked position if it moved past the stored one."""
        subscription = member.subscription
        with member.lock:
            acked = subscription.acked
            if member.removed or not _later(acked, member.persisted):
                return
            try:
                self._records.save(subscription.client_id, subscription.rules, acked)
            except StoreError as exc:
                self._log.warning(
                    "client=%s acked %s, not stored yet (etcd: %s); retried with the next "
                    "ack or flush; a restart before that delivers the changes since %s again",
                    subscription.client_id,
                    acked,
                    exc,
                    member.persisted,
                )
                return
            member.persisted = acked
