"""CPU seconds a process and its descendants used, from ``/proc`` (Linux).

What each side of a benchmark spent: on a 2-core machine shared by both servers and
the service, the copy is as fast as the CPU it needs allows, so this says where the
time went (the downstream's inserts, the source's reads, our processes).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # the name may hold spaces and parentheses


def tree_cpu(pid: int) -> float:
    """User + system seconds of ``pid`` and of every living descendant (the children a
    process has waited for count in its own ``cutime``/``cstime``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        fields = _stat(current)
        if fields is None:
            continue
        utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
        total += (utime + stime + cutime + cstime) / _TICK
        todo.extend(children.get(current, []))
    return total


def own_cpu(pid: int) -> float:
    """User + system seconds of ``pid`` alone, without its children (0 once it is gone)."""
    fields = _stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _TICK


@dataclass(frozen=True)
class Cpu:
    """CPU seconds of one copy: the source's server, the downstream's, and the copying
    side (the dump and load tools, or cdcctl and the cdc-servers with their Spark JVM
    and Python workers)."""

    source: float
    downstream: float
    copying: float


class CpuMeter:
    """``Cpu`` from ``start`` to ``stop``: the servers' process trees, the trees of the
    ``copying`` pids, and the children this process waited for meanwhile (the tools)."""

    def __init__(self, source: int, downstream: int, copying: Sequence[int] = ()) -> None:
        self.pids = (source, downstream)
        self.copying = tuple(copying)
        self._start = (0.0, 0.0, 0.0)

    def _now(self) -> tuple[float, float, float]:
        waited = resource.getrusage(resource.RUSAGE_CHILDREN)
        copying = waited.ru_utime + waited.ru_stime + sum(tree_cpu(p) for p in self.copying)
        return tree_cpu(self.pids[0]), tree_cpu(self.pids[1]), copying

    def start(self) -> CpuMeter:
        self._start = self._now()
        return self

    def stop(self) -> Cpu:
        now = self._now()
        return Cpu(*(b - a for a, b in zip(self._start, now, strict=True)))
