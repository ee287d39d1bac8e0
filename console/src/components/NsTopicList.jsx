// A namespace's topics as the tenants tree and the namespace page show them: listed, grouped,
// filtered, paged, with each shown topic's backlog.
//
// loadTopics(t, ns): `GET /admin/v2/namespaces/{t}/{ns}/topics` (every topic, partitions listed
// as name-partition-N) and `GET /admin/v2/persistent/{t}/{ns}/partitioned` (the partitioned
// topics' own names); partitions are grouped under their partitioned topic, so the list holds
// one row per topic a person created: {name: "persistent://t/ns/x", short: "x", partitions: N
// (0 = not partitioned)}, sorted by name.
//
// <TopicList topics=... query=... pageSize=...>: filters by `query` (a substring of the full
// name) *before* rendering and shows one page at a time, so a namespace of 100,000 topics costs
// one page of DOM. Backlogs (msgBacklog summed over the subscriptions, from stats or
// partitioned-stats) are fetched for the current page only, BACKLOG_CALLS_MAX at a time, and
// kept per name while the list is shown.
import { useEffect, useRef, useState } from "preact/hooks";
import { get, PARTITIONED_STATS_PARTITIONS_MAX, topicPath } from "../api.js";
import { count } from "../format.js";
import { href } from "../router.js";

const BACKLOG_CALLS_MAX = 4;
const PARTITION = /^(.*)-partition-(\d+)$/;

export async function loadTopics(tenant, ns) {
  const base = `/admin/v2/namespaces/${encodeURIComponent(tenant)}/${encodeURIComponent(ns)}`;
  const [names, partitioned] = await Promise.all([
    get(`${base}/topics`),
    get(`/admin/v2/persistent/${encodeURIComponent(tenant)}/${encodeURIComponent(ns)}/partitioned`).catch(() => []),
  ]);
  return groupTopics(names || [], partitioned || []);
}

export function groupTopics(names, partitionedNames) {
  const byName = new Map();
  for (const p of partitionedNames) byName.set(p, { name: p, partitions: 0, partitioned: true });
  for (const n of names) {
    const m = PARTITION.exec(n);
    const parent = m && byName.get(m[1]);
    if (parent && parent.partitioned) parent.partitions += 1;
    else if (!byName.has(n)) byName.set(n, { name: n, partitions: 0, partitioned: false });
  }
  return [...byName.values()]
    .map((t) => ({ ...t, short: t.name.replace(/^[a-z-]+:\/\/[^/]+\/[^/]+\//, "") }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** msgBacklog summed over the topic's subscriptions; an ApiError when its stats are refused;
 *  "many" for a topic with more partitions than the console sums (PARTITIONED_STATS_PARTITIONS_MAX). */
export async function backlogOf(topic) {
  if (topic.partitioned && topic.partitions > PARTITIONED_STATS_PARTITIONS_MAX) return "many";
  const path = topicPath(topic.name) + (topic.partitioned ? "/partitioned-stats" : "/stats");
  const stats = await get(path);
  return Object.values(stats?.subscriptions || {}).reduce((sum, s) => sum + (Number(s.msgBacklog) || 0), 0);
}

function topicArgs(name) {
  const m = /^[a-z-]+:\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(name);
  return m ? [m[1], m[2], m[3]] : name.split("/");
}

function useBacklogs(shown) {
  const [backlogs, setBacklogs] = useState({});   // name → number | "error"
  const known = useRef({});
  const key = shown.map((t) => t.name).join("\n");
  useEffect(() => {
    let alive = true;
    const todo = shown.filter((t) => known.current[t.name] === undefined);
    const next = async () => {
      while (alive && todo.length) {
        const t = todo.shift();
        let value;
        try {
          value = await backlogOf(t);
        } catch {
          value = "error";
        }
        known.current[t.name] = value;
        if (alive) setBacklogs({ ...known.current });
      }
    };
    for (let i = 0; i < BACKLOG_CALLS_MAX; i += 1) next();
    return () => {
      alive = false;
    };
  }, [key]);
  return backlogs;
}

export function filterTopics(topics, query) {
  const q = (query || "").trim().toLowerCase();
  return q ? topics.filter((t) => t.name.toLowerCase().includes(q)) : topics;
}

function Backlog({ value }) {
  if (value === undefined) return <span class="loading">…</span>;
  if (value === "error") return <span title="its stats could not be read">–</span>;
  if (value === "many") return <span class="badge" title="too many partitions to sum here: open the topic's Partitions tab">backlog per partition</span>;
  return <span class={value > 0 ? "badge warn" : "badge"}>backlog {count(value)}</span>;
}

/** One page of `topics` (already filtered) with backlogs; `label` names the list for tests and readers. */
export function TopicList({ label, topics, pageSize = 50, empty = "No topic." }) {
  const [page, setPage] = useState(0);
  const pages = Math.max(1, Math.ceil(topics.length / pageSize));
  const current = Math.min(page, pages - 1);
  const shown = topics.slice(current * pageSize, (current + 1) * pageSize);
  const backlogs = useBacklogs(shown);
  if (topics.length === 0) return <p class="empty">{empty}</p>;
  return (
    <div>
      <ul aria-label={label} class="topic-list" style={{ listStyle: "none", paddingLeft: "1.1rem", margin: ".15rem 0" }}>
        {shown.map((t) => (
          <li key={t.name} style={{ display: "flex", gap: ".5rem", alignItems: "baseline", flexWrap: "wrap" }}>
            <a href={href("topic", topicArgs(t.name))}>{t.short}</a>
            {t.partitioned && <span class="badge">{count(t.partitions)} partitions</span>}
            <Backlog value={backlogs[t.name]} />
          </li>
        ))}
      </ul>
      {pages > 1 && (
        <div class="pager" role="group" aria-label={`${label} pages`}>
          <button type="button" disabled={current === 0} onClick={() => setPage(current - 1)}>Previous</button>
          <span>Page {current + 1} of {pages} ({count(topics.length)} topics)</span>
          <button type="button" disabled={current >= pages - 1} onClick={() => setPage(current + 1)}>Next</button>
        </div>
      )}
    </div>
  );
}
