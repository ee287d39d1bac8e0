// The cluster page (#/cluster, superuser): live totals and their chart, the brokers with their
// load reports, the bookies with their disks, bundle ownership and the cold tier's state — all
// from one call, `GET /admin/v2/console/cluster`, polled every POLL_MS.
//
// What must hold: the chart keeps at most RATE_WINDOW_POINTS_MAX samples (a page left open for a
// day holds the same memory as one open for ten minutes); a failed poll keeps the last answer on
// screen under an ErrorBox (a broker that went away is an error with a Retry, never a blank
// page); a 403 (not a superuser) is a message pointing to the pages the role can use.
import { useEffect, useRef, useState } from "preact/hooks";
import { get } from "../api.js";
import { ErrorBox, Loading, Table } from "../components/common.jsx";
import { RateChart, useRateWindow, RATE_WINDOW_POINTS_MAX } from "../components/RateChart.jsx";
import { byteRate, bytes, count, rate, time } from "../format.js";
import { href } from "../router.js";

const POLL_MS = 2000;
const MSG_SERIES = [["msg/s in", "#2457c5"], ["msg/s out", "#127a3a"]];
const BYTE_SERIES = [["bytes/s in", "#7a3bc5"], ["bytes/s out", "#a15c00"]];

export function Cluster() {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const msgs = useRateWindow(RATE_WINDOW_POINTS_MAX, 2);
  const throughput = useRateWindow(RATE_WINDOW_POINTS_MAX, 2);
  const alive = useRef(true);
  const seen = useRef(new Map());   // broker id → its last answer, to name brokers that left since

  const load = async () => {
    try {
      const answer = await get("/admin/v2/console/cluster");
      if (!alive.current) return;
      const ids = new Set((answer.brokers || []).map((b) => b.id));
      for (const b of answer.brokers || []) seen.current.set(b.id, b);
      answer.gone = [...seen.current.values()].filter((b) => !ids.has(b.id)).map((b) => ({ ...b, reachable: false, gone: true }));
      setData(answer);
      setError(null);
      const t = Date.now() / 1000;
      const tot = answer.totals || {};
      msgs.push(t, [tot.msgRateIn, tot.msgRateOut]);
      throughput.push(t, [tot.msgThroughputIn, tot.msgThroughputOut]);
    } catch (e) {
      if (alive.current) setError(e);
    }
  };
  useEffect(() => {
    alive.current = true;
    load();
    const timer = setInterval(load, POLL_MS);
    return () => {
      alive.current = false;
      clearInterval(timer);
    };
  }, []);

  const forget = () => {
    const ids = new Set((data?.brokers || []).map((b) => b.id));
    for (const id of [...seen.current.keys()]) if (!ids.has(id)) seen.current.delete(id);
    setData({ ...data, gone: [] });
  };

  if (error && error.kind === "forbidden") {
    return (
      <section>
        <h1>Cluster</h1>
        <div class="error" role="alert">
          <strong>The cluster view needs a superuser.</strong>
          <div class="advice">
            Your role may not see the brokers, bookies and bundles of the whole cluster. Your tenants, namespaces and
            topics are under <a href={href("tenants")}>Tenants &amp; topics</a>.
          </div>
        </div>
      </section>
    );
  }
  return (
    <section>
      <h1>Cluster{data ? ` ${data.cluster}` : ""}</h1>
      <ErrorBox error={error} onRetry={load} />
      {!data && !error && <Loading what="Loading the cluster" />}
      {data && <ClusterView data={data} msgs={msgs.data} throughput={throughput.data} onForget={forget} />}
    </section>
  );
}

