// The topic's subscriptions and what can be done to each: skip N, clear the backlog, reset the
// cursor to a publish time (a datetime-local in the viewer's zone, or minutes ago) or to a
// message id, expire old messages, unsubscribe (forced when consumers are connected), and create
// a subscription at latest, earliest or a message id. Destructive actions ask Confirm first.
//
// After a clear or a reset the subscription's backlog is polled, as the CLI's progress bar does
// (cli/admin/subscriptions.py `_with_progress`): during the call and then until it settles
// (SETTLE_POLLS equal answers in a row, at most SETTLE_MS), shown with Progress; then the new
// backlog is announced.
import { useState } from "preact/hooks";
import { del, post, put } from "../api.js";
import { Confirm, ErrorBox, Loading, Notice, Progress, Table } from "../components/common.jsx";
import { bytes, count, zone } from "../format.js";
import { localInputToMs, msToLocalInput, parseMessageId, sleep, topicStats, useInterval } from "./util.jsx";

const POLL_MS = 3000;
const PROGRESS_POLL_MS = 500;
const SETTLE_POLLS = 3;
const SETTLE_MS = 60000;

async function backlogOf(t, sub) {
  const s = await topicStats(t);
  const one = (s.subscriptions || {})[sub];
  return one ? one.msgBacklog || 0 : 0;
}

export function Subscriptions({ t }) {
  const [stats, setStats] = useState(null);
  const [error, setError] = useState(null);
  const [chosen, setChosen] = useState("");
  const [tick, setTick] = useState(0);
  useInterval(async (alive) => {
    try {
      const s = await topicStats(t);
      if (alive()) { setStats(s); setError(null); }
    } catch (e) {
      if (alive()) setError(e);
    }
  }, POLL_MS, [t.base, tick]);
  const refresh = () => setTick((n) => n + 1);

  if (!stats) return error ? <ErrorBox error={error} /> : <Loading what="Loading subscriptions" />;
  const subs = Object.entries(stats.subscriptions || {}).map(([name, s]) => ({ name, ...s }));
  const current = subs.find((s) => s.name === chosen) || subs[0];
  return (
    <section aria-label="Subscriptions">
      {error && <ErrorBox error={error} />}
      <Table label="Subscriptions" rows={subs} empty="No subscription yet: create one below." columns={[
        ["Subscription", (s) => s.name],
        ["Type", (s) => s.type],
        ["Backlog", (s) => <span data-testid={`backlog-${s.name}`}>{count(s.msgBacklog)}</span>],
        ["Backlog size", (s) => bytes(s.backlogSize)],
        ["Unacked", (s) => count(s.unackedMessages)],
        ["Consumers", (s) => count((s.consumers || []).length)],
        ["Mark-delete", (s) => s.markDeletePosition || "–"],
        ["Actions", (s) => <button type="button" onClick={() => setChosen(s.name)} aria-label={`Manage ${s.name}`}>Manage</button>],
      ]} />
      {current && <SubscriptionActions key={current.name} t={t} sub={current} subs={subs} onChosen={setChosen} onDone={refresh} />}
      <CreateSubscription t={t} onDone={refresh} />
    </section>
  );
}

