"""The owner's leader loop: one cycle a second while this capture holds the owner key.

Each cycle reads the cluster from etcd and logs one status line; later cycles
add scheduling, checkpoints and the DDL barrier. An unexpected exception is
logged loudly and the next cycle retries (Patroni's `run_cycle`): the loop never
dies silently while the capture still believes it is owner.
"""

from __future__ import annotations

import threading

from cdc.logs import get_logger
from cdc.store import EtcdStore, Fence, StoreError
from cdc.store.keys import CaptureKey, ChangefeedInfoKey

CYCLE_INTERVAL = 1.0


class Owner:
    """Runs `run_cycle` on its own thread for one term of ownership (one fence)."""

    def __init__(self, store: EtcdStore, capture_id: str, fence: Fence) -> None:
        self.store = store
        self.fence = fence
        self.log = get_logger(__name__, capture=capture_id, role="owner")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="owner", daemon=True)
        self.cycles = 0

    def start(self) -> None:
        self.log.info("owner term starts (fence revision %d)", self.fence.create_revision)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        self.log.info("owner term ends after %d cycles", self.cycles)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_cycle()
            except StoreError as exc:
                self.log.error("cycle %d: etcd error, retrying: %s", self.cycles, exc)
            except Exception:
                self.log.exception("cycle %d failed unexpectedly, retrying", self.cycles)
            self.cycles += 1
            self._stop.wait(CYCLE_INTERVAL)

    def run_cycle(self) -> str:
        """One pass over the cluster state; returns the status line it logged."""
        keys = self.store.keys
        captures = self.store.get_prefix(keys.prefix_of(CaptureKey))
        changefeeds = self.store.get_prefix(keys.prefix_of(ChangefeedInfoKey))
        line = f"cycle {self.cycles}: captures={len(captures)} changefeeds={len(changefeeds)}"
        if self.cycles % 30 == 0:
            self.log.info(line)
        else:
            self.log.debug(line)
        return line
