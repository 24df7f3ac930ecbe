"""Pull subscriptions in Canal's model: clients get, ack and roll back batches of changes.

    pipeline ─► PullSink ─► per client: filter ─► Ring (put ▸ get ▸ ack) ◄─ Get / Ack / Rollback
                   │                                     acked position ─► etcd
                   └─ flushed = lowest acked position ─► changefeed checkpoint

Guarantees: at least once, in binlog order, per client.

* A client sees the changes of the tables its filter selects, in order. Get
  hands out a batch; Ack confirms it (batches in order, as in Canal);
  Rollback, or a new Subscribe with the same client id (a reconnect), hands
  out every unacked batch again. Nothing after the last ack is lost.
* The ring lives in memory. Its acked position is kept in etcd
  (``subscription/<changefeed>/<client>``), and the pull sink reports the
  lowest acked position of its clients as ``flushed``, so the changefeed
  checkpoint never passes a change some client has not acked. When the server
  restarts, the unacked entries are gone from memory, but the pipeline
  replays the binlog from the checkpoint: each subscription drops what lies at
  or before its stored acked position and receives the rest again.
* The acked position only counts whole positions (transactions): a client
  that acked part of a transaction gets all of it again after a restart, and
  a position acked but not yet stored in etcd is delivered again. Both are
  duplicates, never gaps; a consumer that must not apply a change twice
  dedupes by (position, key).

Modules: ``ring`` (the bounded ring), ``subscription`` (one client's filter,
ring and acked position), ``records`` (the etcd records), ``sink`` (the
``PullSink``), ``codec`` (events to proto messages), ``service`` (the gRPC
servicer and the sink registry), ``client`` (the Python client).
"""

from cdc.subscription.client import SubscriptionClient, SubscriptionRpcError
from cdc.subscription.errors import (
    InvalidRequestError,
    SubscriptionClosedError,
    SubscriptionError,
    UnknownChangefeedError,
    UnknownClientError,
)
from cdc.subscription.ring import (
    Batch,
    Entry,
    OutOfOrderAckError,
    Ring,
    RingClosedError,
    RingFullError,
    UnknownBatchError,
)
from cdc.subscription.service import SinkRegistry, SubscriptionServicer, add_subscription_service
from cdc.subscription.sink import PullSink, SubscribeResult, SubscriptionStatus
from cdc.subscription.subscription import EventBatch

__all__ = [
    "Batch",
    "Entry",
    "EventBatch",
    "InvalidRequestError",
    "OutOfOrderAckError",
    "PullSink",
    "Ring",
    "RingClosedError",
    "RingFullError",
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
