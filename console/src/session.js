// Who the console calls the admin API as: a token (Bearer), basic credentials, or nothing (an
// mTLS certificate the browser presents, or a broker with authentication off). Kept in
// sessionStorage: it lives as long as the tab, and is never written anywhere else.
const KEY = "strata.console.credentials";

export function credentials() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY) || "null");
  } catch {
    return null;
  }
}

export function setCredentials(value) {
  if (value) sessionStorage.setItem(KEY, JSON.stringify(value));
  else sessionStorage.removeItem(KEY);
}

export function authorizationHeader() {
  const c = credentials();
  if (!c) return null;
  if (c.kind === "token") return `Bearer ${c.token}`;
  if (c.kind === "basic") return `Basic ${btoa(`${c.user}:${c.password}`)}`;
  return null;
}
