// The console's only way to the server: the JSON API, with the token the user gave.
// The token lives in sessionStorage (gone with the tab) and travels only in the
// Authorization header, never in a URL (which logs and proxies keep).

const KEY = "cdc-console-token";

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function request(method, path) {
  const headers = { Accept: "application/json" };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (method !== "GET") headers["Content-Type"] = "application/json";
  const reply = await fetch(path, { method, headers, cache: "no-store" });
  const text = await reply.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (!reply.ok) {
    const message = (body && body.message) || text.trim() || reply.statusText;
    throw new ApiError(reply.status, (body && body.error) || String(reply.status), message);
  }
  return body;
}

const cf = (id) => `/api/v1/changefeeds/${encodeURIComponent(id)}`;

export const api = {
  changefeeds: () => request("GET", "/api/v1/changefeeds"),
  changefeed: (id) => request("GET", cf(id)),
  lag: (id) => request("GET", `${cf(id)}/lag`),
  captures: () => request("GET", "/api/v1/captures"),
  capture: () => request("GET", "/api/v1/capture"),
  pause: (id) => request("POST", `${cf(id)}/pause`),
  resume: (id) => request("POST", `${cf(id)}/resume`),
  remove: (id) => request("DELETE", cf(id)),
};
