// Why the topic's storage exceeds its backlog (GET .../explain-storage, broker/explain/): a
// stacked horizontal bar over the topic's ledgers, each a segment sized by its bytes and
// coloured by what keeps it (a subscription's backlog, a subscription's ack holes, retention,
// the offload deletion lag, the open ledger, the compacted view, or nothing: awaiting the next
// retention pass), a legend, the advice lines, the totals (storage vs backlog, and the
// decomposition), and an accessible table of the same ledgers.
//
// The bar is plain proportional divs (a layout, not a chart); a ledger too small to see still
// gets MIN_SEGMENT_PX. A partitioned topic's answer has one explanation per partition: the
// partition selector picks one.
import { useState } from "preact/hooks";
import { get } from "../api.js";
import { ErrorBox, Loading, Table, useApi } from "../components/common.jsx";
import { bytes, count, time } from "../format.js";
import { PartitionSelect } from "./util.jsx";

const MIN_SEGMENT_PX = 3;
const BAR_LEDGERS_MAX = 2000;     // beyond this many ledgers the bar groups the rest in one segment

export const KEEPERS = {
  backlog: ["backlog", "#2457c5"],
  ackHoles: ["ack holes", "#c2410c"],
  retention: ["retention", "#7c3aed"],
  offloadLag: ["offload deletion lag", "#0e7490"],
  open: ["open ledger", "#127a3a"],
  compaction: ["compacted view", "#a16207"],
  nothing: ["nothing (awaiting trim)", "#9aa3af"],
};

/** What keeps a ledger, for its colour: [kind, words naming it]. */
export function keeperOf(ledger) {
  const kept = ledger.keptBy || [];
  const parts = ledger.parts || {};
  if (parts.compacted) return ["compaction", "the compacted view"];
  if (kept.some((k) => k.kind === "open")) return ["open", "the open ledger"];
  const subs = kept.filter((k) => k.kind === "subscription");
  if (subs.length) {
    const names = subs.map((k) => k.subscription).join(", ");
    // an ack hole pins this ledger when the subscription acked some of it (offloaded ledgers
    // count their bytes as "offloaded", so the parts alone cannot tell)
    const holes = subs.some((k) => k.ackHoles > 0 && k.unackedEntries < ledger.entries);
    return holes ? ["ackHoles", `ack holes of ${names}`] : ["backlog", `backlog of ${names}`];
  }
  if (kept.some((k) => k.kind === "retention")) return ["retention", "retention"];
  if (kept.some((k) => k.kind === "offloadDeletionLag")) return ["offloadLag", "offload deletion lag"];
  if (kept.some((k) => k.kind === "lastLedger")) return ["open", "the last ledger"];
  return ["nothing", "nothing: awaiting the next retention pass"];
}

export function whereText(ledger) {
  const loc = ledger.location || {};
  const out = [];
  if (loc.s3) out.push(`S3 s3://${loc.s3.bucket}/${loc.s3.key}`);
  if (loc.bookieCopy !== false && (loc.bookies || []).length) out.push(`bookies ${loc.bookies.join(", ")}`);
  return out.join("; ") || "–";
}

export function span(ledger) {
  if (!ledger.firstPublishMs) return "empty";
  return `${time(ledger.firstPublishMs)} – ${time(ledger.lastPublishMs)}`;
}

export function useExplain(t, partition) {
  const path = t.partitions > 0 ? `${t.base}-partition-${partition}` : t.base;
  return useApi(() => get(`${path}/explain-storage`), [path]);
}

export function Storage({ t }) {
  const [partition, setPartition] = useState(0);
  const ex = useExplain(t, partition);
  return (
    <section aria-label="Storage">
      <div class="toolbar">
        <PartitionSelect t={t} value={partition} onChange={setPartition} />
        <button type="button" onClick={ex.reload}>Refresh</button>
      </div>
      {ex.error && <ErrorBox error={ex.error} onRetry={ex.reload} />}
      {!ex.data ? (!ex.error && <Loading what="Explaining the storage" />) : <Explanation doc={ex.data} />}
    </section>
  );
}

