// Usage: what was spent, on what, where calls failed and how fast the nodes are, filtered by
// period, key and chain.
import { api } from "../api.js";
import { CALLS, CREDITS, PERCENT, timeChart } from "../charts.js";
import { $, element, fill, onSubmit, row, withTitle } from "../dom.js";
import { count, credits, creditsFull, hour, ms, percent, scenario, sumExact, when } from "../format.js";
import { chainName, keyName, state } from "../state.js";

const BREAKDOWN_VALUES = 8; // series of a broken-down chart; the rest are summed as "other"

function filters() {
  const days = Number($("#usage-period").value);
  const to = new Date();
  const from = new Date(to.getTime() - days * 86400000);
  const query = {
    from: from.toISOString(),
    to: to.toISOString(),
    granularity: days === 1 ? "hour" : "day",
  };
  if ($("#usage-key").value) query.api_key_id = $("#usage-key").value;
  if ($("#usage-chain").value) query.chain_id = $("#usage-chain").value;
  return { query, hourly: days === 1, breakdown: $("#usage-breakdown").value };
}

async function fillFilters() {
  state.keys = await api("GET", "/api-keys");
  if (!state.chains.length) state.chains = await api("GET", "/chains");
  for (const [select, options] of [
    [$("#usage-key"), state.keys.map((key) => [String(key.id), keyName(key)])],
    [$("#usage-chain"), state.chains.map((chain) => [String(chain.chain_id), chainName(chain.chain_id)])],
  ]) {
    const chosen = select.value;
    const first = select.options[0];
    select.replaceChildren(first, ...options.map(([value, label]) => element("option", label, { value })));
    if ([...select.options].some((option) => option.value === chosen)) select.value = chosen;
  }
}

export function chooseKey(id) {
  $("#usage-key").dataset.wanted = String(id);
}

export async function loadUsage() {
  await fillFilters();
  const wanted = $("#usage-key").dataset.wanted;
  if (wanted) {
    $("#usage-key").value = wanted;
    delete $("#usage-key").dataset.wanted;
  }
  const { query, hourly, breakdown } = filters();
  const main = new URLSearchParams({
    ...query,
    include: "summary,balance,time_series,by_chain,top_methods,by_api_key,by_scenario,time_series_by_scenario,failures",
    limit: "20",
  });
  const asks = [api("GET", `/usage?${main}`), api("GET", `/latency${query.chain_id ? `?chain_id=${query.chain_id}` : ""}`)];
  if (breakdown) {
    const split = new URLSearchParams({ ...query, include: `time_series_by_${breakdown}`, limit: String(BREAKDOWN_VALUES) });
    asks.push(api("GET", `/usage?${split}`));
  }
  const [report, latency, broken] = await Promise.all(asks);
  showSummary(report);
  const buckets = report.time_series.map((r) => r.bucket);
  const spend = broken ? series(buckets, broken[`time_series_by_${breakdown}`], breakdown, "credits_consumed") : [
    { label: "Spend", values: report.time_series.map((r) => r.credits_consumed) },
  ];
  const calls = broken ? series(buckets, broken[`time_series_by_${breakdown}`], breakdown, "request_count") : [
    { label: "Calls", values: report.time_series.map((r) => r.request_count) },
  ];
  timeChart($("#chart-spend"), { buckets, series: spend, unit: CREDITS, hourly, empty: "Nothing was spent in this period." });
  timeChart($("#chart-calls"), { buckets, series: calls, unit: CALLS, hourly, empty: "No calls in this period." });
  timeChart($("#chart-rates"), {
    buckets,
    series: rates(report.time_series, report.time_series_by_scenario),
    unit: PERCENT,
    hourly,
    kind: "lines",
    empty: "No call failed or was limited in this period.",
  });
  drawBars($("#by-chain"), report.by_chain, (r) => chainName(r.chain_id));
  drawBars($("#by-method"), report.top_methods, (r) => r.method);
  drawBars($("#by-key"), report.by_api_key, (r) => r.name || r.key_hint);
  drawBars($("#by-scenario"), report.by_scenario, (r) => `${scenario(r.scenario)} (${r.outcome})`);
  showFailures(report.failures);
  showLatency(latency);
}

