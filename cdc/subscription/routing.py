"""Where a pull changefeed is served, for a capture asked about one it does not serve.

A pull changefeed's tables all run on one capture (its sink kind has one
writer, so the owner schedules them together), and its subscriptions live in
that capture's memory. Any other capture sends the client there::

    no changefeed info ..................................... Refused NOT_FOUND
    its sink is not pull:// ................................ Refused FAILED_PRECONDITION
    failed / finished ...................................... Refused FAILED_PRECONDITION
    stopped, or in error (retrying) ........................ Wait (says so)
    tables running on a live capture other than this one ... Elsewhere(capture, address)
    on this capture (its sink not open yet), or on none
    (moving after a capture died) .......................... Wait

``locate`` decides from a view read once (``read_view``); the service turns
the answer into a status with trailers (``cdc.subscription.service``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from cdc.changefeed import (
    ChangefeedNotFound,
    ChangefeedState,
    ChangefeedStore,
    TableTask,
    TaskState,
)
from cdc.sink.pull import PULL
from cdc.sink.registry import kind_of
from cdc.store import EtcdStore
from cdc.store.keys import CaptureKey, TaskKey

__all__ = ["Elsewhere", "Refused", "Route", "Router", "View", "Wait", "locate"]


@dataclass(frozen=True)
class View:
    """What the decision needs: the changefeed (None: no such one), its tasks, the live
    captures' addresses, and which capture asks."""

    changefeed_id: str
    sink: str | None
    pull: bool
    state: ChangefeedState | None
    tasks: Mapping[str, TableTask]
    captures: Mapping[str, str]
    me: str


@dataclass(frozen=True)
class Elsewhere:
    """Served by ``capture_id`` at ``address``: the client goes there."""

    capture_id: str
    address: str


@dataclass(frozen=True)
class Wait:
    """Served by no capture that can answer now; ``reason`` says why (retry later)."""

    reason: str


@dataclass(frozen=True)
class Refused:
    """Never served as asked: ``not_found`` (no such changefeed) or a precondition."""

    reason: str
    not_found: bool = False


Route = Elsewhere | Wait | Refused


def serving_capture(tasks: Mapping[str, TableTask], live: Mapping[str, str]) -> str | None:
    """The live capture running most of the changefeed's tables (all of them, once the
    owner's schedule settles), ties by name; None when none runs any."""
    load = Counter(
        t.capture_id for t in tasks.values() if t.state is TaskState.RUN and t.capture_id in live
    )
    if not load:
        return None
    return min(load, key=lambda c: (-load[c], c))


def locate(view: View) -> Route:
    """Where the client of ``view.changefeed_id`` should go (module docstring)."""
    cf = view.changefeed_id
    if view.state is None:
        return Refused(f"no changefeed {cf!r} in this cluster", not_found=True)
    if not view.pull:
        return Refused(
            f"changefeed {cf!r} writes to {view.sink}, not to pull://: there is nothing to "
            "pull from it"
        )
    if view.state in (ChangefeedState.FAILED, ChangefeedState.FINISHED):
        return Refused(
            f"changefeed {cf!r} is {view.state.value}: nothing more will be served; "
            "see `cdcctl changefeed query`"
        )
    if view.state is ChangefeedState.STOPPED:
        return Wait(
            f"changefeed {cf!r} is stopped, so no capture serves it now; subscribe again "
            "once it runs (`cdcctl changefeed resume`)"
        )
    if view.state is not ChangefeedState.NORMAL:
        return Wait(
            f"changefeed {cf!r} is in state {view.state.value}, so no capture serves it now "
            "(the owner retries it; `cdcctl changefeed query` says why); subscribe again later"
        )
    serving = serving_capture(view.tasks, view.captures)
    if serving is None:
        return Wait(
            f"no capture runs changefeed {cf!r} right now (its tables are being scheduled "
            "or moved after a capture stopped); subscribe again in a few seconds"
        )
    if serving == view.me:
        return Wait(f"changefeed {cf!r} is starting on this capture; subscribe again in a moment")
    return Elsewhere(serving, view.captures[serving])


class Router:
    """Reads the view of one changefeed from etcd for capture ``me`` (reached at
    ``address``) and locates it."""

    def __init__(self, store: EtcdStore, me: str, address: str = "") -> None:
        self.store = store
        self.me = me
        self.address = address
        self._feeds = ChangefeedStore(store)

    def read_view(self, changefeed_id: str) -> View:
        keys = self.store.keys
        try:
            changefeed = self._feeds.get(changefeed_id)
        except ChangefeedNotFound:
            return View(changefeed_id, None, False, None, {}, {}, self.me)
        uri = changefeed.config.sink_uri
        tasks = {
            keys.parse(item.key, TaskKey).table: TableTask.from_dict(item.json())
            for item in self.store.get_prefix(keys.prefix_of(TaskKey, changefeed_id))
        }
        captures = {}
        for item in self.store.get_prefix(keys.prefix_of(CaptureKey)):
            info = item.json()
            captures[keys.parse(item.key, CaptureKey).capture_id] = str(info.get("address", ""))
        return View(
            changefeed_id,
            uri.masked,
            kind_of(uri) is PULL,
            changefeed.status.state,
            tasks,
            captures,
            self.me,
        )

    def locate(self, changefeed_id: str) -> Route:
        return locate(self.read_view(changefeed_id))
