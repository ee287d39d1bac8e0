// One message as the console shows it (from GET .../messages or the live tail): its id, key,
// properties, publish and event times (the viewer's zone), producer, schema version, size, and
// the payload: decoded (avro/json/protobuf/key_value as pretty JSON, string/text as text, else
// hex), with a decoded/text/hex switch. Text and hex of a schema-decoded payload need its raw
// bytes: they are read from GET .../ledger/{l}/entry/{e} (a non-batched message only), and
// shown up to RAW_BYTES_SHOWN_MAX. A truncated payload has "Show all", which asks for that one
// message again without the cut (limit=1&payloadBytesMax=0).
import { useState } from "preact/hooks";
import { headers } from "../api.js";
import { ErrorBox } from "../components/common.jsx";
import { bytes, count, time } from "../format.js";

const RAW_BYTES_SHOWN_MAX = 65536;
const STRUCTURED = new Set(["avro", "json", "protobuf", "key_value"]);

function hexOf(u8) {
  const out = [];
  for (let i = 0; i < u8.length; i += 16) {
    const row = Array.from(u8.subarray(i, i + 16), (b) => b.toString(16).padStart(2, "0")).join(" ");
    out.push(`${i.toString(16).padStart(8, "0")}  ${row}`);
  }
  return out.join("\n");
}

function decodedText(payload) {
  if (STRUCTURED.has(payload.encoding)) return JSON.stringify(payload.value, null, 2);
  return String(payload.value ?? "");
}

async function rawBytes(base, m) {
  const resp = await fetch(`${base}/ledger/${m.ledgerId}/entry/${m.entryId}`, { headers: headers({ Accept: "application/octet-stream" }) });
  if (!resp.ok) throw { status: resp.status, kind: resp.status === 403 ? "forbidden" : "server", reason: `the raw payload could not be read (${resp.status})` };
  return new Uint8Array(await resp.arrayBuffer());
}

export function MessageView({ m: initial, base, onShowAll }) {
  const [m, setM] = useState(initial);
  const [view, setView] = useState("decoded");
  const [raw, setRaw] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const p = m.payload || { encoding: "hex", value: "" };
  const structured = STRUCTURED.has(p.encoding);
  const canRaw = structured ? m.batchIndex === -1 && base : p.encoding === "text" || p.encoding === "string";

  const choose = async (v) => {
    setView(v);
    setError(null);
    if (v === "decoded" || raw || !structured) return;
    try {
      setRaw(await rawBytes(base, m));
    } catch (e) {
      setError(e);
    }
  };
  const all = async () => {
    setBusy(true);
    setError(null);
    try {
      const full = await onShowAll(m);
      if (full) setM(full);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  let body;
  if (view === "decoded") body = decodedText(p);
  else {
    const u8 = structured ? raw : new TextEncoder().encode(String(p.value ?? ""));
    if (!u8) body = "…";
    else {
      const cut = u8.subarray(0, RAW_BYTES_SHOWN_MAX);
      body = view === "hex" ? hexOf(cut) : new TextDecoder("utf-8", { fatal: false }).decode(cut);
      if (u8.length > RAW_BYTES_SHOWN_MAX) body += `\n… (${bytes(u8.length - RAW_BYTES_SHOWN_MAX)} more)`;
    }
  }
  const props = Object.entries(m.properties || {});
  return (
    <article class="panel message" aria-label={`Message ${m.messageId}`}>
      <div style={{ display: "flex", flexWrap: "wrap", gap: ".25rem 1.25rem" }}>
        <span>id <strong class="mono">{m.messageId}</strong></span>
        <span>key <strong class="mono">{m.key ?? "–"}</strong></span>
        <span>published {time(m.publishTime)}</span>
        {m.eventTime ? <span>event time {time(m.eventTime)}</span> : null}
        <span>producer {m.producerName || "–"}</span>
        <span>schema version {m.schemaVersion ?? "–"}</span>
        <span>{bytes(m.size)}</span>
        <span class="badge">{p.encoding}</span>
        {m.chunk && <span class="badge warn">chunk {m.chunk.id + 1} of {m.chunk.total}</span>}
      </div>
      {props.length > 0 && (
        <div>properties {props.map(([k, v]) => <code key={k} style={{ marginRight: ".5rem" }}>{k}={v}</code>)}</div>
      )}
      {p.error && <p class="warn">{p.error}</p>}
      <div class="toolbar" style={{ marginTop: ".4rem" }}>
        {(canRaw || structured) && (
          <label>
            Show as
            <select value={view} onChange={(e) => choose(e.currentTarget.value)}>
              <option value="decoded">decoded</option>
              {canRaw && <option value="text">text</option>}
              {canRaw && <option value="hex">hex</option>}
            </select>
          </label>
        )}
        {p.truncated && (
          <>
            <span class="warn">{`Payload truncated: ${bytes(m.size)} in all.`}</span>
            {onShowAll && <button type="button" disabled={busy} onClick={all}>Show all</button>}
          </>
        )}
      </div>
      <pre class="payload" data-testid="payload">{body}</pre>
      <ErrorBox error={error} />
    </article>
  );
}

export function MessageList({ messages, base, onShowAll }) {
  if (!messages.length) return <p class="empty">No message matched.</p>;
  return (
    <div aria-label={`${count(messages.length)} messages`} role="list">
      {messages.map((m) => <div role="listitem" key={m.messageId}><MessageView m={m} base={base} onShowAll={onShowAll} /></div>)}
    </div>
  );
}
