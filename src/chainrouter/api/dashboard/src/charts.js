// Time charts drawn with uPlot (bundled: nothing is fetched at run time). Axes with units and
// gridlines, the time zone named, a legend that shows each series' exact value under the
// cursor, an empty state, and the values as a table for screen readers and for copying.

import uPlot from "uplot";
import { element } from "./dom.js";
import { amount, exact, sumExact, zone } from "./format.js";

export const COLOURS = [
  "#0a58ca", "#e8710a", "#188038", "#a142f4", "#d01884",
  "#12b5cb", "#b06000", "#5f6368", "#1e8e3e", "#9334e6",
];

const AXIS = { stroke: "#57606a", grid: { stroke: "#e5e8eb", width: 1 }, ticks: { stroke: "#d0d7de" }, font: "12px system-ui, sans-serif", labelFont: "600 12px system-ui, sans-serif" };
const charts = new Map();

function seconds(iso) {
  return Date.parse(iso) / 1000;
}

// The label of bucket `at` (seconds): its UTC day, or its hour in the viewer's time zone.
export function bucketLabel(at, hourly) {
  const date = new Date(at * 1000);
  return hourly
    ? date.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString(undefined, { timeZone: "UTC", month: "short", day: "numeric", year: "numeric" });
}

// A time axis label: "29 Nov" for a UTC day; "14:00" for an hour, with its day at midnight and
// on the first tick.
function tickLabel(at, hourly, first) {
  const date = new Date(at * 1000);
  if (!hourly) return date.toLocaleDateString(undefined, { timeZone: "UTC", day: "numeric", month: "short" });
  const time = date.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  const midnight = date.getHours() === 0 && date.getMinutes() === 0;
  return first || midnight ? `${time}\n${date.toLocaleDateString(undefined, { day: "numeric", month: "short" })}` : time;
}

/**
 * Draw a time chart into `container`.
 *   buckets: ISO times (every bucket of the window, in order)
 *   series: [{label, values: [exact text or number per bucket, or null]}], bottom of a stack first
 *   unit: {axis: "credits", one: (text) => "0.0001 credits"} names the y axis and shows a value
 *   kind: "bars" (stacked) or "lines"
 *   empty: the text shown when every value is zero or missing
 */
