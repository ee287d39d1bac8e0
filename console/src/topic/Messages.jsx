// Browsing a topic's messages: GET .../messages (broker/admin/messages.py) from latest (newest
// first), earliest, a publish time (datetime-local in the viewer's zone) or a message id, with
// the limit, the key / property / payload filters and the scan bound; `stoppedBy: scanBound`
// is said in words, and "Next page" goes on from `next` (newest first: as `before`, else as
// `messageId`). A partitioned topic is browsed one partition at a time.
import { useEffect, useRef, useState } from "preact/hooks";
import { get } from "../api.js";
import { ErrorBox, Loading } from "../components/common.jsx";
import { count, zone } from "../format.js";
import { MessageList } from "./MessageView.jsx";
import { localInputToMs, msToLocalInput, PartitionSelect, partitionBase } from "./util.jsx";

export function Messages({ t }) {
  const [partition, setPartition] = useState(0);
  const [from, setFrom] = useState("latest");
  const [when, setWhen] = useState(msToLocalInput(Date.now() - 3600000));
  const [msgId, setMsgId] = useState("");
  const [limit, setLimit] = useState("20");
  const [key, setKey] = useState("");
  const [property, setProperty] = useState("");
  const [contains, setContains] = useState("");
  const [scanMax, setScanMax] = useState("10000");
  const [answer, setAnswer] = useState(null);
  const [query, setQuery] = useState(null);     // the query of the answer shown (for Next page)
  const [error, setError] = useState(null);
  const [loading, setLoading] = useState(false);
  const path = partitionBase(t, partition);
  const asked = useRef(0);     // only the newest question's answer is shown

  const ask = async (q) => {
    const mine = ++asked.current;
    setLoading(true);
    setError(null);
    try {
      const a = await get(`${path}/messages`, q);
      if (mine !== asked.current) return;
      setAnswer(a);
      setQuery(q);
    } catch (e) {
      if (mine === asked.current) setError(e);
    } finally {
      if (mine === asked.current) setLoading(false);
    }
  };
  const browse = (e) => {
    if (e) e.preventDefault();
    const q = { limit, key, property, contains, maxScanEntries: scanMax };
    if (from === "latest" || from === "earliest") q.from = from;
    else if (from === "time") {
      const ms = localInputToMs(when);
      if (ms === null) return setError({ kind: "invalid", reason: "Publish time: pick a date and time." });
      q.publishTime = ms;
    } else {
      if (!/^\d+:-?\d+(:-?\d+)?$/.test(msgId.trim())) return setError({ kind: "invalid", reason: "Message id: ledger:entry[:batchIndex], e.g. 12:0." });
      q.messageId = msgId.trim();
    }
    return ask(q);
  };
  // the newest messages are shown as soon as the tab (or another partition) opens
  useEffect(() => { browse(); }, [path]);
  const nextPage = () => {
    const q = { ...query };
    delete q.from;
    delete q.publishTime;
    delete q.messageId;
    delete q.before;
    if (query.from === "latest" || query.before) q.before = answer.next;
    else q.messageId = answer.next;
    ask(q);
  };
  const showAll = async (m) => {
    const one = await get(`${path}/messages`, { messageId: m.messageId, limit: 1, payloadBytesMax: 0 });
    return (one.messages || [])[0] || null;
  };

  return (
    <section aria-label="Messages">
      <form class="panel" aria-label="Browse messages" onSubmit={browse}>
        <div class="toolbar">
          <PartitionSelect t={t} value={partition} onChange={(p) => { setPartition(p); setAnswer(null); }} />
          <label>
            Start from
            <select value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
              <option value="latest">latest (newest first)</option>
              <option value="earliest">earliest</option>
              <option value="time">a publish time</option>
              <option value="id">a message id</option>
            </select>
          </label>
          {from === "time" && <label>{`Publish time (${zone()})`}<input type="datetime-local" step="1" value={when} onInput={(e) => setWhen(e.currentTarget.value)} /></label>}
          {from === "id" && <label>Start at message id<input value={msgId} placeholder="12:0" onInput={(e) => setMsgId(e.currentTarget.value)} /></label>}
          <label>Limit<input type="number" min="1" max="500" value={limit} onInput={(e) => setLimit(e.currentTarget.value)} style={{ width: "6rem" }} /></label>
          <label>Max entries scanned<input type="number" min="1" value={scanMax} onInput={(e) => setScanMax(e.currentTarget.value)} style={{ width: "8rem" }} /></label>
        </div>
        <div class="toolbar">
          <label>Key<input value={key} onInput={(e) => setKey(e.currentTarget.value)} /></label>
          <label>Property (name=value)<input value={property} onInput={(e) => setProperty(e.currentTarget.value)} /></label>
          <label>Payload contains<input value={contains} onInput={(e) => setContains(e.currentTarget.value)} /></label>
          <button type="submit" class="primary" disabled={loading}>Browse</button>
        </div>
      </form>
      <ErrorBox error={error} />
      {loading && <Loading what="Reading messages" />}
      {answer && (
        <>
          <p role="status" data-testid="browse-summary">
            {count(answer.messages.length)} messages, {count(answer.scannedEntries)} entries scanned.{" "}
            {answer.stoppedBy === "scanBound" && <strong class="warn">Stopped after scanning {count(answer.scannedEntries)} entries: narrow the filter or raise the bound.</strong>}
            {answer.stoppedBy === "end" && "Reached the end of the topic."}
          </p>
          <MessageList messages={answer.messages} base={path} onShowAll={showAll} />
          {answer.next && <button type="button" onClick={nextPage} disabled={loading}>Next page</button>}
        </>
      )}
    </section>
  );
}
