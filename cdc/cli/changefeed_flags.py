"""The changefeed flags shared by `cdcctl config check` and `cdcctl changefeed create/update`.

Flags override the TOML file given with --config, key by key, so a TiCDC user
can bring a config file and still set the URIs on the command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cdc.config import ChangefeedConfig, load_changefeed_config

_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--changefeed-id", "changefeed_id", "changefeed id, e.g. orders-to-dw"),
    ("--source-uri", "source_uri", "source database, mysql://user:pass@host:3306/"),
    ("--sink-uri", "sink_uri", "sink: mysql://..., file:///path?protocol=csv, blackhole://"),
    ("--snapshot-mode", "snapshot_mode", "initial | never | snapshot-only"),
    ("--start-pos", "start_position", "binlog start FILE:OFFSET (snapshot mode never)"),
    ("--start-gtid", "start_gtid", "binlog start GTID set (snapshot mode never)"),
    ("--target-pos", "target_position", "stop (state finished) at FILE:OFFSET"),
    ("--chunk-size", "chunk_size", "snapshot rows per chunk (default 8096)"),
    ("--spark-master", "spark_master", "Spark master for snapshot chunks (default local[*])"),
    ("--decode-workers", "decode_workers", "row decoding processes per capture (0: none)"),
)


def add_changefeed_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="changefeed TOML file (TiCDC layout)")
    for flag, dest, help_text in _FLAGS:
        parser.add_argument(flag, dest=dest, help=help_text)
    parser.add_argument(
        "--filter-rule",
        dest="rules",
        action="append",
        help="table filter rule, repeatable: --filter-rule 'shop.*' --filter-rule '!shop.tmp_*'",
    )


def config_from_args(args: argparse.Namespace) -> ChangefeedConfig:
    """Loads --config and applies the flags; raises ConfigError naming the bad field."""
    overrides: dict[str, Any] = {
        dest: getattr(args, dest) for _, dest, _ in _FLAGS if getattr(args, dest) is not None
    }
    if args.rules:
        overrides["rules"] = list(args.rules)
    return load_changefeed_config(args.config, overrides)