function ClusterView({ data, msgs, throughput, onForget }) {
  const t = data.totals || {};
  return (
    <>
      <div class="cards" aria-label="Cluster totals" role="group">
        <Card id="msgRateIn" label="Messages in" value={rate(t.msgRateIn)} />
        <Card id="msgRateOut" label="Messages out" value={rate(t.msgRateOut)} />
        <Card id="msgThroughputIn" label="Bytes in" value={byteRate(t.msgThroughputIn)} />
        <Card id="msgThroughputOut" label="Bytes out" value={byteRate(t.msgThroughputOut)} />
      </div>
      <div style={{ display: "grid", gridTemplateColumns: "repeat(auto-fit, minmax(320px, 1fr))", gap: ".75rem" }}>
        <RateChart label="Messages per second, last minutes" series={MSG_SERIES} data={msgs} format={(v) => rate(v, "")} />
        <RateChart label="Bytes per second, last minutes" series={BYTE_SERIES} data={throughput} format={(v) => byteRate(v)} />
      </div>
      <Brokers brokers={data.brokers || []} gone={data.gone || []} onForget={onForget} />
      <Bookies bookies={data.bookies || []} />
      <Tier tier={data.tier} />
      <Bundles bundles={data.bundles || { total: 0, items: [] }} />
    </>
  );
}

function Card({ id, label, value }) {
  return (
    <div class="card">
      <div class="label">{label}</div>
      <div class="value" data-testid={`total-${id}`}>{value}</div>
    </div>
  );
}

function percent(resource) {
  if (!resource || typeof resource !== "object" || !resource.limit) return "–";
  return `${((100 * resource.usage) / resource.limit).toFixed(1)} %`;
}

function memory(resource) {
  // Pulsar's load report gives memory in MB.
  if (!resource || typeof resource !== "object") return "–";
  const used = bytes(resource.usage * 1024 * 1024);
  return resource.limit ? `${used} of ${bytes(resource.limit * 1024 * 1024)}` : used;
}

function brokerState(b) {
  if (b.gone) return <span class="badge bad">left the cluster</span>;
  return b.reachable ? <span class="badge ok">reachable</span> : <span class="badge bad">unreachable</span>;
}

function Brokers({ brokers, gone, onForget }) {
  const down = brokers.filter((b) => !b.reachable);
  const columns = [
    ["Broker", (b) => <span class="mono">{b.id}</span>],
    ["State", brokerState],
    ["CPU", (b) => percent(b.load?.cpu)],
    ["Memory", (b) => memory(b.load?.memory)],
    ["Msg/s in", (b) => rate(b.load?.msgRateIn)],
    ["Msg/s out", (b) => rate(b.load?.msgRateOut)],
    ["Bytes/s in", (b) => byteRate(b.load?.msgThroughputIn)],
    ["Bytes/s out", (b) => byteRate(b.load?.msgThroughputOut)],
    ["Bundles", (b) => count(b.load?.numBundles)],
    ["Topics", (b) => count(b.load?.numTopics)],
    ["Producers / consumers", (b) => `${count(b.load?.numProducers)} / ${count(b.load?.numConsumers)}`],
    ["Service URL", (b) => <span class="mono">{b.serviceUrl}{b.kafka ? ` ${b.kafka}` : ""}</span>],
    ["Reported", (b) => time(b.load?.lastUpdate)],
  ];
  return (
    <>
      <h2>Brokers ({brokers.length})</h2>
      {down.length > 0 && (
        <div class="error" role="alert">
          <strong>{down.map((b) => b.id).join(", ")} did not answer.</strong>
          <div class="advice">
            The load shown is from its last report. Check that the broker is running and reachable from this one; a
            broker that stopped leaves this list once its registration expires, and its bundles move to the others.
          </div>
        </div>
      )}
      {gone.length > 0 && (
        <div class="error" role="alert">
          <strong>{gone.map((b) => b.id).join(", ")} left the cluster since this page was opened.</strong>
          <div class="advice">
            It stopped or lost its registration; the other brokers take over its bundles. Check that the broker is
            running (its log says why it stopped), restart it, or forget it here once that is intended.
          </div>
          <div class="actions"><button type="button" onClick={onForget}>Forget brokers that left</button></div>
        </div>
      )}
      <Table label="Brokers" columns={columns} rows={[...brokers, ...gone]} empty="No broker is registered." />
    </>
  );
}

