// The topic's overview: stats polled every POLL_MS (GET .../stats, or .../partitioned-stats
// ?perPartition=false for a partitioned topic): rates and sizes as cards, rate charts over the
// last few minutes (a bounded window of samples, RATE_WINDOW_POINTS), the producers, and every
// subscription with its consumers and backlog. A topic with more than
// PARTITIONED_STATS_PARTITIONS_MAX partitions is not summed (that would load every partition on
// the broker every poll): the page sends the reader to the Partitions tab's pages instead.
import { useState } from "preact/hooks";
import { PARTITIONED_STATS_PARTITIONS_MAX } from "../api.js";
import { ErrorBox, Loading, Table } from "../components/common.jsx";
import { RateChart, useRateWindow } from "../components/RateChart.jsx";
import { byteRate, bytes, count, rate, time } from "../format.js";
import { topicStats, useInterval } from "./util.jsx";

const POLL_MS = 2000;
const RATE_WINDOW_POINTS = 150;      // 5 minutes of 2 s samples
const MSG_SERIES = [["in msg/s", "#2457c5"], ["out msg/s", "#127a3a"]];
const bps = (v) => byteRate(Math.round(Number(v) || 0));   // format.bytes keeps fractions below 1 KB
const BYTE_SERIES = [["in bytes/s", "#2457c5"], ["out bytes/s", "#127a3a"]];

export function Overview({ t }) {
  if (t.partitions > PARTITIONED_STATS_PARTITIONS_MAX) {
    return (
      <p class="panel" role="status">
        This topic has {count(t.partitions)} partitions: its stats are not summed here, because that would load
        every partition on the broker. The <a href={`#/topic/${t.tenant}/${t.ns}/${encodeURIComponent(t.name)}/partitions`}>Partitions</a> tab
        shows each partition's stats, one page at a time.
      </p>
    );
  }
  return <OverviewStats t={t} />;
}

function OverviewStats({ t }) {
  const [stats, setStats] = useState(null);
  const [error, setError] = useState(null);
  const msgs = useRateWindow(RATE_WINDOW_POINTS, 2);
  const tput = useRateWindow(RATE_WINDOW_POINTS, 2);
  useInterval(async (alive) => {
    try {
      const s = await topicStats(t);
      if (!alive()) return;
      setStats(s);
      setError(null);
      const now = Date.now() / 1000;
      msgs.push(now, [s.msgRateIn, s.msgRateOut]);
      tput.push(now, [s.msgThroughputIn, s.msgThroughputOut]);
    } catch (e) {
      if (alive()) setError(e);
    }
  }, POLL_MS, [t.base]);

  if (!stats) return error ? <ErrorBox error={error} /> : <Loading what="Loading stats" />;
  const subs = Object.entries(stats.subscriptions || {}).map(([name, s]) => ({ name, ...s }));
  const consumers = subs.flatMap((s) => (s.consumers || []).map((c) => ({ sub: s.name, ...c })));
  const cards = [
    ["msgRateIn", "Rate in", rate(stats.msgRateIn)],
    ["msgRateOut", "Rate out", rate(stats.msgRateOut)],
    ["msgThroughputIn", "Throughput in", bps(stats.msgThroughputIn)],
    ["msgThroughputOut", "Throughput out", bps(stats.msgThroughputOut)],
    ["msgInCounter", "Messages in", count(stats.msgInCounter)],
    ["msgOutCounter", "Messages out", count(stats.msgOutCounter)],
    ["storageSize", "Storage size", bytes(stats.storageSize)],
    ["backlogSize", "Backlog size", bytes(stats.backlogSize)],
    ["msgBacklog", "Backlog (messages)", count(stats.msgBacklog ?? subs.reduce((a, s) => Math.max(a, s.msgBacklog || 0), 0))],
    ["offloadedStorageSize", "Offloaded", bytes(stats.offloadedStorageSize)],
    ["producers", "Producers", count((stats.publishers || []).length)],
    ["subscriptions", "Subscriptions", count(subs.length)],
    ["consumers", "Consumers", count(consumers.length)],
  ];
  return (
    <section aria-label="Overview">
      {error && <ErrorBox error={error} />}
      <div class="cards">
        {cards.map(([id, label, value]) => (
          <div class="card" key={id}>
            <div class="label">{label}</div>
            <div class="value" data-testid={`stat-${id}`}>{value}</div>
          </div>
        ))}
      </div>
      <div style={{ display: "grid", gridTemplateColumns: "repeat(auto-fit, minmax(320px, 1fr))", gap: "0 .75rem" }}>
        <RateChart label="Messages per second, in and out" series={MSG_SERIES} data={msgs.data} format={(v) => rate(v, "/s")} height={180} />
        <RateChart label="Bytes per second, in and out" series={BYTE_SERIES} data={tput.data} format={bps} height={180} />
      </div>
      <h2>Producers</h2>
      <Table label="Producers" rows={stats.publishers || []} empty="No producer is connected." columns={[
        ["Name", (p) => p.producerName],
        ["Address", (p) => p.address],
        ["Rate in", (p) => rate(p.msgRateIn)],
        ["Throughput in", (p) => bps(p.msgThroughputIn)],
        ["Messages in", (p) => count(p.msgInCounter)],
        ["Access mode", (p) => p.accessMode],
        ["Client", (p) => p.clientVersion],
        ["Connected since", (p) => (p.connectedSince ? time(Date.parse(p.connectedSince)) : "–")],
      ]} />
      <h2>Subscriptions</h2>
      <Table label="Subscriptions" rows={subs} empty="No subscription." columns={[
        ["Subscription", (s) => s.name],
        ["Type", (s) => s.type],
        ["Backlog", (s) => <span data-testid={`overview-backlog-${s.name}`}>{count(s.msgBacklog)}</span>],
        ["Backlog size", (s) => bytes(s.backlogSize)],
        ["Unacked", (s) => count(s.unackedMessages)],
        ["Rate out", (s) => rate(s.msgRateOut)],
        ["Consumers", (s) => count((s.consumers || []).length)],
        ["Mark-delete", (s) => s.markDeletePosition || "–"],
      ]} />
      <h3>Consumers</h3>
      <Table label="Consumers" rows={consumers} empty="No consumer is connected." columns={[
        ["Subscription", (c) => c.sub],
        ["Consumer", (c) => c.consumerName],
        ["Address", (c) => c.address],
        ["Unacked", (c) => count(c.unackedMessages)],
        ["Permits", (c) => count(c.availablePermits)],
        ["Rate out", (c) => rate(c.msgRateOut)],
        ["Connected since", (c) => (c.connectedSince ? time(Date.parse(c.connectedSince)) : "–")],
      ]} />
    </section>
  );
}
