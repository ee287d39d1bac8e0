// The tenants tree (#/tenants?q=): tenant → namespace → topics, with a search over all three.
//
// Tenants come from `GET /admin/v2/tenants` (superusers), else from whoami's `tenants` (a role
// refused the list sees the tenants it administers). Every tenant's namespaces are listed at
// once; a namespace's topics are listed when it is opened, and for every namespace while a
// search is typed (NS_CALLS_MAX lists at a time), since a topic name may match anywhere.
//
// What must hold: the search filters before anything is rendered and each namespace shows one
// page of TREE_PAGE_TOPICS topics (paged), so 100,000 topics cost one page of DOM; the search
// text lives in the hash (replaced, not pushed) so a reload keeps it; a namespace or tenant the
// role may not list shows why in place and the rest of the tree still works.
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, get } from "../api.js";
import { ErrorBox, Loading } from "../components/common.jsx";
import { TopicList, filterTopics, loadTopics } from "../components/NsTopicList.jsx";
import { count } from "../format.js";
import { href } from "../router.js";

const TREE_PAGE_TOPICS = 25;
const NS_CALLS_MAX = 4;
const SEARCH_DELAY_MS = 250;

async function eachBounded(items, limit, fn) {
  const todo = [...items];
  const worker = async () => {
    while (todo.length) await fn(todo.shift());
  };
  await Promise.all(Array.from({ length: Math.min(limit, todo.length) }, worker));
}

