"""The web console in headless Chromium against a real cluster (issue #19).

Two cdc-server processes with --http-addr and both tokens. A changefeed made
with `cdcctl` appears in the console; its table's snapshot progress moves
while the snapshot runs; lag appears, in numbers and in the chart; pause from
the console is refused with the read-only token and changes what
`cdcctl changefeed query` reports with the admin one; remove asks for the id
first; a stopped capture leaves the captures view. The changefeed stores
distinctive passwords (store-credentials), which no page and no API answer
ever shows. Each view is saved as a screenshot.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from console_kit import ConsoleCluster, http
from playwright.sync_api import Page, expect
from testkit import execute

from cdc.cli.main import main as cdcctl
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

CHANGEFEED = "console"
ROWS = 30_000
CHUNK = 500
WAIT = 120_000  # ms: Spark starts inside the server on the first snapshot
HELD = ROWS - 2 * CHUNK + CHUNK // 2  # inside one of the last chunks, held downstream midway


@dataclass(frozen=True)
class Account:
    user: str
    password: str
    port: int

    def uri(self) -> str:
        return f"mysql://{self.user}:{quote(self.password, safe='')}@127.0.0.1:{self.port}/"


def _account(db: MariaDBServer, role: str) -> Iterator[Account]:
    user = f"console_{role}_{secrets.token_hex(3)}"
    password = f"Console{role.title()}-{secrets.token_hex(6)}@p:w/d%?"
    execute(
        db,
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'",
    )
    yield Account(user, password, db.port)
    execute(db, f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.fixture(scope="module")
def accounts(source_db: MariaDBServer, sink_db: MariaDBServer) -> Iterator[tuple[Account, ...]]:
    source = _account(source_db, "source")
    sink = _account(sink_db, "sink")
    yield next(source), next(sink)
    for made in (source, sink):
        next(made, None)


@pytest.fixture(scope="module")
def database(source_db: MariaDBServer, sink_db: MariaDBServer) -> Iterator[str]:
    """A database with ``items`` of ROWS rows on the source, and the empty database downstream."""
    name = f"console_{secrets.token_hex(4)}"
    execute(
        source_db,
        f"CREATE DATABASE `{name}`",
        f"CREATE TABLE `{name}`.items (id INT PRIMARY KEY, name VARCHAR(40))",
        f"INSERT INTO `{name}`.items SELECT seq, CONCAT('row-', seq) FROM `{name}`.seq_1_to_{ROWS}",
    )
    execute(sink_db, f"CREATE DATABASE `{name}`")
    yield name
    for db in (source_db, sink_db):
        execute(db, f"DROP DATABASE IF EXISTS `{name}`")


@contextmanager
def _midway_held(sink_db: MariaDBServer, database: str) -> Iterator[None]:
    """The snapshot held midway until the block ends, however fast it copies.

    The console polls every 2 s and a 30,000-row snapshot can be done within
    one poll. ``items`` is made downstream beforehand (the changefeed uses an
    existing table that fits) with a stale copy of every row, and an open
    transaction changes row HELD: the chunk holding it waits on that row's lock
    (a lock wait is retried), the others are done. Every row is there because
    a chunk's range DELETE reads one row past its range, and on an empty table
    that is the held row for every chunk below it (READ COMMITTED too): they
    would all wait, and whether any chunk came first would be a race.
    """
    execute(
        sink_db,
        f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY, name VARCHAR(40))",
        f"INSERT INTO `{database}`.items SELECT seq, 'stale' FROM `{database}`.seq_1_to_{ROWS}",
    )
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"UPDATE `{database}`.items SET name = 'held' WHERE id = {HELD}")
        yield
    finally:
        conn.rollback()
        conn.close()


def _secrets(accounts: tuple[Account, ...]) -> list[str]:
    return [form for a in accounts for form in (a.password, quote(a.password, safe=""))]


class Cli:
    """cdcctl in-process against console-a with a token; every output kept."""

    def __init__(self, cluster: ConsoleCluster, capsys: pytest.CaptureFixture[str]) -> None:
        self.server = cluster.servers["console-a"].address
        self.token = str(cluster.tokens.admin_file)
        self.capsys = capsys
        self.seen: list[str] = []

    def __call__(self, *argv: str) -> Any:
        code = cdcctl([*argv, "--server", self.server, "--token-file", self.token])
        out, err = self.capsys.readouterr()
        self.seen += [out, err]
        assert code == 0, err
        return json.loads(out)

    def state(self, changefeed: str) -> str:
        return str(self("changefeed", "query", "-c", changefeed, "--simple")["state"])


@pytest.fixture
def page(browser: Any, cluster: ConsoleCluster) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert errors == [], f"the console's scripts failed: {errors}"


def _open(page: Page, url: str, token: str | None, route: str = "#/changefeeds") -> None:
    page.goto(f"{url}/{route}")
    if token is not None:
        page.fill("#token", token)
        page.click("#token-form button")
        expect(page.locator("#token-state")).to_have_text("token set")


def _no_secret_in(texts: list[str], secrets_: list[str]) -> None:
    for text in texts:
        for secret in secrets_:
            assert secret not in text, "a password was shown"


_PROGRESS = re.compile(r"(\d+)/(\d+) chunks")

_WATCH_PROGRESS = """() => {
  window.__progress = [];
  const seen = () => {
    for (const el of document.querySelectorAll('#tables .progress-text')) {
      const last = window.__progress[window.__progress.length - 1];
      if (el.textContent !== last) window.__progress.push(el.textContent);
    }
  };
  new MutationObserver(seen).observe(document.getElementById('view'),
                                     {childList: true, subtree: true});
  seen();
}"""


_MIDWAY = """(total) => window.__progress.some((text) => {
  const m = /(\\d+)\\/(\\d+) chunks/.exec(text);
  return m && Number(m[2]) === total && 0 < Number(m[1]) && Number(m[1]) < total;
})"""


def test_the_console_follows_a_changefeed_made_with_cdcctl(
    cluster: ConsoleCluster,
    page: Page,
    accounts: tuple[Account, ...],
    database: str,
    sink_db: MariaDBServer,
    shots: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = Cli(cluster, capsys)
    console = cluster.servers["console-a"].url
    _open(page, console, cluster.tokens.read)
    expect(page.locator("#view .empty")).to_contain_text("No changefeed yet")

    stored = tmp_path / "stored.toml"
    stored.write_text("store-credentials = true\n")
    source, sink = accounts
    total = ROWS // CHUNK + 1  # and the plan's tail, at the MAX
    table = page.locator(f'#tables tr[data-table="{database}.items"]')
    with _midway_held(sink_db, database):
        cli(
            "changefeed", "create", "--config", str(stored), "--changefeed-id", CHANGEFEED,
            "--source-uri", source.uri(), "--sink-uri", sink.uri() + "?worker-count=2",
            "--filter-rule", f"{database}.*", "--chunk-size", str(CHUNK),
            "--spark-master", "local[1]",
        )  # fmt: skip

        row = page.locator(f'#changefeeds tr[data-changefeed="{CHANGEFEED}"]')
        expect(row).to_be_visible()
        expect(row.locator(".badge")).to_have_text("normal")
        page.screenshot(path=str(shots / "changefeeds.png"))

        row.locator("a.cf-link").click()
        expect(page.locator("#view")).to_have_attribute("data-view", "changefeed")
        page.evaluate(_WATCH_PROGRESS)
        expect(table).to_be_visible()
        expect(table.locator(".progress-text")).to_contain_text(" chunks", timeout=WAIT)
        page.wait_for_function(_MIDWAY, arg=total, timeout=WAIT)
        page.screenshot(path=str(shots / "changefeed-snapshot.png"), full_page=True)
    expect(table.locator(".progress-text")).to_contain_text(f"{total}/{total} chunks", timeout=WAIT)
    seen = [m.groups() for m in map(_PROGRESS.search, page.evaluate("window.__progress")) if m]
    done = [int(d) for d, t in seen if int(t) == total]
    assert any(0 < d < total for d in done), f"no progress seen between start and end: {seen}"
    assert done == sorted(done), f"progress went backwards: {seen}"
    stale = execute(sink_db, f"SELECT COUNT(*) FROM `{database}`.items WHERE name = 'stale'")
    assert stale == [(0,)], "every chunk replaces the rows its range held downstream"

    expect(table.locator(".badge")).to_have_text("running", timeout=WAIT)
    expect(page.locator("#cf-lag")).to_have_text(re.compile(r"^\d+ s$"), timeout=WAIT)
    expect(table.locator(".lag")).to_have_text(re.compile(r"^\d+ s$"))
    chart = page.locator("#lag-chart svg.chart")
    expect(chart.locator("polyline, circle").first).to_be_attached(timeout=WAIT)
    expect(page.locator("#barrier")).not_to_have_attribute("data-kind", "none")
    page.screenshot(path=str(shots / "changefeed.png"), full_page=True)

    responses = [
        http(f"{console}{path}", token=cluster.tokens.read)[1]
        for path in (
            "/api/v1/changefeeds", f"/api/v1/changefeeds/{CHANGEFEED}", "/api/v1/captures",
            f"/api/v1/changefeeds/{CHANGEFEED}/lag", "/api/v1/capture",
        )
    ]  # fmt: skip
    detail = json.loads(responses[1])
    assert "******" in detail["config"]["source-uri"]
    # the audit history, read-only: who created it (cdcctl with the admin token)
    assert [(e["op"], e["who"]["role"]) for e in detail["history"]] == [("create", "admin")]
    _no_secret_in([page.content(), *responses, *cli.seen], _secrets(accounts))


def test_pause_from_the_console_needs_the_admin_token(
    cluster: ConsoleCluster, page: Page, shots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(cluster, capsys)
    console = cluster.servers["console-a"].url
    route = f"#/changefeeds/{CHANGEFEED}"
    assert cli.state(CHANGEFEED) == "normal"

    _open(page, console, None, route)
    expect(page.locator("#poll-error")).to_contain_text("no bearer token")
    expect(page.locator("#view button")).to_have_count(0)

    page.fill("#token", cluster.tokens.read)
    page.click("#token-form button")
    expect(page.locator("h1 .badge")).to_have_text("normal")
    page.click(f'button[data-action="pause"][data-id="{CHANGEFEED}"]')
    expect(page.locator("#notice")).to_contain_text(
        "PERMISSION_DENIED: the read-only token may not call PauseChangefeed"
    )
    assert cli.state(CHANGEFEED) == "normal"

    page.fill("#token", cluster.tokens.admin)
    page.click("#token-form button")
    page.click(f'button[data-action="pause"][data-id="{CHANGEFEED}"]')
    expect(page.locator("#notice")).to_contain_text("pause console: done")
    assert cli.state(CHANGEFEED) == "stopped"
    expect(page.locator("h1 .badge")).to_have_text("stopped")
    page.screenshot(path=str(shots / "changefeed-paused.png"))

    page.click(f'button[data-action="resume"][data-id="{CHANGEFEED}"]')
    expect(page.locator("#notice")).to_contain_text("resume console: done")
    assert cli.state(CHANGEFEED) == "normal"
    # both recorded in the history the page shows, as made through the HTTP API
    history = page.locator("#history tbody")
    expect(history.locator("tr").first).to_contain_text("resume")
    expect(history.locator("tr").nth(1)).to_contain_text("pause")
    expect(history.locator("tr").first).to_contain_text("(admin) from http")


def test_remove_asks_for_the_id_first(
    cluster: ConsoleCluster,
    page: Page,
    database: str,
    shots: Path,
    source_db: MariaDBServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = Cli(cluster, capsys)
    secret = cluster.log_dir / "source.password"  # inside the servers' --secrets-dir
    secret.write_text(source_db.password)
    source = f"mysql://{source_db.user}@127.0.0.1:{source_db.port}/?password-file={secret}"
    cli(
        "changefeed", "create", "--changefeed-id", "to-remove",
        "--source-uri", source, "--sink-uri", "blackhole://",
        "--filter-rule", f"{database}.*", "--snapshot-mode", "never",
    )  # fmt: skip
    _open(page, cluster.servers["console-a"].url, cluster.tokens.admin)
    row = page.locator('#changefeeds tr[data-changefeed="to-remove"]')
    row.locator('button[data-action="remove"]').click()
    dialog = page.locator("#confirm-remove")
    expect(dialog).to_be_visible()
    expect(page.locator("#remove-confirm")).to_be_disabled()
    page.fill("#remove-typed", "to-remov")
    expect(page.locator("#remove-confirm")).to_be_disabled()
    page.screenshot(path=str(shots / "remove-dialog.png"))
    page.click('#confirm-remove button[value="cancel"]')
    assert "to-remove" in [c["id"] for c in cli("changefeed", "list")]

    row.locator('button[data-action="remove"]').click()
    page.fill("#remove-typed", "to-remove")
    page.click("#remove-confirm")
    expect(row).to_have_count(0)
    assert "to-remove" not in [c["id"] for c in cli("changefeed", "list")]
    expect(page.locator(f'#changefeeds tr[data-changefeed="{CHANGEFEED}"]')).to_be_visible()


def test_a_stopped_capture_leaves_the_captures_view(
    cluster: ConsoleCluster, page: Page, shots: Path
) -> None:
    _open(page, cluster.servers["console-a"].url, cluster.tokens.read, "#/captures")
    rows = page.locator("#captures tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#captures .badge.owner")).to_have_count(1)
    page.screenshot(path=str(shots / "captures.png"))

    cluster.servers["console-b"].stop()
    expect(page.locator('#captures tr[data-capture="console-b"]')).to_have_count(0, timeout=30_000)
    expect(page.locator('#captures tr[data-capture="console-a"] .badge.owner')).to_be_visible(
        timeout=30_000
    )
    page.screenshot(path=str(shots / "captures-after-stop.png"))
