// A live line chart of rates (uPlot), and the bounded window of samples it draws.
//
// <RateChart label="Message rates" series={[["in", "#2457c5"], ["out", "#127a3a"]]}
//            data={[times_s, values_in, values_out]} format={(v) => rate(v)} />
//   `data` is uPlot's column form: the first array is epoch *seconds*, then one array per series,
//   all the same length. The chart follows its container's width (ResizeObserver) and is
//   redrawn with setData when data changes, never rebuilt (rebuilding every poll would leak).
//
// useRateWindow(maxPoints) keeps the last `maxPoints` samples in memory (oldest dropped first),
// so a page polling every 2 s for hours holds a bounded window: push(tSeconds, [v1, v2, ...]).
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";

export const RATE_WINDOW_POINTS_MAX = 300;

export function useRateWindow(maxPoints = RATE_WINDOW_POINTS_MAX, seriesCount = 1) {
  const empty = () => Array.from({ length: seriesCount + 1 }, () => []);
  const [data, setData] = useState(empty);
  const push = (tSeconds, values) => {
    setData((old) => {
      const keep = Math.max(0, old[0].length + 1 - maxPoints);
      return old.map((col, i) => [...col.slice(keep), i === 0 ? tSeconds : Number(values[i - 1]) || 0]);
    });
  };
  const reset = () => setData(empty());
  return { data, push, reset };
}

export function RateChart({ label, series, data, format = (v) => String(v), height = 220 }) {
  const box = useRef(null);
  const plot = useRef(null);

  useEffect(() => {
    const el = box.current;
    const opts = {
      width: Math.max(200, el.clientWidth - 16),
      height,
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [{}, { values: (u, ticks) => ticks.map((v) => format(v)), size: 90 }],
      series: [{}, ...series.map(([name, stroke]) => ({ label: name, stroke, width: 2, value: (u, v) => (v === null ? "–" : format(v)) }))],
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => {
      if (plot.current) plot.current.setSize({ width: Math.max(200, el.clientWidth - 16), height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [series.map((s) => s.join(":")).join(","), height]);

  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  }, [data]);

  return <figure class="chart" style={{ margin: "0 0 1rem" }} ref={box} role="img" aria-label={label} />;
}
