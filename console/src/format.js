// Numbers the way Pulsar's tools print them: sizes in bytes with binary prefixes (KB = 1024,
// as pulsar-admin's size flags take them), rates per second, and times in the viewer's own zone.
const SIZE_UNITS = ["B", "KB", "MB", "GB", "TB", "PB"];

export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  let v = Number(n);
  let i = 0;
  while (Math.abs(v) >= 1024 && i < SIZE_UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i === 0 ? Math.round(v) : v.toFixed(v >= 100 ? 0 : 1)} ${SIZE_UNITS[i]}`;
}

export function count(n) {
  if (n === null || n === undefined) return "–";
  return Number(n).toLocaleString();
}

export function rate(n, unit = "msg/s") {
  if (n === null || n === undefined) return "–";
  const v = Number(n);
  return `${v >= 100 ? Math.round(v).toLocaleString() : v.toFixed(v >= 10 ? 1 : 2)} ${unit}`;
}

export function byteRate(n) {
  return `${bytes(n)}/s`;
}

/** An epoch-ms time in the viewer's zone, with the zone named. */
export function time(ms) {
  if (!ms || ms <= 0) return "–";
  return new Date(ms).toLocaleString(undefined, { timeZoneName: "short" });
}

export function zone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}

/** Seconds as Pulsar's time flags write them: 90 → "1m 30s". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || seconds < 0) return "–";
  let s = Math.round(seconds);
  const out = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    const q = Math.floor(s / size);
    if (q > 0 || (unit === "s" && out.length === 0)) out.push(`${q}${unit}`);
    s -= q * size;
  }
  return out.join(" ");
}

/** Pulsar's size flags: "10M", "2G", "512K", "-1" (infinite) → MB, as retention takes them; null when invalid. */
export function parseSizeMb(text) {
  const t = String(text).trim();
  if (t === "-1") return -1;
  const m = /^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$/i.exec(t);
  if (!m) return null;
  const factor = { "": 1 / (1024 * 1024), K: 1 / 1024, M: 1, G: 1024, T: 1024 * 1024 }[m[2].toUpperCase()];
  return Math.round(Number(m[1]) * factor);
}

/** Pulsar's time flags: "30s", "10m", "2h", "7d", "1w", "-1" → seconds; null when invalid. */
export function parseSeconds(text) {
  const t = String(text).trim();
  if (t === "-1") return -1;
  const m = /^(\d+)\s*([smhdw]?)$/i.exec(t);
  if (!m) return null;
  return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[m[2].toLowerCase()];
}
