"""Pull subscriptions in Canal's model: clients get, ack and roll back batches of changes.

    pipeline ─► PullSink ─► per client: filter ─► Ring (put ▸ get ▸ ack) ◄─ Get / Ack / Rollback
                   │                                     acked position ─► etcd
                   └─ flush waits for every client's acks ─► changefeed checkpoint

Guarantees: at least once, in binlog order per table, per client.

* A client sees the changes of the tables its filter selects, each table's
  in binlog order, and the DDL the owner applied before the rows after it.
  Get hands out a batch; Ack confirms it (batches in order, as in Canal);
  Rollback, or a new Subscribe with the same client id (a reconnect), hands
  out every unacked batch again. Nothing after the last ack is lost.
* The ring lives in memory, bounded: a full ring stalls the changefeed's
  stream (back-pressure), nothing is dropped. The sink's flush waits until
  every client acked everything handed in, so a table's checkpoint never
  passes a change some client has not acked. When the capture serving the
  changefeed dies, the owner moves the tables; the new capture replays each
  from its checkpoint, and the clients (sent there by any capture they ask)
  receive everything after their last ack, and some of what they acked since
  the last checkpoint again: duplicates, never gaps. A consumer that must
  not apply a change twice dedupes by (position, key), DDL by position.
* Each client's acked position is kept in etcd
  (``subscription/<changefeed>/<client>``) for operators (``cdcctl
  subscription list``) and to restore the subscription, rules included,
  wherever the changefeed runs next.
* A changefeed's tables all run on one capture (the pull kind has one
  writer); any capture routes a client there (``routing``).

Modules: ``ring`` (the bounded ring), ``subscription`` (one client's filter,
ring and acked position), ``records`` (the etcd records), ``sink`` (the
``PullSink``), ``ddl_log`` (the owner's DDL, handed to the serving capture),
``codec`` (events to proto messages), ``routing`` (where a changefeed is
served), ``listing`` (ListSubscriptions), ``service`` (the gRPC servicer and
the sink registry), ``host`` (what a cdc-server process runs), ``client``
(the Python client), ``replay`` (a consumer that applies the changes to a
MySQL/MariaDB database, ``examples/pull_replay.py``).
"""

from cdc.subscription.client import SubscriptionClient, SubscriptionRpcError
from cdc.subscription.errors import (
    InvalidRequestError,
    NotPullableError,
    NotServedNowError,
    NotServingError,
    ServedElsewhereError,
    SubscriptionClosedError,
    SubscriptionError,
    UnknownChangefeedError,
    UnknownClientError,
)
from cdc.subscription.host import PullHost
from cdc.subscription.ring import (
    Batch,
    Entry,
    OutOfOrderAckError,
    Ring,
    RingClosedError,
    RingFullError,
    UnknownBatchError,
)
from cdc.subscription.routing import Router
from cdc.subscription.service import SinkRegistry, SubscriptionServicer, add_subscription_service
from cdc.subscription.sink import PullSink, Served, SubscribeResult, SubscriptionStatus
from cdc.subscription.subscription import EventBatch

__all__ = [
    "Batch",
    "Entry",
    "EventBatch",
    "InvalidRequestError",
    "NotPullableError",
    "NotServedNowError",
    "NotServingError",
    "OutOfOrderAckError",
    "PullHost",
    "PullSink",
    "Ring",
    "RingClosedError",
    "RingFullError",
    "Router",
    "Served",
    "ServedElsewhereError",
    "SinkRegistry",
    "SubscribeResult",
    "SubscriptionClient",
    "SubscriptionClosedError",
    "SubscriptionError",
    "SubscriptionRpcError",
    "SubscriptionServicer",
    "SubscriptionStatus",
    "UnknownBatchError",
    "UnknownChangefeedError",
    "UnknownClientError",
    "add_subscription_service",
]
