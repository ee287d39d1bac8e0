// Actions on the whole topic, each with its status: create a topic (partitioned or not) in this
// namespace, delete (Confirm; force), unload, terminate (Confirm), compact (PUT .../compaction,
// then GET .../compaction polled with a Progress bar until it is no longer RUNNING) and offload
// (PUT .../offload with a message id, or the last message id for "everything before latest";
// GET .../offload polled the same way). A partitioned topic: delete, terminate and compact act
// on every partition; offload on the chosen partition.
import { useState } from "preact/hooks";
import { del, get, post, put, topicPath } from "../api.js";
import { Confirm, ErrorBox, Notice, Progress } from "../components/common.jsx";
import { count } from "../format.js";
import { href, navigate } from "../router.js";
import { PartitionSelect, parseMessageId, partitionBase, sleep, statusBadge, useInterval } from "./util.jsx";

const STATUS_POLL_MS = 1000;
const FOLLOW_MS_MAX = 30 * 60 * 1000;

export function Actions({ t }) {
  return (
    <section aria-label="Actions">
      <Simple t={t} />
      <LongRunning t={t} kind="compaction" title="Compaction" start={() => put(`${t.base}/compaction`)} statusPath={`${t.base}/compaction`} />
      <Offload t={t} />
      <CreateTopic t={t} />
    </section>
  );
}

function useAction() {
  const [confirm, setConfirm] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState("");
  const [busy, setBusy] = useState(false);
  const run = async (fn, done) => {
    setConfirm(null);
    setBusy(true);
    setError(null);
    setNotice("");
    try {
      const out = await fn();
      setNotice(done(out));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const dialog = confirm && <Confirm {...confirm} onCancel={() => setConfirm(null)} />;
  return { run, ask: setConfirm, error, setError, notice, busy, dialog };
}

function Simple({ t }) {
  const a = useAction();
  const [force, setForce] = useState(false);
  const partitioned = t.partitions > 0;
  const remove = () => a.ask({
    title: `Delete topic ${t.name}?`,
    message: `Every message${partitioned ? ` of its ${count(t.partitions)} partitions` : ""} and its subscriptions are deleted${force ? "; connected clients are disconnected" : ""}. This cannot be undone.`,
    confirmLabel: "Delete",
    onConfirm: () => a.run(() => (partitioned ? del(`${t.base}/partitions`, { force: force || undefined }) : del(t.base, { force: force || undefined })),
      () => { setTimeout(() => navigate("namespace", [t.tenant, t.ns]), 1500); return `Topic ${t.name} deleted.`; }),
  });
  const terminate = () => a.ask({
    title: `Terminate topic ${t.name}?`,
    message: "It will take no more messages: producers are closed and consumers reach its end. This cannot be undone.",
    confirmLabel: "Terminate",
    onConfirm: () => a.run(() => post(partitioned ? `${t.base}/terminate/partitions` : `${t.base}/terminate`),
      (id) => `Terminated${id && id.ledgerId !== undefined ? ` at ${id.ledgerId}:${id.entryId}` : ""}.`),
  });
  const unload = () => a.run(() => put(`${t.base}/unload`), () => "Unloaded: the topic is served again on its next use.");
  return (
    <div class="panel" role="group" aria-label="Topic actions">
      <h2>Topic</h2>
      <div class="toolbar">
        <button type="button" disabled={a.busy} onClick={unload}>Unload</button>
        <button type="button" disabled={a.busy} onClick={terminate}>Terminate</button>
        <label style={{ flexDirection: "row", alignItems: "center" }}>
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.currentTarget.checked)} /> Force delete (disconnect clients)
        </label>
        <button type="button" class="danger" disabled={a.busy} onClick={remove}>Delete topic</button>
      </div>
      <ErrorBox error={a.error} />
      <Notice text={a.notice} />
      {a.dialog}
    </div>
  );
}

