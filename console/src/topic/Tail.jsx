// The live tail: GET .../tail, Server-Sent Events read with fetch (an EventSource cannot send
// the Authorization header) and parsed here: `event: open` (the broker fixed where the tail
// starts: only from then on does the page say "Tailing"), `event: message` (one message as .../messages
// shows it), `event: dropped` ({"dropped", "reason"}: the page fell behind and the broker
// skipped ahead), `event: end` ({"reason"}), and `: ping` comments (ignored). Start/Stop; the
// newest message at the top; at most MESSAGES_KEPT_MAX messages kept in the page (older ones
// fall off); the stream is aborted when the tab is left.
//
// What must hold: one stream at a time per tab; a buffered partial event never grows past
// EVENT_BYTES_MAX (a broken stream is ended with an error instead).
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, headers, url } from "../api.js";
import { ErrorBox } from "../components/common.jsx";
import { count } from "../format.js";
import { MessageView } from "./MessageView.jsx";
import { PartitionSelect, partitionBase } from "./util.jsx";

const MESSAGES_KEPT_MAX = 500;
const EVENT_BYTES_MAX = 32 * 1024 * 1024;

/** Splits an SSE byte stream's text into events: feed(text) → [{event, data}]. */
export function sseParser() {
  let buf = "";
  return (text) => {
    buf += text;
    if (buf.length > EVENT_BYTES_MAX) throw new Error("an event larger than the console reads");
    const out = [];
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + (buf[i] === "\r" ? 4 : 2));
      let event = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (!line || line.startsWith(":")) continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        const value = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
      }
      if (data.length) out.push({ event, data: data.join("\n") });
    }
    return out;
  };
}

export function Tail({ t }) {
  const [partition, setPartition] = useState(0);
  const [key, setKey] = useState("");
  const [property, setProperty] = useState("");
  const [contains, setContains] = useState("");
  const [running, setRunning] = useState(false);
  const [opened, setOpened] = useState(false);      // the broker sent `open`: the tail has its start
  const [messages, setMessages] = useState([]);
  const [dropped, setDropped] = useState(0);
  const [ended, setEnded] = useState(null);
  const [error, setError] = useState(null);
  const ctl = useRef(null);
  const path = partitionBase(t, partition);

  const stop = () => {
    if (ctl.current) ctl.current.abort();
    ctl.current = null;
    setRunning(false);
  };
  useEffect(() => stop, [path]);     // leaving the tab (or the partition) ends the stream

  const on = ({ event, data }) => {
    let doc = null;
    try { doc = JSON.parse(data); } catch { return; }
    if (event === "open") setOpened(true);
    else if (event === "message") setMessages((old) => [doc, ...old].slice(0, MESSAGES_KEPT_MAX));
    else if (event === "dropped") setDropped((n) => n + (doc.dropped || 0));
    else if (event === "end") setEnded(doc.reason || "the stream ended");
  };
  const start = async () => {
    stop();
    const c = new AbortController();
    ctl.current = c;
    setRunning(true);
    setOpened(false);
    setError(null);
    setEnded(null);
    try {
      const resp = await fetch(url(`${path}/tail`, { key, property, contains }), { headers: headers({ Accept: "text/event-stream" }), signal: c.signal });
      if (!resp.ok) {
        let reason = await resp.text();
        try { reason = JSON.parse(reason).reason || reason; } catch { /* plain text */ }
        const kind = { 401: "auth", 403: "forbidden", 404: "notFound", 503: "unavailable" }[resp.status] || (resp.status >= 500 ? "server" : "invalid");
        throw new ApiError(resp.status, reason || `${resp.status}`, kind);
      }
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      const feed = sseParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feed(decoder.decode(value, { stream: true })).forEach(on);
      }
      if (ctl.current === c) setEnded((old) => old || "the broker closed the stream");
    } catch (e) {
      if (!c.signal.aborted) setError(e instanceof ApiError ? e : new ApiError(0, `the stream broke: ${e.message || e}`, "unavailable"));
    } finally {
      if (ctl.current === c) { ctl.current = null; setRunning(false); }
    }
  };

  return (
    <section aria-label="Live tail">
      <div class="panel">
        <div class="toolbar">
          <PartitionSelect t={t} value={partition} onChange={setPartition} />
          <label>Key<input value={key} disabled={running} onInput={(e) => setKey(e.currentTarget.value)} /></label>
          <label>Property (name=value)<input value={property} disabled={running} onInput={(e) => setProperty(e.currentTarget.value)} /></label>
          <label>Payload contains<input value={contains} disabled={running} onInput={(e) => setContains(e.currentTarget.value)} /></label>
          {running ? <button type="button" onClick={stop}>Stop</button> : <button type="button" class="primary" onClick={start}>Start</button>}
          <button type="button" onClick={() => { setMessages([]); setDropped(0); }}>Clear</button>
        </div>
        <p role="status" data-testid="tail-status">
          {!running ? "Stopped." : opened ? "Tailing: new messages appear at the top." : "Opening the tail…"} {count(messages.length)} shown (at most {MESSAGES_KEPT_MAX}).
        </p>
        {dropped > 0 && <p class="warn" role="alert">{`Dropped ${count(dropped)} messages: the page fell behind.`}</p>}
        {ended && <p class="warn">{`The tail ended: ${ended}.`}</p>}
        <ErrorBox error={error} onRetry={running ? undefined : start} />
      </div>
      {messages.map((m) => <MessageView key={`${m.messageId}/${m.publishTime}`} m={m} base={path} />)}
    </section>
  );
}
