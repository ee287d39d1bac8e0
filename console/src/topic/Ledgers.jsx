// The topic's ledgers: GET .../internalStats (the managed ledger's view: ids, entries, sizes,
// the offloaded flag, the cursors) joined by ledger id with explain-storage's per-ledger facts
// (where it lives: bookies or the S3 key, the publish-time span, what keeps it). A partitioned
// topic: one partition at a time.
import { useState } from "preact/hooks";
import { get } from "../api.js";
import { ErrorBox, Loading, Table, useApi } from "../components/common.jsx";
import { bytes, count } from "../format.js";
import { keeperOf, span, whereText } from "./Storage.jsx";
import { PartitionSelect, partitionBase } from "./util.jsx";

export function Ledgers({ t }) {
  const [partition, setPartition] = useState(0);
  const path = partitionBase(t, partition);
  const data = useApi(async () => {
    const [internal, explain] = await Promise.all([
      get(`${path}/internalStats`),
      get(`${path}/explain-storage`).catch(() => null),   // the ledgers show without it
    ]);
    return { internal, explain };
  }, [path]);
  return (
    <section aria-label="Ledgers">
      <div class="toolbar">
        <PartitionSelect t={t} value={partition} onChange={setPartition} />
        <button type="button" onClick={data.reload}>Refresh</button>
      </div>
      {data.error && <ErrorBox error={data.error} onRetry={data.reload} />}
      {!data.data ? (!data.error && <Loading what="Loading ledgers" />) : <LedgerView {...data.data} />}
    </section>
  );
}

function LedgerView({ internal, explain }) {
  const facts = new Map(((explain && explain.ledgers) || []).map((l) => [l.ledgerId, l]));
  const rows = (internal.ledgers || []).map((l) => ({ ...l, fact: facts.get(l.ledgerId) }));
  const cursors = Object.entries(internal.cursors || {}).map(([name, c]) => ({ name, ...c }));
  const compacted = internal.compactedLedger && internal.compactedLedger.ledgerId >= 0 ? internal.compactedLedger : null;
  return (
    <>
      <div class="cards">
        <div class="card"><div class="label">State</div><div class="value">{internal.state}</div></div>
        <div class="card"><div class="label">Entries</div><div class="value">{count(internal.numberOfEntries)}</div></div>
        <div class="card"><div class="label">Total size</div><div class="value">{bytes(internal.totalSize)}</div></div>
        <div class="card"><div class="label">Last confirmed</div><div class="value mono">{internal.lastConfirmedEntry}</div></div>
      </div>
      <Table label="Ledgers" rows={rows} empty="No ledger." columns={[
        ["Ledger", (l) => l.ledgerId],
        ["Where", (l) => (
          <>
            {l.offloaded ? <span class="badge warn">offloaded</span> : <span class="badge">bookies</span>}{" "}
            <span class="mono">{l.fact ? whereText(l.fact) : l.offloaded ? "S3 (key unknown)" : "–"}</span>
          </>
        )],
        ["Size", (l) => bytes(l.fact ? l.fact.size : l.size)],
        ["Entries", (l) => count(l.fact ? l.fact.entries : l.entries)],
        ["Published", (l) => (l.fact ? span(l.fact) : "–")],
        ["Kept by", (l) => (l.fact ? keeperOf(l.fact)[1] : "–")],
        ["Detail", (l) => (l.fact ? (l.fact.keptBy || []).map((k) => k.detail).join("; ") : "")],
      ]} />
      {compacted && <p>Compacted ledger {compacted.ledgerId}: {count(compacted.entries)} entries, {bytes(compacted.size)}.</p>}
      <h2>Cursors</h2>
      <Table label="Cursors" rows={cursors} empty="No cursor." columns={[
        ["Cursor", (c) => c.name],
        ["Mark-delete", (c) => <span class="mono">{c.markDeletePosition}</span>],
        ["Read position", (c) => <span class="mono">{c.readPosition}</span>],
        ["Acked ranges", (c) => count(c.totalNonContiguousDeletedMessagesRange)],
        ["Entries since first unacked", (c) => count(c.numberOfEntriesSinceFirstNotAckedMessage)],
        ["State", (c) => c.state],
      ]} />
    </>
  );
}
