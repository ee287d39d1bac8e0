// The audit log (#/audit, superuser): changes, message views and refusals recorded by every
// broker, newest first (`GET /admin/v2/console/audit?limit=&role=&kind=`, broker/admin/audit.py),
// filtered by role and kind on the broker and paged here.
//
// What must hold: at most AUDIT_FETCH_MAX records are fetched at once (the broker's own bound is
// higher); brokers that did not answer are named, so a short list is not taken as complete; a
// 403 (not a superuser) is a message, not an empty table.
import { useState } from "preact/hooks";
import { get } from "../api.js";
import { ErrorBox, Loading, Table, useApi } from "../components/common.jsx";
import { time } from "../format.js";
import { href } from "../router.js";

const AUDIT_FETCH_MAX = 2000;
const KIND_BADGE = { change: "warn", view: "", denied: "bad" };

export function Audit() {
  const [role, setRole] = useState("");
  const [kind, setKind] = useState("");
  const [applied, setApplied] = useState({ role: "", kind: "" });
  const log = useApi(() => get("/admin/v2/console/audit", { limit: AUDIT_FETCH_MAX, role: applied.role, kind: applied.kind }),
    [applied.role, applied.kind]);

  if (log.error && log.error.kind === "forbidden") {
    return (
      <section>
        <h1>Audit log</h1>
        <div class="error" role="alert">
          <strong>The audit log needs a superuser.</strong>
          <div class="advice">Your role may not read who changed what. Your own tenants are under <a href={href("tenants")}>Tenants &amp; topics</a>.</div>
        </div>
      </section>
    );
  }
  const entries = log.data?.entries || [];
  const unreachable = log.data?.unreachable || [];
  const columns = [
    ["Time", (r) => time(r.time)],
    ["Kind", (r) => <span class={`badge ${KIND_BADGE[r.kind] || ""}`}>{r.kind}</span>],
    ["Role", (r) => (r.role === null || r.role === undefined ? <em>none</em> : r.role || <em>anonymous</em>)],
    ["Call", (r) => <span class="mono">{r.method} {r.path}{r.query ? `?${r.query}` : ""}</span>],
    ["Status", (r) => r.status],
    ["From", (r) => <span class="mono">{r.remote}</span>],
    ["Broker", (r) => <span class="mono">{r.broker}</span>],
  ];
  const submit = (e) => {
    e.preventDefault();
    if (applied.role === role.trim() && applied.kind === kind) log.reload();
    else setApplied({ role: role.trim(), kind });
  };
  return (
    <section>
      <h1>Audit log</h1>
      <p>Changes, message views and refused calls, newest first (plain reads are not recorded).</p>
      <form class="toolbar" role="search" aria-label="Filter the audit log" onSubmit={submit}>
        <label>
          Role
          <input type="text" value={role} onInput={(e) => setRole(e.currentTarget.value)} placeholder="any role" />
        </label>
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
            <option value="">any</option>
            <option value="change">change</option>
            <option value="view">view</option>
            <option value="denied">denied</option>
          </select>
        </label>
        <button type="submit" class="primary">Show</button>
      </form>
      {unreachable.length > 0 && (
        <p class="warn" role="note">Not included: {unreachable.join(", ")} did not answer; their records are missing until they do.</p>
      )}
      <ErrorBox error={log.error} onRetry={log.reload} />
      {log.loading && <Loading what="Loading the audit log" />}
      {log.data && (
        <>
          {entries.length >= AUDIT_FETCH_MAX && <p class="warn">Showing the newest {AUDIT_FETCH_MAX.toLocaleString()} records: narrow the filter to see older ones.</p>}
          <Table label="Audit records" columns={columns} rows={entries} empty="No record matches." />
        </>
      )}
    </section>
  );
}