function SubscriptionActions({ t, sub, subs, onChosen, onDone }) {
  const [confirm, setConfirm] = useState(null);    // {title, message, label, run}
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState("");
  const [progress, setProgress] = useState(null);  // {label, value, max}
  const [skipN, setSkipN] = useState("1");
  const [when, setWhen] = useState(msToLocalInput(Date.now() - 3600000));
  const [minutes, setMinutes] = useState("10");
  const [msgId, setMsgId] = useState("");
  const [expireS, setExpireS] = useState("3600");
  const [force, setForce] = useState((sub.consumers || []).length > 0);
  const path = `${t.base}/subscription/${encodeURIComponent(sub.name)}`;

  const ask = (title, message, label, run, follow) => setConfirm({ title, message, label, run, follow });
  const go = async ({ run, follow, label }) => {
    setConfirm(null);
    setBusy(true);
    setError(null);
    setNotice("");
    setProgress(null);
    try {
      if (follow) await withProgress(follow, run);
      else await run();
      const after = await backlogOf(t, sub.name).catch(() => null);
      setNotice(`${label} done on ${sub.name}${after === null ? "" : `: backlog now ${count(after)} messages`}.`);
      onDone();
    } catch (e) {
      setError(e);
      setProgress(null);
    } finally {
      setBusy(false);     // a followed call's last bar stays, showing where the backlog settled
    }
  };
  // the call, then polls of the backlog until it settles: a bar as the CLI draws it
  const withProgress = async (kind, run) => {
    const before = await backlogOf(t, sub.name).catch(() => 0);
    const label = kind === "clear" ? `Clearing the backlog of ${sub.name}` : `Resetting ${sub.name}`;
    let largest = Math.max(before, 1);
    const show = (now) => {
      largest = Math.max(largest, now);
      setProgress(kind === "clear"
        ? { label: `${label}: ${count(now)} left`, value: Math.max(0, before - now), max: Math.max(before, 1) }
        : { label: `${label}: backlog ${count(now)}`, value: now, max: largest });
    };
    setProgress({ label, value: 0, max: 0 });
    let done = false;
    const call = run().finally(() => { done = true; });
    while (!done) {
      await sleep(PROGRESS_POLL_MS);
      const now = await backlogOf(t, sub.name).catch(() => null);
      if (now !== null && !done) show(now);
    }
    await call;
    let last = null;
    let same = 0;
    const until = Date.now() + SETTLE_MS;
    while (same < SETTLE_POLLS && Date.now() < until) {
      const now = await backlogOf(t, sub.name).catch(() => null);
      if (now !== null) {
        show(now);
        same = now === last ? same + 1 : 1;
        last = now;
        if (kind === "clear" && now === 0) break;
      }
      await sleep(PROGRESS_POLL_MS);
    }
  };

  const bad = (reason) => setError({ kind: "invalid", reason });
  const skip = () => {
    const n = Number(skipN);
    if (!Number.isInteger(n) || n < 1) return bad("Messages to skip: a whole number of at least 1.");
    ask(`Skip ${n} messages?`, `Subscription ${sub.name} will acknowledge its next ${n} unacked messages without reading them.`, "Skip",
      () => post(`${path}/skip/${n}`));
  };
  const clear = () => ask("Clear the backlog?", `Subscription ${sub.name} will acknowledge all ${count(sub.msgBacklog)} messages of its backlog.`, "Clear backlog",
    () => post(`${path}/skip_all`), "clear");
  const resetTime = (ms) => ask("Reset the subscription?", `Subscription ${sub.name} will read again from the first message published at or after ${new Date(ms).toLocaleString(undefined, { timeZoneName: "short" })}. Connected consumers are disconnected and come back.`, "Reset",
    () => post(`${path}/resetcursor/${ms}`), "reset");
  const resetAt = () => {
    const ms = localInputToMs(when);
    if (ms === null) return bad("Reset to publish time: pick a date and time.");
    resetTime(ms);
  };
  const resetAgo = () => {
    const m = Number(minutes);
    if (!Number.isFinite(m) || m < 0) return bad("Minutes ago: a number of minutes, 0 or more.");
    resetTime(Math.round(Date.now() - m * 60000));
  };
  const resetId = () => {
    const id = parseMessageId(msgId);
    if (!id) return bad("Message id: ledger:entry, e.g. 12:0.");
    ask("Reset the subscription?", `Subscription ${sub.name} will read again from message ${id.ledgerId}:${id.entryId}.`, "Reset",
      () => post(`${path}/resetcursor`, { ledgerId: id.ledgerId, entryId: id.entryId, partitionIndex: -1 }), "reset");
  };
  const expire = () => {
    const s = Number(expireS);
    if (!Number.isInteger(s) || s < 0) return bad("Expire: whole seconds, 0 or more.");
    ask("Expire messages?", `Subscription ${sub.name} will acknowledge every message published more than ${s} s ago.`, "Expire",
      () => post(`${path}/expireMessages/${s}`));
  };
  const unsubscribe = () => ask(`Delete subscription ${sub.name}?`, `Its cursor and backlog are removed${force ? "; connected consumers are disconnected" : ""}.`, "Unsubscribe",
    () => del(path, force ? { force: true } : {}));

  return (
    <div class="panel" role="group" aria-label={`Actions on ${sub.name}`}>
      <div class="toolbar">
        <label>
          Subscription
          <select value={sub.name} onChange={(e) => onChosen(e.currentTarget.value)}>
            {subs.map((s) => <option key={s.name} value={s.name}>{s.name}</option>)}
          </select>
        </label>
        <span>backlog <strong data-testid="chosen-backlog">{count(sub.msgBacklog)}</strong> messages, {count((sub.consumers || []).length)} consumers</span>
      </div>
      <div class="toolbar">
        <label>Messages to skip<input type="number" min="1" value={skipN} onInput={(e) => setSkipN(e.currentTarget.value)} /></label>
        <button type="button" disabled={busy} onClick={skip}>Skip</button>
        <button type="button" disabled={busy} onClick={clear}>Clear backlog</button>
      </div>
      <div class="toolbar">
        <label>{`Reset to publish time (${zone()})`}<input type="datetime-local" step="1" value={when} onInput={(e) => setWhen(e.currentTarget.value)} /></label>
        <button type="button" disabled={busy} onClick={resetAt}>Reset to time</button>
        <label>Minutes ago<input type="number" min="0" value={minutes} onInput={(e) => setMinutes(e.currentTarget.value)} /></label>
        <button type="button" disabled={busy} onClick={resetAgo}>Reset to minutes ago</button>
      </div>
      <div class="toolbar">
        <label>Message id (ledger:entry)<input value={msgId} placeholder="12:0" onInput={(e) => setMsgId(e.currentTarget.value)} /></label>
        <button type="button" disabled={busy} onClick={resetId}>Reset to message id</button>
        <label>Expire older than (seconds)<input type="number" min="0" value={expireS} onInput={(e) => setExpireS(e.currentTarget.value)} /></label>
        <button type="button" disabled={busy} onClick={expire}>Expire</button>
      </div>
      <div class="toolbar">
        <label style={{ flexDirection: "row", alignItems: "center" }}>
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.currentTarget.checked)} /> Force (disconnect consumers)
        </label>
        <button type="button" class="danger" disabled={busy} onClick={unsubscribe}>Unsubscribe</button>
      </div>
      {progress && <Progress label={progress.label} value={progress.value} max={progress.max} />}
      <ErrorBox error={error} />
      <Notice text={notice} />
      {confirm && <Confirm title={confirm.title} message={confirm.message} confirmLabel={confirm.label}
        onConfirm={() => go(confirm)} onCancel={() => setConfirm(null)} />}
    </div>
  );
}

