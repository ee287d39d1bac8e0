// A namespace's policies, each shown and editable on its own: retention, message TTL, backlog
// quotas, offload threshold, deduplication and schema compatibility.
//
// Inputs take Pulsar's units as pulsar-admin's flags do (sizes "10M", "2G", "-1"; times "30s",
// "7d", "-1"; binary prefixes). Each form checks its values before sending anything and says
// what is wrong; a refusal from the broker (400/412/403...) is shown under the form; a success
// says "Saved" and reads the value back, so what is shown is what the broker stored.
//
// Routes (broker/admin/namespaces.py, backlog_quota.py, offload.py, schemas.py), under
// /admin/v2/namespaces/{t}/{ns}:
//   retention           GET | POST {"retentionTimeInMinutes", "retentionSizeInMB"} | DELETE
//   messageTTL          GET | POST seconds (>= 0, 0 = off) | DELETE
//   backlogQuotaMap     GET; backlogQuota?backlogQuotaType= POST {"limitSize" bytes, "limitTime" s, "policy"} | DELETE
//   offloadThreshold    GET (-1 unset) | PUT bytes | DELETE
//   deduplication       GET (null unset) | POST true/false | DELETE
//   schemaCompatibilityStrategy  GET | PUT "FULL"...
import { useEffect, useState } from "preact/hooks";
import { del, get, post, put } from "../api.js";
import { ErrorBox, Notice } from "./common.jsx";
import { bytes, duration, parseSeconds, parseSizeMb } from "../format.js";

const QUOTA_POLICIES = ["producer_request_hold", "producer_exception", "consumer_backlog_eviction"];
const STRATEGIES = ["UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
  "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"];

/** Pulsar's size flags in bytes: "10M", "2G", "512K", "100", "-1"; null when invalid. */
export function parseSizeBytes(text) {
  const t = String(text).trim();
  if (t === "-1") return -1;
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$/i.exec(t);
  if (!m) return null;
  const factor = { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 }[m[2].toUpperCase()];
  return Math.round(Number(m[1]) * factor);
}

const lowerFirst = (s) => s.charAt(0).toLowerCase() + s.slice(1);
const infinite = (v, show) => (v === -1 ? "infinite" : show(v));

/**
 * One policy: `load()` → the stored value; `describe(value)` → text; `Fields` edits a draft
 * (an object of strings); `check(draft)` → [body-or-null, problem-or-null]; `save(body)` sends it.
 */