/** A background job's status (compaction, offload): shown now, and followed after a start. */
function LongRunning({ kind, title, start, statusPath, children, before }) {
  const [status, setStatus] = useState(null);
  const [error, setError] = useState(null);
  const [following, setFollowing] = useState(false);
  const [notice, setNotice] = useState("");
  useInterval(async (alive) => {
    try {
      const s = await get(statusPath);
      if (alive()) setStatus(s);
    } catch (e) {
      if (alive() && e.kind !== "notFound") setError(e);
    }
  }, following ? STATUS_POLL_MS : 15000, [statusPath, following]);
  const go = async () => {
    setError(null);
    setNotice("");
    try {
      if (before) await before();
      await start();
      setFollowing(true);
      const until = Date.now() + FOLLOW_MS_MAX;
      let s = null;
      while (Date.now() < until) {
        await sleep(STATUS_POLL_MS);
        s = await get(statusPath);
        setStatus(s);
        if (s.status !== "RUNNING") break;
      }
      setNotice(`${title}: ${s ? s.status : "unknown"}${s && s.message ? ` — ${s.message}` : ""}`);
    } catch (e) {
      setError(e);
    } finally {
      setFollowing(false);
    }
  };
  const p = status && status.progress;
  return (
    <div class="panel" role="group" aria-label={title}>
      <h2>{title}</h2>
      {children}
      <div class="toolbar">
        <button type="button" disabled={following} onClick={go}>{`Start ${kind}`}</button>
        <span>status <span class={statusBadge(status && status.status)} data-testid={`${kind}-status`}>{status ? status.status : "–"}</span></span>
        {status && status.lastError && <span class="warn">{status.lastError}</span>}
      </div>
      {status && status.message && <p>{status.message}</p>}
      {(following || (status && status.status === "RUNNING")) && (
        <Progress label={`${title}${p ? `: ${count(p.entriesDone)} of ${count(p.entriesTotal)} entries` : ""}`}
          value={p ? p.entriesDone : 0} max={p ? p.entriesTotal : 0} />
      )}
      <ErrorBox error={error} />
      <Notice text={notice} />
    </div>
  );
}

function Offload({ t }) {
  const [partition, setPartition] = useState(0);
  const [mode, setMode] = useState("latest");
  const [msgId, setMsgId] = useState("");
  const path = partitionBase(t, partition);
  let target = null;
  const before = async () => {
    if (mode === "latest") {
      target = await get(`${path}/lastMessageId`);
    } else {
      const id = parseMessageId(msgId);
      if (!id) throw { kind: "invalid", reason: "Message id: ledger:entry, e.g. 12:0." };
      target = { ledgerId: id.ledgerId, entryId: id.entryId, partitionIndex: -1 };
    }
  };
  return (
    <LongRunning key={path} kind="offload" title="Offload to the cold tier" statusPath={`${path}/offload`}
      before={before} start={() => put(`${path}/offload`, { ledgerId: target.ledgerId, entryId: target.entryId, partitionIndex: target.partitionIndex ?? -1 })}>
      <div class="toolbar">
        <PartitionSelect t={t} value={partition} onChange={setPartition} />
        <label>
          Offload
          <select value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
            <option value="latest">everything before latest</option>
            <option value="id">the ledgers before a message id</option>
          </select>
        </label>
        {mode === "id" && <label>Offload before message id<input value={msgId} placeholder="12:0" onInput={(e) => setMsgId(e.currentTarget.value)} /></label>}
      </div>
    </LongRunning>
  );
}

function CreateTopic({ t }) {
  const [name, setName] = useState("");
  const [partitions, setPartitions] = useState("0");
  const [created, setCreated] = useState("");
  const a = useAction();
  const create = (e) => {
    e.preventDefault();
    const n = Number(partitions);
    const local = name.trim();
    if (!local || local.includes("/")) return a.setError({ kind: "invalid", reason: "Topic name: a local name without '/'." });
    if (!Number.isInteger(n) || n < 0) return a.setError({ kind: "invalid", reason: "Partitions: a whole number (0: not partitioned)." });
    const path = topicPath(`persistent://${t.tenant}/${t.ns}/${local}`);
    return a.run(() => (n > 0 ? put(`${path}/partitions`, n) : put(path)), () => { setCreated(local); return `Topic ${local} created.`; });
  };
  return (
    <form class="panel" aria-label="Create a topic" onSubmit={create}>
      <h2>{`Create a topic in ${t.tenant}/${t.ns}`}</h2>
      <div class="toolbar">
        <label>Topic name<input value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>Partitions (0: not partitioned)<input type="number" min="0" value={partitions} onInput={(e) => setPartitions(e.currentTarget.value)} /></label>
        <button type="submit" class="primary" disabled={a.busy}>Create topic</button>
      </div>
      <ErrorBox error={a.error} />
      {a.notice && <p class="notice" role="status">{a.notice} <a href={href("topic", [t.tenant, t.ns, created, "overview"])}>Open it</a></p>}
    </form>
  );
}