const BOOKIE_BADGE = { available: "ok", "read-only": "warn", unreachable: "bad" };

function DiskBar({ bookie }) {
  const used = Number(bookie.usedBytes) || 0;
  const free = Number(bookie.freeBytes) || 0;
  const total = used + free;
  if (!total) return <span>–</span>;
  return (
    <span style={{ display: "inline-flex", gap: ".5rem", alignItems: "center", flexWrap: "wrap" }}>
      <progress value={used} max={total} aria-label={`Disk used on ${bookie.bookieId}`} />
      <span>{bytes(used)} used, {bytes(free)} free</span>
    </span>
  );
}

function Bookies({ bookies }) {
  const columns = [
    ["Bookie", (b) => <span class="mono">{b.bookieId}</span>],
    ["State", (b) => <span class={`badge ${BOOKIE_BADGE[b.state] || ""}`}>{b.state}</span>],
    ["Disk", (b) => <DiskBar bookie={b} />],
    ["Ledgers", (b) => count(b.ledgerCount)],
    ["Address", (b) => <span class="mono">{b.address}</span>],
  ];
  return (
    <>
      <h2>Bookies ({bookies.length})</h2>
      <Table label="Bookies" columns={columns} rows={bookies} empty="No bookie is registered." />
    </>
  );
}

function Tier({ tier }) {
  let state;
  if (!tier || !tier.configured) state = <span class="badge">not configured</span>;
  else if (tier.reachable) state = <span class="badge ok">reachable</span>;
  else if (tier.reachable === false) state = <span class="badge bad">unreachable</span>;
  else state = <span class="badge warn">not checked</span>;
  return (
    <>
      <h2>Cold tier (offload)</h2>
      <div class="panel" aria-label="Cold tier" role="group">
        <p>State: <span data-testid="tier-state">{state}</span></p>
        {tier && tier.configured && (
          <dl style={{ display: "grid", gridTemplateColumns: "max-content 1fr", gap: ".2rem 1rem", margin: ".25rem 0" }}>
            <dt>Driver</dt><dd>{tier.driver}</dd>
            <dt>Bucket</dt><dd class="mono">{tier.bucket}</dd>
            <dt>Endpoint</dt><dd class="mono">{tier.endpoint || "(the driver's default)"}</dd>
            <dt>Region</dt><dd>{tier.region || "–"}</dd>
          </dl>
        )}
        {tier && tier.error && (
          <div class="error" role="alert">
            <strong>The cold tier cannot be used: </strong><span class="reason">{tier.error}</span>
            <div class="advice">Offloads will fail until it answers: check the bucket, endpoint and credentials.</div>
          </div>
        )}
        {(!tier || !tier.configured) && <p class="empty">No offload driver is set: ledgers stay on the bookies.</p>}
      </div>
    </>
  );
}

function Bundles({ bundles }) {
  const [filter, setFilter] = useState("");
  const f = filter.trim().toLowerCase();
  const rows = f
    ? bundles.items.filter((b) => `${b.namespace} ${b.bundle} ${b.owner || ""}`.toLowerCase().includes(f))
    : bundles.items;
  const columns = [
    ["Namespace", (b) => <a href={href("namespace", b.namespace.split("/"))}>{b.namespace}</a>],
    ["Bundle", (b) => <span class="mono">{b.bundle}</span>],
    ["Owner", (b) => <span class="mono">{b.owner || "–"}</span>],
  ];
  return (
    <>
      <h2>Bundle ownership ({count(bundles.total)})</h2>
      <div class="toolbar">
        <label>
          Filter bundles
          <input type="search" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} placeholder="namespace, range or broker" />
        </label>
      </div>
      {bundles.total > bundles.items.length && (
        <p class="warn">Showing the first {count(bundles.items.length)} of {count(bundles.total)} owned bundles.</p>
      )}
      <Table label="Bundles" columns={columns} rows={rows} empty={f ? "No bundle matches the filter." : "No bundle is owned yet."} />
    </>
  );
}
