// The console: hash routes, polling every two seconds, the token form and the actions.
//
//   #/changefeeds            every changefeed (state, checkpoint, lag, error and retry)
//   #/changefeeds/<id>       its tables, snapshot progress, barrier, skipped DDL, history,
//                            lag chart
//   #/captures               the captures and which is owner
//
// Polling rather than server-sent events: one request per view every two seconds is
// nothing for the server, works through every proxy, and a failed poll is simply
// shown and retried.

import { api, ApiError, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { capturesView, changefeedsView, changefeedView } from "./views.js";

const POLL_MS = 2000;
const view = document.getElementById("view");
const notice = document.getElementById("notice");
const pollError = document.getElementById("poll-error");
let timer = null;
let generation = 0;

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "captures") return { name: "captures" };
  if (parts[0] === "changefeeds" && parts[1]) return { name: "changefeed", id: parts[1] };
  return { name: "changefeeds" };
}

async function load(r) {
  if (r.name === "captures") {
    const [captures, me] = await Promise.all([api.captures(), api.capture()]);
    return capturesView(captures, me);
  }
  if (r.name === "changefeed") {
    const [cf, lag] = await Promise.all([api.changefeed(r.id), api.lag(r.id)]);
    return changefeedView(cf, lag, Date.now() / 1000);
  }
  return changefeedsView(await api.changefeeds());
}

function show(message, kind) {
  notice.textContent = message;
  notice.className = kind;
  notice.hidden = !message;
}

function showPollError(message) {
  pollError.textContent = message;
  pollError.hidden = !message;
}

function explain(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return `${err.message} — paste a token above`;
    return `${err.code}: ${err.message}`;
  }
  return `cannot reach the server: ${err.message}`;
}

async function refresh() {
  const mine = ++generation;
  clearTimeout(timer);
  const r = route();
  document.querySelectorAll("[data-nav]").forEach((a) => {
    a.classList.toggle("active", a.dataset.nav === (r.name === "captures" ? "captures" : "changefeeds"));
  });
  try {
    const content = await load(r);
    if (mine !== generation) return;
    view.replaceChildren(content);
    view.dataset.view = r.name;
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    showPollError("");
  } catch (err) {
    if (mine !== generation) return;
    showPollError(explain(err));
    if (err instanceof ApiError && err.status === 404 && r.name === "changefeed") {
      view.replaceChildren(h("p", { class: "empty" }, `Changefeed ${r.id} does not exist (any more).`));
    }
  } finally {
    if (mine === generation) timer = setTimeout(refresh, POLL_MS);
  }
}

async function act(action, id) {
  try {
    await api[action](id);
    show(`${action} ${id}: done`, "ok");
    if (action === "remove" && route().name === "changefeed") location.hash = "#/changefeeds";
  } catch (err) {
    show(`${action} ${id} refused: ${explain(err)}`, "refused");
  }
  refresh();
}

function confirmRemove(id) {
  const dialog = document.getElementById("confirm-remove");
  const typed = document.getElementById("remove-typed");
  const button = document.getElementById("remove-confirm");
  document.getElementById("remove-name").textContent = id;
  typed.value = "";
  button.disabled = true;
  typed.oninput = () => { button.disabled = typed.value !== id; };
  dialog.onclose = () => { if (dialog.returnValue === "remove") act("remove", id); };
  dialog.showModal();
  typed.focus();
}

view.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-action]");
  if (!button) return;
  const { action, id } = button.dataset;
  if (action === "remove") confirmRemove(id);
  else act(action, id);
});

function showTokenState() {
  document.getElementById("token-state").textContent = token() ? "token set" : "no token";
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token");
  setToken(input.value.trim());
  input.value = "";
  showTokenState();
  show("", "");
  refresh();
});

window.addEventListener("hashchange", refresh);
showTokenState();
refresh();
