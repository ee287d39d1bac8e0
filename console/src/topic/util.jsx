// Helpers the topic page's tabs share: the stats call for a topic (partitioned or not), a
// bounded partition selector, datetime-local ↔ epoch ms in the viewer's zone, message-id parsing,
// and a small poller that stops when its tab goes away.
//
// What must hold: a partition selector never renders more than PARTITION_SELECT_MAX options (a
// topic may have 10,000 partitions: then it is a number input); every poller is cleared on unmount.
import { useEffect, useRef } from "preact/hooks";
import { ApiError, get, PARTITIONED_STATS_PARTITIONS_MAX } from "../api.js";

export const PARTITION_SELECT_MAX = 100;

/** The topic's stats: `.../stats`, or the partitions summed for a partitioned topic. */
export function topicStats(t) {
  if (t.partitions > PARTITIONED_STATS_PARTITIONS_MAX) {
    // partitioned-stats would load every partition on the broker, on every poll
    return Promise.reject(new ApiError(0, `This topic has ${t.partitions.toLocaleString()} partitions: the console sums `
      + `stats over at most ${PARTITIONED_STATS_PARTITIONS_MAX}.`, "limit"));
  }
  return t.partitions > 0 ? get(`${t.base}/partitioned-stats`, { perPartition: false }) : get(`${t.base}/stats`);
}

/** The admin path of partition `i` of topic `t` (or the topic itself when it is not partitioned). */
export function partitionBase(t, i) {
  return t.partitions > 0 ? `${t.base}-partition-${i}` : t.base;
}

/** A partition chooser: a select for up to PARTITION_SELECT_MAX partitions, a number input beyond. */
export function PartitionSelect({ t, value, onChange }) {
  if (!(t.partitions > 0)) return null;
  if (t.partitions <= PARTITION_SELECT_MAX) {
    return (
      <label>
        Partition
        <select value={value} onChange={(e) => onChange(Number(e.currentTarget.value))}>
          {Array.from({ length: t.partitions }, (_, i) => <option key={i} value={i}>{i}</option>)}
        </select>
      </label>
    );
  }
  return (
    <label>
      {`Partition (0–${t.partitions - 1})`}
      <input type="number" min="0" max={t.partitions - 1} value={value}
        onChange={(e) => {
          const n = Math.trunc(Number(e.currentTarget.value));
          if (Number.isFinite(n) && n >= 0 && n < t.partitions) onChange(n);
        }} />
    </label>
  );
}

/** A datetime-local input's value (the viewer's zone) → epoch ms, or null. */
export function localInputToMs(text) {
  if (!text) return null;
  const ms = new Date(text).getTime();   // "YYYY-MM-DDTHH:MM[:SS]" without a zone is local time
  return Number.isFinite(ms) ? ms : null;
}

/** Epoch ms → a datetime-local input's value in the viewer's zone (seconds kept). */
export function msToLocalInput(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** "12:3" or "12:3:0" → {ledgerId, entryId, batchIndex}; null when malformed. */
export function parseMessageId(text) {
  const m = /^\s*(\d+):(-?\d+)(?::(-?\d+))?\s*$/.exec(text || "");
  if (!m) return null;
  return { ledgerId: Number(m[1]), entryId: Number(m[2]), batchIndex: m[3] === undefined ? -1 : Number(m[3]) };
}

/** Calls `fn` every `ms` while mounted (and at once); `fn` gets an `alive()` check. */
export function useInterval(fn, ms, deps) {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    let on = true;
    const tick = () => saved.current(() => on);
    tick();
    const id = setInterval(tick, ms);
    return () => {
      on = false;
      clearInterval(id);
    };
  }, deps);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A status line's class for a LongRunningProcessStatus. */
export function statusBadge(status) {
  return { SUCCESS: "badge ok", ERROR: "badge bad", RUNNING: "badge warn" }[status] || "badge";
}
