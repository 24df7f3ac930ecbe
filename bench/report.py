"""Writes one benchmark's section into docs/benchmarks.md, with the machine it ran on.

Each benchmark owns the text between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`,
so benchmarks can be re-run one at a time without losing the others' figures.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
from datetime import UTC, datetime
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Every figure here was measured by a script under `bench/`, on the machine named
in its section, with the command shown. Ratios compare against the baseline the
issue names, measured in the same run on the same data. `bench/run_all.sh`
re-runs everything.
"""


def machine() -> str:
    try:
        mariadb = subprocess.run(
            ["mariadbd", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except FileNotFoundError:
        mariadb = "mariadbd not on PATH"
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; {mariadb}"
    )


def median_cell(values: list[float]) -> str:
    """A table cell of runs: their median, then every run in order (``8.6 (8.6 / 7.6)``)."""
    every = " / ".join(f"{v:.1f}" for v in values)
    return f"{statistics.median(values):.1f} ({every})"


def update_section(name: str, title: str, command: str, body: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\n"
        f"Command: `{command}`  \nMeasured: {stamp} on {machine()}\n\n{body.strip()}\n"
        f"<!-- /bench:{name} -->"
    )
    text = DOC.read_text() if DOC.exists() else HEADER
    pattern = re.compile(rf"<!-- bench:{name} -->.*?<!-- /bench:{name} -->", re.S)
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else (text.rstrip() + "\n\n" + section + "\n")
    )
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
