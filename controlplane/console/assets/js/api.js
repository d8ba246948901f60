// The admin REST API client: bearer token from session storage, exact JSON, structured errors.
import { parseExact, stringify } from "./wire.js";

const TOKEN_KEY = "tollgate.console.token";

export function getToken() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

/** An admin API error: {"error":{"code","message","details":[…]}} plus the HTTP status. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
    this.details = Array.isArray(details) ? details : [];
  }
}

/** Calls the admin API. Returns {status, data, text}; throws ApiError on a non-2xx answer. */
export async function call(method, path, body, { token = getToken(), raw = false } = {}) {
  const headers = { "Accept": "application/json" };
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "network", `The control plane is unreachable (${e.message}).`);
  }
  const text = await res.text();
  let data = null;
  if (text && !raw) {
    try { data = parseExact(text); } catch { data = null; }
  }
  if (!res.ok) {
    let err = null;
    if (raw && text) { try { err = parseExact(text); } catch { err = null; } } else { err = data; }
    const e = err && err.error ? err.error : {};
    throw new ApiError(res.status, e.code, e.message || defaultMessage(res.status, text), e.details);
  }
  return { status: res.status, data, text };
}

function defaultMessage(status, text) {
  switch (status) {
    case 401: return "The token was not accepted.";
    case 403: return "This token may not do that (viewer tokens are read-only).";
    case 404: return "Not found.";
    default: return `HTTP ${status}${text ? ": " + text.slice(0, 200) : ""}`;
  }
}

/** Fetches every page of a list endpoint ({"items":[…],"next_cursor":"…"}). */
export async function listAll(path) {
  const items = [];
  let cursor = "";
  for (let page = 0; page < 1000; page++) {
    const sep = path.includes("?") ? "&" : "?";
    const url = cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path;
    const { data } = await call("GET", url);
    if (Array.isArray(data)) return data;
    const got = (data && (data.items || data.price_rules || data.providers)) || [];
    items.push(...got);
    cursor = data && data.next_cursor ? String(data.next_cursor) : "";
    if (!cursor) break;
  }
  return items;
}
