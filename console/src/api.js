// The console's only way to the broker: the admin REST API, same origin, with the session's
// credentials. Every call is marked `X-Strata-Forward: owner` so a topic owned by another broker
// is answered through this one (a browser cannot follow the 307 with its credentials).
//
// Errors are `ApiError`s with a message a person can act on: `kind` is one of
//   "auth" (401: log in again), "forbidden" (403), "notFound" (404), "invalid" (400/406/409/412),
//   "unavailable" (503, or the broker did not answer), "server" (other 5xx).
import { authorizationHeader } from "./session.js";

export const CALL_TIMEOUT_MS = 30000;
// A partitioned topic's whole-topic stats (partitioned-stats) load every partition on the broker:
// the console asks for them only up to this many partitions, and per page of partitions beyond.
export const PARTITIONED_STATS_PARTITIONS_MAX = 64;

export class ApiError extends Error {
  constructor(status, reason, kind) {
    super(reason);
    this.status = status;
    this.reason = reason;
    this.kind = kind;
  }
}

const listeners = new Set();
/** Called with every ApiError of kind "auth" (the page goes back to the login form). */
export function onAuthError(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function kindOf(status) {
  if (status === 401) return "auth";
  if (status === 403) return "forbidden";
  if (status === 404) return "notFound";
  if (status === 503 || status === 502 || status === 504) return "unavailable";
  if (status >= 500) return "server";
  return "invalid";
}

export function headers(extra = {}) {
  const h = { "X-Strata-Forward": "owner", Accept: "application/json", ...extra };
  const auth = authorizationHeader();
  if (auth) h.Authorization = auth;
  return h;
}

export function url(path, query) {
  const u = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, String(v));
  }
  return u.pathname + u.search;
}

/** One admin call: the decoded JSON answer (null for an empty one), or an ApiError. `notifyAuth`
 *  false: a 401 is only thrown, not announced (the login checks use it: a 401 there is an answer). */
export async function api(method, path, { body, query, timeoutMs = CALL_TIMEOUT_MS, raw = false, notifyAuth = true } = {}) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  let resp;
  try {
    resp = await fetch(url(path, query), {
      method,
      headers: headers(body !== undefined ? { "Content-Type": "application/json" } : {}),
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: ctl.signal,
      credentials: "same-origin",
    });
  } catch (e) {
    const why = ctl.signal.aborted ? `no answer within ${timeoutMs / 1000} s` : "the broker cannot be reached";
    throw new ApiError(0, `${why}: is the broker still running? Reload the page once it is back.`, "unavailable");
  } finally {
    clearTimeout(timer);
  }
  const text = await resp.text();
  if (!resp.ok) {
    let reason = text;
    try {
      const parsed = JSON.parse(text);
      reason = parsed.reason || parsed.message || text;
    } catch {
      /* a plain-text reason */
    }
    if (!reason) reason = `${resp.status} ${resp.statusText}`;
    const err = new ApiError(resp.status, reason, kindOf(resp.status));
    if (err.kind === "auth" && notifyAuth) listeners.forEach((fn) => fn(err));
    throw err;
  }
  if (raw) return text;
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export const get = (path, query, opts) => api("GET", path, { ...opts, query });
/** whoami: who the broker takes this page's credentials for (a 401 means "log in", not an error). */
export const whoami = () => api("GET", "/admin/v2/console/whoami", { notifyAuth: false });
export const put = (path, body, opts) => api("PUT", path, { ...opts, body });
export const post = (path, body, opts) => api("POST", path, { ...opts, body });
export const del = (path, query, opts) => api("DELETE", path, { ...opts, query });

/** The admin path of a topic: "persistent://t/ns/x" or "t/ns/x" → "/admin/v2/persistent/t/ns/x". */
export function topicPath(topic) {
  const m = /^(persistent|non-persistent):\/\/(.*)$/.exec(topic);
  const domain = m ? m[1] : "persistent";
  const rest = m ? m[2] : topic;
  return `/admin/v2/${domain}/${rest.split("/").map(encodeURIComponent).join("/")}`;
}
