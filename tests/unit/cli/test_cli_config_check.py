"""cdcctl's offline commands: help, config check, and the bad-input exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdc.cli import exitcodes
from cdc.cli.main import main

SOURCE = "mysql://cdc:s3cret-pw@127.0.0.1:3316/"
SINK = "mysql://cdc:other-pw@127.0.0.1:3317/?worker-count=4"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["playground"],
        ["playground", "up"],
        ["config"],
        ["config", "check"],
        ["capture"],
        ["capture", "list"],
    ],
)
def test_help_describes_every_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: cdcctl")
    assert "not implemented" not in out


def test_config_check_prints_the_config_masked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "config",
        "check",
        "--changefeed-id",
        "shop-to-dw",
        "--source-uri",
        SOURCE,
        "--sink-uri",
        SINK,
        "--filter-rule",
        "shop.*",
        "--filter-rule",
        "!shop.tmp_*",
    )
    assert code == exitcodes.OK, err
    shown = json.loads(out)
    assert "s3cret-pw" not in out and "other-pw" not in out
    assert "******" in out
    assert shown["changefeed-id"] == "shop-to-dw"
    assert shown["filter"]["rules"] == ["shop.*", "!shop.tmp_*"]


def test_flags_override_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cf.toml"
    config.write_text(
        'changefeed-id = "from-file"\n'
        f'source-uri = "{SOURCE}"\n'
        'sink-uri = "blackhole://"\n'
        "[snapshot]\nchunk-size = 100\n"
    )
    code, out, err = run(
        capsys, "config", "check", "--config", str(config), "--changefeed-id", "from-flag"
    )
    assert code == exitcodes.OK, err
    shown = json.loads(out)
    assert shown["changefeed-id"] == "from-flag"
    assert shown["snapshot"]["chunk-size"] == 100


@pytest.mark.parametrize(
    ("uri_flag", "uri", "expected"),
    [
        ("--source-uri", "mysql://cdc:pw@127.0.0.1:99999/", "port"),
        ("--source-uri", "postgres://cdc:pw@127.0.0.1:5432/", "postgres"),
        ("--sink-uri", "mysql://cdc:pw@127.0.0.1:3306/?worker-cnt=4", "worker-count"),
        ("--sink-uri", "file://relative/path", "absolute"),
    ],
)
def test_malformed_uris_are_bad_input_and_masked(
    uri_flag: str, uri: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {"--source-uri": SOURCE, "--sink-uri": "blackhole://", uri_flag: uri}
    argv = ["config", "check", "--changefeed-id", "cf"]
    for flag, value in args.items():
        argv += [flag, value]
    code, out, err = run(capsys, *argv)
    assert code == exitcodes.BAD_INPUT
    assert out == ""
    assert err.startswith("cdcctl: error: ")
    assert uri_flag.lstrip("-") in err
    assert expected in err
    assert "s3cret-pw" not in err and ":pw@" not in err


def test_config_file_with_a_type_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cf.toml"
    config.write_text(
        f'changefeed-id = "cf"\nsource-uri = "{SOURCE}"\nsink-uri = "blackhole://"\n'
        '[snapshot]\nchunk-size = "big"\n'
    )
    code, _, err = run(capsys, "config", "check", "--config", str(config))
    assert code == exitcodes.BAD_INPUT
    assert "snapshot.chunk-size" in err
    assert "'big'" in err


def test_config_file_with_an_unknown_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "cf.toml"
    config.write_text(
        f'changefeed-id = "cf"\nsource-uri = "{SOURCE}"\nsink-uri = "blackhole://"\n'
        "[filter]\nrulez = ['a.*']\n"
    )
    code, _, err = run(capsys, "config", "check", "--config", str(config))
    assert code == exitcodes.BAD_INPUT
    assert "rulez" in err and "rules" in err


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "check", "--sink-url", "blackhole://"])
    assert exit_info.value.code == exitcodes.BAD_INPUT
    assert "--sink-url" in capsys.readouterr().err


def test_capture_list_without_etcd_says_how_to_give_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CDC_ETCD", raising=False)
    code, _, err = run(capsys, "capture", "list")
    assert code == exitcodes.BAD_INPUT
    assert "--etcd" in err and "CDC_ETCD" in err