function showSummary(report) {
  const total = report.summary.request_count;
  const outcomes = { failed: 0, limited: 0 };
  for (const r of report.by_scenario) if (r.outcome in outcomes) outcomes[r.outcome] += r.request_count;
  const facts = [
    ["Spent", withTitle(credits(report.summary.credits_consumed), creditsFull(report.summary.credits_consumed))],
    ["Calls", count(total, "call")],
    ["Average per call", withTitle(credits(report.summary.credits_per_request), creditsFull(report.summary.credits_per_request))],
    ["Failed", `${count(outcomes.failed, "call")} (${percent(outcomes.failed, total)})`],
    ["Limited", `${count(outcomes.limited, "call")} (${percent(outcomes.limited, total)})`],
    ["Balance", withTitle(credits(report.balance.credits), creditsFull(report.balance.credits))],
  ];
  $("#usage-summary").replaceChildren(
    ...facts.map(([term, value]) => {
      const card = element("div", null, { class: "card" });
      const dd = element("dd");
      dd.append(value instanceof Node ? value : document.createTextNode(value));
      card.append(element("dt", term), dd);
      return card;
    }),
  );
}

function label(row, breakdown) {
  if (row.other) return "other";
  if (breakdown === "chain") return chainName(row.chain_id);
  if (breakdown === "api_key") return row.name || row.key_hint || `key ${row.api_key_id}`;
  return row.method;
}

// One series per value of the breakdown (largest spend first, "other" last), aligned to every
// bucket of the window (zero where it had no usage).
function series(buckets, rows, breakdown, field) {
  const byLabel = new Map();
  for (const r of rows) {
    const name = label(r, breakdown);
    if (!byLabel.has(name)) byLabel.set(name, { label: name, at: new Map(), other: r.other });
    byLabel.get(name).at.set(r.bucket, r[field]);
  }
  const zero = field === "credits_consumed" ? "0" : 0;
  const made = [...byLabel.values()].map((s) => ({
    label: s.label,
    other: s.other,
    values: buckets.map((b) => s.at.get(b) ?? zero),
    total: field === "credits_consumed" ? Number(sumExact([...s.at.values()])) : [...s.at.values()].reduce((a, v) => a + v, 0),
  }));
  made.sort((a, b) => Number(a.other) - Number(b.other) || b.total - a.total);
  return made.length ? made : [{ label: field === "credits_consumed" ? "Spend" : "Calls", values: buckets.map(() => zero) }];
}

// The share of each bucket's calls that failed, and that were limited; no calls: no value.
function rates(totals, rows) {
  const failed = new Map();
  const limited = new Map();
  for (const r of rows) {
    const into = r.outcome === "failed" ? failed : r.outcome === "limited" ? limited : null;
    if (into) into.set(r.bucket, (into.get(r.bucket) || 0) + r.request_count);
  }
  const share = (into) => totals.map((t) => (t.request_count ? ((into.get(t.bucket) || 0) * 100) / t.request_count : null));
  return [
    { label: "Failed", values: share(failed) },
    { label: "Limited", values: share(limited) },
  ];
}

function drawBars(container, rows, name) {
  if (!rows.length) {
    container.replaceChildren(element("p", "Nothing in this period.", { class: "hint" }));
    return;
  }
  const most = Math.max(...rows.map((r) => Number(r.request_count))) || 1;
  const list = element("ul");
  for (const r of rows) {
    const item = element("li");
    item.append(element("span", name(r), { class: "bar-name", title: r.scenario || "" }));
    const meter = element("span", null, { class: `bar ${r.outcome || ""}` });
    meter.style.width = `${(Number(r.request_count) / most) * 100}%`;
    item.append(meter);
    const value = element("span", null, { class: "bar-value" });
    value.append(withTitle(credits(r.credits_consumed), creditsFull(r.credits_consumed)), document.createTextNode(`, ${count(r.request_count, "call")}`));
    item.append(value);
    list.append(item);
  }
  container.replaceChildren(list);
}

function showFailures(rows) {
  fill(
    $("#failures tbody"),
    rows.map((r) =>
      row([
        hour(r.bucket),
        r.name || r.key_hint,
        chainName(r.chain_id),
        element("code", r.method),
        withTitle(
          `${scenario(r.scenario)}: ${r.error}${r.error_codes.length ? ` (${r.error_codes.join(", ")})` : ""}`,
          `scenario ${r.scenario}, ${r.outcome}`,
        ),
        count(r.request_count, "call"),
      ]),
    ),
    "No call failed in this period.",
  );
}

function showLatency(rows) {
  fill(
    $("#latency tbody"),
    rows.map((r) =>
      row([chainName(r.chain_id), count(r.nodes, "node"), ms(r.fastest_ms), ms(r.median_ms), ms(r.slowest_ms), when(r.as_of)]),
    ),
    "No node has been measured yet.",
  );
}


onSubmit($("#usage-form"), loadUsage);
