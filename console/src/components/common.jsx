// Small building blocks every page uses: an error with a way forward, a loading line, a
// confirmation dialog for destructive actions, tabs, a paged table, and `useApi` (load, reload,
// poll). Everything is labelled, so the pages are usable from the keyboard and by screen readers.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

const ADVICE = {
  auth: "Your credentials were refused or have expired: log in again.",
  forbidden: "Your role is not allowed to do this. Ask a tenant admin or a superuser for a grant.",
  notFound: "It does not exist (any more). Go back to the list and pick another.",
  invalid: "Correct the value and try again.",
  unavailable: "The broker did not answer. Check that it is running, then retry.",
  server: "The broker failed to answer. Retry; if it persists, look at the broker's log.",
  limit: "Open one partition from the Partitions tab: each partition has its own stats, subscriptions and actions.",
};

export function ErrorBox({ error, onRetry }) {
  if (!error) return null;
  const advice = ADVICE[error.kind] || "";
  return (
    <div class="error" role="alert">
      <strong>{error.status ? `Error ${error.status}: ` : "Error: "}</strong>
      <span class="reason">{error.reason || String(error.message || error)}</span>
      {advice && <div class="advice">{advice}</div>}
      <div class="actions">
        {onRetry && <button type="button" onClick={onRetry}>Retry</button>}
        {error.kind === "auth" && <a href="#/login">Log in</a>}
        {error.kind === "notFound" && <a href="#/tenants">Back to tenants</a>}
      </div>
    </div>
  );
}

export function Loading({ what = "Loading" }) {
  return <p class="loading" aria-live="polite">{what}…</p>;
}

/** Load with `fetcher()`; `pollMs` reloads on a timer while the component is shown. */
export function useApi(fetcher, deps = [], pollMs = 0) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const alive = useRef(true);
  const load = useCallback(async () => {
    try {
      const data = await fetcher();
      if (alive.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (alive.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    alive.current = true;
    setState({ data: null, error: null, loading: true });
    load();
    let timer = null;
    if (pollMs > 0) timer = setInterval(load, pollMs);
    return () => {
      alive.current = false;
      if (timer) clearInterval(timer);
    };
  }, [load, pollMs]);
  return { ...state, reload: load };
}

/** A modal asking to confirm `message`; resolves through onConfirm/onCancel. */
export function Confirm({ title, message, confirmLabel = "Confirm", onConfirm, onCancel }) {
  const ref = useRef(null);
  useEffect(() => {
    if (ref.current && !ref.current.open) ref.current.showModal();
  }, []);
  return (
    <dialog ref={ref} class="confirm" aria-labelledby="confirm-title" onCancel={onCancel}>
      <h2 id="confirm-title">{title}</h2>
      <p>{message}</p>
      <div class="actions">
        <button type="button" onClick={onCancel}>Cancel</button>
        <button type="button" class="danger" onClick={onConfirm}>{confirmLabel}</button>
      </div>
    </dialog>
  );
}

export function Tabs({ tabs, current, hrefOf }) {
  return (
    <nav class="tabs" aria-label="Sections">
      {tabs.map(([id, label]) => (
        <a key={id} href={hrefOf(id)} aria-current={id === current ? "page" : undefined}>{label}</a>
      ))}
    </nav>
  );
}

/** A table of `rows` shown `pageSize` at a time; `columns` are [header, row => cell]. */
export function Table({ label, columns, rows, pageSize = 50, empty = "Nothing here." }) {
  const [page, setPage] = useState(0);
  const pages = Math.max(1, Math.ceil(rows.length / pageSize));
  const shown = rows.slice(page * pageSize, (page + 1) * pageSize);
  useEffect(() => {
    if (page >= pages) setPage(0);
  }, [pages]);
  if (rows.length === 0) return <p class="empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>{columns.map(([h]) => <th key={h} scope="col">{h}</th>)}</tr>
        </thead>
        <tbody>
          {shown.map((row, i) => (
            <tr key={i}>{columns.map(([h, cell]) => <td key={h} data-label={h}>{cell(row)}</td>)}</tr>
          ))}
        </tbody>
      </table>
      {pages > 1 && (
        <div class="pager" role="group" aria-label={`${label} pages`}>
          <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>Previous</button>
          <span>Page {page + 1} of {pages} ({rows.length.toLocaleString()} rows)</span>
          <button type="button" disabled={page >= pages - 1} onClick={() => setPage(page + 1)}>Next</button>
        </div>
      )}
    </div>
  );
}

/** A progress bar with a label (`value` of `max`; no max: indeterminate). */
export function Progress({ label, value, max }) {
  return (
    <div class="progress">
      <label>
        {label}
        <progress value={max ? value : undefined} max={max || undefined} aria-label={label} />
      </label>
    </div>
  );
}

/** A one-line notice that something worked; `role=status` so it is announced. */
export function Notice({ text }) {
  if (!text) return null;
  return <p class="notice" role="status">{text}</p>;
}