export function Tenants({ route, who }) {
  const [input, setInput] = useState(route.query.q || "");
  const [q, setQ] = useState(route.query.q || "");
  const [tenants, setTenants] = useState(null);
  const [tenantsNote, setTenantsNote] = useState(null);
  const [error, setError] = useState(null);
  const [namespaces, setNamespaces] = useState({});   // tenant → {list} | {error}
  const [topics, setTopics] = useState({});           // "t/ns" → {list} | {error} | {loading}
  const [open, setOpen] = useState({});               // "t" or "t/ns" → true
  const started = useRef(new Set());

  const loadAll = async () => {
    setError(null);
    let list;
    try {
      list = await get("/admin/v2/tenants");
      setTenantsNote(null);
    } catch (e) {
      if (!(e instanceof ApiError) || e.kind !== "forbidden") {
        setError(e);
        return;
      }
      list = who.tenants || [];
      setTenantsNote("Your role may not list every tenant: these are the tenants you administer.");
    }
    setTenants(list);
    await eachBounded(list, NS_CALLS_MAX, async (t) => {
      try {
        const nss = await get(`/admin/v2/namespaces/${encodeURIComponent(t)}`);
        setNamespaces((m) => ({ ...m, [t]: { list: nss.map((n) => n.split("/")[1]) } }));
      } catch (e) {
        setNamespaces((m) => ({ ...m, [t]: { error: e } }));
      }
    });
  };
  useEffect(() => {
    loadAll();
  }, []);

  const loadNs = async (key) => {
    if (started.current.has(key)) return;
    started.current.add(key);
    setTopics((m) => ({ ...m, [key]: { loading: true } }));
    const [t, ns] = key.split("/");
    try {
      const list = await loadTopics(t, ns);
      setTopics((m) => ({ ...m, [key]: { list } }));
    } catch (e) {
      started.current.delete(key);
      setTopics((m) => ({ ...m, [key]: { error: e } }));
    }
  };

  // the search: applied after a short pause in typing; kept in the hash without a history entry
  useEffect(() => {
    const timer = setTimeout(() => {
      setQ(input);
      const target = href("tenants", [], { q: input.trim() });
      if (window.location.hash !== target) history.replaceState(null, "", target);
    }, SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [input]);
  const allNs = Object.entries(namespaces).flatMap(([t, v]) => (v.list || []).map((ns) => `${t}/${ns}`));
  useEffect(() => {
    if (q.trim()) eachBounded(allNs, NS_CALLS_MAX, loadNs);
  }, [q, allNs.join(",")]);

  const toggle = (key) => {
    setOpen((o) => ({ ...o, [key]: !o[key] }));
    if (key.includes("/")) loadNs(key);
  };

  const query = q.trim().toLowerCase();
  const searching = query.length > 0;
  const pending = searching && allNs.some((k) => !topics[k] || topics[k].loading);
  const visible = (tenants || []).filter((t) => !searching || t.toLowerCase().includes(query)
    || (namespaces[t]?.list || []).some((n) => nsMatches(t, n, topics, query)));
  return (
    <section>
      <h1>Tenants &amp; topics</h1>
      <div class="toolbar" role="search">
        <label>
          Search tenants, namespaces and topics
          <input type="search" value={input} onInput={(e) => setInput(e.currentTarget.value)} placeholder="part of a name" size={40} />
        </label>
        {pending && <span class="loading" aria-live="polite">searching every namespace…</span>}
      </div>
      {tenantsNote && <p class="warn">{tenantsNote}</p>}
      <ErrorBox error={error} onRetry={loadAll} />
      {!tenants && !error && <Loading what="Loading tenants" />}
      {tenants && (
        <div class="tree panel">
          <ul aria-label="Tenants">
            {visible.map((t) => (
              <TenantNode key={t} tenant={t} ns={namespaces[t]} topics={topics} open={open} toggle={toggle} query={query} />
            ))}
          </ul>
          {visible.length === 0 && (
            <p class="empty">{searching ? (pending ? "No match yet…" : `Nothing matches "${q.trim()}".`) : "No tenant."}</p>
          )}
        </div>
      )}
    </section>
  );
}

function Toggle({ expanded, onClick, children }) {
  return (
    <button type="button" class="toggle" aria-expanded={expanded} onClick={onClick}
      style={{ border: "none", background: "none", padding: ".1rem .25rem" }}>
      <span aria-hidden="true">{expanded ? "▾" : "▸"} </span>{children}
    </button>
  );
}

function nsMatches(t, ns, topics, query) {
  if (!query) return true;
  if (`${t}/${ns}`.toLowerCase().includes(query)) return true;
  const list = topics[`${t}/${ns}`]?.list;
  return !!list && filterTopics(list, query).length > 0;
}

function TenantNode({ tenant, ns, topics, open, toggle, query }) {
  const names = ns?.list || [];
  const shownNs = names.filter((n) => nsMatches(tenant, n, topics, query));
  const expanded = !!open[tenant] || (!!query && shownNs.length > 0);
  return (
    <li>
      <Toggle expanded={expanded} onClick={() => toggle(tenant)}>
        <strong>{tenant}</strong>
      </Toggle>
      {ns && !ns.error && <span class="badge">{count(names.length)} namespaces</span>}
      {expanded && (
        <>
          {!ns && <Loading what="Loading namespaces" />}
          {ns?.error && <NodeError error={ns.error} what={`the namespaces of ${tenant}`} />}
          {ns?.list && (
            <ul aria-label={`Namespaces of ${tenant}`}>
              {(query ? shownNs : names).map((n) => (
                <NamespaceNode key={n} tenant={tenant} ns={n} state={topics[`${tenant}/${n}`]} open={open} toggle={toggle} query={query} />
              ))}
              {names.length === 0 && <li class="empty">No namespace.</li>}
            </ul>
          )}
        </>
      )}
    </li>
  );
}

function NamespaceNode({ tenant, ns, state, open, toggle, query }) {
  const key = `${tenant}/${ns}`;
  const list = state?.list;
  const shown = list ? filterTopics(list, query) : [];
  const expanded = !!open[key] || (!!query && shown.length > 0);
  return (
    <li>
      <Toggle expanded={expanded} onClick={() => toggle(key)}>{ns}</Toggle>
      {" "}<a href={href("namespace", [tenant, ns])} aria-label={`Namespace ${key}`}>namespace page</a>{" "}
      {list && <span class="badge">{query ? `${count(shown.length)} of ` : ""}{count(list.length)} topics</span>}
      {expanded && (
        <>
          {state?.loading && <Loading what="Loading topics" />}
          {state?.error && <NodeError error={state.error} what={`the topics of ${key}`} />}
          {list && <TopicList label={`Topics of ${key}`} topics={shown} pageSize={TREE_PAGE_TOPICS} empty={query ? "No topic matches." : "No topic."} />}
        </>
      )}
    </li>
  );
}

function NodeError({ error, what }) {
  if (error.kind === "forbidden") {
    return <p class="warn" role="note">Your role may not see {what}.</p>;
  }
  return <ErrorBox error={error} />;
}
