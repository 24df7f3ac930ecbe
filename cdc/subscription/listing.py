"""``ListSubscriptions``: the subscriptions etcd keeps, and where each changefeed is served.

    subscription/<cf>/<client> records ──┐
    tasks and captures (routing) ────────┼──► one SubscriptionInfo per client
    this capture's open pull sinks ──────┘    (live ring state where served here)

Any capture answers from etcd; only the capture serving a changefeed knows its
rings (events not acked, batches outstanding), so only its answer is ``live``
(``cdcctl subscription`` asks the serving capture for those).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.store.keys import SubscriptionKey
from cdc.subscription.codec import position_to_proto
from cdc.subscription.errors import NotPullableError
from cdc.subscription.records import SubscriptionRecord
from cdc.subscription.routing import Router, serving_capture
from cdc.subscription.sink import PullSink, SubscriptionStatus

__all__ = ["SinkFinder", "list_subscriptions"]


class SinkFinder(Protocol):
    """What listing needs of ``cdc.subscription.service.SinkRegistry``."""

    def find(self, changefeed_id: str) -> PullSink | None:
        """The open pull sink of ``changefeed_id`` on this capture, if any."""


def list_subscriptions(
    router: Router, registry: SinkFinder, changefeed_id: str | None
) -> list[pb.SubscriptionInfo]:
    """Every subscription (of ``changefeed_id`` only, when given), by changefeed and client.

    ``NotPullableError`` when the changefeed given does not exist or is not a pull one.
    """
    store = router.store
    keys = store.keys
    if changefeed_id is not None:
        view = router.read_view(changefeed_id)
        if view.state is None:
            raise NotPullableError(
                f"no changefeed {changefeed_id!r} in this cluster", not_found=True
            )
        if not view.pull:
            raise NotPullableError(
                f"changefeed {changefeed_id!r} writes to {view.sink}, not to pull://: it has "
                "no subscriptions"
            )
        prefix = keys.prefix_of(SubscriptionKey, changefeed_id)
    else:
        prefix = keys.prefix_of(SubscriptionKey)
    by_feed: dict[str, list[SubscriptionRecord]] = defaultdict(list)
    for item in store.get_prefix(prefix):
        key = keys.parse(item.key, SubscriptionKey)
        by_feed[key.changefeed_id].append(SubscriptionRecord.from_dict(item.json(), item.key))
    infos: list[pb.SubscriptionInfo] = []
    for cf in sorted(by_feed):
        sink = registry.find(cf)
        live = {s.client_id: s for s in sink.status()} if sink is not None else {}
        if sink is not None:
            capture, address = router.me, router.address
        else:
            view = router.read_view(cf)
            found = serving_capture(view.tasks, view.captures)
            capture, address = found or "", view.captures.get(found, "") if found else ""
        for record in sorted(by_feed[cf], key=lambda r: r.client_id):
            infos.append(_info(cf, record, live.get(record.client_id), capture, address, sink))
    return infos


def _info(
    cf: str,
    record: SubscriptionRecord,
    live: SubscriptionStatus | None,
    capture: str,
    address: str,
    sink: PullSink | None,
) -> pb.SubscriptionInfo:
    info = pb.SubscriptionInfo(
        changefeed_id=cf,
        client_id=record.client_id,
        filter_rules=list(live.rules if live is not None else record.rules),
        updated_at=record.updated_at,
        serving_capture=capture,
        serving_address=address,
        live=live is not None,
    )
    acked = live.acked if live is not None else record.acked
    if acked is not None:
        position_to_proto(acked, info.acked_position)
    if live is not None and sink is not None:
        cursors = live.cursors
        info.unacked = cursors.put - cursors.ack
        info.handed_out = cursors.get - cursors.ack
        info.outstanding_batches.extend(live.outstanding)
        info.capacity = sink.capacity
    return info
