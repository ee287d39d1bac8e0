// A namespace's page (#/namespace/<t>/<ns>): its topics (searchable, paged, with backlogs), a
// form to create a topic, and its policies, each viewable and editable (components/NsPolicies).
//
// What must hold: a role that may not list the namespace's topics gets a 403 message in place
// (the policies below still say, one by one, what the role may see); an unknown namespace is a
// 404 with a way back; nothing here renders more than one page of topics.
import { useEffect, useState } from "preact/hooks";
import { put, topicPath } from "../api.js";
import { ErrorBox, Loading, Notice, useApi } from "../components/common.jsx";
import { NsPolicies } from "../components/NsPolicies.jsx";
import { TopicList, filterTopics, loadTopics } from "../components/NsTopicList.jsx";
import { count } from "../format.js";
import { href } from "../router.js";

const PARTITIONS_MAX = 10_000;
const TOPIC_NAME = /^[A-Za-z0-9_.=:-]+$/;

export function Namespace({ route }) {
  const [tenant, ns] = route.args;
  if (!tenant || !ns) {
    return <ErrorBox error={{ kind: "notFound", reason: "No namespace is named in the address (#/namespace/<tenant>/<namespace>)." }} />;
  }
  return <NamespaceView key={`${tenant}/${ns}`} tenant={tenant} ns={ns} />;
}

function NamespaceView({ tenant, ns }) {
  const topics = useApi(() => loadTopics(tenant, ns), [tenant, ns]);
  const [search, setSearch] = useState("");
  const forbidden = topics.error && topics.error.kind === "forbidden";
  const gone = topics.error && topics.error.kind === "notFound";
  const shown = topics.data ? filterTopics(topics.data, search) : [];
  return (
    <section>
      <p><a href={href("tenants")}>Tenants</a> / {tenant} / {ns}</p>
      <h1>Namespace {tenant}/{ns}</h1>
      <h2>Topics{topics.data ? ` (${count(topics.data.length)})` : ""}</h2>
      {forbidden && (
        <div class="error" role="alert">
          <strong>Error 403: </strong>your role may not see the topics of {tenant}/{ns}.
          <div class="advice">Ask an admin of tenant {tenant} or a superuser for a grant, or go back to <a href={href("tenants")}>your tenants</a>.</div>
        </div>
      )}
      {topics.error && !forbidden && <ErrorBox error={topics.error} onRetry={topics.reload} />}
      {topics.loading && <Loading what="Loading topics" />}
      {topics.data && (
        <>
          <div class="toolbar">
            <label>
              Search topics
              <input type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} placeholder="part of a name" />
            </label>
          </div>
          <div class="panel">
            <TopicList label={`Topics of ${tenant}/${ns}`} topics={shown} pageSize={50} empty={search ? "No topic matches." : "No topic yet."} />
          </div>
          <CreateTopic tenant={tenant} ns={ns} onCreated={topics.reload} />
        </>
      )}
      {!forbidden && !gone && (
        <>
          <h2>Policies</h2>
          <NsPolicies tenant={tenant} ns={ns} />
        </>
      )}
    </section>
  );
}

function CreateTopic({ tenant, ns, onCreated }) {
  const [name, setName] = useState("");
  const [partitions, setPartitions] = useState("0");
  const [problem, setProblem] = useState(null);
  const [error, setError] = useState(null);
  const [done, setDone] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => setDone(null), [name]);

  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setDone(null);
    const n = Number(partitions);
    if (!TOPIC_NAME.test(name) || name.includes("-partition-")) {
      setProblem("A topic name is letters, digits and - _ . = : only, and may not contain -partition-.");
      return;
    }
    if (!Number.isInteger(n) || n < 0 || n > PARTITIONS_MAX) {
      setProblem(`Partitions is a whole number from 0 (not partitioned) to ${PARTITIONS_MAX.toLocaleString()}.`);
      return;
    }
    setProblem(null);
    setBusy(true);
    const path = topicPath(`persistent://${tenant}/${ns}/${name}`);
    try {
      if (n > 0) await put(`${path}/partitions`, n);
      else await put(path);
      setDone(`Created ${name}${n > 0 ? ` with ${n} partitions` : ""}.`);
      setName("");
      onCreated();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="panel" aria-label="Create topic" onSubmit={submit} noValidate>
      <h3>Create a topic</h3>
      <div class="toolbar">
        <label>
          Topic name
          <input type="text" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Partitions
          <input type="number" min="0" max={PARTITIONS_MAX} value={partitions} onInput={(e) => setPartitions(e.currentTarget.value)} title="0: not partitioned" />
        </label>
        <button type="submit" class="primary" disabled={busy}>Create topic</button>
      </div>
      {problem && <p class="error" role="alert">{problem}</p>}
      <ErrorBox error={error} />
      <Notice text={done} />
    </form>
  );
}
