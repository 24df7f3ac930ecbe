"""Soak mode of the randomized differential test (issue #13): many seeds, one line each.

    .venv/bin/python bench/fuzz_soak.py --seeds 20 [--start 5000] [--minutes 60]
                                        [--operations 120] [--faults 4] [--variety]

Starts its own source and downstream MariaDB and etcd (loopback, temporary
folders), then runs seed after seed, each with a fresh database, cluster of
three `cdc-server` processes and changefeed on those same servers, exactly as
tests/fuzz/test_fuzz_differential.py runs one seed (the same generator and
runner, tests/fuzz/fuzzgen.py and fuzzrun.py). Prints per seed: seed,
operations, DDL, faults, seconds, result; then a summary. Stops at the first
seed that fails, prints what differed, the command that replays it and its
operations log, and exits 1. ``--minutes`` stops starting new seeds after that
long. Logs stay in a temporary folder whose path is printed.

The generator and the runner live in tests/fuzz and are imported from there
(with tests/ on ``sys.path``) rather than from bench/: the runner is built on
the cluster harness the fault-injection suite uses (tests/cluster_harness.py),
so moving only the generator here would still leave this script needing
tests/, or a second copy of the harness.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "fuzz")]

from fuzzgen import OpKind  # noqa: E402
from fuzzrun import Budget, World, run_seed  # noqa: E402

from bench.cluster import private_etcd  # noqa: E402
from bench.servers import mariadb  # noqa: E402


def replay(seed: int, args: argparse.Namespace) -> str:
    return (
        f".venv/bin/python bench/fuzz_soak.py --seeds 1 --start {seed} "
        f"--operations {args.operations} --faults {args.faults} --readds {args.readds}"
        + (" --variety" if args.variety else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, required=True, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--minutes", type=float, default=None, help="start no seed after this")
    parser.add_argument("--operations", type=int, default=120, help="operations per seed")
    parser.add_argument("--faults", type=int, default=4, help="most faults per seed")
    parser.add_argument(
        "--readds", type=int, default=1, help="tables removed and added back per seed"
    )
    parser.add_argument(
        "--variety",
        action="store_true",
        help="columns of every kind the generator knows and tables of every key shape",
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.operations < 1 or args.faults < 0:
        parser.error("--seeds and --operations must be >= 1, --faults >= 0")
    budget = Budget(
        operations=args.operations,
        max_faults=args.faults,
        readds=args.readds,
        variety=args.variety,
    )
    deadline = None if args.minutes is None else time.monotonic() + 60 * args.minutes
    work = Path(tempfile.mkdtemp(prefix="cdc-fuzz-soak-"))
    print(f"logs in {work}", flush=True)
    print(f"{'seed':>8} {'ops':>5} {'ddl':>4} {'faults':>6} {'seconds':>8}  result", flush=True)
    passed, started = 0, time.monotonic()
    with (
        mariadb("fuzz-source", 31, binlog=True) as source,
        mariadb("fuzz-sink", 32, binlog=False) as sink,
        private_etcd() as etcd,
    ):
        world = World(source, sink, etcd)
        for seed in range(args.start, args.start + args.seeds):
            if deadline is not None and time.monotonic() > deadline:
                print("time is up", flush=True)
                break
            seed_dir = work / f"seed-{seed}"
            seed_dir.mkdir()
            result = run_seed(world, seed, seed_dir, budget, replay=replay(seed, args))
            plan = result.plan
            print(
                f"{seed:>8} {len(plan.operations):>5} {plan.count(OpKind.DDL):>4} "
                f"{plan.count(OpKind.FAULT):>6} {result.seconds:>8.1f}  "
                f"{'ok' if result.ok else 'DIFFERENT'}",
                flush=True,
            )
            if not result.ok:
                print(result.failure, flush=True)
                print(f"summary: {passed} seeds passed, seed {seed} failed", flush=True)
                return 1
            passed += 1
    print(f"summary: {passed} seeds passed in {time.monotonic() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
