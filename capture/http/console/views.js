// The three views, each a pure function from API answers to elements.
// Actions are buttons whose clicks app.js handles (data-action, data-id).

import { lagChart } from "./chart.js";
import { clock, h, rate, seconds } from "./dom.js";

function stateBadge(state) {
  return h("span", { class: `badge state-${state}`, dataset: { state } }, state);
}

function actions(cf) {
  const paused = cf.state === "stopped";
  const resumable = ["stopped", "error", "failed"].includes(cf.state);
  return h("span", { class: "actions" },
    h("button", { dataset: { action: "pause", id: cf.id }, disabled: paused || cf.state === "finished" }, "Pause"),
    h("button", { dataset: { action: "resume", id: cf.id }, disabled: !resumable }, "Resume"),
    h("button", { class: "danger", dataset: { action: "remove", id: cf.id } }, "Remove"));
}

function errorText(cf) {
  if (!cf.error) return "";
  const where = cf.error.table ? ` (table ${cf.error.table})` : "";
  let when = "";
  if (cf.error.permanent || cf.state === "failed") when = " — needs you: fix, then resume";
  else if (cf.retry_at) when = ` — retry at ${clock(cf.retry_at)}`;
  return `${cf.error.message}${where}${when}`;
}

export function changefeedsView(list) {
  if (!list.length) {
    return h("section", {}, h("h1", {}, "Changefeeds"),
      h("p", { class: "empty" }, "No changefeed yet. Create one with: cdcctl changefeed create ..."));
  }
  const rows = list.map((cf) => h("tr", { dataset: { changefeed: cf.id } },
    h("td", {}, h("a", { href: `#/changefeeds/${encodeURIComponent(cf.id)}`, class: "cf-link" }, cf.id)),
    h("td", {}, stateBadge(cf.state)),
    h("td", { class: "mono" }, cf.checkpoint || "-"),
    h("td", { class: "lag" }, seconds(cf.lag)),
    h("td", { class: "error" }, errorText(cf)),
    h("td", {}, actions(cf))));
  return h("section", {}, h("h1", {}, "Changefeeds"),
    h("table", { id: "changefeeds" },
      h("thead", {}, h("tr", {}, ["id", "state", "checkpoint", "lag", "error", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)));
}

function progressCell(snap) {
  if (!snap.chunks_total) return h("td", { class: "muted" }, "no snapshot");
  const pct = Math.round((100 * snap.chunks_done) / snap.chunks_total);
  const eta = snap.running ? ` · ETA ${seconds(snap.eta_seconds)}` : "";
  return h("td", { class: "progress-cell" },
    h("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": snap.chunks_total,
      "aria-valuenow": snap.chunks_done },
      h("div", { class: snap.running ? "fill running" : "fill", style: { width: `${pct}%` } })),
    h("div", { class: "progress-text" },
      `${snap.chunks_done}/${snap.chunks_total} chunks · ${snap.rows.toLocaleString()} rows · ${rate(snap.rows_per_second)}${eta}`));
}

function tablesSection(tables) {
  const rows = tables.map((t) => h("tr", { dataset: { table: t.table, state: t.state } },
    h("td", { class: "mono" }, t.table),
    h("td", {}, t.capture || "-"),
    h("td", {}, stateBadge(t.state)),
    h("td", { class: "mono" }, t.checkpoint || "-"),
    h("td", { class: "lag" }, seconds(t.lag)),
    progressCell(t.snapshot),
    h("td", { class: "error" }, t.error || "")));
  return h("section", {}, h("h2", {}, `Tables (${tables.length})`),
    h("table", { id: "tables" },
      h("thead", {}, h("tr", {}, ["table", "capture", "state", "checkpoint", "lag", "snapshot", "error"].map((x) => h("th", {}, x)))),
      h("tbody", {}, rows)));
}

function barrierSection(barrier) {
  let body;
  if (!barrier) body = h("p", { class: "muted" }, "No barrier yet (the owner sets one once it runs the changefeed).");
  else if (barrier.ddl) {
    body = h("div", {},
      h("p", {}, `Every table stops at ${barrier.limit} until this DDL is applied downstream:`),
      h("pre", { class: "ddl" }, barrier.ddl.statement),
      h("p", { class: "muted" }, `${barrier.ddl.kind} at ${barrier.ddl.position} · tables ${barrier.ddl.tables.join(", ") || "-"}`));
  } else body = h("p", {}, `${barrier.kind}: tables may deliver up to ${barrier.limit}; no DDL waiting.`);
  return h("section", { id: "barrier", dataset: { kind: barrier ? barrier.kind : "none" } }, h("h2", {}, "DDL barrier"), body);
}

function skippedSection(skipped) {
  if (!skipped.length) return h("section", { id: "skipped" }, h("h2", {}, "Skipped DDL"), h("p", { class: "muted" }, "None."));
  return h("section", { id: "skipped" }, h("h2", {}, `Skipped DDL (${skipped.length})`),
    h("table", {},
      h("thead", {}, h("tr", {}, ["at", "position", "kind", "statement", "why"].map((x) => h("th", {}, x)))),
      h("tbody", {}, skipped.map((s) => h("tr", {},
        h("td", {}, clock(s.at)), h("td", { class: "mono" }, s.position), h("td", {}, s.kind),
        h("td", { class: "mono" }, s.statement), h("td", {}, s.reason))))));
}

function historySection(history) {
  const who = (e) => [e.who.cert || e.who.user || "anonymous", `(${e.who.role})`, e.who.peer ? `from ${e.who.peer}` : ""].join(" ");
  const what = (e) => Object.entries(e.detail).map(([k, v]) => `${k}: ${v}`).join(" · ");
  if (!history.length) return h("section", { id: "history" }, h("h2", {}, "History"), h("p", { class: "muted" }, "None."));
  return h("section", { id: "history" }, h("h2", {}, `History (${history.length})`),
    h("table", {},
      h("thead", {}, h("tr", {}, ["at", "operation", "who", "what"].map((x) => h("th", {}, x)))),
      h("tbody", {}, history.slice().reverse().map((e) => h("tr", {},
        h("td", {}, clock(e.at)), h("td", {}, e.op), h("td", {}, who(e)), h("td", { class: "mono" }, what(e)))))));
}

function configSection(config) {
  const shown = ["source-uri", "sink-uri"].filter((k) => config[k]);
  const rules = (config.filter && config.filter.rules) || [];
  return h("section", { id: "config" }, h("h2", {}, "Configuration"),
    h("dl", {}, shown.flatMap((k) => [h("dt", {}, k), h("dd", { class: "mono" }, config[k])]),
      h("dt", {}, "filter"), h("dd", { class: "mono" }, rules.join(", ") || "-")));
}

export function changefeedView(cf, lag, now) {
  const error = cf.error
    ? h("p", { class: "error-box" }, errorText(cf))
    : null;
  return h("section", { dataset: { changefeed: cf.id } },
    h("p", {}, h("a", { href: "#/changefeeds" }, "← all changefeeds")),
    h("h1", {}, `Changefeed ${cf.id} `, stateBadge(cf.state)),
    h("div", { class: "facts" },
      h("span", {}, "checkpoint ", h("b", { class: "mono", id: "cf-checkpoint" }, cf.checkpoint || "-")),
      h("span", {}, "resolved ", h("b", { class: "mono" }, cf.resolved || "-")),
      h("span", {}, "lag ", h("b", { id: "cf-lag" }, seconds(cf.lag))),
      actions(cf)),
    error,
    h("section", { id: "lag-chart" }, h("h2", {}, "Lag (up to the last hour)"), lagChart(lag, now),
      h("p", { class: "muted" }, "Seconds since the slowest running table last reported its checkpoint; sampled every ",
        `${lag.interval} s by this server. Source-clock lag: cdc_checkpoint_lag_seconds in /metrics.`)),
    tablesSection(cf.tables),
    barrierSection(cf.barrier),
    skippedSection(cf.skipped_ddl),
    historySection(cf.history || []),
    configSection(cf.config));
}

export function capturesView(captures, me) {
  const rows = captures.map((c) => h("tr", { dataset: { capture: c.id } },
    h("td", {}, c.id, c.is_owner ? h("span", { class: "badge owner" }, "owner") : null),
    h("td", { class: "mono" }, c.address),
    h("td", {}, c.version),
    h("td", {}, clock(c.started_at))));
  return h("section", {}, h("h1", {}, "Captures"),
    h("p", { class: "muted" }, `This console is served by ${me.id} (cluster ${me.cluster}).`),
    h("table", { id: "captures" },
      h("thead", {}, h("tr", {}, ["capture", "address", "version", "started"].map((x) => h("th", {}, x)))),
      h("tbody", {}, rows)));
}