function CreateSubscription({ t, onDone }) {
  const [name, setName] = useState("");
  const [where, setWhere] = useState("latest");
  const [msgId, setMsgId] = useState("");
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState("");
  const create = async (e) => {
    e.preventDefault();
    setError(null);
    setNotice("");
    if (!name.trim()) return setError({ kind: "invalid", reason: "Name the subscription." });
    let body;
    if (where === "latest") body = undefined;
    else if (where === "earliest") body = { ledgerId: -1, entryId: -1, partitionIndex: -1 };
    else {
      const id = parseMessageId(msgId);
      if (!id) return setError({ kind: "invalid", reason: "Message id: ledger:entry, e.g. 12:0." });
      body = { ledgerId: id.ledgerId, entryId: id.entryId, partitionIndex: -1 };
    }
    try {
      await put(`${t.base}/subscription/${encodeURIComponent(name.trim())}`, body);
      setNotice(`Subscription ${name.trim()} created at ${where === "id" ? msgId : where}.`);
      onDone();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="panel" aria-label="Create a subscription" onSubmit={create}>
      <h2>Create a subscription</h2>
      <div class="toolbar">
        <label>New subscription name<input value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>
          Start position
          <select value={where} onChange={(e) => setWhere(e.currentTarget.value)}>
            <option value="latest">latest</option>
            <option value="earliest">earliest</option>
            <option value="id">a message id</option>
          </select>
        </label>
        {where === "id" && <label>Start at message id<input value={msgId} placeholder="12:0" onInput={(e) => setMsgId(e.currentTarget.value)} /></label>}
        <button type="submit" class="primary">Create subscription</button>
      </div>
      <ErrorBox error={error} />
      <Notice text={notice} />
    </form>
  );
}