export function timeChart(container, { buckets, series, unit, hourly, kind = "bars", empty }) {
  const old = charts.get(container);
  if (old) old.destroy();
  container.replaceChildren();
  const xs = buckets.map(seconds);
  const numbers = series.map((s) => s.values.map((v) => (v === null || v === undefined ? null : Number(v))));
  const nothing = numbers.every((values) => values.every((v) => !v));
  const step = xs.length > 1 ? xs[1] - xs[0] : hourly ? 3600 : 86400;

  // Stacked bars: each series drawn as the running total up to it, the top of the stack
  // first, so that each lower part is painted over the one above.
  let drawn = numbers;
  if (kind === "bars") {
    const running = xs.map(() => 0);
    drawn = numbers.map((values) => values.map((v, i) => (running[i] += v || 0)));
  }
  const order = kind === "bars" ? [...series.keys()].reverse() : [...series.keys()];
  const bars = uPlot.paths.bars({ size: [0.7, 60], align: 0 });
  const width = Math.max(container.clientWidth, 280);
  const opts = {
    width,
    height: width < 500 ? 220 : 260,
    tzDate: hourly ? (ts) => new Date(ts * 1000) : (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    scales: {
      x: { time: true, range: (u, min, max) => [min - step / 2, max + step / 2] },
      y: { range: (u, min, max) => [0, max > 0 ? max * 1.08 : 1] },
    },
    axes: [
      {
        ...AXIS,
        label: hourly ? `Hour (${zone})` : "Day (UTC)",
        space: hourly ? 60 : 56,
        values: (u, ticks) => ticks.map((t, i) => tickLabel(t, hourly, i === 0)),
      },
      {
        ...AXIS,
        label: unit.axis,
        size: 64,
        values: (u, ticks) => ticks.map((t) => unit.tick(t)),
      },
    ],
    legend: { live: true },
    cursor: { points: { show: kind === "lines" }, drag: { x: false, y: false } },
    series: [
      { label: hourly ? "Hour" : "Day", value: (u, v) => (v === null ? "–" : bucketLabel(v, hourly)) },
      ...order.map((index) => ({
        label: series[index].label,
        stroke: COLOURS[index % COLOURS.length],
        fill: kind === "bars" ? COLOURS[index % COLOURS.length] : undefined,
        width: kind === "bars" ? 0 : 2,
        paths: kind === "bars" ? bars : undefined,
        spanGaps: false,
        points: { show: false },
        // The exact value of this series at the hovered bucket, not the stack's running total.
        value: (u, v, seriesIndex, dataIndex) => {
          if (dataIndex === null || dataIndex === undefined) return "–";
          const raw = series[index].values[dataIndex];
          return raw === null || raw === undefined ? "–" : unit.one(raw);
        },
      })),
    ],
  };
  const data = [xs, ...order.map((index) => drawn[index])];
  const chart = new uPlot(opts, data, container);
  charts.set(container, chart);
  if (nothing) container.append(element("p", empty, { class: "chart-empty" }));
  if (!container.dataset.observed) {
    container.dataset.observed = "yes";
    new ResizeObserver(() => {
      const live = charts.get(container);
      const w = Math.max(container.clientWidth, 280);
      if (live && Math.abs(live.width - w) > 4) live.setSize({ width: w, height: w < 500 ? 220 : 260 });
    }).observe(container);
  }
  container.append(valuesTable(buckets, series, unit, hourly));
  // The drawing is a picture for screen readers, told in words; its values are in the table.
  const canvas = container.querySelector("canvas");
  canvas.setAttribute("role", "img");
  canvas.setAttribute(
    "aria-label",
    `${hourly ? `By hour (${zone})` : "By UTC day"}, ${unit.axis}. ${summary(series, unit)}.`,
  );
  return chart;
}

function summary(series, unit) {
  return series.map((s) => `${s.label}: ${unit.sum(s.values)}`).join("; ");
}

// The chart's values as a table, behind a disclosure: for screen readers, and exact.
function valuesTable(buckets, series, unit, hourly) {
  const details = element("details", null, { class: "chart-values" });
  details.append(element("summary", "Values as a table"));
  const table = element("table");
  const head = element("tr");
  head.append(element("th", hourly ? `Hour (${zone})` : "Day (UTC)", { scope: "col" }));
  for (const s of series) head.append(element("th", s.label, { scope: "col" }));
  table.append(element("thead"));
  table.tHead.append(head);
  const body = element("tbody");
  buckets.forEach((bucket, i) => {
    const tr = element("tr");
    tr.append(element("th", bucketLabel(seconds(bucket), hourly), { scope: "row" }));
    for (const s of series) {
      const raw = s.values[i];
      tr.append(element("td", raw === null || raw === undefined ? "–" : unit.cell(raw)));
    }
    body.append(tr);
  });
  table.append(body);
  details.append(table);
  return details;
}

// Units: credits (exact text; the axis rounds, the legend and table are exact), calls, percent.
export const CREDITS = {
  axis: "credits",
  tick: (t) => amount(t.toFixed(12)).replace("≈", ""),
  one: (text) => `${exact(String(text))} credits`,
  cell: (text) => exact(String(text)),
  sum: (values) => `${sumExact(values.filter((v) => v !== null))} credits in all`,
};
export const CALLS = {
  axis: "calls",
  tick: (t) => (Number.isInteger(t) ? t.toLocaleString() : ""),
  one: (v) => `${Number(v).toLocaleString()} ${Number(v) === 1 ? "call" : "calls"}`,
  cell: (v) => Number(v).toLocaleString(),
  sum: (values) => `${values.reduce((a, v) => a + (Number(v) || 0), 0).toLocaleString()} calls in all`,
};
export const PERCENT = {
  axis: "% of calls",
  tick: (t) => `${t.toFixed(t < 10 ? 1 : 0)}%`,
  one: (v) => `${Number(v).toFixed(1)}%`,
  cell: (v) => `${Number(v).toFixed(1)}%`,
  sum: (values) => {
    const known = values.filter((v) => v !== null);
    const top = known.length ? Math.max(...known.map(Number)) : 0;
    return `at most ${top.toFixed(1)}%`;
  },
};
