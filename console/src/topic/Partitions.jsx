// A partitioned topic's partitions, PAGE_SIZE at a time: the rows are made from the page's index
// range (10,000 partitions never become 10,000 rows at once), and per-partition stats are asked
// only for the partitions on the page, at most STATS_CONCURRENCY calls at a time. A partition
// links to its own topic page. A non-partitioned topic says so.
import { useEffect, useState } from "preact/hooks";
import { get } from "../api.js";
import { ErrorBox } from "../components/common.jsx";
import { bytes, count, rate } from "../format.js";
import { href } from "../router.js";

const PAGE_SIZE = 50;
const STATS_CONCURRENCY = 6;

export function Partitions({ t }) {
  const [page, setPage] = useState(0);
  const [stats, setStats] = useState({});     // partition index -> stats | {error}
  const [jump, setJump] = useState("");
  const n = t.partitions;
  const pages = Math.max(1, Math.ceil(n / PAGE_SIZE));
  const first = page * PAGE_SIZE;
  const indexes = Array.from({ length: Math.max(0, Math.min(PAGE_SIZE, n - first)) }, (_, i) => first + i);

  useEffect(() => {
    if (!(n > 0)) return undefined;
    let alive = true;
    setStats({});
    const queue = [...indexes];
    const worker = async () => {
      while (alive && queue.length) {
        const i = queue.shift();
        let s;
        try {
          s = await get(`${t.base}-partition-${i}/stats`);
        } catch (error) {
          s = { error };
        }
        if (alive) setStats((old) => ({ ...old, [i]: s }));
      }
    };
    for (let w = 0; w < STATS_CONCURRENCY; w += 1) worker();
    return () => { alive = false; };
  }, [t.base, page, n]);

  if (!(n > 0)) return <p class="empty">This topic is not partitioned.</p>;
  const cell = (i, f) => {
    const s = stats[i];
    if (!s) return "…";
    if (s.error) return <span class="warn" title={s.error.reason}>{s.error.status || "error"}</span>;
    return f(s);
  };
  const go = (e) => {
    e.preventDefault();
    const i = Math.trunc(Number(jump));
    if (Number.isFinite(i) && i >= 0 && i < n) setPage(Math.floor(i / PAGE_SIZE));
  };
  return (
    <section aria-label="Partitions">
      <form class="toolbar" onSubmit={go}>
        <label>{`Go to partition (0–${n - 1})`}<input type="number" min="0" max={n - 1} value={jump} onInput={(e) => setJump(e.currentTarget.value)} /></label>
        <button type="submit">Go</button>
      </form>
      <div class="table-wrap">
        <table aria-label="Partitions">
          <thead><tr>{["Partition", "Rate in", "Rate out", "Storage", "Backlog", "Producers", "Subscriptions"].map((h) => <th key={h} scope="col">{h}</th>)}</tr></thead>
          <tbody>
            {indexes.map((i) => (
              <tr key={i}>
                <td data-label="Partition"><a href={href("topic", [t.tenant, t.ns, `${t.name}-partition-${i}`, "overview"])}>{`${t.name}-partition-${i}`}</a></td>
                <td data-label="Rate in">{cell(i, (s) => rate(s.msgRateIn))}</td>
                <td data-label="Rate out">{cell(i, (s) => rate(s.msgRateOut))}</td>
                <td data-label="Storage">{cell(i, (s) => bytes(s.storageSize))}</td>
                <td data-label="Backlog">{cell(i, (s) => bytes(s.backlogSize))}</td>
                <td data-label="Producers">{cell(i, (s) => count((s.publishers || []).length))}</td>
                <td data-label="Subscriptions">{cell(i, (s) => count(Object.keys(s.subscriptions || {}).length))}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <div class="pager" role="group" aria-label="Partitions pages">
          <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>Previous</button>
          <span>Page {page + 1} of {pages} ({n.toLocaleString()} partitions)</span>
          <button type="button" disabled={page >= pages - 1} onClick={() => setPage(page + 1)}>Next</button>
        </div>
      </div>
      {Object.values(stats).some((s) => s.error && s.error.kind === "forbidden") && <ErrorBox error={Object.values(stats).find((s) => s.error).error} />}
    </section>
  );
}