function PolicyForm({ title, id, load, describe, initialDraft, Fields, check, save, remove }) {
  const [value, setValue] = useState(undefined);
  const [loadError, setLoadError] = useState(null);
  const [draft, setDraft] = useState(null);
  const [problem, setProblem] = useState(null);
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(null);
  const [busy, setBusy] = useState(false);

  const reload = async () => {
    try {
      const v = await load();
      setValue(v);
      setLoadError(null);
      setDraft((d) => d || initialDraft(v));
    } catch (e) {
      setLoadError(e);
    }
  };
  useEffect(() => {
    reload();
  }, []);

  const run = async (action, notice) => {
    setBusy(true);
    setError(null);
    setSaved(null);
    try {
      await action();
      setSaved(notice);
      const v = await load();
      setValue(v);
      setDraft(initialDraft(v));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const submit = (e) => {
    e.preventDefault();
    setSaved(null);
    const [body, why] = check(draft);
    setProblem(why);
    if (why) return;
    run(() => save(body), `Saved: ${lowerFirst(title)} updated.`);
  };

  return (
    <form class="panel" aria-label={title} onSubmit={submit} noValidate>
      <h3>{title}</h3>
      {loadError && (loadError.kind === "forbidden"
        ? <p class="warn">Your role may not see this policy.</p>
        : <ErrorBox error={loadError} onRetry={reload} />)}
      {!loadError && <p>Now: <strong data-testid={`policy-${id}`}>{value === undefined ? "…" : describe(value)}</strong></p>}
      {draft && (
        <div class="toolbar">
          {Fields({ draft, set: (k, v) => setDraft({ ...draft, [k]: v }) })}
          <button type="submit" class="primary" disabled={busy}>Save {lowerFirst(title)}</button>
          {remove && <button type="button" disabled={busy} onClick={() => run(remove, `Saved: ${lowerFirst(title)} removed (the broker's default applies).`)}>Remove</button>}
        </div>
      )}
      {problem && <p class="error" role="alert">{problem}</p>}
      <ErrorBox error={error} />
      <Notice text={saved} />
    </form>
  );
}

function Text({ label, value, onInput, hint }) {
  return (
    <label>
      {label}
      <input type="text" value={value} onInput={(e) => onInput(e.currentTarget.value)} title={hint} placeholder={hint} size={10} />
    </label>
  );
}

export function NsPolicies({ tenant, ns }) {
  const base = `/admin/v2/namespaces/${encodeURIComponent(tenant)}/${encodeURIComponent(ns)}`;
  return (
    <div style={{ display: "grid", gridTemplateColumns: "repeat(auto-fit, minmax(min(100%, 520px), 1fr))", gap: "0 1rem" }}>
      <Retention base={base} />
      <Ttl base={base} />
      <BacklogQuota base={base} />
      <OffloadThreshold base={base} />
      <Dedup base={base} />
      <SchemaStrategy base={base} />
    </div>
  );
}

function Retention({ base }) {
  return (
    <PolicyForm
      title="Retention" id="retention"
      load={() => get(`${base}/retention`)}
      describe={(r) => (r ? `time ${infinite(r.retentionTimeInMinutes, (m) => duration(m * 60))}, size ${infinite(r.retentionSizeInMB, (mb) => bytes(mb * 1024 * 1024))}` : "not set (the broker's default applies)")}
      initialDraft={(r) => ({ time: r ? String(r.retentionTimeInMinutes === -1 ? -1 : `${r.retentionTimeInMinutes}m`) : "", size: r ? String(r.retentionSizeInMB === -1 ? -1 : `${r.retentionSizeInMB}M`) : "" })}
      Fields={({ draft, set }) => (
        <>
          <Text label="Retention time" value={draft.time} onInput={(v) => set("time", v)} hint="7d, 12h, 30m, -1" />
          <Text label="Retention size" value={draft.size} onInput={(v) => set("size", v)} hint="10G, 500M, -1" />
        </>
      )}
      check={(d) => {
        const seconds = parseSeconds(d.time);
        const mb = parseSizeMb(d.size);
        if (seconds === null) return [null, `Retention time "${d.time}" is not a time: use a number with s, m, h, d or w (7d), or -1 for infinite.`];
        if (seconds !== -1 && seconds % 60 !== 0) return [null, "Retention time is kept in whole minutes: use a multiple of 60 s."];
        if (mb === null) return [null, `Retention size "${d.size}" is not a size: use a number with K, M, G or T (10G), or -1 for infinite.`];
        const minutes = seconds === -1 ? -1 : seconds / 60;
        if ((minutes === 0 && mb > 0) || (mb === 0 && minutes > 0)) return [null, "Retention time and size must both be 0 (no retention) or both set."];
        return [{ retentionTimeInMinutes: minutes, retentionSizeInMB: mb }, null];
      }}
      save={(body) => post(`${base}/retention`, body)}
      remove={() => del(`${base}/retention`)}
    />
  );
}

function Ttl({ base }) {
  return (
    <PolicyForm
      title="Message TTL" id="ttl"
      load={() => get(`${base}/messageTTL`)}
      describe={(s) => (s === null || s === undefined ? "not set (the broker's default applies)" : s === 0 ? "off" : duration(s))}
      initialDraft={(s) => ({ ttl: s === null || s === undefined ? "" : `${s}s` })}
      Fields={({ draft, set }) => <Text label="Message TTL" value={draft.ttl} onInput={(v) => set("ttl", v)} hint="1h, 30m, 0 = off" />}
      check={(d) => {
        const s = parseSeconds(d.ttl);
        if (s === null || s < 0) return [null, `Message TTL "${d.ttl}" is not a time of 0 or more: use a number with s, m, h, d or w (1h); 0 turns it off.`];
        return [s, null];
      }}
      save={(s) => post(`${base}/messageTTL`, s)}
      remove={() => del(`${base}/messageTTL`)}
    />
  );
}

function BacklogQuota({ base }) {
  const describe = (map) => {
    const parts = Object.entries(map || {}).map(([type, q]) =>
      type === "message_age" ? `message age ${infinite(q.limitTime, duration)} (${q.policy})` : `size ${infinite(q.limitSize, bytes)} (${q.policy})`);
    return parts.length ? parts.join("; ") : "none (the broker's default applies)";
  };
  return (
    <PolicyForm
      title="Backlog quota" id="backlog-quota"
      load={() => get(`${base}/backlogQuotaMap`)}
      describe={describe}
      initialDraft={() => ({ type: "destination_storage", limit: "", policy: QUOTA_POLICIES[0] })}
      Fields={({ draft, set }) => (
        <>
          <label>
            Quota type
            <select value={draft.type} onChange={(e) => set("type", e.currentTarget.value)}>
              <option value="destination_storage">backlog size (destination_storage)</option>
              <option value="message_age">message age (message_age)</option>
            </select>
          </label>
          <Text label="Quota limit" value={draft.limit} onInput={(v) => set("limit", v)}
            hint={draft.type === "message_age" ? "1h, 2d" : "10G, 500M"} />
          <label>
            Quota policy
            <select value={draft.policy} onChange={(e) => set("policy", e.currentTarget.value)}>
              {QUOTA_POLICIES.map((p) => <option key={p} value={p}>{p}</option>)}
            </select>
          </label>
        </>
      )}
      check={(d) => {
        const age = d.type === "message_age";
        const v = age ? parseSeconds(d.limit) : parseSizeBytes(d.limit);
        if (v === null || v < 0) return [null, age ? `Quota limit "${d.limit}" is not a time (1h, 2d).` : `Quota limit "${d.limit}" is not a size (10G, 500M).`];
        return [{ type: d.type, body: { limitSize: age ? -1 : v, limitTime: age ? v : -1, policy: d.policy } }, null];
      }}
      save={({ type, body }) => post(`${base}/backlogQuota?backlogQuotaType=${type}`, body)}
    />
  );
}

function OffloadThreshold({ base }) {
  return (
    <PolicyForm
      title="Offload threshold" id="offload-threshold"
      load={() => get(`${base}/offloadThreshold`)}
      describe={(b) => (b === null || b === undefined || b < 0 ? "not set (the broker's default applies)" : b === 0 ? "0 (offload as soon as possible)" : `${bytes(b)} kept on the bookies`)}
      initialDraft={(b) => ({ size: b === null || b === undefined || b < 0 ? "" : String(b) })}
      Fields={({ draft, set }) => <Text label="Offload threshold" value={draft.size} onInput={(v) => set("size", v)} hint="10G, 0" />}
      check={(d) => {
        const b = parseSizeBytes(d.size);
        if (b === null || b < 0) return [null, `Offload threshold "${d.size}" is not a size of 0 or more (10G, 500M; 0 offloads as soon as possible).`];
        return [b, null];
      }}
      save={(b) => put(`${base}/offloadThreshold`, b)}
      remove={() => del(`${base}/offloadThreshold`)}
    />
  );
}

function Dedup({ base }) {
  const asText = (v) => (v === true ? "enabled" : v === false ? "disabled" : "");
  return (
    <PolicyForm
      title="Deduplication" id="dedup"
      load={() => get(`${base}/deduplication`)}
      describe={(v) => (v === null || v === undefined ? "not set (the broker's default applies)" : asText(v))}
      initialDraft={(v) => ({ dedup: asText(v) || "disabled" })}
      Fields={({ draft, set }) => (
        <label>
          Deduplication
          <select value={draft.dedup} onChange={(e) => set("dedup", e.currentTarget.value)}>
            <option value="enabled">enabled</option>
            <option value="disabled">disabled</option>
          </select>
        </label>
      )}
      check={(d) => [d.dedup === "enabled", null]}
      save={(v) => post(`${base}/deduplication`, v)}
      remove={() => del(`${base}/deduplication`)}
    />
  );
}

function SchemaStrategy({ base }) {
  return (
    <PolicyForm
      title="Schema compatibility" id="schema-strategy"
      load={() => get(`${base}/schemaCompatibilityStrategy`)}
      describe={(s) => (s === "UNDEFINED" || !s ? "not set (FULL, the broker's default, applies)" : s)}
      initialDraft={(s) => ({ strategy: s || "UNDEFINED" })}
      Fields={({ draft, set }) => (
        <label>
          Compatibility strategy
          <select value={draft.strategy} onChange={(e) => set("strategy", e.currentTarget.value)}>
            {STRATEGIES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
      )}
      check={(d) => (STRATEGIES.includes(d.strategy) ? [d.strategy, null] : [null, "Pick a strategy."])}
      save={(s) => put(`${base}/schemaCompatibilityStrategy`, s)}
    />
  );
}
