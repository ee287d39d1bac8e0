// The topic page: #/topic/<tenant>/<ns>/<topic>/<tab> (persistent topics; a partition is the
// topic named x-partition-N). It first learns whether the topic is partitioned
// (GET .../partitions) and, if not, that it exists (GET .../stats): an unknown topic is a 404
// ErrorBox with the way back to its namespace, a role without permission a 403 ErrorBox. Then
// one tab at a time: each tab loads and polls only while shown, and stops when left.
import { get, topicPath } from "../api.js";
import { ErrorBox, Loading, Tabs, useApi } from "../components/common.jsx";
import { href } from "../router.js";
import { Actions } from "../topic/Actions.jsx";
import { Ledgers } from "../topic/Ledgers.jsx";
import { Messages } from "../topic/Messages.jsx";
import { Overview } from "../topic/Overview.jsx";
import { Partitions } from "../topic/Partitions.jsx";
import { Schema } from "../topic/Schema.jsx";
import { Storage } from "../topic/Storage.jsx";
import { Subscriptions } from "../topic/Subscriptions.jsx";
import { Tail } from "../topic/Tail.jsx";

const TABS = [
  ["overview", "Overview", Overview],
  ["subscriptions", "Subscriptions", Subscriptions],
  ["messages", "Messages", Messages],
  ["tail", "Live tail", Tail],
  ["storage", "Storage", Storage],
  ["ledgers", "Ledgers", Ledgers],
  ["schema", "Schema", Schema],
  ["partitions", "Partitions", Partitions],
  ["actions", "Actions", Actions],
];

export function Topic({ route, who }) {
  const [tenant, ns, name, tab = "overview"] = route.args;
  const valid = Boolean(tenant && ns && name);
  const full = `persistent://${tenant}/${ns}/${name}`;
  const base = valid ? topicPath(full) : "";
  const meta = useApi(async () => {
    if (!valid) return null;
    const p = await get(`${base}/partitions`);
    const partitions = (p && p.partitions) || 0;
    if (partitions === 0) await get(`${base}/stats`);   // 404 for a topic that does not exist
    return { partitions };
  }, [base]);

  const back = valid ? href("namespace", [tenant, ns]) : href("tenants");
  const heading = (
    <>
      <p class="crumbs"><a href={href("tenants")}>Tenants</a> / <a href={back}>{tenant}/{ns}</a></p>
      <h1>Topic {name}</h1>
    </>
  );
  if (!valid) {
    return <>{heading}<ErrorBox error={{ kind: "notFound", status: 404, reason: "The address names no topic (#/topic/<tenant>/<ns>/<topic>/<tab>)." }} /></>;
  }
  if (meta.error) {
    return (
      <>
        {heading}
        <ErrorBox error={meta.error} onRetry={meta.error.kind === "notFound" ? undefined : meta.reload} />
        <p><a href={back}>Back to namespace {tenant}/{ns}</a></p>
      </>
    );
  }
  if (!meta.data) return <>{heading}<Loading what="Loading the topic" /></>;

  const t = { tenant, ns, name, full, base, partitions: meta.data.partitions, who, reloadMeta: meta.reload };
  const entry = TABS.find(([id]) => id === tab) || TABS[0];
  const Tab = entry[2];
  return (
    <>
      {heading}
      <p class="muted">
        {full}{" "}
        {t.partitions > 0 ? <span class="badge">{t.partitions.toLocaleString()} partitions</span> : <span class="badge">non-partitioned</span>}
      </p>
      <Tabs tabs={TABS.map(([id, label]) => [id, label])} current={entry[0]} hrefOf={(id) => href("topic", [tenant, ns, name, id])} />
      <Tab key={`${base}/${entry[0]}`} t={t} route={route} />
    </>
  );
}
