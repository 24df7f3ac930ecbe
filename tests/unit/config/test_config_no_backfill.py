"""``[filter] no-backfill``: table rules whose tables an update adds without a snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.config import load_changefeed_config
from cdc.errors import ConfigError

BASE = """changefeed-id = "cf"
source-uri = "mysql://repl@db1:3306/?password-env=SRC_PW"
sink-uri = "blackhole://"
[filter]
rules = ["shop.*"]
"""


def test_read_from_toml_stored_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "cf.toml"
    path.write_text(BASE + 'no-backfill = ["shop.events_*"]\n')
    config = load_changefeed_config(path, {})
    assert config.no_backfill == ("shop.events_*",)
    assert type(config).from_dict(config.to_dict(mask=False)) == config
    assert (
        "no-backfill"
        not in load_changefeed_config(
            None,
            {
                "changefeed_id": "cf",
                "source_uri": "mysql://repl@db1:3306/",
                "sink_uri": "blackhole://",
            },
        ).to_dict()["filter"]
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('no-backfill = "shop.x"', "filter.no-backfill: .*an array of table rules"),
        ('no-backfill = ["shop."]', "filter.no-backfill"),
        ('no-backfil = ["shop.x"]', "did you mean 'no-backfill'"),
    ],
)
def test_bad_rules_are_refused_naming_the_key(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "cf.toml"
    path.write_text(BASE + line + "\n")
    with pytest.raises(ConfigError, match=message):
        load_changefeed_config(path, {})