function Explanation({ doc }) {
  const ledgers = doc.ledgers || [];
  const total = Math.max(1, ledgers.reduce((a, l) => a + (l.size || 0), 0));
  const shown = ledgers.slice(0, BAR_LEDGERS_MAX);
  const rest = ledgers.slice(BAR_LEDGERS_MAX);
  const used = new Set(ledgers.map((l) => keeperOf(l)[0]));
  const parts = (doc.decomposition || []).filter((p) => p.size > 0);
  return (
    <>
      <div class="cards">
        <div class="card"><div class="label">Storage size</div><div class="value" data-testid="storage-size">{bytes(doc.storageSize)}</div></div>
        <div class="card"><div class="label">Backlog size</div><div class="value" data-testid="storage-backlog">{bytes(doc.backlogSize)}</div>
          {doc.backlogSubscription && <div class="label">of {doc.backlogSubscription}</div>}</div>
        <div class="card"><div class="label">Storage beyond backlog</div><div class="value">{bytes(Math.max(0, doc.storageSize - doc.backlogSize))}</div></div>
        <div class="card"><div class="label">Ledgers</div><div class="value">{count(ledgers.length)}</div></div>
      </div>
      <div style={{ display: "flex", flexWrap: "wrap", gap: "1rem", alignItems: "flex-start" }}>
        <div class="panel" style={{ flex: "2 1 420px", minWidth: 0 }}>
          <h2>Ledgers by what keeps them</h2>
          <div role="img" aria-label="Ledgers stacked by size, coloured by what keeps each"
            style={{ display: "flex", height: "2.5rem", width: "100%", border: "1px solid var(--line)", borderRadius: "4px", overflow: "hidden" }}>
            {shown.map((l) => {
              const [kind, words] = keeperOf(l);
              const title = `ledger ${l.ledgerId}: ${bytes(l.size)}, ${count(l.entries)} entries, kept by ${words}; ${l.goes || ""}`;
              return <div key={l.ledgerId} title={title} data-keeper={kind}
                style={{ flex: `${Math.max(l.size, 0) / total} 0 ${MIN_SEGMENT_PX}px`, background: KEEPERS[kind][1], borderRight: "1px solid #fff" }} />;
            })}
            {rest.length > 0 && <div title={`${rest.length} more ledgers`} style={{ flex: `${rest.reduce((a, l) => a + l.size, 0) / total} 0 ${MIN_SEGMENT_PX}px`, background: "#d9dee5" }} />}
          </div>
          <ul aria-label="Legend" style={{ display: "flex", flexWrap: "wrap", gap: ".25rem 1rem", listStyle: "none", padding: 0 }}>
            {Object.entries(KEEPERS).filter(([k]) => used.has(k)).map(([k, [label, colour]]) => (
              <li key={k}><span style={{ display: "inline-block", width: "0.9rem", height: "0.9rem", background: colour, verticalAlign: "middle", marginRight: ".3rem" }} />{label}</li>
            ))}
          </ul>
          <h3>Where the bytes are</h3>
          <ul aria-label="Decomposition">
            {parts.map((p) => <li key={p.category}>{p.label}: <strong>{bytes(p.size)}</strong> ({p.percent}%, {count(p.ledgers)} ledgers)</li>)}
            {parts.length === 0 && <li>nothing stored</li>}
          </ul>
        </div>
        <div class="panel" style={{ flex: "1 1 300px" }} aria-label="Advice" role="region">
          <h2>Advice</h2>
          {(doc.advice || []).length === 0 ? <p class="empty">Nothing to do: storage is what the backlog needs.</p>
            : <ul>{doc.advice.map((a, i) => <li key={i}>{a}</li>)}</ul>}
        </div>
      </div>
      <h2>Ledgers</h2>
      <LedgerTable label="Ledgers and what keeps them" ledgers={ledgers} />
    </>
  );
}

export function LedgerTable({ label, ledgers, extra = [] }) {
  return (
    <Table label={label} rows={ledgers} empty="No ledger." columns={[
      ["Ledger", (l) => l.ledgerId],
      ["State", (l) => l.state],
      ["Where", (l) => <span class="mono">{whereText(l)}</span>],
      ["Size", (l) => bytes(l.size)],
      ["Entries", (l) => count(l.entries)],
      ["Published", (l) => span(l)],
      ["Kept by", (l) => {
        const [kind, words] = keeperOf(l);
        return (
          <>
            <span class="badge" style={{ background: KEEPERS[kind][1], color: "#fff" }}>{words}</span>
            <ul style={{ margin: ".2rem 0 0", paddingLeft: "1rem" }}>{(l.keptBy || []).map((k, i) => <li key={i}>{k.detail}</li>)}</ul>
          </>
        );
      }],
      ["Goes", (l) => l.goes || "–"],
      ...extra,
    ]} />
  );
}
