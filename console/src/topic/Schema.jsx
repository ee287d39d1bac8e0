// The topic's schema: the latest version (GET /admin/v2/schemas/{t}/{ns}/{topic}/schema) and
// every live version (.../schemas), each with its type, version and definition pretty-printed
// (a JSON definition re-indented; a protobuf descriptor or other text shown as it is). A topic
// without a schema (404 "Schema not found") says so: its messages are bytes.
import { get } from "../api.js";
import { ErrorBox, Loading, useApi } from "../components/common.jsx";
import { time } from "../format.js";

function pretty(data) {
  try {
    return JSON.stringify(JSON.parse(data), null, 2);
  } catch {
    return data;
  }
}

export function Schema({ t }) {
  const base = `/admin/v2/schemas/${[t.tenant, t.ns, t.name.replace(/-partition-\d+$/, "")].map(encodeURIComponent).join("/")}`;
  const data = useApi(async () => {
    try {
      const all = await get(`${base}/schemas`);
      return (all && all.getSchemaResponses) || [];
    } catch (e) {
      if (e.kind === "notFound") return [];
      throw e;
    }
  }, [base]);
  if (data.error) return <ErrorBox error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="Loading the schema" />;
  if (data.data.length === 0) return <p class="empty">This topic has no schema: its messages are plain bytes.</p>;
  const versions = [...data.data].reverse();   // newest first
  return (
    <section aria-label="Schema">
      {versions.map((v, i) => (
        <article class="panel" key={v.version} aria-label={`Schema version ${v.version}`}>
          <h2>{i === 0 ? "Latest: " : ""}version {v.version} <span class="badge">{v.type}</span></h2>
          <p>Registered {time(v.timestamp)}</p>
          {v.properties && Object.keys(v.properties).length > 0 && (
            <p>Properties: <code>{JSON.stringify(v.properties)}</code></p>
          )}
          <pre aria-label={`Definition of version ${v.version}`}>{pretty(v.data)}</pre>
        </article>
      ))}
    </section>
  );
}
